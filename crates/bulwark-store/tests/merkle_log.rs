//! The Merkle-backed audit log: checkpoints, verification, proofs, crash
//! consistency. The tamper suite is in `tamper.rs`.

use bulwark_audit::{
    AuditRecord, AuditSink, Checkpoint, Decision, VerifierKey, parse_and_verify,
    verify_consistency, verify_inclusion,
};
use bulwark_store::{Coverage, ProblemKind, Store, StoreError};

fn record(n: u64) -> AuditRecord {
    AuditRecord {
        time_ms: 1_700_000_000_000 + n as i64,
        session: format!("sess-{}", n % 7),
        agent: "coder".into(),
        user: "alice".into(),
        action: bulwark_audit::Action::ToolCall,
        tool: "shell".into(),
        operation: "exec".into(),
        args_digest: AuditRecord::digest_args(&serde_json::json!({ "n": n })),
        decision: Decision::Allowed,
        reason: bulwark_audit::Reason::Capability,
        detail: format!("detail {n} ünïcødé \u{0}"),
        duration_us: n * 10,
    }
}

const ORIGIN: &str = "bulwark.test/audit";

fn key() -> (bulwark_audit::SigningKey, VerifierKey) {
    let key = bulwark_audit::generate_signing_key();
    let vkey = VerifierKey::from_signing_key(ORIGIN, &key).unwrap();
    (key, vkey)
}

#[test]
fn append_checkpoint_verify_and_prove() {
    let store = Store::open_in_memory().unwrap();
    let sink = store.audit_sink();
    let (key, vkey) = key();
    let empty = sink.verify().unwrap();
    assert!(empty.is_ok());
    assert_eq!(empty.records, 0);
    assert!(sink.latest_checkpoint().unwrap().is_none());

    for n in 0..100 {
        sink.record(&record(n)).unwrap();
    }
    sink.flush().unwrap();
    let note_100 = sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    let cp_100 = parse_and_verify(&note_100, std::slice::from_ref(&vkey)).unwrap();
    assert_eq!(cp_100.size, 100);

    // Mixed synchronous and queued appends keep seq dense.
    for n in 100..250 {
        if n % 3 == 0 {
            assert!(sink.append(&record(n)).unwrap() > 100);
        } else {
            sink.record(&record(n)).unwrap();
        }
    }
    let note = sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    let cp = parse_and_verify(&note, std::slice::from_ref(&vkey)).unwrap();
    assert_eq!(cp.size, 250);

    let report = sink.verify().unwrap();
    assert_eq!(report.problem, None);
    assert_eq!(report.records, 250);
    assert_eq!(report.root, cp.root);
    assert_eq!(report.checkpoints_checked, 2);
    let stored = sink.newest(1000).unwrap();
    let seqs: Vec<u64> = stored.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=250).collect::<Vec<_>>());

    let latest = sink.latest_checkpoint().unwrap().unwrap();
    assert_eq!(
        (latest.size, latest.root, &latest.note),
        (250, cp.root, &note)
    );

    // A second checkpoint at the same size is accepted and not duplicated.
    sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    assert_eq!(sink.verify().unwrap().checkpoints_checked, 2);

    for index in [0, 1, 99, 100, 128, 249] {
        let p = sink.inclusion_proof(index).unwrap();
        assert_eq!((p.index, p.size, p.root), (index, 250, cp.root));
        let row = &stored[index as usize];
        assert_eq!(p.leaf, row.record.leaf_hash(row.seq).unwrap());
        verify_inclusion(&p.leaf, index, p.size, &p.proof, &cp.root).unwrap();
    }
    assert!(matches!(
        sink.inclusion_proof(250),
        Err(StoreError::Proof(_))
    ));

    let c = sink.consistency_proof(100).unwrap();
    assert_eq!((c.old_root, c.new_root), (cp_100.root, cp.root));
    verify_consistency(100, 250, &cp_100.root, &cp.root, &c.proof).unwrap();
    assert!(matches!(
        sink.consistency_proof(0),
        Err(StoreError::Proof(_))
    ));
    assert!(matches!(
        sink.consistency_proof(251),
        Err(StoreError::Proof(_))
    ));

    // External checkpoints: the matching one passes, a larger one is
    // truncation, a wrong root is a mismatch at its size.
    let ok = sink.verify_against(&cp_100).unwrap();
    assert!(ok.is_ok());
    assert_eq!(ok.checkpoints_checked, 3);
    let beyond = sink
        .verify_against(&Checkpoint::new(ORIGIN, 251, cp.root))
        .unwrap()
        .problem
        .unwrap();
    assert_eq!(
        (beyond.kind, beyond.index),
        (ProblemKind::CheckpointBeyondLog, 250)
    );
    let wrong = sink
        .verify_against(&Checkpoint::new(ORIGIN, 7, cp.root))
        .unwrap()
        .problem
        .unwrap();
    assert_eq!(
        (wrong.kind, wrong.index),
        (ProblemKind::CheckpointMismatch, 7)
    );
}

