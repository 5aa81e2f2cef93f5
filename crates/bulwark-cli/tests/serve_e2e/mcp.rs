//! `/mcp/{agent}` as an MCP client meets it: rmcp's Streamable HTTP client
//! against the real `bulwark serve`, each tool call run by a real
//! tools-only `bulwark worker` through the agent's door; and the requests
//! it must refuse (no token, another user's private agent, a foreign Host
//! or Origin, an oversized body, malformed JSON-RPC).

use super::*;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use std::time::{Duration, Instant};

/// Reads anything in its workspace; alice may use it, bob may not.
const READER: &str = r#"
[tools]
allow = ["files"]
[[capabilities]]
kind = "file_read"
path = "**"
[access]
mode = "users"
users = ["alice"]
"#;

/// Writes under `out/`, each write only with a person's approval.
const APPROVING: &str = r#"
[tools]
allow = ["files"]
[[capabilities]]
kind = "file_write"
path = "out/**"
[approval]
operations = ["files:write"]
[access]
mode = "users"
users = ["alice"]
"#;

/// Never used: a tools-only session calls no model.
const NO_TURNS: &str = "{\"text\": \"unused\"}\n";

fn setup() -> (Bw, String, String) {
    let bw = Bw::init();
    bw.agent(
        "reader",
        &common::scripted("reader", READER),
        Some(NO_TURNS),
    );
    bw.write(
        "users/alice/agents/reader/workspace/notes.txt",
        "hello from the workspace",
    );
    bw.agent(
        "writer",
        &common::scripted("writer", APPROVING),
        Some(NO_TURNS),
    );
    let alice = token_for(&bw, "alice", "reader,writer");
    let bob = token_for(&bw, "bob", "reader,writer");
    (bw, alice, bob)
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A raw HTTP/1.1 request (status, body), for what an MCP client would
/// never send.
async fn raw(addr: &str, host: &str, extra: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "POST /mcp/reader HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // A refused oversized body may be cut off mid-write: the answer still comes.
    let _ = stream.write_all(request.as_bytes()).await;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_lists_and_calls_the_agents_tools_in_a_worker() {
    let (bw, alice, _) = setup();
    let mut server = common::serve::start_with(
        std::path::Path::new(common::BIN),
        &bw,
        &["--idle-timeout-secs", "2"],
    );
    let url = format!("http://{}/mcp/reader", server.addr);
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(alice.clone()),
    );
    let client = ClientConfig::default()
        .serve(transport)
        .await
        .expect("the MCP handshake succeeds");
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"file_read"), "{names:?}");
    assert!(
        !names.contains(&"shell_exec"),
        "only granted tools: {names:?}"
    );
    assert_eq!(
        workers_of(server.pid(), Some("alice")).len(),
        1,
        "one tools-only worker serves alice's MCP requests to reader"
    );

    let args = serde_json::json!({"path": "notes.txt"});
    let read = client
        .call_tool(
            CallToolRequestParams::new("file_read")
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("tools/call");
    assert_ne!(read.is_error, Some(true), "{read:?}");
    assert!(
        text_of(&read).contains("hello from the workspace"),
        "{read:?}"
    );

    let outside = serde_json::json!({"path": "../../../../access.toml"});
    let refused = client
        .call_tool(
            CallToolRequestParams::new("file_read")
                .with_arguments(outside.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("a refusal is a tool result, not a protocol error");
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert!(!text_of(&refused).contains("bwk_"), "{refused:?}");
    let _ = client.cancel().await;

    // Idle for longer than --idle-timeout-secs: the worker is gone.
    let started = Instant::now();
    while !workers_of(server.pid(), Some("alice")).is_empty() {
        assert!(
            started.elapsed() < common::serve::PATIENCE,
            "the idle tools-only worker was not ended"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // ... and the next request starts another one.
    let (status, body) = raw(
        &server.addr,
        &server.addr,
        &format!("Authorization: Bearer {alice}\r\nMCP-Protocol-Version: 2025-11-25\r\n"),
        LIST,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("file_read"), "{body}");
    server.terminate();

    let records = bw.audit();
    let calls: Vec<(&str, &str)> = common::with_action(&records, "tool_call")
        .into_iter()
        .filter(|r| common::field(r, "user") == "alice")
        .map(|r| (common::field(r, "tool"), common::field(r, "decision")))
        .collect();
    assert!(
        calls.contains(&("file_read", "allowed")),
        "{calls:?} {records:#?}"
    );
    assert!(calls.contains(&("file_read", "denied")), "{calls:?}");
}

/// A call that needs a person's approval, from a client that cannot be
/// asked (this one declares no elicitation), is refused and never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_needing_approval_is_refused_when_the_client_cannot_answer() {
    let (bw, alice, _) = setup();
    let server = start(&bw);
    let url = format!("http://{}/mcp/writer", server.addr);
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(alice),
    );
    let client = ClientConfig::default()
        .serve(transport)
        .await
        .expect("the MCP handshake succeeds");
    let args = serde_json::json!({"path": "out/a.txt", "content": "unapproved"});
    let result = client
        .call_tool(
            CallToolRequestParams::new("file_write")
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("a refusal is a tool result");
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let _ = client.cancel().await;
    assert!(
        !bw.path("users/alice/agents/writer/workspace/out/a.txt")
            .exists(),
        "the unapproved write ran"
    );
    drop(server);
    let records = bw.audit();
    let writes: Vec<&str> = common::with_action(&records, "tool_call")
        .into_iter()
        .filter(|r| common::field(r, "tool") == "file_write")
        .map(|r| common::field(r, "decision"))
        .collect();
    assert_eq!(writes, ["denied"], "{records:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_endpoint_refuses_what_it_must_and_keeps_serving() {
    let (bw, alice, bob) = setup();
    let server = start(&bw);
    let addr = server.addr.clone();
    let auth =
        |t: &str| format!("Authorization: Bearer {t}\r\nMCP-Protocol-Version: 2025-11-25\r\n");

    // No token; a wrong one.
    assert_eq!(raw(&addr, &addr, "", LIST).await.0, 401);
    assert_eq!(raw(&addr, &addr, &auth("bwk_wrong"), LIST).await.0, 401);
    // Bob's valid token, alice's private agent; an agent that does not
    // exist looks the same; a name that cannot be an agent is not found.
    let (status, body) = raw(&addr, &addr, &auth(&bob), LIST).await;
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains("hello"), "{body}");
    // DNS rebinding: a Host this server does not answer to.
    let (status, _) = raw(&addr, "evil.example:80", &auth(&alice), LIST).await;
    assert_eq!(status, 421);
    // A page on another origin driving alice's browser.
    let foreign = format!("{}Origin: https://evil.example\r\n", auth(&alice));
    assert_eq!(raw(&addr, &addr, &foreign, LIST).await.0, 403);
    // Too big a body.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"file_read","arguments":{{"path":"{}"}}}}}}"#,
        "a".repeat(2 << 20)
    );
    assert_eq!(raw(&addr, &addr, &auth(&alice), &huge).await.0, 413);
    // GET is not part of this (stateless, POST-only) endpoint.
    // Malformed JSON-RPC: a JSON-RPC error, and the server goes on.
    let (status, body) = raw(&addr, &addr, &auth(&alice), "{not json").await;
    assert!(status == 400 || status == 200, "{status} {body}");
    assert!(body.contains("\"error\""), "{body}");
    let (status, body) = raw(
        &addr,
        &addr,
        &auth(&alice),
        r#"{"jsonrpc":"2.0","id":3,"method":"no/such","params":{}}"#,
    )
    .await;
    assert!(body.contains("\"error\""), "{status} {body}");
    let (status, body) = raw(&addr, &addr, &auth(&alice), LIST).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("file_read"), "{body}");
    // The allowed origin still works (the server's own page).
    let own = format!("{}Origin: http://{addr}\r\n", auth(&alice));
    assert_eq!(raw(&addr, &addr, &own, LIST).await.0, 200);
}
