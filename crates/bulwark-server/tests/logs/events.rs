//! Security events in the audit log: failed sign-ins (aggregated, never
//! the token) and access.toml reloads.

use crate::common::{Fixture, get, raw_get};
use bulwark_audit::{AuditRecord, AuditSink};
use bulwark_server::ServerConfig;
use std::time::Duration;

fn records(f: &Fixture, action: &str) -> Vec<AuditRecord> {
    f.store
        .audit_sink()
        .tail(1000)
        .unwrap()
        .into_iter()
        .map(|r| r.record)
        .filter(|r| r.action.as_str() == action)
        .collect()
}

#[tokio::test]
async fn failed_sign_ins_are_one_counted_record_without_the_token() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let guesses: Vec<String> = (0..7)
        .map(|i| format!("bwk_guess{i:03}_SECRETPART{i}"))
        .collect();
    for g in &guesses {
        assert_eq!(get(&state, "/api/v1/agents", Some(g)).await.status(), 401);
    }
    // A valid sign-in and a request without a token are not failures.
    assert_eq!(
        get(&state, "/api/v1/agents", Some(&f.bob)).await.status(),
        200
    );
    assert_eq!(get(&state, "/api/v1/agents", None).await.status(), 401);
    assert!(
        records(&f, "auth_failure").is_empty(),
        "never one record per attempt"
    );
    state.flush_security_events();
    let found = records(&f, "auth_failure");
    assert_eq!(found.len(), 1, "{found:?}");
    let r = &found[0];
    assert!(r.detail.starts_with("7 failed sign-in"), "{}", r.detail);
    assert_eq!(r.operation, "sign_in");
    let text = serde_json::to_string(r).unwrap();
    for g in &guesses {
        assert!(
            !text.contains(g.as_str()) && !text.contains("SECRETPART"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_reload_of_access_toml_is_audited() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    // Once it answers, its background tasks run.
    let health = raw_get(server.addr, "/health", &server.host()).await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    f.add_user("erin");
    server.state.reload_access();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while records(&f, "config_reload").is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a config_reload record"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = &records(&f, "config_reload")[0];
    assert_eq!(r.operation, "access");
    assert!(r.detail.contains("4 users"), "{}", r.detail);
    // A file that does not parse is audited as refused.
    std::fs::write(f.home.access_path(), "[users.x]\nrole = 3\n").unwrap();
    server.state.reload_access();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while records(&f, "config_reload").len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "a second record");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = records(&f, "config_reload").pop().unwrap();
    assert_eq!(r.decision, bulwark_audit::Decision::Denied);
    server.stop().await;
}