#[test]
fn checkpoint_refuses_bad_key_name_and_saturated_duration_verifies() {
    let store = Store::open_in_memory().unwrap();
    let sink = store.audit_sink();
    let (key, _) = key();
    let mut r = record(1);
    r.duration_us = u64::MAX;
    sink.append(&r).unwrap();
    assert!(sink.verify().unwrap().is_ok());
    assert!(matches!(
        sink.checkpoint(&key, ORIGIN, "bad name"),
        Err(StoreError::Checkpoint(_))
    ));
    assert!(sink.latest_checkpoint().unwrap().is_none());
}

#[test]
fn verify_survives_reopen_and_sees_existing_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db");
    let (key, _) = key();
    {
        let sink = Store::open(&path).unwrap().audit_sink();
        for n in 0..50 {
            sink.record(&record(n)).unwrap();
        }
        sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    }
    let sink = Store::open(&path).unwrap().audit_sink();
    for n in 50..60 {
        sink.record(&record(n)).unwrap();
    }
    let report = sink.verify().unwrap();
    assert_eq!((report.records, report.checkpoints_checked), (60, 1));
    assert!(report.is_ok());
}

const CRASH_ENV: &str = "BULWARK_STORE_CRASH_DB";
const CRASH_FLUSHED: u64 = 100;

/// Child half of `crash_mid_append_leaves_a_verifying_log`: does nothing
/// unless started by it.
#[test]
fn crash_child() {
    let Some(path) = std::env::var_os(CRASH_ENV) else {
        return;
    };
    let sink = Store::open(std::path::Path::new(&path))
        .unwrap()
        .audit_sink();
    let (key, _) = key();
    for n in 0..CRASH_FLUSHED {
        sink.record(&record(n)).unwrap();
    }
    sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    // Keep the writer thread busy committing, then die without flushing or
    // dropping anything.
    for n in CRASH_FLUSHED..CRASH_FLUSHED + 20_000 {
        sink.record(&record(n)).unwrap();
    }
    std::process::abort();
}

