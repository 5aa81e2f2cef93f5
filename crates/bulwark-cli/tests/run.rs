//! `bulwark run`: the demo walkthrough, headless approvals, and exit codes.

use crate::common;
#[path = "run/children.rs"]
mod children;
#[path = "run/lease.rs"]
mod lease;
#[path = "run/taint.rs"]
mod taint;

use common::{Bw, field, scripted, with_action};

/// The scripted demo shows each kind of door decision, in order, in the
/// audit log: a granted read, an ungranted tool, the loop guard's warning and
/// block, and a `..` path.
#[test]
fn demo_walkthrough_audits_every_decision_in_order() {
    let bw = Bw::init();
    let out = bw.run(&["run", "demo", "show me"]);
    out.ok();
    assert!(
        out.stdout
            .contains("Done: one read allowed, the shell refused"),
        "the scripted final text is missing from stdout:\n{}",
        out.stdout
    );

    let out = bw.run(&["audit", "tail", "--json", "-n", "50"]);
    out.ok();
    let records = common::parse_json_lines(&out.stdout);
    let session = field(&records[0], "session").to_string();
    assert!(
        records.iter().all(|r| field(r, "session") == session),
        "one run, one session: {records:#?}"
    );

    let starts = with_action(&records, "session_start");
    assert_eq!(starts.len(), 1, "{records:#?}");
    assert_eq!(field(starts[0], "agent"), "demo");

    let calls: Vec<(&str, &str, &str)> = with_action(&records, "tool_call")
        .into_iter()
        .map(|r| (field(r, "tool"), field(r, "decision"), field(r, "reason")))
        .collect();
    assert_eq!(
        calls,
        [
            ("file_read", "allowed", "ok"),
            ("shell_exec", "denied", "tool"),
            ("file_read", "allowed", "ok"),
            ("file_read", "denied", "loop_guard"),
            ("file_read", "denied", "path"),
        ],
        "tool_call records, in order"
    );

    let warned: Vec<_> = with_action(&records, "loop_guard")
        .into_iter()
        .filter(|r| field(r, "decision") == "warned")
        .collect();
    assert_eq!(warned.len(), 1, "one loop-guard warning: {records:#?}");
    assert_eq!(field(warned[0], "tool"), "file_read");

    // The warning comes before the block it announces.
    let seq = |r: &serde_json::Value| r["seq"].as_u64().expect("seq");
    let block = with_action(&records, "tool_call")
        .into_iter()
        .find(|r| field(r, "reason") == "loop_guard")
        .expect("the loop-guard block");
    assert!(seq(warned[0]) < seq(block));
}

use crate::common::WRITER;

const WRITE_SCRIPT: &str = r#"{"tool_calls": [{"name": "file_write", "input": {"path": "out/a.txt", "content": "written"}}]}
{"text": "finished"}
"#;

fn writer() -> Bw {
    let bw = Bw::empty();
    bw.agent("writer", &scripted("writer", WRITER), Some(WRITE_SCRIPT));
    bw
}

/// With nobody at a terminal and no `--approve`, a call that needs approval
/// is denied and never runs.
#[test]
fn headless_run_denies_what_needs_approval() {
    let bw = writer();
    let out = bw.run(&["run", "writer", "write it"]);
    out.ok();
    assert!(
        out.stderr.contains("--approve files:write"),
        "the denial tells how to pre-approve:\n{}",
        out.stderr
    );
    assert!(!bw.workspace_file("writer", "out/a.txt").exists());

    let records = bw.audit();
    let approvals = with_action(&records, "approval");
    assert_eq!(approvals.len(), 1, "{records:#?}");
    assert_eq!(field(approvals[0], "decision"), "denied");
    assert_eq!(field(approvals[0], "reason"), "approval");
    let calls = with_action(&records, "tool_call");
    assert_eq!(calls.len(), 1, "{records:#?}");
    assert_eq!(field(calls[0], "tool"), "file_write");
    assert_eq!(field(calls[0], "decision"), "denied");
    assert_eq!(field(calls[0], "reason"), "approval");
}

/// `--approve files:write` lets exactly that call through, and the approval
/// is audited.
#[test]
fn approve_flag_allows_the_named_operation() {
    let bw = writer();
    bw.run(&["run", "writer", "write it", "--approve", "files:write"])
        .ok();
    let written = bw.workspace_file("writer", "out/a.txt");
    assert_eq!(
        std::fs::read_to_string(&written).expect("out/a.txt was written"),
        "written"
    );

    let records = bw.audit();
    let approvals = with_action(&records, "approval");
    assert_eq!(approvals.len(), 1, "{records:#?}");
    assert_eq!(field(approvals[0], "decision"), "approved");
    assert_eq!(field(approvals[0], "tool"), "file_write");
    let calls = with_action(&records, "tool_call");
    assert_eq!(calls.len(), 1, "{records:#?}");
    assert_eq!(field(calls[0], "decision"), "allowed");
    // The audit log holds the argument digest, not the written content.
    let raw = bw.run(&["audit", "tail", "--json"]);
    assert!(!raw.stdout.contains("written"), "{}", raw.stdout);
}

/// Pre-approving a different operation (or another domain) approves nothing
/// else.
#[test]
fn approve_flag_for_another_operation_does_not_leak() {
    // Names that exist but are not files:write approve nothing else.
    for rule in ["files:read", "shell:exec", "shell", "file_read"] {
        let bw = writer();
        bw.run(&["run", "writer", "write it", "--approve", rule])
            .ok();
        assert!(
            !bw.workspace_file("writer", "out/a.txt").exists(),
            "--approve {rule} approved files:write"
        );
        let records = bw.audit();
        let calls = with_action(&records, "tool_call");
        assert_eq!(calls.len(), 1, "{records:#?}");
        assert_eq!(field(calls[0], "reason"), "approval", "--approve {rule}");
    }
}

