//! Revoking a user's token with `bulwark access revoke` stops their
//! running turn in its `bulwark worker` at once (not when the detach grace
//! ends) and writes a `revocation` audit record; another user's turn, in
//! its own worker, goes on.

use super::*;
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(15);

/// A turn that waits for a person's approval: running for as long as the
/// test wants.
const WAITING: &str = r#"{"tool_calls": [{"name": "file_write", "input": {"path": "out/a.txt", "content": "x"}}]}
{"text": "done"}
"#;

fn revocations(bw: &common::Bw) -> Vec<(String, String, String)> {
    let db = rusqlite::Connection::open(bw.path("bulwark.db")).expect("the database");
    let mut stmt = db
        .prepare("SELECT user, operation, detail FROM audit WHERE action = 'revocation'")
        .expect("a query");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("rows")
        .map(|r| r.expect("a row"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_stops_that_users_running_turn_in_its_worker() {
    let bw = Bw::init();
    let manifest =
        format!("{APPROVED_WRITES}[access]\nmode = \"users\"\nusers = [\"alice\", \"bob\"]\n");
    bw.agent("gate", &common::scripted("gate", &manifest), Some(WAITING));
    let alice = token_for(&bw, "alice", "gate");
    let bob = token_for(&bw, "bob", "gate");
    let server = start(&bw);

    let mut wa = connect(&server.addr, &alice).await;
    send(&mut wa, json!({"type": "subscribe", "agent": "gate"})).await;
    until(&mut wa, "subscribed").await;
    send(&mut wa, json!({"type": "message", "text": "go"})).await;
    until(&mut wa, "approval_request").await;
    let mut wb = connect(&server.addr, &bob).await;
    send(&mut wb, json!({"type": "subscribe", "agent": "gate"})).await;
    until(&mut wb, "subscribed").await;
    send(&mut wb, json!({"type": "message", "text": "go"})).await;
    let (request, _) = until(&mut wb, "approval_request").await;
    assert_eq!(workers_of(server.pid(), Some("alice")).len(), 1);
    assert_eq!(workers_of(server.pid(), Some("bob")).len(), 1);

    bw.run(&["access", "revoke", "alice"]).ok();
    let revoked = Instant::now();
    while !workers_of(server.pid(), Some("alice")).is_empty() {
        assert!(
            revoked.elapsed() < BOUND,
            "alice's worker still runs after the revocation"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while revocations(&bw).is_empty() {
        assert!(revoked.elapsed() < BOUND, "no revocation record");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let records = revocations(&bw);
    assert_eq!(records.len(), 1, "{records:?}");
    let (user, operation, detail) = &records[0];
    assert_eq!((user.as_str(), operation.as_str()), ("alice", "stop_turns"));
    assert!(
        detail.contains("stopped 1 running conversation"),
        "{detail}"
    );

    // Bob's worker and turn go on.
    assert_eq!(workers_of(server.pid(), Some("bob")).len(), 1);
    send(
        &mut wb,
        json!({"type": "tool_approval", "request_id": request["request_id"], "approve": true}),
    )
    .await;
    let (ended, _) = until(&mut wb, "turn_ended").await;
    assert_eq!(ended["text"], "done", "{ended}");
}
