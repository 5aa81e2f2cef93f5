//! `bulwark serve` as a user meets it: the real binary, a token made by
//! `bulwark access create`, a WebSocket conversation run by a real
//! `bulwark worker` process, and `kill -9` of that worker mid-conversation.

mod common;

use common::{Bw, SCRUBBED};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `bulwark serve --bind 127.0.0.1:0` and reads the bound address
/// from its first line on stderr.
fn start(bw: &Bw) -> Server {
    let mut cmd = Command::new(common::BIN);
    cmd.arg("--home")
        .arg(bw.home())
        .args(["serve", "--bind", "127.0.0.1:0"]);
    for var in SCRUBBED {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bulwark serve starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("serve printed its address before exiting")
            .expect("stderr is text");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .expect("an address")
                .to_owned();
        }
    };
    // Keep draining the logs so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Server { child, addr }
}

fn token_for(bw: &Bw, user: &str, agents: &str) -> String {
    let out = bw.run(&["access", "create", user, "--agents", agents]);
    out.ok();
    out.stdout
        .lines()
        .find(|l| l.starts_with("bwk_"))
        .unwrap_or_else(|| panic!("no token in:\n{}", out.stdout))
        .to_owned()
}

async fn connect(addr: &str, token: &str) -> Ws {
    let mut request = format!("ws://{addr}/api/v1/ws")
        .into_client_request()
        .expect("a request");
    request.headers_mut().insert(
        "sec-websocket-protocol",
        format!("bulwark.v1, bearer.{token}")
            .parse()
            .expect("a header value"),
    );
    tokio_tungstenite::connect_async(request)
        .await
        .expect("the WebSocket handshake")
        .0
}

async fn send(ws: &mut Ws, frame: Value) {
    ws.send(Message::text(frame.to_string()))
        .await
        .expect("send a frame");
}

/// The next JSON frame, within 60 s (a debug-build worker starts in well
/// under a second; the bound only keeps a broken server from hanging CI).
async fn next(ws: &mut Ws) -> Value {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .expect("a frame within 60 s")
            .expect("the connection is open")
            .expect("a WebSocket message");
        if let Message::Text(text) = message {
            return serde_json::from_str(&text).expect("server frames are JSON");
        }
    }
}

async fn until(ws: &mut Ws, kind: &str) -> (Value, Vec<Value>) {
    let mut seen = Vec::new();
    loop {
        let frame = next(ws).await;
        if frame["type"] == kind {
            return (frame, seen);
        }
        seen.push(frame);
    }
}

fn worker_pids() -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.first().is_some_and(|a| a.ends_with(b"bulwark"))
            && args.iter().any(|a| *a == b"worker")
        {
            pids.push(pid);
        }
    }
    pids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_runs_in_a_worker_and_survives_its_kill() {
    let bw = Bw::init();
    // Agents are private (admins only) unless their manifest admits users.
    let manifest = std::fs::read_to_string(bw.path("agents/demo/agent.toml")).expect("the demo");
    bw.write(
        "agents/demo/agent.toml",
        &format!("{manifest}\n[access]\nmode = \"users\"\nusers = [\"alice\"]\n"),
    );
    let token = token_for(&bw, "alice", "demo");
    let server = start(&bw);

    // Public health says nothing but status and version.
    let health = reqwest_get(&server.addr, "/health", None).await;
    assert_eq!(health.0, 200);
    let body: Value = serde_json::from_str(&health.1).expect("JSON");
    assert_eq!(body.as_object().map(|o| o.len()), Some(2), "{body}");

    // REST needs the token, and only from the header.
    assert_eq!(
        reqwest_get(&server.addr, "/api/v1/agents", None).await.0,
        401
    );
    let agents = reqwest_get(&server.addr, "/api/v1/agents", Some(&token)).await;
    assert_eq!(agents.0, 200, "{}", agents.1);
    assert!(agents.1.contains("\"demo\""), "{}", agents.1);
    let in_query = reqwest_get(
        &server.addr,
        &format!("/api/v1/agents?token={token}"),
        Some(&token),
    )
    .await;
    assert_eq!(in_query.0, 400, "a token in a URL is refused");

    // A turn of the scripted demo agent, in a worker process.
    let mut ws = connect(&server.addr, &token).await;
    send(&mut ws, json!({"type": "subscribe", "agent": "demo"})).await;
    let (subscribed, _) = until(&mut ws, "subscribed").await;
    let session = subscribed["session_id"]
        .as_str()
        .expect("a session id")
        .to_owned();
    let workers = worker_pids();
    assert_eq!(workers.len(), 1, "one worker per conversation: {workers:?}");
    send(&mut ws, json!({"type": "message", "text": "show me"})).await;
    let (ended, during) = until(&mut ws, "turn_ended").await;
    assert!(
        during.iter().any(|f| f["type"] == "tool_call"),
        "{during:#?}"
    );
    assert_eq!(ended["end"], "completed", "{ended}");

    // kill -9 the worker: the client hears about it, the server lives on.
    let pid = workers[0];
    let status = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let (lost, _) = until(&mut ws, "error").await;
    assert_eq!(lost["code"], "worker_lost", "{lost}");

    // Reconnect and resume: the history of the completed turn is intact.
    let mut again = connect(&server.addr, &token).await;
    send(
        &mut again,
        json!({"type": "subscribe", "agent": "demo", "session": session}),
    )
    .await;
    let (resumed, _) = until(&mut again, "subscribed").await;
    assert_eq!(resumed["session_id"], session.as_str());
    assert!(
        resumed["history_messages"].as_u64().unwrap_or(0) >= 2,
        "{resumed}"
    );
    let messages = reqwest_get(
        &server.addr,
        &format!("/api/v1/sessions/{session}/messages"),
        Some(&token),
    )
    .await;
    assert_eq!(messages.0, 200, "{}", messages.1);
    assert!(messages.1.contains("show me"), "{}", messages.1);
}

/// A minimal HTTP/1.1 GET over a plain socket (status, body), so this test
/// needs no HTTP client crate.
async fn reqwest_get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the server");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .expect("read the response");
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
