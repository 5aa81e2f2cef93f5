//! Tamper suite: single edits to copies of a small, checkpointed log, made
//! with plain SQLite after dropping the append-only triggers. Every edit must
//! be detected: by `verify` (at the right index for single-row edits) or, for
//! truncation and whole-log forgeries, by `verify_against` a checkpoint
//! exported before the edit.

use bulwark_audit::{
    AuditRecord, Checkpoint, Decision, Hash, SigningKey, VerifierKey, parse_and_verify,
};
use bulwark_store::{Problem, ProblemKind, Store};
use rusqlite::{Connection, params};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const N: u64 = 64;
const EDITS: usize = 1200;
const ORIGIN: &str = "bulwark.test/audit";
const DECISIONS: [Decision; 5] = [
    Decision::Allowed,
    Decision::Denied,
    Decision::Approved,
    Decision::Failed,
    Decision::Warned,
];
const TEXT_FIELDS: [&str; 9] = [
    "session",
    "agent",
    "user",
    "action",
    "tool",
    "operation",
    "args_digest",
    "reason",
    "detail",
];

/// splitmix64: deterministic, dependency-free randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn record(n: u64) -> AuditRecord {
    AuditRecord {
        time_ms: 1_700_000_000_000 + n as i64,
        session: format!("sess-{}", n % 5),
        agent: ["coder", "researcher"][(n % 2) as usize].into(),
        user: "alice".into(),
        action: bulwark_audit::Action::ToolCall,
        tool: "shell".into(),
        operation: "exec".into(),
        args_digest: AuditRecord::digest_args(&serde_json::json!({ "n": n })),
        decision: DECISIONS[(n % 5) as usize],
        reason: format!("reason {n}").into(),
        detail: format!("détail {n}: matched grant"),
        duration_us: n * 37,
    }
}

struct Base {
    _dir: tempfile::TempDir,
    path: PathBuf,
    records: Vec<AuditRecord>,
    /// Exported before any edit, signed by the real key.
    exported: Checkpoint,
    /// The real log key's verifier.
    vkey: VerifierKey,
}

fn build_base() -> Base {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base.db");
    let key = bulwark_audit::generate_signing_key();
    let vkey = VerifierKey::from_signing_key(ORIGIN, &key).unwrap();
    let records: Vec<AuditRecord> = (0..N).map(record).collect();
    let note = {
        let sink = Store::open(&path).unwrap().audit_sink();
        for r in &records[..(N / 2) as usize] {
            bulwark_audit::AuditSink::record(&sink, r).unwrap();
        }
        sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
        for r in &records[(N / 2) as usize..] {
            bulwark_audit::AuditSink::record(&sink, r).unwrap();
        }
        sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap()
    };
    fold_wal(&path);
    let exported = parse_and_verify(&note, std::slice::from_ref(&vkey)).unwrap();
    assert_eq!(exported.size, N);
    Base {
        _dir: dir,
        path,
        records,
        exported,
        vkey,
    }
}

/// Folds the WAL into the main file so that copying one file copies all;
/// a checkpoint that could not finish (another connection busy) fails here
/// rather than as a puzzling missing table or trigger in the copy.
fn fold_wal(path: &Path) {
    let conn = Connection::open(path).unwrap();
    let busy: i64 = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .unwrap();
    assert_eq!(busy, 0, "the WAL of {} could not be folded", path.display());
}

/// Opens a copy of the log at `src` with the triggers gone.
fn tamper_copy(src: &Path, dest: &Path) -> Connection {
    std::fs::copy(src, dest).unwrap();
    let conn = Connection::open(dest).unwrap();
    conn.execute_batch(
        "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete; \
         DROP TRIGGER audit_no_replace; DROP TRIGGER audit_checkpoint_no_update; \
         DROP TRIGGER audit_checkpoint_no_delete; DROP TRIGGER audit_checkpoint_no_replace;",
    )
    .unwrap();
    conn
}

fn seq(index: u64) -> i64 {
    index as i64 + 1
}

