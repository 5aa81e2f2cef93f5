//! Streamable HTTP through SafeHttp: a python3 HTTP MCP server on
//! loopback, reached only because the test allows exactly its port.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use bulwark_mcp::McpError;
use bulwark_mcp::client::{Launch, McpClient};
use bulwark_net::{CallContext, EgressPolicy, HttpLimits, SafeHttp};

use super::{args, limits};

/// The server process; killed when dropped.
struct HttpServer {
    child: Child,
    port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(lifecycle: &str, behaviour: &str) -> HttpServer {
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/mcp_http_server.py");
    let mut child = Command::new("python3")
        .arg(script)
        .args([lifecycle, behaviour])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 http server");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("port line");
    let port = line.trim().parse().expect("port");
    HttpServer { child, port }
}

fn launch(server: &HttpServer, allow: bool) -> Launch {
    let mut http = SafeHttp::new(EgressPolicy::default(), HttpLimits::default()).expect("client");
    if allow {
        http.allow_loopback_port_for_tests(server.port);
    }
    Launch::Http {
        url: format!("http://127.0.0.1:{}/mcp", server.port),
        http: Arc::new(http),
        context: CallContext::tool("mcp:web"),
    }
}

#[tokio::test]
async fn a_2026_http_server_is_reached_through_safe_http() {
    let server = start("modern", "normal");
    let client = McpClient::connect("web", launch(&server, true), limits())
        .await
        .expect("connect");
    assert_eq!(client.protocol_version(), "2026-07-28");
    let tools = client.list_tools().await.expect("list");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "echo");
    // The answer comes as an SSE body, read whole and parsed.
    let out = client
        .call_tool("echo", args(serde_json::json!({"text": "over http"})))
        .await
        .expect("call");
    assert_eq!(out.text, "over http");
    client.close().await;
}

#[tokio::test]
async fn a_2025_http_server_is_reached_by_the_fallback() {
    let server = start("legacy", "normal");
    let client = McpClient::connect("web", launch(&server, true), limits())
        .await
        .expect("connect");
    assert_eq!(client.protocol_version(), "2025-11-25");
    let out = client
        .call_tool("echo", args(serde_json::json!({"text": "legacy http"})))
        .await
        .expect("call");
    assert_eq!(out.text, "legacy http");
}

/// A 2025-11-25 server that hands out a session on `initialize` refuses
/// every later request without it: the id from the response headers is
/// carried back.
#[tokio::test]
async fn a_2025_http_server_gets_its_session_id_back() {
    let server = start("session", "normal");
    let client = McpClient::connect("web", launch(&server, true), limits())
        .await
        .expect("connect");
    assert_eq!(client.protocol_version(), "2025-11-25");
    assert_eq!(client.list_tools().await.expect("list").len(), 1);
    let out = client
        .call_tool("echo", args(serde_json::json!({"text": "in session"})))
        .await
        .expect("call");
    assert_eq!(out.text, "in session");
}

#[tokio::test]
async fn an_http_server_the_policy_does_not_allow_is_never_contacted() {
    let server = start("modern", "normal");
    match McpClient::connect("web", launch(&server, false), limits()).await {
        Err(McpError::Launch { server, detail }) => {
            assert_eq!(server, "web");
            assert!(detail.contains("127.0.0.1"), "{detail}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("connected past the egress policy"),
    }
}

#[tokio::test]
async fn an_oversized_sse_event_is_too_large() {
    let server = start("modern", "big");
    let client = McpClient::connect("web", launch(&server, true), limits())
        .await
        .expect("connect");
    let result = client
        .call_tool("echo", args(serde_json::json!({"text": "x"})))
        .await;
    assert!(
        matches!(result, Err(McpError::TooLarge { .. })),
        "{result:?}"
    );
}