#[test]
fn crash_mid_append_leaves_a_verifying_log() {
    if std::env::var_os(CRASH_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let status = bulwark_test_support::process::rerun_test(module_path!(), "crash_child")
        .env(CRASH_ENV, &path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child must die by abort");
    let sink = Store::open(&path).unwrap().audit_sink();
    let report = sink.verify().unwrap();
    assert_eq!(report.problem, None);
    assert!(report.records >= CRASH_FLUSHED, "{report:?}");
    assert!(report.records <= CRASH_FLUSHED + 20_000);
    assert_eq!(report.checkpoints_checked, 1);
    println!(
        "crash: {} records on disk after abort ({CRASH_FLUSHED} flushed)",
        report.records
    );
    // And the log keeps going from there.
    assert_eq!(sink.append(&record(0)).unwrap(), report.records + 1);
    assert!(sink.verify().unwrap().is_ok());
}

/// Drops the append-only triggers of the database at `path`, as someone
/// with the file could.
fn tamper_conn(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete; \
         DROP TRIGGER audit_checkpoint_no_update; DROP TRIGGER audit_checkpoint_no_delete;",
    )
    .unwrap();
    conn
}

#[test]
fn incremental_checkpoints_extend_the_latest_and_match_a_full_verify() {
    let store = Store::open_in_memory().unwrap();
    let sink = store.audit_sink();
    let (key, vkey) = key();
    // Nothing stored yet: the incremental check falls back to a full one.
    let empty = sink.verify_since_latest_checkpoint().unwrap();
    assert!(empty.is_ok());
    assert!(matches!(empty.coverage, Coverage::FullFallback { .. }));
    assert_eq!(sink.records_since_latest_checkpoint().unwrap(), 0);

    let mut n = 0;
    let mut stored = 0;
    // Odd and even sizes, powers of two, and a step longer than a scan chunk.
    for step in [1, 1, 2, 60, 64, 4100, 7] {
        for _ in 0..step {
            sink.record(&record(n)).unwrap();
            n += 1;
        }
        // Queued records count before they are committed.
        assert_eq!(sink.records_since_latest_checkpoint().unwrap(), step);
        let since = sink.verify_since_latest_checkpoint().unwrap();
        let full = sink.verify().unwrap();
        assert_eq!((since.problem.clone(), full.problem.clone()), (None, None));
        assert_eq!((since.records, since.root), (full.records, full.root));
        assert_eq!(full.coverage, Coverage::Full);
        if stored > 0 {
            assert_eq!(since.coverage, Coverage::SinceCheckpoint { size: n - step });
        }
        let note = sink.checkpoint_incremental(&key, ORIGIN, ORIGIN).unwrap();
        let cp = parse_and_verify(&note, std::slice::from_ref(&vkey)).unwrap();
        assert_eq!((cp.size, cp.root), (n, full.root));
        stored += 1;
        assert_eq!(sink.latest_checkpoint().unwrap().unwrap().size, n);
        assert_eq!(sink.records_since_latest_checkpoint().unwrap(), 0);
    }
    // Every stored checkpoint, root and frontier, matches the full walk.
    let full = sink.verify().unwrap();
    assert_eq!((full.problem, full.checkpoints_checked), (None, stored));
    // Nothing new: the note is returned, nothing is stored twice.
    sink.checkpoint_incremental(&key, ORIGIN, ORIGIN).unwrap();
    assert_eq!(sink.verify().unwrap().checkpoints_checked, stored);

    // Another key (a rotation) cannot extend this key's checkpoint: it falls
    // back to a full verification and still signs.
    let other = bulwark_audit::generate_signing_key();
    sink.record(&record(n)).unwrap();
    let note = sink.checkpoint_incremental(&other, ORIGIN, ORIGIN).unwrap();
    let other_vkey = VerifierKey::from_signing_key(ORIGIN, &other).unwrap();
    let cp = parse_and_verify(&note, &[other_vkey]).unwrap();
    assert_eq!((cp.size, cp.root), (n + 1, sink.verify().unwrap().root));
    // A bad key name is refused before any work.
    assert!(matches!(
        sink.checkpoint_incremental(&key, ORIGIN, "bad name"),
        Err(StoreError::Checkpoint(_))
    ));
}

#[test]
fn incremental_check_sees_tampering_after_the_checkpoint_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db");
    let (key, _) = key();
    let sink = Store::open(&path).unwrap().audit_sink();
    for n in 0..50 {
        sink.record(&record(n)).unwrap();
    }
    sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    for n in 50..80 {
        sink.record(&record(n)).unwrap();
    }
    sink.flush().unwrap();
    let conn = tamper_conn(&path);
    let since = |sink: &bulwark_store::SqliteAuditSink| {
        let report = sink.verify_since_latest_checkpoint().unwrap();
        assert_eq!(report.coverage, Coverage::SinceCheckpoint { size: 50 });
        report.problem.map(|p| (p.kind, p.index))
    };

    // An edit before the checkpoint: invisible to the incremental check (as
    // documented), caught by the full one at its index.
    conn.execute("UPDATE audit SET detail = 'forged' WHERE seq = 10", [])
        .unwrap();
    assert_eq!(since(&sink), None);
    let full = sink.verify().unwrap().problem.unwrap();
    assert_eq!((full.kind, full.index), (ProblemKind::LeafMismatch, 9));

    // An edit after it is caught, at its index, and blocks signing.
    conn.execute("UPDATE audit SET reason = 'forged' WHERE seq = 70", [])
        .unwrap();
    assert_eq!(since(&sink), Some((ProblemKind::LeafMismatch, 69)));
    assert!(matches!(
        sink.checkpoint_incremental(&key, ORIGIN, ORIGIN),
        Err(StoreError::Corrupt(_))
    ));

    // Undone, the rows after the checkpoint verify again.
    conn.execute(
        "UPDATE audit SET reason = ?1 WHERE seq = 70",
        rusqlite::params![record(69).reason.as_str()],
    )
    .unwrap();
    assert_eq!(since(&sink), None);

    // The checkpoint's own last row is re-checked too...
    conn.execute("UPDATE audit SET detail = 'forged' WHERE seq = 50", [])
        .unwrap();
    assert_eq!(since(&sink), Some((ProblemKind::LeafMismatch, 49)));
    conn.execute("UPDATE audit SET leaf = NULL WHERE seq = 50", [])
        .unwrap();
    assert_eq!(since(&sink), Some((ProblemKind::MissingLeaf, 49)));

    // ...and a truncation below the checkpoint (checkpoints left in place).
    conn.execute("DELETE FROM audit WHERE seq > 45", [])
        .unwrap();
    assert_eq!(since(&sink), Some((ProblemKind::CheckpointBeyondLog, 45)));
}