/// Changes one byte of one field of row `index`; returns the field's name.
fn edit_field(conn: &Connection, rng: &mut Rng, index: u64) -> &'static str {
    let which = rng.below(TEXT_FIELDS.len() as u64 + 5) as usize;
    let get = |field: &str| format!("SELECT {field} FROM audit WHERE seq = ?1");
    let set = |field: &str| format!("UPDATE audit SET {field} = ?1 WHERE seq = ?2");
    if let Some(&field) = TEXT_FIELDS.get(which) {
        let value: String = conn
            .query_row(&get(field), [seq(index)], |r| r.get(0))
            .unwrap();
        let mut bytes = value.into_bytes();
        let ascii: Vec<usize> = (0..bytes.len())
            .filter(|&i| bytes[i].is_ascii_alphanumeric())
            .collect();
        let at = ascii[rng.below(ascii.len() as u64) as usize];
        bytes[at] = if bytes[at] == b'x' { b'y' } else { b'x' };
        let value = String::from_utf8(bytes).unwrap();
        conn.execute(&set(field), params![value, seq(index)])
            .unwrap();
        return field;
    }
    match which - TEXT_FIELDS.len() {
        n @ (0 | 1) => {
            let field = ["time_ms", "duration_us"][n];
            let value: i64 = conn
                .query_row(&get(field), [seq(index)], |r| r.get(0))
                .unwrap();
            let value = value ^ (1i64 << rng.below(40));
            conn.execute(&set(field), params![value, seq(index)])
                .unwrap();
            field
        }
        2 => {
            let old: String = conn
                .query_row(&get("decision"), [seq(index)], |r| r.get(0))
                .unwrap();
            let others: Vec<&str> = DECISIONS
                .iter()
                .map(|d| d.as_str())
                .filter(|d| *d != old)
                .collect();
            let new = others[rng.below(others.len() as u64) as usize];
            conn.execute(&set("decision"), params![new, seq(index)])
                .unwrap();
            "decision"
        }
        3 => {
            let mut leaf: Vec<u8> = conn
                .query_row(&get("leaf"), [seq(index)], |r| r.get(0))
                .unwrap();
            let at = rng.below(leaf.len() as u64) as usize;
            leaf[at] ^= 1 << rng.below(8);
            conn.execute(&set("leaf"), params![leaf, seq(index)])
                .unwrap();
            "leaf"
        }
        _ => {
            // Invalid UTF-8 smuggled into a TEXT column.
            conn.execute(
                "UPDATE audit SET reason = CAST(x'C328' AS TEXT) WHERE seq = ?1",
                [seq(index)],
            )
            .unwrap();
            "reason (invalid UTF-8)"
        }
    }
}

const COLS: &str = "time_ms, session, agent, user, action, tool, operation, args_digest, \
                    decision, reason, detail, duration_us, leaf";

/// Swaps everything but `seq` (optionally also the leaf) between two rows.
fn swap_rows(conn: &Connection, a: u64, b: u64, with_leaf: bool) {
    let cols: Vec<&str> = COLS
        .split(", ")
        .filter(|c| with_leaf || *c != "leaf")
        .collect();
    conn.execute_batch(&format!(
        "CREATE TEMP TABLE t AS SELECT * FROM audit WHERE seq IN ({sa}, {sb});
         UPDATE audit SET ({list}) = (SELECT {list} FROM t WHERE t.seq = {sb}) WHERE seq = {sa};
         UPDATE audit SET ({list}) = (SELECT {list} FROM t WHERE t.seq = {sa}) WHERE seq = {sb};
         DROP TABLE t;",
        sa = seq(a),
        sb = seq(b),
        list = cols.join(", "),
    ))
    .unwrap();
}

/// Rewrites the whole log as `records` with correct leaf hashes and replaces
/// every checkpoint by one of the forged log, signed by the forger's key.
fn forge(conn: &Connection, records: &[AuditRecord], forger: &SigningKey) -> String {
    conn.execute_batch("DELETE FROM audit; DELETE FROM audit_checkpoint;")
        .unwrap();
    let mut leaves: Vec<Hash> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let s = i as u64 + 1;
        let leaf = r.leaf_hash(s).unwrap();
        leaves.push(leaf);
        conn.execute(
            &format!("INSERT INTO audit (seq, {COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"),
            params![
                s as i64, r.time_ms, r.session, r.agent, r.user, r.action.as_str(), r.tool, r.operation,
                r.args_digest, r.decision.as_str(), r.reason.as_str(), r.detail, r.duration_us as i64,
                leaf.as_slice()
            ],
        )
        .unwrap();
    }
    let root = bulwark_audit::root(&leaves);
    let cp = Checkpoint::new(ORIGIN, leaves.len() as u64, root);
    let note = bulwark_audit::sign(&cp, forger, ORIGIN).unwrap();
    conn.execute(
        "INSERT INTO audit_checkpoint (size, root, note, time_ms) VALUES (?1, ?2, ?3, 0)",
        params![leaves.len() as i64, root.as_slice(), note],
    )
    .unwrap();
    note
}

