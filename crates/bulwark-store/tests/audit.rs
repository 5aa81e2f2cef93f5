//! The SQLite audit sink: sequence numbers, tail, query, append-only triggers.

use bulwark_audit::{AuditRecord, AuditSink, Decision};
use bulwark_store::{AuditQuery, Store};

fn record(session: &str, n: u64, decision: Decision) -> AuditRecord {
    AuditRecord {
        time_ms: 1_700_000_000_000 + n as i64,
        session: session.into(),
        agent: "coder".into(),
        user: "alice".into(),
        action: bulwark_audit::Action::ToolCall,
        tool: "shell".into(),
        operation: "exec".into(),
        args_digest: AuditRecord::digest_args(&serde_json::json!({ "n": n })),
        decision,
        reason: bulwark_audit::Reason::Capability,
        detail: format!("detail {n} ünïcødé \u{0}"),
        duration_us: n * 10,
    }
}

const DECISIONS: [Decision; 5] = [
    Decision::Allowed,
    Decision::Denied,
    Decision::Approved,
    Decision::Failed,
    Decision::Warned,
];

#[test]
fn record_assigns_dense_seq_from_one_and_round_trips() {
    let store = Store::open_in_memory().unwrap();
    let sink = store.audit_sink();
    let mut written = Vec::new();
    for n in 0..10u64 {
        let r = record("s1", n, DECISIONS[n as usize % 5]);
        assert_eq!(sink.append(&r).unwrap(), n + 1);
        written.push(r);
    }
    let all = sink.tail(100).unwrap();
    assert_eq!(all.len(), 10);
    for (i, stored) in all.iter().enumerate() {
        assert_eq!(stored.seq, i as u64 + 1);
        assert_eq!(stored.record, written[i]);
    }
}

#[test]
fn tail_is_newest_oldest_first() {
    let store = Store::open_in_memory().unwrap();
    let sink = store.audit_sink();
    assert!(sink.tail(5).unwrap().is_empty());
    for n in 0..10 {
        sink.record(&record("s1", n, Decision::Allowed)).unwrap();
    }
    let seqs: Vec<u64> = sink.tail(3).unwrap().iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [8, 9, 10]);
    assert!(sink.tail(0).unwrap().is_empty());
    assert_eq!(sink.tail(usize::MAX).unwrap().len(), 10);
}

#[test]
fn query_filters_by_session_and_since() {
    let store = Store::open_in_memory().unwrap();
    let sink = store.audit_sink();
    for n in 0..10 {
        let s = if n % 2 == 0 { "even" } else { "odd" };
        sink.record(&record(s, n, Decision::Denied)).unwrap();
    }
    let seqs =
        |q: AuditQuery| -> Vec<u64> { sink.query(&q).unwrap().iter().map(|r| r.seq).collect() };
    let q = |session: Option<&str>, since_seq, limit| AuditQuery {
        session: session.map(str::to_owned),
        since_seq,
        limit,
    };
    assert_eq!(seqs(q(None, None, 100)), (1..=10).collect::<Vec<_>>());
    assert_eq!(seqs(q(Some("even"), None, 100)), [1, 3, 5, 7, 9]);
    assert_eq!(seqs(q(Some("odd"), Some(4), 100)), [6, 8, 10]);
    assert_eq!(seqs(q(None, Some(7), 2)), [8, 9]);
    assert_eq!(seqs(q(None, Some(10), 100)), Vec::<u64>::new());
    assert_eq!(seqs(q(None, Some(u64::MAX), 100)), Vec::<u64>::new());
    assert_eq!(seqs(q(Some("none"), None, 100)), Vec::<u64>::new());
    assert_eq!(seqs(q(None, None, 0)), Vec::<u64>::new());
}

#[test]
fn huge_duration_saturates_instead_of_losing_the_record() {
    let store = Store::open_in_memory().unwrap();
    let sink = store.audit_sink();
    let mut r = record("s1", 1, Decision::Failed);
    r.duration_us = u64::MAX;
    sink.record(&r).unwrap();
    assert_eq!(sink.tail(1).unwrap()[0].record.duration_us, i64::MAX as u64);
}

#[test]
fn audit_rows_refuse_update_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bulwark.db");
    let store = Store::open(&path).unwrap();
    let sink = store.audit_sink();
    for n in 0..3 {
        sink.record(&record("s1", n, Decision::Denied)).unwrap();
    }
    let before = sink.tail(10).unwrap();

    let conn = rusqlite::Connection::open(&path).unwrap();
    for sql in [
        "UPDATE audit SET decision = 'allowed' WHERE seq = 1",
        "UPDATE audit SET detail = 'nothing to see'",
        "DELETE FROM audit WHERE seq = 2",
        // No WHERE: SQLite's truncate optimisation must not bypass the trigger.
        "DELETE FROM audit",
        "INSERT OR REPLACE INTO audit (seq, time_ms, session, agent, user, action, tool, \
         operation, args_digest, decision, reason, detail, duration_us) \
         VALUES (1, 0, 's1', 'a', 'u', 'x', 't', 'o', '', 'allowed', '', '', 0)",
    ] {
        let err = conn.execute(sql, []).unwrap_err();
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    assert_eq!(sink.tail(10).unwrap(), before);
}

