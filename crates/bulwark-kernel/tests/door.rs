//! The door: every tool is refused without its grant, allowed with it, and
//! every decision is audited once.

use crate::common;
#[path = "door/args.rs"]
mod args;
#[path = "door/links.rs"]
mod links;
#[path = "door/sequence.rs"]
mod sequence;
#[path = "door/taint.rs"]
mod taint;

use bulwark_audit::{Decision, MemorySink, Reason};
use bulwark_kernel::{ToolCall, ToolRegistry};
use common::*;
use serde_json::json;
use std::sync::Arc;

async fn call(
    door: &bulwark_kernel::Door,
    session: &mut bulwark_kernel::Session,
    name: &str,
    input: serde_json::Value,
) -> bulwark_kernel::DispatchResult {
    door.dispatch(
        session,
        ToolCall {
            id: "c1",
            name,
            input: &input,
        },
    )
    .await
}

#[tokio::test]
async fn every_registered_tool_is_refused_without_its_domain() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let none = policy(&registry, "[agent]\nname = \"tester\"\n");
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), none);
    let mut count = 0;
    for tool in registry.iter() {
        let r = call(&door, &mut s, &tool.spec().name, tool.example_args()).await;
        assert_eq!(
            r.decision,
            Decision::Denied,
            "{} was not refused",
            tool.spec().name
        );
        assert!(r.is_error);
        count += 1;
    }
    assert!(count >= 11, "expected every built-in tool, saw {count}");
    assert_eq!(sink.records().len(), count, "one audit record per call");
    assert!(
        sink.records()
            .iter()
            .all(|r| r.decision == Decision::Denied && r.action == bulwark_audit::Action::ToolCall)
    );
}

#[tokio::test]
async fn every_resource_tool_is_refused_without_its_capability() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    // Every domain allowed (shell too), but no resource capability at all.
    let manifest =
        "[agent]\nname = \"tester\"\n[tools]\nallow = [\"*\"]\n[sandbox]\nshell = true\n";
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), policy(&registry, manifest));
    for tool in registry.iter() {
        let r = call(&door, &mut s, &tool.spec().name, tool.example_args()).await;
        if tool.spec().domain == "time" {
            assert_eq!(r.decision, Decision::Allowed, "time needs no resource");
        } else if matches!(
            tool.spec().name.as_ref(),
            "credits_balance" | "list_children"
        ) {
            // They read the session's own account and children, which this
            // session (no [credits], no child host) does not have.
            assert_eq!(
                r.reason,
                bulwark_audit::Reason::Scope,
                "{}: {}",
                tool.spec().name,
                r.content
            );
        } else {
            assert_eq!(
                r.decision,
                Decision::Denied,
                "{} ran without a capability",
                tool.spec().name
            );
            assert_eq!(
                r.reason,
                Reason::Capability,
                "{}: {}",
                tool.spec().name,
                r.content
            );
        }
    }
}

#[tokio::test]
async fn granted_read_works_and_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), policy(&registry, FILES_READ_ONLY));
    std::fs::write(
        s.resources().workspace.root().join("notes.txt"),
        "BLUE HERON",
    )
    .unwrap();

    let r = call(&door, &mut s, "file_read", json!({"path": "notes.txt"})).await;
    assert_eq!(r.decision, Decision::Allowed, "{}", r.content);
    assert!(r.content.contains("BLUE HERON"));
    assert!(
        r.content.contains("untrusted_"),
        "workspace content is boundary-wrapped"
    );

    let w = call(
        &door,
        &mut s,
        "file_write",
        json!({"path": "x.txt", "content": "y"}),
    )
    .await;
    assert_eq!(w.decision, Decision::Denied);
    assert!(!s.resources().workspace.root().join("x.txt").exists());
}

#[tokio::test]
async fn traversal_and_absolute_paths_are_refused_as_path_denials() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), policy(&registry, FILES_READ_ONLY));
    for path in [
        "../../etc/passwd",
        "/etc/passwd",
        "a/../../b",
        "..",
        "a\\..\\b",
        "x\0y",
    ] {
        let r = call(&door, &mut s, "file_read", json!({ "path": path })).await;
        assert_eq!(r.decision, Decision::Denied, "{path:?}: {}", r.content);
        assert_eq!(r.reason, bulwark_audit::Reason::Path, "{path:?}");
    }
}