/// Verifies the tampered copy; returns (verify problem, verify_against problem).
fn check(path: &Path, exported: &Checkpoint) -> (Option<Problem>, Option<Problem>) {
    let sink = Store::open(path).unwrap().audit_sink();
    let own = sink.verify().unwrap().problem;
    let against = sink.verify_against(exported).unwrap().problem;
    (own, against)
}

fn expect(p: &Option<Problem>, index: u64, kinds: &[ProblemKind], what: &str) {
    let p = p.as_ref().unwrap_or_else(|| panic!("{what}: not detected"));
    assert!(
        p.index == index && kinds.contains(&p.kind),
        "{what}: expected {kinds:?} at {index}, got {p}"
    );
}

#[test]
fn every_single_edit_is_detected() {
    let base = build_base();
    let clean = check(&base.path, &base.exported);
    assert_eq!(clean, (None, None));
    let forger = bulwark_audit::generate_signing_key();
    let seed = 0x5EED_0000_B01A_u64;
    let mut rng = Rng(seed);
    // Each round copies, edits and reopens a database: on tmpfs when there is
    // one, since the fsyncs of a real disk dominate otherwise.
    let shm = Path::new("/dev/shm");
    let work = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    let mut tried: BTreeMap<String, usize> = BTreeMap::new();
    let mut detected: BTreeMap<String, usize> = BTreeMap::new();
    for round in 0..EDITS {
        let path = work.path().join(format!("t{}.db", round % 4));
        let _ = std::fs::remove_file(&path);
        let conn = tamper_copy(&base.path, &path);
        let kind = ["field", "delete", "swap", "truncate", "forge"][round % 5];
        let label;
        match kind {
            "field" => {
                let index = rng.below(N);
                let field = edit_field(&conn, &mut rng, index);
                drop(conn);
                label = format!("field byte: {field}");
                let (own, _) = check(&path, &base.exported);
                let kinds = [ProblemKind::LeafMismatch, ProblemKind::Undecodable];
                expect(&own, index, &kinds, &format!("{label} of row {index}"));
            }
            "delete" => {
                let index = rng.below(N);
                conn.execute("DELETE FROM audit WHERE seq = ?1", [seq(index)])
                    .unwrap();
                drop(conn);
                label = "delete row".to_owned();
                let (own, _) = check(&path, &base.exported);
                if index + 1 < N {
                    expect(
                        &own,
                        index,
                        &[ProblemKind::SeqGap],
                        &format!("delete {index}"),
                    );
                } else {
                    // The last row: the stored checkpoint at N catches it.
                    expect(
                        &own,
                        index,
                        &[ProblemKind::CheckpointBeyondLog],
                        "delete last",
                    );
                }
            }
            "swap" => {
                let a = rng.below(N - 1);
                let b = a + 1 + rng.below(N - 1 - a);
                let with_leaf = rng.below(2) == 0;
                swap_rows(&conn, a, b, with_leaf);
                drop(conn);
                label = format!(
                    "swap rows (leaf {})",
                    if with_leaf { "moved" } else { "kept" }
                );
                let (own, _) = check(&path, &base.exported);
                expect(
                    &own,
                    a,
                    &[ProblemKind::LeafMismatch],
                    &format!("swap {a} {b}"),
                );
            }
            "truncate" => {
                // A careful attacker also drops the checkpoints that would
                // betray the truncation.
                let keep = N / 2 + rng.below(N / 2);
                conn.execute("DELETE FROM audit WHERE seq > ?1", [keep as i64])
                    .unwrap();
                conn.execute(
                    "DELETE FROM audit_checkpoint WHERE size > ?1",
                    [keep as i64],
                )
                .unwrap();
                drop(conn);
                label = "truncate tail".to_owned();
                let (own, against) = check(&path, &base.exported);
                assert_eq!(own, None, "truncation to {keep} is internally consistent");
                expect(
                    &against,
                    keep,
                    &[ProblemKind::CheckpointBeyondLog],
                    "truncate",
                );
            }
            _ => {
                let mut forged = base.records.clone();
                let index = rng.below(N) as usize;
                let variant = rng.below(3);
                match variant {
                    0 => forged[index].detail.push_str(" (nothing happened)"),
                    1 => {
                        forged.remove(index);
                        forged.push(record(N + 1000));
                    }
                    _ => forged.swap(index, (index + 1) % N as usize),
                }
                let note = forge(&conn, &forged, &forger);
                drop(conn);
                label = ["forge: edit", "forge: delete+pad", "forge: reorder"][variant as usize]
                    .to_owned();
                // The forged note does not verify under the real key...
                assert!(parse_and_verify(&note, std::slice::from_ref(&base.vkey)).is_err());
                // ...the forged log is internally consistent...
                let (own, against) = check(&path, &base.exported);
                assert_eq!(own, None, "{label} at {index}");
                // ...but the checkpoint exported before the edit exposes it.
                expect(&against, N, &[ProblemKind::CheckpointMismatch], &label);
            }
        }
        *tried.entry(label.clone()).or_default() += 1;
        *detected.entry(label).or_default() += 1;
    }
    println!("tamper suite (seed {seed:#x}, log of {N} records, {EDITS} edits):");
    for (label, n) in &tried {
        println!(
            "  {label:<28} tried {n:>4}  detected {:>4}",
            detected[label]
        );
    }
    assert_eq!(tried.values().sum::<usize>(), EDITS);
}