#[test]
fn replace_cannot_rewrite_rows() {
    // `INSERT OR REPLACE` / `REPLACE` delete the old row without firing DELETE
    // triggers (recursive_triggers is off), so they need their own guard.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bulwark.db");
    let store = Store::open(&path).unwrap();
    let sink = store.audit_sink();
    sink.record(&record("s1", 0, Decision::Denied)).unwrap();
    sink.flush().unwrap();
    store
        .create_session(&bulwark_store::NewSession {
            id: "s1".into(),
            agent: "a".into(),
            user: "u".into(),
        })
        .unwrap();
    store.append_message("s1", "user", "original").unwrap();
    let before = sink.tail(10).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    for sql in [
        "REPLACE INTO audit (seq, time_ms, session, agent, user, action, tool, \
         operation, args_digest, decision, reason, detail, duration_us) \
         VALUES (1, 0, 's1', 'a', 'u', 'x', 't', 'o', '', 'allowed', '', '', 0)",
        "REPLACE INTO messages (id, session_id, role, content_json, created_ms) \
         VALUES (1, 's1', 'user', 'forged', 0)",
    ] {
        let err = conn.execute(sql, []).unwrap_err();
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    assert_eq!(sink.tail(10).unwrap(), before);
    assert_eq!(store.messages("s1").unwrap()[0].content_json, "original");
}

#[test]
fn bad_decision_in_file_is_corrupt_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bulwark.db");
    let store = Store::open(&path).unwrap();
    let sink = store.audit_sink();
    sink.record(&record("s1", 0, Decision::Denied)).unwrap();
    sink.flush().unwrap();
    // Someone with the file drops the guards and edits a row.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA ignore_check_constraints = ON; DROP TRIGGER audit_no_update; \
         UPDATE audit SET decision = 'maybe';",
    )
    .unwrap();
    drop(conn);
    let err = sink
        .query(&AuditQuery {
            session: None,
            since_seq: None,
            limit: 10,
        })
        .unwrap_err();
    assert!(
        matches!(err, bulwark_store::StoreError::Corrupt(_)),
        "{err:?}"
    );
    assert!(sink.tail(1).is_err());
}

#[test]
fn audit_survives_reopen_and_continues_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bulwark.db");
    {
        let sink = Store::open(&path).unwrap().audit_sink();
        for n in 0..5 {
            sink.record(&record("s1", n, Decision::Allowed)).unwrap();
        }
    }
    let sink = Store::open(&path).unwrap().audit_sink();
    assert_eq!(sink.append(&record("s1", 5, Decision::Allowed)).unwrap(), 6);
    assert_eq!(sink.tail(100).unwrap().len(), 6);
}

#[test]
fn sink_is_usable_as_trait_object() {
    let store = Store::open_in_memory().unwrap();
    let sink: std::sync::Arc<dyn AuditSink> = std::sync::Arc::new(store.audit_sink());
    sink.record(&record("s", 0, Decision::Warned)).unwrap();
    let tail = sink.tail(10).unwrap();
    assert_eq!(tail.len(), 1);
    assert_eq!(tail[0].seq, 1);
}

/// Automatic checkpoints are off on the store's connection, so pages reach
/// the main database file only through the background checkpointer: if it
/// were not running, the file would stay at its initial size while the WAL
/// grew without bound.
#[test]
fn background_checkpointer_moves_the_wal_into_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ckpt.db");
    let store = Store::open(&path).unwrap();
    let sink = store.audit_sink();
    let initial = std::fs::metadata(&path).unwrap().len();
    let detail = "x".repeat(200);
    for i in 0..3000 {
        let mut r = record("s", i, Decision::Allowed);
        r.detail = format!("{detail}{i}");
        sink.record(&r).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::metadata(&path).unwrap().len() <= initial + 100_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint within 10 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(store);
}

/// Through the trait, records are queued and committed in batches: `flush`
/// makes everything accepted so far durable, in order, with dense seqs, and
/// dropping the last handle drains what is still queued.
#[test]
fn batched_records_are_durable_after_flush_and_after_drop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("batch.db");
    {
        let store = Store::open(&path).unwrap();
        let sink = store.audit_sink();
        for i in 0..500 {
            sink.record(&record("s", i, Decision::Allowed)).unwrap();
        }
        sink.flush().unwrap();
        // A second handle on the same file sees all of them after the flush.
        let other = Store::open(&path).unwrap();
        let seen = other.audit_sink().newest(1000).unwrap();
        assert_eq!(seen.len(), 500);
        assert!(seen.iter().enumerate().all(|(i, r)| r.seq == i as u64 + 1));
        for i in 500..700 {
            sink.record(&record("s", i, Decision::Denied)).unwrap();
        }
        // No flush: dropping the sink and the store must drain the queue.
    }
    let store = Store::open(&path).unwrap();
    let all = store.audit_sink().newest(1000).unwrap();
    assert_eq!(all.len(), 700);
    assert_eq!(
        all.last().map(|r| r.record.decision),
        Some(Decision::Denied)
    );
}

/// A batch that cannot be stored poisons the sink: the failure surfaces at
/// `flush` and every later `record`, never silently.
#[test]
fn a_failed_batch_is_reported_and_sticky() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("fail.db")).unwrap();
    let sink = store.audit_sink();
    sink.record(&record("s", 0, Decision::Allowed)).unwrap();
    sink.flush().unwrap();
    // Make every further insert fail inside SQLite.
    store
        .audit_sink()
        .append(&record("s", 1, Decision::Allowed))
        .unwrap();
    drop_table_for_test(&dir.path().join("fail.db"));
    sink.record(&record("s", 2, Decision::Allowed)).unwrap();
    let err = sink.flush().unwrap_err();
    assert!(err.to_string().contains("not stored"), "{err}");
    assert!(sink.record(&record("s", 3, Decision::Allowed)).is_err());
    assert!(sink.flush().is_err());
}

/// Replaces the audit table with one that refuses inserts, from another
/// connection, to simulate a storage failure under the sink.
fn drop_table_for_test(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    conn.execute_batch(
        "CREATE TRIGGER audit_test_fail BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'disk says no'); END;",
    )
    .unwrap();
}
