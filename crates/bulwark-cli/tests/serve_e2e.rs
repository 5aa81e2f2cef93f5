//! `bulwark serve` as a user meets it: the real binary, a token made by
//! `bulwark access create`, a WebSocket conversation run by a real
//! `bulwark worker` process, and `kill -9` of that worker mid-conversation.

use crate::common;

use common::serve::{connect, send, start, token_for, until, workers_of};
use common::{APPROVED_WRITES, Bw, FOR_ALICE};
use serde_json::json;
use std::process::Command;

const GATE_SCRIPT: &str = r#"{"text": "first answer"}
{"tool_calls": [{"name": "file_write", "input": {"path": "out/a.txt", "content": "written"}}]}
{"text": "after the crash"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_runs_in_a_worker_and_survives_its_kill() {
    let bw = Bw::init();
    // Agents are private (admins only) unless their manifest admits users.
    let manifest = std::fs::read_to_string(bw.path("agents/demo/agent.toml")).expect("the demo");
    bw.write(
        "agents/demo/agent.toml",
        &format!("{manifest}\n[access]\nmode = \"users\"\nusers = [\"alice\"]\n"),
    );
    // Its second turn waits for a person's approval: a worker that is
    // mid-turn for as long as the test wants.
    let gate = format!("{APPROVED_WRITES}{FOR_ALICE}");
    bw.agent("gate", &common::scripted("gate", &gate), Some(GATE_SCRIPT));
    let token = token_for(&bw, "alice", "demo,gate");
    let server = start(&bw);

    // Public health says nothing but status and version.
    let health = http_get(&server.addr, "/health", None).await;
    assert_eq!(health.0, 200);
    let body: serde_json::Value = serde_json::from_str(&health.1).expect("JSON");
    assert_eq!(body.as_object().map(|o| o.len()), Some(2), "{body}");

    // REST needs the token, and only from the header.
    assert_eq!(http_get(&server.addr, "/api/v1/agents", None).await.0, 401);
    let agents = http_get(&server.addr, "/api/v1/agents", Some(&token)).await;
    assert_eq!(agents.0, 200, "{}", agents.1);
    assert!(agents.1.contains("\"demo\""), "{}", agents.1);
    let in_query = http_get(
        &server.addr,
        &format!("/api/v1/agents?token={token}"),
        Some(&token),
    )
    .await;
    assert_eq!(in_query.0, 400, "a token in a URL is refused");

    // A turn of the scripted demo agent, in a worker process.
    let mut ws = connect(&server.addr, &token).await;
    send(&mut ws, json!({"type": "subscribe", "agent": "demo"})).await;
    until(&mut ws, "subscribed").await;
    assert_eq!(
        workers_of(server.pid(), None).len(),
        1,
        "one worker per conversation"
    );
    send(&mut ws, json!({"type": "message", "text": "show me"})).await;
    let (ended, during) = until(&mut ws, "turn_ended").await;
    assert!(
        during.iter().any(|f| f["type"] == "tool_call"),
        "{during:#?}"
    );
    assert_eq!(ended["end"], "completed", "{ended}");
    drop(ws);

    // The gate agent: one completed turn, then a turn that stops at an
    // approval, and the worker is killed with SIGKILL right there.
    let before = workers_of(server.pid(), None);
    let mut ws = connect(&server.addr, &token).await;
    send(&mut ws, json!({"type": "subscribe", "agent": "gate"})).await;
    let (subscribed, _) = until(&mut ws, "subscribed").await;
    let session = subscribed["session_id"]
        .as_str()
        .expect("a session id")
        .to_owned();
    let gate_worker: Vec<u32> = workers_of(server.pid(), None)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(gate_worker.len(), 1, "{gate_worker:?}");
    send(&mut ws, json!({"type": "message", "text": "one"})).await;
    let (first, _) = until(&mut ws, "turn_ended").await;
    assert_eq!(first["text"], "first answer", "{first}");
    send(&mut ws, json!({"type": "message", "text": "two"})).await;
    until(&mut ws, "approval_request").await;
    let status = Command::new("kill")
        .args(["-9", &gate_worker[0].to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let (lost, _) = until(&mut ws, "error").await;
    assert_eq!(lost["code"], "worker_lost", "{lost}");

    // Reconnect and resume: the completed turn is intact, the unapproved
    // write never happened, and the conversation goes on.
    let mut again = connect(&server.addr, &token).await;
    send(
        &mut again,
        json!({"type": "subscribe", "agent": "gate", "session": session}),
    )
    .await;
    let (resumed, _) = until(&mut again, "subscribed").await;
    assert_eq!(resumed["session_id"], session.as_str());
    assert!(
        resumed["history_messages"].as_u64().unwrap_or(0) >= 2,
        "{resumed}"
    );
    let messages = http_get(
        &server.addr,
        &format!("/api/v1/sessions/{session}/messages"),
        Some(&token),
    )
    .await;
    assert_eq!(messages.0, 200, "{}", messages.1);
    assert!(messages.1.contains("first answer"), "{}", messages.1);
    let workspace = bw.path("users/alice/agents/gate/workspace");
    assert!(workspace.is_dir(), "alice's workspace for gate exists");
    assert!(
        !workspace.join("out/a.txt").exists(),
        "the unapproved write ran"
    );
    send(&mut again, json!({"type": "message", "text": "three"})).await;
    let (after, _) = until(&mut again, "turn_ended").await;
    assert_eq!(after["text"], "after the crash", "{after}");
}

/// A minimal HTTP/1.1 GET over a plain socket (status, body), so this test
/// needs no HTTP client crate.
async fn http_get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
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

#[path = "serve_e2e/mcp.rs"]
mod mcp;
#[path = "serve_e2e/revocation.rs"]
mod revocation;