/// A log longer than two scan chunks is read as fixed `seq` ranges by
/// several threads at once; the first problem must still be reported at its
/// exact index, including gaps that empty a whole range and rows renumbered
/// far beyond the end.
#[test]
fn range_reads_of_a_long_log_report_the_first_problem() {
    const CHUNK: u64 = 4096;
    const LONG: u64 = 3 * CHUNK + 100;
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("long.db");
    {
        let key = bulwark_audit::generate_signing_key();
        let sink = Store::open(&long).unwrap().audit_sink();
        for n in 0..LONG {
            bulwark_audit::AuditSink::record(&sink, &record(n)).unwrap();
        }
        sink.checkpoint(&key, ORIGIN, ORIGIN).unwrap();
        assert!(sink.verify().unwrap().is_ok());
    }
    fold_wal(&long);
    let work = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, u64, ProblemKind); 7] = [
        (
            "delete one",
            "DELETE FROM audit WHERE seq = 5000",
            4999,
            ProblemKind::SeqGap,
        ),
        (
            "delete a whole range",
            "DELETE FROM audit WHERE seq BETWEEN 4097 AND 8192",
            4096,
            ProblemKind::SeqGap,
        ),
        (
            "renumber far beyond the end",
            "UPDATE audit SET seq = 1000000000000000 WHERE seq = 9000",
            8999,
            ProblemKind::SeqGap,
        ),
        (
            "renumber below one",
            "UPDATE audit SET seq = -5 WHERE seq = 3",
            0,
            ProblemKind::SeqGap,
        ),
        (
            "edit in the third range",
            "UPDATE audit SET detail = 'x' WHERE seq = 10000",
            9999,
            ProblemKind::LeafMismatch,
        ),
        (
            "edit at a range's last row",
            "UPDATE audit SET reason = 'x' WHERE seq = 8192",
            8191,
            ProblemKind::LeafMismatch,
        ),
        (
            "delete the last row",
            "DELETE FROM audit WHERE seq = 12388", // LONG
            LONG - 1,
            ProblemKind::CheckpointBeyondLog,
        ),
    ];
    for (i, (label, sql, index, kind)) in cases.into_iter().enumerate() {
        let path = work.path().join(format!("case{i}.db"));
        let conn = tamper_copy(&long, &path);
        conn.execute_batch(sql).unwrap();
        drop(conn);
        let sink = Store::open(&path).unwrap().audit_sink();
        let started = std::time::Instant::now();
        let problem = sink.verify().unwrap().problem;
        expect(&problem, index, &[kind], label);
        assert!(started.elapsed().as_secs() < 60, "{label}: too slow");
    }
}