/// Rules naming no tool, domain or operation (typos, wildcards) are usage
/// errors rather than approvals of nothing.
#[test]
fn approve_rules_must_name_real_tools() {
    for rule in ["*", "files:wrte", "flies", "files:*", "nosuch:write"] {
        let bw = writer();
        let out = bw.run(&["run", "writer", "write it", "--approve", rule]);
        out.expect_code(2);
        assert!(out.stderr.contains("--approve"), "{rule}: {}", out.stderr);
        assert!(!bw.workspace_file("writer", "out/a.txt").exists());
        assert!(
            !bw.path("bulwark.db").exists(),
            "{rule}: the store was touched"
        );
    }
}

/// A malformed `--approve` is a usage error, caught before any session.
#[test]
fn malformed_approve_is_a_usage_error() {
    for rule in [":", "files:", ":write", ""] {
        let bw = writer();
        let out = bw.run(&["run", "writer", "write it", "--approve", rule]);
        out.expect_code(2);
        assert!(out.stderr.contains("--approve"), "{rule:?}: {}", out.stderr);
        assert!(
            !bw.path("bulwark.db").exists(),
            "{rule:?} started a session"
        );
        assert!(!bw.workspace_file("writer", "out/a.txt").exists());
    }
}

/// A script that keeps calling tools past `max_turns`: exit 4.
#[test]
fn exhausting_max_turns_exits_4() {
    let bw = Bw::empty();
    bw.agent(
        "busy",
        &scripted(
            "busy",
            "max_turns = 2\n[tools]\nallow = [\"files\"]\n[[capabilities]]\nkind = \"file_read\"\npath = \"**\"\n",
        ),
        Some(concat!(
            r#"{"tool_calls": [{"name": "file_list", "input": {"path": "."}}]}"#,
            "\n",
            r#"{"tool_calls": [{"name": "file_read", "input": {"path": "a.txt"}}]}"#,
            "\n",
            r#"{"tool_calls": [{"name": "file_read", "input": {"path": "b.txt"}}]}"#,
            "\n",
            r#"{"text": "never reached"}"#,
            "\n",
        )),
    );
    let out = bw.run(&["run", "busy", "go"]);
    out.expect_code(4);
    assert!(out.stderr.contains("max_turns"), "{}", out.stderr);
    assert!(!out.stdout.contains("never reached"));
    // Two model calls, two tool calls: the third turn was never played.
    assert_eq!(with_action(&bw.audit(), "tool_call").len(), 2);
}

/// The loop guard's session-wide breaker stops the session: exit 3.
#[test]
fn loop_guard_breaker_exits_3() {
    let bw = Bw::empty();
    bw.agent(
        "looper",
        &scripted(
            "looper",
            "[tools]\nallow = [\"files\"]\n[[capabilities]]\nkind = \"file_read\"\npath = \"**\"\n[loop_guard]\nmax_tool_calls = 2\n",
        ),
        Some(concat!(
            r#"{"tool_calls": [{"name": "file_read", "input": {"path": "a.txt"}}]}"#,
            "\n",
            r#"{"tool_calls": [{"name": "file_read", "input": {"path": "b.txt"}}]}"#,
            "\n",
            r#"{"tool_calls": [{"name": "file_read", "input": {"path": "c.txt"}}]}"#,
            "\n",
            r#"{"tool_calls": [{"name": "file_read", "input": {"path": "d.txt"}}]}"#,
            "\n",
            r#"{"text": "never reached"}"#,
            "\n",
        )),
    );
    let out = bw.run(&["run", "looper", "go"]);
    out.expect_code(3);
    assert!(out.stderr.contains("stopped"), "{}", out.stderr);
    assert!(!out.stdout.contains("never reached"));
    let records = bw.audit();
    let calls = with_action(&records, "tool_call");
    assert_eq!(calls.len(), 3, "{records:#?}");
    assert_eq!(field(calls[2], "decision"), "denied");
    assert_eq!(field(calls[2], "reason"), "loop_guard");
}

/// A provider failure (scripted `error` turn): exit 1 with its message.
#[test]
fn model_error_exits_1_with_the_message() {
    let bw = Bw::empty();
    bw.agent(
        "broken",
        &scripted("broken", ""),
        Some("{\"error\": \"the provider is on fire\"}\n"),
    );
    let out = bw.run(&["run", "broken", "go"]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("the provider is on fire"),
        "{}",
        out.stderr
    );
}

/// A session whose resources cannot be opened (the workspace path is a
/// file) fails as a setup error and leaves no half-made session behind.
#[test]
fn failed_setup_stores_no_session() {
    let bw = Bw::init();
    let workspace = bw.path("users/local/agents/demo/workspace");
    std::fs::remove_dir_all(&workspace).expect("remove the demo workspace");
    std::fs::write(&workspace, "not a directory").expect("block the workspace");
    let out = bw.run(&["run", "demo", "show me"]);
    out.expect_code(2);
    assert!(out.stderr.contains("workspace"), "{}", out.stderr);
    assert!(!out.stdout.contains("Reading"), "{}", out.stdout);
    assert_eq!(bw.sessions(), []);
    assert_eq!(bw.audit(), Vec::<serde_json::Value>::new());
}
