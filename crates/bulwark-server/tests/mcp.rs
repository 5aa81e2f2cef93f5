//! `POST /mcp/{agent}` in front of the (in-process) fake backend: who may
//! reach an agent's tools, from where, with what; and that a valid client
//! lists and calls them through the agent's tools-only conversation.

use crate::common;

use axum::body::Body;
use axum::http::Request;
use bulwark_server::ServerConfig;
use common::{Fixture, LOCAL_HOST, bearer, body_text, call};
use std::sync::atomic::Ordering;

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
const CALL: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}"#;

fn mcp(agent: &str, token: Option<&str>, _body: &str) -> axum::http::request::Builder {
    let mut req = Request::post(format!("/mcp/{agent}"))
        .header("host", LOCAL_HOST)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(t) = token {
        req = req.header("authorization", bearer(t));
    }
    req
}

async fn send(
    state: &bulwark_server::AppState,
    req: axum::http::request::Builder,
    body: &str,
) -> (u16, String) {
    let resp = call(state, req.body(Body::from(body.to_owned())).unwrap()).await;
    let status = resp.status().as_u16();
    (status, body_text(resp).await)
}

#[tokio::test]
async fn a_user_lists_and_calls_an_agents_tools_in_one_tools_only_conversation() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let (status, body) = send(&state, mcp("helper", Some(&f.alice), LIST), LIST).await;
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["result"]["tools"][0]["name"], "echo", "{body}");
    let (status, body) = send(&state, mcp("helper", Some(&f.alice), CALL), CALL).await;
    assert_eq!(status, 200, "{body}");
    let result: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        result["result"]["content"][0]["text"], "echo {\"x\":1}",
        "{body}"
    );
    assert_ne!(result["result"]["isError"], true, "{body}");
    // Both requests went to one conversation.
    assert_eq!(f.backend.counters.opened.load(Ordering::SeqCst), 1);
    assert_eq!(state.mcp_workers_open(), 1);
    // An unknown tool is a tool error, not a broken server.
    let unknown = CALL.replace("\"echo\"", "\"rm\"");
    let (status, body) = send(&state, mcp("helper", Some(&f.alice), &unknown), &unknown).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"isError\":true"), "{body}");
}

#[tokio::test]
async fn tokens_agents_and_names_are_checked_before_any_conversation_opens() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    // No token, a wrong one.
    assert_eq!(send(&state, mcp("helper", None, LIST), LIST).await.0, 401);
    assert_eq!(
        send(&state, mcp("helper", Some("bwk_nope"), LIST), LIST)
            .await
            .0,
        401
    );
    // alice may use `helper` only; `secret` is private; an agent that does
    // not exist is refused the same way (its existence is not told).
    for agent in ["other", "secret", "missing"] {
        let (status, body) = send(&state, mcp(agent, Some(&f.alice), LIST), LIST).await;
        assert_eq!(status, 403, "{agent}: {body}");
    }
    // Not an agent name at all.
    assert_eq!(
        send(&state, mcp("..", Some(&f.alice), LIST), LIST).await.0,
        404
    );
    assert_eq!(f.backend.counters.opened.load(Ordering::SeqCst), 0);
    // GET (an SSE stream in session mode) is not served: POST only.
    let get = Request::get("/mcp/helper")
        .header("host", LOCAL_HOST)
        .header("authorization", bearer(&f.alice))
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(&state, get).await.status().as_u16(), 405);
}

#[tokio::test]
async fn host_origin_and_body_size_are_checked_and_the_server_keeps_serving() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let foreign_host = Request::post("/mcp/helper")
        .header("host", "evil.example:8420")
        .header("authorization", bearer(&f.alice))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    assert_eq!(send(&state, foreign_host, LIST).await.0, 421);
    let foreign_origin =
        mcp("helper", Some(&f.alice), LIST).header("origin", "https://evil.example");
    assert_eq!(send(&state, foreign_origin, LIST).await.0, 403);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"echo","arguments":{{"x":"{}"}}}}}}"#,
        "a".repeat(ServerConfig::default().limits.mcp_body_bytes)
    );
    assert_eq!(
        send(&state, mcp("helper", Some(&f.alice), &big), &big)
            .await
            .0,
        413
    );
    // Malformed JSON-RPC gets a JSON-RPC error; the next request works.
    let (_, body) = send(&state, mcp("helper", Some(&f.alice), "{oops"), "{oops").await;
    assert!(body.contains("\"error\""), "{body}");
    assert!(body.contains("-32700"), "{body}");
    let not_rpc = r#"{"hello":"world"}"#;
    let (status, body) = send(&state, mcp("helper", Some(&f.alice), not_rpc), not_rpc).await;
    assert!((400..500).contains(&status), "{status} {body}");
    assert!(body.contains("\"error\""), "{body}");
    let (status, body) = send(&state, mcp("helper", Some(&f.alice), LIST), LIST).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(f.backend.counters.opened.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_openapi_document_lists_the_mcp_route() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let doc = common::get_json(&state, "/api/v1/openapi.json", Some(&f.bob)).await;
    assert!(doc["paths"]["/mcp/{agent}"]["post"].is_object(), "{doc}");
}

/// Revoking a user's tokens ends their tools-only conversations at once
/// (not at the idle timeout); another user's stays.
#[tokio::test]
async fn revoking_a_users_tokens_ends_their_mcp_conversations() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let state = server.state.clone();
    // What `serve_on` does as it starts (its task may not have run yet).
    state.set_bound_addr(server.addr);
    state.start_background_tasks();
    assert_eq!(server.status("/health", None).await, 200);
    let as_user = |token: &str| {
        Request::post("/mcp/helper")
            .header("host", server.host())
            .header("authorization", bearer(token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
    };
    assert_eq!(send(&state, as_user(&f.alice), LIST).await.0, 200);
    assert_eq!(send(&state, as_user(&f.bob), LIST).await.0, 200);
    assert_eq!(state.mcp_workers_open(), 2);
    f.editor().revoke("alice").unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while state.mcp_workers_open() != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "alice's MCP conversation was not ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(f.backend.counters.killed.load(Ordering::SeqCst), 1);
    assert_eq!(send(&state, as_user(&f.alice), LIST).await.0, 401);
    server.stop().await;
}
