//! The official MCP Python SDK's client (`ClientSession` over
//! `stdio_client`, and over `streamable_http_client`) driving Bulwark as an
//! MCP server: `bulwark mcp serve AGENT`, and `/mcp/{agent}` under
//! `bulwark serve`. It sees the agent's granted tools and nothing else;
//! a read in the workspace works, a read outside is refused, and each call
//! is audited.
//!
//! Both protocol revisions: 2025-11-25 (`initialize`) and 2026-07-28
//! (`server/discover`, stateless).

use super::{Peers, run_client};
use crate::common::serve;
use crate::common::{BIN, Bw, FOR_ALICE, field, scripted, with_action};
use serde_json::{Value, json};

const AGENT: &str = "toolbox";
const NOTE: &str = "peers-served-note-Tb6w2Q";

/// An agent that may read (only) its workspace; `extra` is appended.
fn agent(bw: &Bw, extra: &str) {
    let manifest = scripted(
        AGENT,
        &format!(
            r#"max_turns = 10
[tools]
allow = ["files"]
[[capabilities]]
kind = "file_read"
path = "**"
{extra}"#
        ),
    );
    bw.agent(AGENT, &manifest, None);
}

fn calls() -> String {
    json!([
        {"tool": "file_read", "arguments": {"path": "notes.txt"}},
        {"tool": "file_read", "arguments": {"path": "../../etc/passwd"}},
        {"tool": "file_read", "arguments": {"path": "/etc/passwd"}},
        {"tool": "shell_exec", "arguments": {"argv": ["id"]}},
    ])
    .to_string()
}

/// What every era and transport must show.
fn check(out: &Value, era: &str) {
    let version = out["protocol_version"].as_str().unwrap_or_default();
    match era {
        "legacy" => assert_eq!(version, "2025-11-25", "{out:#}"),
        _ => assert_eq!(version, "2026-07-28", "{out:#}"),
    }
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .expect("a tool list")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"file_read"), "{tools:?}");
    assert!(
        !tools.iter().any(|t| t.starts_with("shell")),
        "an ungranted tool is offered: {tools:?}"
    );
    let calls = out["calls"].as_array().expect("the calls");
    assert_eq!(calls.len(), 4, "{out:#}");
    // In the workspace: the content.
    assert_eq!(calls[0]["is_error"], false, "{out:#}");
    assert!(
        calls[0]["text"].as_str().unwrap_or_default().contains(NOTE),
        "{out:#}"
    );
    // Outside it (relative and absolute), and an ungranted tool: refused,
    // as a tool error or a protocol error, never with the content.
    for refused in &calls[1..] {
        let is_error = refused["is_error"] == true || refused.get("error").is_some();
        assert!(is_error, "not refused: {refused:#}");
        let text = refused["text"].as_str().unwrap_or_default();
        assert!(!text.contains("root:x:0:0"), "{refused:#}");
    }
}

/// The audit trail of one client run: file_read allowed once, refused
/// twice (the ungranted tool never reaches a tool).
fn check_audit(bw: &Bw, runs: usize) {
    let records = bw.audit();
    let reads: Vec<(String, String)> = with_action(&records, "tool_call")
        .iter()
        .filter(|r| field(r, "tool") == "file_read")
        .map(|r| {
            (
                field(r, "decision").to_string(),
                field(r, "detail").to_string(),
            )
        })
        .collect();
    assert_eq!(reads.len(), 3 * runs, "{reads:#?}");
    let allowed = reads.iter().filter(|(d, _)| d == "allowed").count();
    assert_eq!(allowed, runs, "{reads:#?}");
}

fn home() -> Bw {
    let bw = Bw::init();
    agent(&bw, FOR_ALICE);
    // `mcp serve` runs as the local user; `/mcp` as the token's (alice):
    // each has a workspace of their own.
    for user in ["local", "alice"] {
        let note = bw.path(&format!("users/{user}/agents/{AGENT}/workspace/notes.txt"));
        std::fs::create_dir_all(note.parent().unwrap()).unwrap();
        std::fs::write(&note, NOTE).unwrap();
    }
    bw
}

#[test]
fn the_python_sdk_client_drives_bulwark_mcp_serve_over_stdio() {
    let peers = Peers::get();
    let bw = home();
    let home = bw.home().display().to_string();
    let calls = calls();
    for (i, era) in ["legacy", "modern"].into_iter().enumerate() {
        let out = run_client(
            &peers,
            &[
                "--era", era, "--calls", &calls, "stdio", "--", BIN, "--home", &home, "mcp",
                "serve", AGENT,
            ],
        );
        check(&out, era);
        check_audit(&bw, i + 1);
    }
}

#[test]
fn the_python_sdk_client_drives_mcp_under_bulwark_serve() {
    let peers = Peers::get();
    let bw = home();
    let server = serve::start(&bw);
    let token = serve::token_for(&bw, "alice", AGENT);
    let url = format!("http://{}/mcp/{AGENT}", server.addr);
    let calls = calls();
    for (i, era) in ["legacy", "modern"].into_iter().enumerate() {
        let out = run_client(
            &peers,
            &[
                "--era", era, "--calls", &calls, "--token", &token, "http", &url,
            ],
        );
        check(&out, era);
        check_audit(&bw, i + 1);
    }
    // Without the token: no session.
    let mut cmd = std::process::Command::new(peers.python());
    cmd.arg(super::data_dir().join("client.py"))
        .args(["--era", "legacy", "http", &url]);
    let out = cmd.output().expect("the SDK client starts");
    assert!(
        !out.status.success(),
        "an unauthenticated client got in: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}
