//! The Merkle-backed audit log: checkpoints, verification, proofs, crash
//! consistency. The tamper suite is in `tamper.rs`.

use bulwark_audit::{
    AuditRecord, AuditSink, Checkpoint, Decision, VerifierKey, parse_and_verify,
    verify_consistency, verify_inclusion,
};
use bulwark_store::{ProblemKind, Store, StoreError};

fn record(n: u64) -> AuditRecord {
    AuditRecord {
        time_ms: 1_700_000_000_000 + n as i64,
        session: format!("sess-{}", n % 7),
        agent: "coder".into(),
        user: "alice".into(),
        action: "tool_call".into(),
        tool: "shell".into(),
        operation: "exec".into(),
        args_digest: AuditRecord::digest_args(&serde_json::json!({ "n": n })),
        decision: Decision::Allowed,
        reason: "capability".into(),
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
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
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
