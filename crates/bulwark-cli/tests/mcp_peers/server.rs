//! The reference MCP filesystem server, a real third-party stdio server,
//! behind Bulwark's client: pinned by `bulwark mcp pin`, listed by
//! `bulwark mcp list`, started inside the process sandbox, every call
//! through the door and audited.
//!
//! Two servers of the same program: `fs`, rooted at the workspace (its own
//! root check refuses what lies outside), and `wide`, rooted at `/`, whose
//! own check allows everything: what it still cannot read, the sandbox
//! refused.

use super::{Peers, node, stored, toml_path};
use crate::common::{Bw, field, scripted, with_action};
use serde_json::{Value, json};
use std::path::Path;

const AGENT: &str = "fsuser";
const NOTE: &str = "peers-workspace-note-Hq4v7Z";
const OUTSIDE: &str = "peers-outside-secret-Mz81Rk";

fn call(tool: &str, path: &Path) -> String {
    json!({"tool_calls": [{"name": tool, "input": {"path": path.display().to_string()}}]})
        .to_string()
}

/// An agent with both servers, each granted as its `mcp:<name>` domain.
fn agent(bw: &Bw, peers: &Peers, script: &str) {
    let (node, node_dirs) = node();
    let mut read_only = vec![toml_path(&peers.node_dir())];
    read_only.extend(node_dirs.iter().map(|d| toml_path(d)));
    let read_only = read_only.join(", ");
    let node = toml_path(&node);
    let server = toml_path(&peers.filesystem_server());
    let manifest = scripted(
        AGENT,
        &format!(
            r#"max_turns = 12
[tools]
allow = ["mcp:fs", "mcp:wide"]

# After the first result the conversation holds `mcp`-labelled content,
# which by default needs a person before it reaches an MCP server again;
# this test is about the sandbox, so these two sinks take it.
[taint.sinks]
"mcp:fs" = {{ mcp = "allow" }}
"mcp:wide" = {{ mcp = "allow" }}

[mcp.servers.fs]
command = [{node}, {server}, "{{workspace}}"]
read_only = [{read_only}]
timeout_secs = 30

[mcp.servers.wide]
command = [{node}, {server}, "/"]
read_only = [{read_only}]
timeout_secs = 30
"#
        ),
    );
    bw.agent(AGENT, &manifest, Some(script));
}

#[test]
fn the_reference_filesystem_server_works_in_the_sandbox_and_cannot_leave_it() {
    let peers = Peers::get();
    let bw = Bw::empty();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, OUTSIDE).unwrap();
    let note = bw.workspace_file(AGENT, "notes.txt");
    std::fs::create_dir_all(note.parent().unwrap()).unwrap();
    std::fs::write(&note, NOTE).unwrap();
    let shadow = Path::new("/etc/shadow");

    let turns = [
        // Inside the workspace: the content comes back.
        call("mcp__fs__read_text_file", &note),
        // Outside it: the server's own root check refuses.
        call("mcp__fs__read_text_file", shadow),
        call("mcp__fs__read_text_file", &secret),
        // Rooted at `/`, the server itself refuses nothing: the sandbox does.
        call("mcp__wide__read_text_file", &secret),
        call("mcp__wide__read_text_file", shadow),
        // ...and still lets it do its work inside the workspace.
        call("mcp__wide__read_text_file", &note),
        json!({"text": "done"}).to_string(),
    ];
    agent(&bw, &peers, &(turns.join("\n") + "\n"));

    // Pinning connects to each server (in the sandbox) and stores its tools
    // (its deprecated `read_file` points to a sibling tool, which passes
    // the checks; every tool is pinned without an override).
    let out = bw.run(&["mcp", "pin", AGENT, "--yes"]);
    out.ok();
    assert!(!out.stdout.contains("skipped"), "{}", out.stdout);
    let out = bw.run(&["mcp", "list", AGENT]);
    out.ok();
    for seen in ["fs", "wide", "read_text_file", "list_allowed_directories"] {
        assert!(
            out.stdout.contains(seen),
            "{seen:?} not listed:\n{}",
            out.stdout
        );
    }

    let out = bw.run(&["run", AGENT, "read the notes"]);
    out.ok();

    // What the model saw: the workspace note, twice; nothing from outside.
    assert!(
        stored(bw.home(), NOTE),
        "the workspace read returned nothing"
    );
    assert!(
        !stored(bw.home(), OUTSIDE),
        "a file outside the workspace reached the transcript"
    );
    if let Ok(shadow) = std::fs::read_to_string(shadow)
        && let Some(first) = shadow.lines().next()
    {
        assert!(
            !stored(bw.home(), first),
            "/etc/shadow reached the transcript"
        );
    }

    // Every call is audited, under its model-facing name.
    let records = bw.audit();
    let calls: Vec<(String, String, String)> = with_action(&records, "tool_call")
        .iter()
        .map(|r| {
            (
                field(r, "tool").to_string(),
                field(r, "decision").to_string(),
                field(r, "detail").to_string(),
            )
        })
        .collect();
    let names: Vec<&str> = calls.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(
        names,
        [
            "mcp__fs__read_text_file",
            "mcp__fs__read_text_file",
            "mcp__fs__read_text_file",
            "mcp__wide__read_text_file",
            "mcp__wide__read_text_file",
            "mcp__wide__read_text_file",
        ],
        "{calls:#?}"
    );
    // The door let each call through (the grant covers the domain); the
    // four reads outside came back as the server's errors, the two inside
    // as content.
    let errors: Vec<bool> = calls
        .iter()
        .map(|(_, _, detail)| detail.contains("error"))
        .collect();
    assert_eq!(errors, [false, true, true, true, true, false], "{calls:#?}");
    // Each server process started in the sandbox.
    let spawns: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("MCP server ") && d.contains("sandboxed"))
        })
        .collect();
    assert!(
        !spawns.is_empty(),
        "no sandboxed start audited: {records:#?}"
    );
}

#[test]
fn an_ungranted_server_is_never_started_nor_offered() {
    // The manifest declares both servers but grants only `fs`: a call to
    // `wide`'s tool is refused at the door, as an unknown tool.
    let peers = Peers::get();
    let bw = Bw::empty();
    let note = bw.workspace_file(AGENT, "notes.txt");
    std::fs::create_dir_all(note.parent().unwrap()).unwrap();
    std::fs::write(&note, NOTE).unwrap();
    let turns = [
        call("mcp__wide__read_text_file", &note),
        json!({"text": "done"}).to_string(),
    ];
    agent(&bw, &peers, &(turns.join("\n") + "\n"));
    let manifest = bw.path(&format!("agents/{AGENT}/agent.toml"));
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace(r#"allow = ["mcp:fs", "mcp:wide"]"#, r#"allow = ["mcp:fs"]"#),
    )
    .unwrap();
    bw.run(&["mcp", "pin", AGENT, "--yes"]).ok();
    let out = bw.run(&["run", AGENT, "read the notes"]);
    assert!(out.code.is_some(), "{}", out.stderr);
    assert!(!stored(bw.home(), NOTE), "the ungranted server answered");
    let records = bw.audit();
    for r in with_action(&records, "tool_call") {
        assert_ne!(field(r, "decision"), "allowed", "{r}");
    }
    assert!(
        !records.iter().any(|r| r["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("MCP server wide"))),
        "the ungranted server was started: {records:#?}"
    );
}
