//! Revoking or rotating a user's tokens stops their running turns at once
//! (not after the detach grace), and says so in the audit log; another
//! user's turn goes on.

use crate::common::{Fixture, Ws, recv, say, subscribe};
use bulwark_server::ServerConfig;
use bulwark_store::Store;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(10);

fn running(f: &Fixture, user: &str) -> u64 {
    *f.backend
        .counters
        .by_user
        .lock()
        .unwrap()
        .get(user)
        .unwrap_or(&0)
}

/// A turn that streams for far longer than the test (a delta every 20 ms).
async fn long_turn(ws: &mut Ws, agent: &str) {
    subscribe(ws, agent).await;
    say(ws, "slow:100000").await;
    assert_eq!(recv(ws).await["type"], "text_delta");
}

/// The newest audit records with this action.
fn records(store: &Store, action: &str) -> Vec<bulwark_audit::AuditRecord> {
    use bulwark_audit::AuditSink;
    store
        .audit_sink()
        .tail(1000)
        .unwrap()
        .into_iter()
        .map(|r| r.record)
        .filter(|r| r.action.as_str() == action)
        .collect()
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_stops_the_users_running_turns_and_audits_it() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut alice = server.ws(&f.alice).await;
    long_turn(&mut alice, "helper").await;
    let mut bob = server.ws(&f.bob).await;
    long_turn(&mut bob, "helper").await;
    assert_eq!((running(&f, "alice"), running(&f, "bob")), (1, 1));

    f.editor().revoke("alice").unwrap();
    server.state.reload_access();
    eventually("alice's conversation is stopped", || {
        running(&f, "alice") == 0
    })
    .await;
    eventually("the stop is audited", || {
        !records(&f.store, "revocation").is_empty()
    })
    .await;
    let r = &records(&f.store, "revocation")[0];
    assert_eq!(
        (r.user.as_str(), r.operation.as_str()),
        ("alice", "stop_turns")
    );
    assert!(
        r.detail.contains("stopped 1 running conversation"),
        "{}",
        r.detail
    );
    assert!(r.detail.contains("revoked"), "{}", r.detail);

    // Bob's turn streams on.
    assert_eq!(running(&f, "bob"), 1);
    for _ in 0..3 {
        assert_eq!(recv(&mut bob).await["type"], "text_delta");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_stops_the_turns_too_but_adding_a_user_stops_nothing() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut bob = server.ws(&f.bob).await;
    // (The socket was answered: the server's background tasks run.)
    long_turn(&mut bob, "other").await;
    f.add_user("dave");
    server.state.reload_access();
    eventually("the reload is audited", || {
        !records(&f.store, "config_reload").is_empty()
    })
    .await;
    assert_eq!(running(&f, "bob"), 1, "another user's edit stops nothing");
    f.editor().rotate("bob").unwrap();
    server.state.reload_access();
    eventually("bob's conversation is stopped", || running(&f, "bob") == 0).await;
    eventually("the stop is audited", || {
        !records(&f.store, "revocation").is_empty()
    })
    .await;
    let r = &records(&f.store, "revocation")[0];
    assert!(r.detail.starts_with("rotated"), "{}", r.detail);
    server.stop().await;
}
