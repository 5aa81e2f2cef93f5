//! `bulwark mcp pin` and `bulwark mcp list` against the kernel tests'
//! python3 stdio MCP server, started in the real sandbox.

mod egress;

use crate::common::{self, Bw};
use std::path::{Path, PathBuf};

pub(super) fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bulwark-kernel/tests/data/mcp/server.py")
}

pub(super) fn python() -> &'static str {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("/usr/bin/python3")
}

/// An agent whose one MCP server `x` runs the test server in `mode`.
fn manifest(mode: &str) -> String {
    let script = script().canonicalize().expect("the test server exists");
    let dir = script.parent().expect("a directory").display().to_string();
    common::scripted(
        "tools",
        &format!(
            r#"[tools]
allow = ["mcp:x"]
[mcp.servers.x]
command = ["{python}", "{script}"]
read_only = ["{dir}"]
timeout_secs = 20
[mcp.servers.x.env]
MCP_TEST_MODE = "{mode}"
"#,
            python = python(),
            script = script.display(),
        ),
    )
}

/// A home where the sandbox may run without every layer (CI machines
/// without user namespaces): the server still starts through the helper.
fn home(mode: &str) -> Bw {
    let bw = Bw::init();
    bw.write("config.toml", "[sandbox]\nenforcement = \"permissive\"\n");
    bw.agent("tools", &manifest(mode), Some(""));
    bw
}

fn text(out: &common::Out) -> String {
    format!("{}{}", out.stdout, out.stderr)
}

// ---- run now ----

#[test]
fn an_unknown_agent_is_a_usage_error() {
    let bw = Bw::init();
    let out = bw.run(&["mcp", "pin", "nosuch", "--yes"]);
    out.expect_code(2);
    assert!(text(&out).contains("nosuch"), "{}", text(&out));
}

#[test]
fn an_agent_without_servers_is_told_how_to_add_one() {
    let bw = Bw::init();
    bw.agent(
        "plain",
        &common::scripted("plain", "[tools]\nallow = [\"time\"]\n"),
        Some(""),
    );
    let out = bw.run(&["mcp", "pin", "plain", "--yes"]);
    out.expect_code(2);
    assert!(text(&out).contains("[mcp.servers.NAME]"), "{}", text(&out));
    let out = bw.run(&["mcp", "list", "plain"]);
    out.ok();
    assert!(
        out.stdout.contains("may use no MCP server"),
        "{}",
        out.stdout
    );
}

// ---- need the policy's [mcp] layering, the MCP client, pins and the
// sandbox's long-running processes merged ----

#[test]
fn pin_with_yes_writes_the_pins_audits_them_and_list_shows_them() {
    let bw = home("normal");
    let out = bw.run(&["mcp", "pin", "tools", "--yes"]);
    out.ok();
    assert!(out.stdout.contains("mcp__x__echo"), "{}", out.stdout);
    assert!(out.stdout.contains("pinned 2 tool(s)"), "{}", out.stdout);
    let pins = bw.path("mcp/pins/tools.json");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pins).unwrap()).unwrap();
    assert!(saved["servers"]["x"]["tools"]["echo"]["digest"].is_string());
    let records = bw.audit();
    let pinned = common::with_action(&records, "mcp_pin");
    assert_eq!(pinned.len(), 1, "{records:?}");
    assert_eq!(common::field(pinned[0], "decision"), "allowed");
    // The server's start was recorded before it ran.
    assert!(!common::with_action(&records, "spawn").is_empty());

    let out = bw.run(&["mcp", "list", "tools"]);
    out.ok();
    assert!(out.stdout.contains("mcp__x__echo"), "{}", out.stdout);
    assert!(out.stdout.contains("stdio:"), "{}", out.stdout);
    let out = bw.run(&["mcp", "list", "tools", "--live"]);
    out.ok();
    assert!(out.stdout.contains("matches the pins"), "{}", out.stdout);
}

#[test]
fn pin_without_a_terminal_asks_for_yes_and_pins_nothing() {
    let bw = home("normal");
    let out = bw.run(&["mcp", "pin", "tools"]);
    out.expect_code(2);
    assert!(text(&out).contains("--yes"), "{}", text(&out));
    assert!(!bw.path("mcp/pins/tools.json").exists());
}

#[test]
fn list_live_shows_a_rug_pull_after_pinning() {
    let bw = home("normal");
    bw.run(&["mcp", "pin", "tools", "--yes"]).ok();
    bw.agent("tools", &manifest("changed"), Some(""));
    let out = bw.run(&["mcp", "list", "tools", "--live"]);
    out.ok();
    assert!(out.stdout.contains("changed: echo"), "{}", out.stdout);
}

#[test]
fn an_unknown_server_name_lists_the_agents_servers() {
    let bw = home("normal");
    let out = bw.run(&["mcp", "pin", "tools", "--server", "nope", "--yes"]);
    out.expect_code(2);
    assert!(text(&out).contains("its servers: x"), "{}", text(&out));
}