#[test]
fn a_rewritten_last_row_of_an_odd_checkpoint_contradicts_its_frontier() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db");
    let (key, _) = key();
    let sink = Store::open(&path).unwrap().audit_sink();
    for n in 0..51 {
        sink.record(&record(n)).unwrap();
    }
    sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    sink.record(&record(51)).unwrap();
    sink.flush().unwrap();
    // Row 51 rewritten with a consistent leaf: only the frontier knows.
    let mut forged = record(50);
    forged.detail = "nothing happened".into();
    tamper_conn(&path)
        .execute(
            "UPDATE audit SET detail = ?1, leaf = ?2 WHERE seq = 51",
            rusqlite::params![forged.detail, forged.leaf_hash(51).unwrap().as_slice()],
        )
        .unwrap();
    let problem = sink
        .verify_since_latest_checkpoint()
        .unwrap()
        .problem
        .unwrap();
    assert_eq!(
        (problem.kind, problem.index),
        (ProblemKind::CheckpointMismatch, 51)
    );
}

#[test]
fn a_tampered_frontier_is_not_trusted_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db");
    let (key, _) = key();
    let sink = Store::open(&path).unwrap().audit_sink();
    for n in 0..20 {
        sink.record(&record(n)).unwrap();
    }
    sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    for n in 20..25 {
        sink.record(&record(n)).unwrap();
    }
    assert_eq!(
        sink.verify_since_latest_checkpoint().unwrap().coverage,
        Coverage::SinceCheckpoint { size: 20 }
    );
    let conn = tamper_conn(&path);
    let frontier: Vec<u8> = conn
        .query_row("SELECT frontier FROM audit_checkpoint", [], |r| r.get(0))
        .unwrap();
    // 20 = 0b10100: two subtrees, two hashes.
    assert_eq!(frontier.len(), 64);

    for (label, bad) in [
        ("flipped bit", {
            let mut f = frontier.clone();
            f[40] ^= 1;
            f
        }),
        ("extra hash", [frontier.as_slice(), &[0; 32]].concat()),
    ] {
        conn.execute(
            "UPDATE audit_checkpoint SET frontier = ?1",
            rusqlite::params![bad],
        )
        .unwrap();
        // Not used as a starting point: the check falls back to a full
        // walk, which reports the frontier at its checkpoint.
        let report = sink.verify_since_latest_checkpoint().unwrap();
        let Coverage::FullFallback { reason } = &report.coverage else {
            panic!("{label}: {:?}", report.coverage);
        };
        assert!(reason.contains("frontier"), "{label}: {reason}");
        let problem = report.problem.unwrap();
        assert_eq!(
            (problem.kind, problem.index),
            (ProblemKind::FrontierMismatch, 20),
            "{label}"
        );
        assert_eq!(sink.verify().unwrap().problem, Some(problem), "{label}");
        // And nothing is signed on top of it.
        assert!(matches!(
            sink.checkpoint_incremental(&key, ORIGIN, ORIGIN),
            Err(StoreError::Corrupt(_))
        ));
    }
    conn.execute(
        "UPDATE audit_checkpoint SET frontier = ?1",
        rusqlite::params![frontier],
    )
    .unwrap();
    assert!(sink.verify().unwrap().is_ok());
    sink.checkpoint_incremental(&key, ORIGIN, ORIGIN).unwrap();
    assert_eq!(sink.latest_checkpoint().unwrap().unwrap().size, 25);
}