#[tokio::test]
async fn repeated_identical_calls_are_blocked_by_the_loop_guard() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let manifest =
        format!("{FILES_READ_ONLY}\n[loop_guard]\nwarn_threshold = 2\nblock_threshold = 3\n");
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), policy(&registry, &manifest));
    std::fs::write(s.resources().workspace.root().join("a.txt"), "a").unwrap();
    let mut decisions = Vec::new();
    for _ in 0..4 {
        decisions.push(call(&door, &mut s, "file_read", json!({"path": "a.txt"})).await);
    }
    assert_eq!(decisions[0].decision, Decision::Allowed);
    assert_eq!(decisions[1].decision, Decision::Allowed);
    assert!(decisions[1].content.contains("loop guard warning"));
    assert_eq!(decisions[2].decision, Decision::Denied);
    assert_eq!(decisions[2].reason, bulwark_audit::Reason::LoopGuard);
    // Different arguments are tracked separately.
    let other = call(&door, &mut s, "file_list", json!({})).await;
    assert_eq!(other.decision, Decision::Allowed);
    assert!(
        sink.records()
            .iter()
            .any(|r| r.action == bulwark_audit::Action::LoopGuard && r.decision == Decision::Warned)
    );
}

#[tokio::test]
async fn unknown_tools_and_bad_arguments_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), policy(&registry, FILES_READ_ONLY));
    let r = call(&door, &mut s, "rm_rf", json!({})).await;
    assert_eq!(
        (r.decision, &r.reason),
        (Decision::Denied, &bulwark_audit::Reason::UnknownTool)
    );
    // The error names the session's own tools, and none it does not hold.
    assert!(r.content.contains("file_read"), "{}", r.content);
    let mut unheld = 0;
    for spec in registry.iter().map(|t| t.spec()) {
        if s.policy()
            .check_tool(&spec.domain, &spec.operation)
            .is_err()
        {
            unheld += 1;
            assert!(
                !r.content.contains(&format!(" {},", spec.name))
                    && !r.content.ends_with(&format!(" {}", spec.name)),
                "`{}` is not held but was listed: {}",
                spec.name,
                r.content
            );
        }
    }
    assert!(unheld > 5, "the test needs tools the session lacks");
    assert!(!r.content.contains("shell_exec"), "{}", r.content);
    for bad in [
        json!("notes.txt"),
        json!({"path": 3}),
        json!({"path": "a", "follow": true}),
        json!(null),
    ] {
        let r = call(&door, &mut s, "file_read", bad.clone()).await;
        assert!(r.is_error, "{bad}");
        assert_ne!(r.decision, Decision::Allowed, "{bad}");
    }
    assert_eq!(sink.records().len(), 5);
}

#[tokio::test]
async fn approval_is_required_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let manifest = r#"
[agent]
name = "tester"
[tools]
allow = ["files"]
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "file_write"
path = "out/**"
[approval]
operations = ["files:write"]
"#;
    let p = policy(&registry, manifest);

    let sink = Arc::new(MemorySink::new());
    let denying = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), p.clone());
    let r = call(
        &denying,
        &mut s,
        "file_write",
        json!({"path": "out/a.txt", "content": "x"}),
    )
    .await;
    assert_eq!(
        (r.decision, &r.reason),
        (Decision::Denied, &bulwark_audit::Reason::Approval)
    );
    assert!(!s.resources().workspace.root().join("out/a.txt").exists());
    assert!(
        sink.records()
            .iter()
            .any(|r| r.action == bulwark_audit::Action::Approval && r.decision == Decision::Denied)
    );

    let sink2 = Arc::new(MemorySink::new());
    let approving = door(registry.clone(), sink2.clone(), approve(&["files:write"]));
    let r = call(
        &approving,
        &mut s,
        "file_write",
        json!({"path": "out/a.txt", "content": "x"}),
    )
    .await;
    assert_eq!(r.decision, Decision::Allowed, "{}", r.content);
    assert!(s.resources().workspace.root().join("out/a.txt").exists());
    assert!(
        sink2.records().iter().any(
            |r| r.action == bulwark_audit::Action::Approval && r.decision == Decision::Approved
        )
    );
    // Approval never widens the capability set.
    let r = call(
        &approving,
        &mut s,
        "file_write",
        json!({"path": "elsewhere.txt", "content": "x"}),
    )
    .await;
    assert_eq!(
        (r.decision, &r.reason),
        (Decision::Denied, &bulwark_audit::Reason::Capability)
    );
}

#[tokio::test]
async fn untrusted_content_cannot_drive_the_shell_without_approval() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let manifest = r#"
[agent]
name = "tester"
[tools]
allow = ["shell"]
[sandbox]
shell = true
[[capabilities]]
kind = "shell_exec"
argv = ["echo", "**"]
"#;
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), policy(&registry, manifest));
    let ok = call(&door, &mut s, "shell_exec", json!({"argv": ["echo", "hi"]})).await;
    assert_eq!(ok.decision, Decision::Allowed, "{}", ok.content);
    assert!(ok.content.contains("hi"));
    s.add_taint([bulwark_policy::TaintLabel::External]);
    let r = call(
        &door,
        &mut s,
        "shell_exec",
        json!({"argv": ["echo", "again"]}),
    )
    .await;
    assert_eq!(
        (r.decision, &r.reason),
        (Decision::Denied, &bulwark_audit::Reason::Approval)
    );
}

