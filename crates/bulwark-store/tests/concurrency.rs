//! Many writers: threads sharing one `Store`, and separate connections on one
//! file (as separate processes would have) relying on WAL + busy timeout.

use bulwark_audit::{AuditRecord, AuditSink, Decision};
use bulwark_store::{NewSession, Store};
use std::collections::HashSet;
use std::sync::{Arc, Barrier};

#[path = "concurrency/lease.rs"]
mod lease;

fn audit(session: &str, n: u64) -> AuditRecord {
    AuditRecord {
        time_ms: n as i64,
        session: session.into(),
        agent: "a".into(),
        user: "u".into(),
        action: bulwark_audit::Action::ToolCall,
        tool: "t".into(),
        operation: "o".into(),
        args_digest: String::new(),
        decision: Decision::Allowed,
        reason: bulwark_audit::Reason::Empty,
        detail: format!("{n}"),
        duration_us: n,
    }
}

#[test]
fn concurrent_appends_on_one_store() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("bulwark.db")).unwrap();
    store
        .create_session(&NewSession {
            id: "s".into(),
            agent: "a".into(),
            user: "u".into(),
        })
        .unwrap();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let sink = store.audit_sink();
                barrier.wait();
                let mut seqs = Vec::new();
                let mut ids = Vec::new();
                for i in 0..PER_THREAD {
                    ids.push(
                        store
                            .append_message("s", "user", &format!("{t}:{i}"))
                            .unwrap(),
                    );
                    seqs.push(
                        sink.append(&audit("s", (t * PER_THREAD + i) as u64))
                            .unwrap(),
                    );
                }
                (ids, seqs)
            })
        })
        .collect();
    let mut all_seqs = Vec::new();
    let mut all_ids = HashSet::new();
    for h in handles {
        let (ids, seqs) = h.join().unwrap();
        // Each thread sees its own writes in increasing order.
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
        all_ids.extend(ids);
        all_seqs.extend(seqs);
    }
    let total = THREADS * PER_THREAD;
    all_seqs.sort_unstable();
    assert_eq!(
        all_seqs,
        (1..=total as u64).collect::<Vec<_>>(),
        "unique and dense"
    );
    assert_eq!(all_ids.len(), total);

    let msgs = store.messages("s").unwrap();
    assert_eq!(msgs.len(), total);
    // Every thread's messages are present and in that thread's order.
    for t in 0..THREADS {
        let mine: Vec<String> = msgs
            .iter()
            .filter(|m| m.content_json.starts_with(&format!("{t}:")))
            .map(|m| m.content_json.clone())
            .collect();
        let expected: Vec<String> = (0..PER_THREAD).map(|i| format!("{t}:{i}")).collect();
        assert_eq!(mine, expected);
    }
    assert_eq!(
        store.session("s").unwrap().unwrap().message_count,
        total as u64
    );
}

#[test]
fn two_connections_on_one_file_both_write() {
    const HANDLES: usize = 4;
    const PER_HANDLE: usize = 150;
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("bulwark.db"));
    let barrier = Arc::new(Barrier::new(HANDLES));
    // Each thread opens its own Store on a fresh file at the same time, so
    // schema creation races too.
    let handles: Vec<_> = (0..HANDLES)
        .map(|h| {
            let path = Arc::clone(&path);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let store = Store::open(&path).unwrap();
                let sid = format!("s{h}");
                store
                    .create_session(&NewSession {
                        id: sid.clone(),
                        agent: "a".into(),
                        user: "u".into(),
                    })
                    .unwrap();
                let sink = store.audit_sink();
                let mut seqs = Vec::new();
                for i in 0..PER_HANDLE {
                    store.append_message(&sid, "user", &i.to_string()).unwrap();
                    seqs.push(sink.append(&audit(&sid, i as u64)).unwrap());
                    if i % 10 == 0 {
                        store.save_state(&sid, &format!("{{\"i\":{i}}}")).unwrap();
                        // Readers interleave with the other connection's writes.
                        store.list_sessions(None, 10).unwrap();
                    }
                }
                seqs
            })
        })
        .collect();
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.join().unwrap());
    }
    all.sort_unstable();
    let total = HANDLES * PER_HANDLE;
    assert_eq!(all, (1..=total as u64).collect::<Vec<_>>());

    let store = Store::open(&path).unwrap();
    assert_eq!(store.list_sessions(None, 100).unwrap().len(), HANDLES);
    for h in 0..HANDLES {
        let msgs = store.messages(&format!("s{h}")).unwrap();
        let got: Vec<String> = msgs.into_iter().map(|m| m.content_json).collect();
        let expected: Vec<String> = (0..PER_HANDLE).map(|i| i.to_string()).collect();
        assert_eq!(got, expected);
    }
    assert_eq!(store.audit_sink().tail(usize::MAX).unwrap().len(), total);
}

/// Many threads recording through the batching trait path at once: after one
/// flush every record is stored exactly once with dense sequence numbers.
#[test]
fn concurrent_batched_records_are_all_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("batched.db")).unwrap();
    let sink = store.audit_sink();
    let threads = 8;
    let per_thread = 250;
    std::thread::scope(|scope| {
        for t in 0..threads {
            let sink = sink.clone();
            scope.spawn(move || {
                for i in 0..per_thread {
                    sink.record(&audit("s", (t * per_thread + i) as u64))
                        .unwrap();
                }
            });
        }
    });
    sink.flush().unwrap();
    let all = sink.newest(10_000).unwrap();
    assert_eq!(all.len(), threads * per_thread);
    let seqs: Vec<u64> = all.iter().map(|r| r.seq).collect();
    assert_eq!(
        seqs,
        (1..=(threads * per_thread) as u64).collect::<Vec<_>>()
    );
    let mut ids: Vec<i64> = all.iter().map(|r| r.record.time_ms).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        threads * per_thread,
        "a record was stored twice or lost"
    );
}
