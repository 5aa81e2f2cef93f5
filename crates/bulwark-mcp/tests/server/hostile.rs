//! A hostile client: malformed and oversized frames, a flood of requests.
//! Each costs an error or a dropped frame; the server keeps serving.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bulwark_mcp::server::{BulwarkMcpServer, ServerLimits, serve_io};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

use super::{FakeHost, TestClient, Version, connect};

struct Raw {
    write: tokio::io::WriteHalf<DuplexStream>,
    read: BufReader<tokio::io::ReadHalf<DuplexStream>>,
}

impl Raw {
    fn start(limits: ServerLimits) -> Self {
        let (server_end, client_end) = tokio::io::duplex(64 * 1024);
        let (read, write) = tokio::io::split(server_end);
        let server = BulwarkMcpServer::with_limits(Arc::new(FakeHost::default()), limits);
        tokio::spawn(serve_io(server, read, write, limits));
        let (read, write) = tokio::io::split(client_end);
        Self {
            write,
            read: BufReader::new(read),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.write.write_all(bytes).await.expect("write");
        self.write.flush().await.expect("flush");
    }

    async fn frame(&mut self) -> Value {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(10), self.read.read_line(&mut line))
            .await
            .expect("the server answers")
            .expect("read");
        serde_json::from_str(&line).expect("the server writes JSON-RPC")
    }

    async fn initialize(&mut self, id: u64) -> Value {
        let init = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}});
        self.send(format!("{init}\n").as_bytes()).await;
        self.frame().await
    }
}

#[tokio::test]
async fn garbage_and_wrong_shapes_get_errors_and_the_server_keeps_serving() {
    let mut raw = Raw::start(ServerLimits::default());
    let answer = raw.initialize(1).await;
    assert_eq!(answer["id"], 1);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await;
    // Not JSON at all: ignored (no id to answer).
    raw.send(b"{this is not json\n\xff\xfe\n").await;
    // JSON that is no JSON-RPC message: an Invalid Request error.
    raw.send(b"{\"hello\": [1, 2, 3]}\n").await;
    let error = raw.frame().await;
    assert_eq!(error["error"]["code"], -32600, "{error}");
    // A request with the wrong parameter shape: an error for its id.
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":5}}\n")
        .await;
    let error = raw.frame().await;
    assert!(error.get("error").is_some(), "{error}");
    // Still serving.
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}\n")
        .await;
    let list = raw.frame().await;
    assert_eq!(list["id"], 8);
    assert_eq!(list["result"]["tools"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn an_oversized_frame_is_dropped_unread_and_the_next_one_served() {
    let limits = ServerLimits {
        max_frame_bytes: 4096,
        ..ServerLimits::default()
    };
    let mut raw = Raw::start(limits);
    raw.initialize(1).await;
    let huge = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"x": "a".repeat(100_000)}}});
    raw.send(format!("{huge}\n").as_bytes()).await;
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}\n")
        .await;
    let next = raw.frame().await;
    assert_eq!(next["id"], 3, "the oversized call got no answer: {next}");
}

#[tokio::test]
async fn a_frame_before_initialize_that_is_not_a_request_ends_the_connection_cleanly() {
    let mut raw = Raw::start(ServerLimits::default());
    raw.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await;
    let mut line = String::new();
    let read = tokio::time::timeout(Duration::from_secs(10), raw.read.read_line(&mut line))
        .await
        .expect("the server closes");
    assert!(matches!(read, Ok(0)), "closed without a frame: {line}");
}

#[tokio::test]
async fn a_flood_is_bounded_and_every_request_is_answered() {
    let host = Arc::new(FakeHost::default());
    let limits = ServerLimits {
        max_in_flight: 4,
        ..ServerLimits::default()
    };
    let (client, _) = connect(host.clone(), TestClient::mute(), Version::Legacy, limits).await;
    let calls = (0..200).map(|_| client.call_tool(CallToolRequestParams::new("slow")));
    let results = futures_util::future::join_all(calls).await;
    let served = results.iter().filter(|r| r.is_ok()).count();
    let busy = results.len() - served;
    assert!(served >= 1, "some calls ran");
    assert!(busy >= 1, "the overflow was refused, not queued");
    assert!(
        host.max_active.load(Ordering::SeqCst) <= 4,
        "never more than the bound ran at once"
    );
    // And the connection still works.
    assert_eq!(client.list_all_tools().await.expect("list").len(), 3);
}