/// Opens a stored note with `vkey` as the CLI does with its key chain.
fn open_with(vkey: &VerifierKey) -> impl Fn(&str) -> Result<Checkpoint, String> + '_ {
    move |note| parse_and_verify(note, std::slice::from_ref(vkey)).map_err(|e| e.to_string())
}

#[test]
fn verify_trusted_counts_a_badly_signed_checkpoint_as_a_problem_never_as_matching() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.db");
    let store = Store::open(&path).unwrap();
    let sink = store.audit_sink();
    let (key, vkey) = key();
    for n in 0..10 {
        sink.append(&record(n)).unwrap();
    }
    sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    for n in 10..20 {
        sink.append(&record(n)).unwrap();
    }
    sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    // The work it allows: both signed by the trusted key, both match.
    let ok = sink.verify_trusted(&open_with(&vkey), &[]).unwrap();
    assert!(ok.is_ok(), "{:?}", ok.problem);
    assert_eq!((ok.checkpoints_checked, ok.bad_signatures), (2, 0));

    // Re-signed by another key: the roots still match, the signature not.
    let (other, _) = self::key();
    let forged = bulwark_audit::sign(
        &Checkpoint::new(
            ORIGIN,
            10,
            parse_and_verify(
                &sink.stored_checkpoints().unwrap()[0].note,
                std::slice::from_ref(&vkey),
            )
            .unwrap()
            .root,
        ),
        &other,
        ORIGIN,
    )
    .unwrap();
    let conn = tamper_conn(&path);
    conn.execute(
        "UPDATE audit_checkpoint SET note = ?1 WHERE size = 10",
        [forged],
    )
    .unwrap();
    // The unsigned check still calls it matching; the trusted one does not.
    assert!(sink.verify().unwrap().is_ok());
    let report = sink.verify_trusted(&open_with(&vkey), &[]).unwrap();
    assert_eq!(report.bad_signatures, 1);
    assert_eq!(report.checkpoints_checked, 1);
    let problem = report.problem.unwrap();
    assert_eq!(problem.kind, ProblemKind::CheckpointSignature);
    assert_eq!(problem.index, 10);
}

#[test]
fn verify_trusted_checks_the_log_against_checkpoints_kept_outside_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let store = Store::open(&path).unwrap();
    let sink = store.audit_sink();
    let (key, vkey) = key();
    for n in 0..12 {
        sink.append(&record(n)).unwrap();
    }
    let note = sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
    let kept = bulwark_store::ExternalCheckpoint {
        checkpoint: parse_and_verify(&note, std::slice::from_ref(&vkey)).unwrap(),
        source: "the kept checkpoint".into(),
    };
    let ok = sink
        .verify_trusted(&open_with(&vkey), std::slice::from_ref(&kept))
        .unwrap();
    assert!(ok.is_ok(), "{:?}", ok.problem);
    assert_eq!(ok.checkpoints_checked, 2);
    // The stored checkpoints deleted, the log truncated: the rows alone
    // verify, the kept checkpoint does not.
    let conn = tamper_conn(&path);
    conn.execute_batch("DELETE FROM audit_checkpoint; DELETE FROM audit WHERE seq > 5;")
        .unwrap();
    assert!(sink.verify().unwrap().is_ok());
    let report = sink
        .verify_trusted(&open_with(&vkey), std::slice::from_ref(&kept))
        .unwrap();
    let problem = report.problem.unwrap();
    assert_eq!(problem.kind, ProblemKind::CheckpointBeyondLog);
    assert!(
        problem.what.contains("the kept checkpoint"),
        "{}",
        problem.what
    );
    assert_eq!(sink.record_count().unwrap(), 5);
    assert_eq!(sink.checkpoint_count().unwrap(), 0);
}