#[tokio::test]
async fn shell_children_see_no_inherited_environment() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let manifest = r#"
[agent]
name = "tester"
[tools]
allow = ["shell"]
[sandbox]
shell = true
[[capabilities]]
kind = "shell_exec"
argv = ["env"]
"#;
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink, deny_all());
    let mut s = session(dir.path(), policy(&registry, manifest));
    let r = call(&door, &mut s, "shell_exec", json!({"argv": ["env"]})).await;
    assert_eq!(r.decision, Decision::Allowed, "{}", r.content);
    let keys: Vec<&str> = r
        .content
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| {
            !k.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        })
        .collect();
    assert!(
        keys.contains(&"PATH") && keys.contains(&"HOME"),
        "{}",
        r.content
    );
    for key in &keys {
        assert!(
            ["PATH", "HOME", "LANG", "TERM", "TZ"].contains(key),
            "leaked {key}"
        );
    }
    // argv outside the grant is refused even for the same program's siblings.
    let r = call(
        &door,
        &mut s,
        "shell_exec",
        json!({"argv": ["env", "-i", "sh"]}),
    )
    .await;
    assert_eq!(
        (r.decision, &r.reason),
        (Decision::Denied, &bulwark_audit::Reason::Capability)
    );
}

#[tokio::test]
async fn audit_records_never_contain_argument_values() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let manifest = r#"
[agent]
name = "tester"
[tools]
allow = ["files", "shell"]
[sandbox]
shell = true
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "file_write"
path = "MARKER7/**"
"#;
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), policy(&registry, manifest));
    let calls = [
        ("file_read", json!({"path": "MARKER7/missing.txt"})),
        ("file_read", json!({"path": "../MARKER7"})),
        ("file_read", json!({"path": "/MARKER7"})),
        (
            "file_write",
            json!({"path": "MARKER7/a.txt", "content": "MARKER7 body"}),
        ),
        (
            "file_write",
            json!({"path": "elsewhere/MARKER7", "content": "x"}),
        ),
        (
            "file_edit",
            json!({"path": "MARKER7/a.txt", "old": "MARKER7", "new": "y"}),
        ),
        ("shell_exec", json!({"argv": ["MARKER7"]})),
        ("file_read", json!({"path": "a", "MARKER7": 1})),
        ("MARKER7_tool", json!({})),
    ];
    for (name, input) in calls {
        call(&door, &mut s, name, input).await;
    }
    let records = sink.records();
    assert!(records.len() >= 9);
    for r in records {
        let fields = [
            r.action.as_str(),
            &r.operation,
            r.reason.as_str(),
            &r.detail,
        ];
        for f in fields {
            assert!(
                !f.contains("MARKER7"),
                "argument value in audit record: {r:?}"
            );
        }
        if r.tool != "MARKER7_tool" {
            assert!(!r.tool.contains("MARKER7"));
        }
    }
}

/// A loop-guard warning the audit log refuses stops the session like any
/// other audit failure, instead of being dropped (issue 17, item 10).
#[tokio::test]
async fn a_loop_guard_warning_the_log_refuses_stops_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let manifest =
        format!("{FILES_READ_ONLY}\n[loop_guard]\nwarn_threshold = 2\nblock_threshold = 3\n");
    let sink: Arc<dyn bulwark_audit::AuditSink> = Arc::new(FaultySink::refusing(|r| {
        r.action == bulwark_audit::Action::LoopGuard
    }));
    let door = bulwark_kernel::Door::new(registry.clone(), sink, deny_all());
    let mut s = session(dir.path(), policy(&registry, &manifest));
    std::fs::write(s.resources().workspace.root().join("a.txt"), "SECRET-A").unwrap();
    let first = call(&door, &mut s, "file_read", json!({"path": "a.txt"})).await;
    assert_eq!(first.decision, Decision::Allowed);
    let second = call(&door, &mut s, "file_read", json!({"path": "a.txt"})).await;
    assert!(
        second.stop.is_some(),
        "the session goes on: {}",
        second.content
    );
    assert!(!second.content.contains("SECRET-A"), "{}", second.content);
    assert!(
        second.content.contains("loop-guard warning"),
        "{}",
        second.content
    );
}
