//! The REST reads, health, metrics and the OpenAPI document.

use crate::common;

use bulwark_server::ServerConfig;
use common::{Fixture, body_text, get, get_json, open_session, post, status, turn};

#[tokio::test]
async fn messages_usage_and_session_listing() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut ws = server.ws(&f.bob).await;
    let session = open_session(&mut ws, "other").await;
    for text in ["first", "second"] {
        turn(&mut ws, text).await;
    }
    let sessions = server
        .get_json("/api/v1/sessions?agent=other&limit=5", Some(&f.bob))
        .await;
    let s = &sessions["sessions"][0];
    assert_eq!(
        (s["id"].as_str(), s["agent"].as_str(), s["live"].as_bool()),
        (Some(session.as_str()), Some("other"), Some(true))
    );
    assert_eq!(s["message_count"], 2);
    let msgs = server
        .get_json(
            &format!("/api/v1/sessions/{session}/messages"),
            Some(&f.bob),
        )
        .await;
    let list = msgs["messages"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["content"]["blocks"][0]["text"], "first");
    let first_id = list[0]["id"].as_i64().unwrap();
    let after = server
        .get_json(
            &format!("/api/v1/sessions/{session}/messages?after={first_id}&limit=1"),
            Some(&f.bob),
        )
        .await;
    assert_eq!(
        after["messages"][0]["content"]["blocks"][0]["text"],
        "second"
    );
    let usage = server.get_json("/api/v1/usage", Some(&f.bob)).await;
    assert_eq!(usage["sessions"][0]["tokens"], 14, "{usage}");
    assert_eq!(usage["agents"]["other"], 14);
    assert_eq!(usage["total_tokens"], 14);
    // Bounds and unknown parameters.
    for bad in [
        "/api/v1/sessions?limit=0",
        "/api/v1/sessions?limit=501",
        "/api/v1/sessions?agent=../x",
        "/api/v1/sessions?colour=red",
        "/api/v1/usage?user=Bad%20Name",
    ] {
        assert_eq!(server.status(bad, Some(&f.bob)).await, 400, "{bad}");
    }
    let long = format!("/api/v1/sessions/{}/messages", "a".repeat(200));
    assert_eq!(server.status(&long, Some(&f.bob)).await, 404);
    server.stop().await;
}

#[tokio::test]
async fn health_says_little_detail_and_metrics_are_for_admins() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let h = get_json(&state, "/health", None).await;
    assert_eq!(h.as_object().unwrap().len(), 2, "{h}");
    assert_eq!(h["status"], "ok");
    assert_eq!(h["version"], env!("CARGO_PKG_VERSION"));
    let d = get_json(&state, "/health/detail", Some(&f.root)).await;
    assert_eq!(d["store"]["reachable"], true);
    assert_eq!(d["access"]["users_with_tokens"], 3);
    assert_eq!(d["workers"]["workers"], 0);
    assert!(d["uptime_secs"].is_u64());
    let r = get(&state, "/metrics", Some(&f.root)).await;
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = body_text(r).await;
    for name in [
        "bulwark_workers",
        "bulwark_auth_failures_total",
        "bulwark_http_responses_total{class=\"2xx\"}",
    ] {
        assert!(text.contains(name), "{name} in\n{text}");
    }
    // Every sample line is `name{labels} value`.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (_, value) = line.rsplit_once(' ').unwrap();
        value.parse::<u64>().unwrap();
    }
}

#[tokio::test]
async fn openapi_describes_every_route() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let doc = get_json(&state, "/api/v1/openapi.json", Some(&f.bob)).await;
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    let paths: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let routes = [
        "/health",
        "/health/detail",
        "/metrics",
        "/api/v1/agents",
        "/api/v1/sessions",
        "/api/v1/sessions/{id}/messages",
        "/api/v1/usage",
        "/api/v1/openapi.json",
        "/api/v1/ws",
        "/api/v1/credits",
        "/api/v1/credits/history",
        "/api/v1/credits/transfer",
        "/mcp/{agent}",
    ];
    let mut sorted = paths.clone();
    sorted.sort();
    let mut want = routes.to_vec();
    want.sort();
    assert_eq!(sorted, want);
    // Each documented path is routed (the router is built from the same list).
    for path in routes {
        let p = path.replace("{id}", "x").replace("{agent}", "other");
        let s = if path.ends_with("/transfer") || path.starts_with("/mcp/") {
            post(&state, &p, Some(&f.root), "{}")
                .await
                .status()
                .as_u16()
        } else {
            status(&state, &p, Some(&f.root)).await
        };
        assert_ne!(s, 405, "{path}");
        assert!(s != 404 || path.contains("{id}"), "{path}: {s}");
    }
    assert!(doc["components"]["schemas"]["ClientFrame"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    assert_eq!(status(&state, "/api/v1/openapi.json", None).await, 401);
}
