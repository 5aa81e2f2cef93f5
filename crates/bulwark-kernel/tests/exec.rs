//! The exec policy through the door: every command in a wrapper chain is
//! checked, refusals are audited without the argv.

mod common;

use bulwark_audit::{Decision, MemorySink};
use bulwark_kernel::{AgentSetup, ToolCall, ToolRegistry};
use bulwark_policy::parse_manifest;
use common::*;
use serde_json::json;
use std::sync::Arc;

const MANIFEST: &str = r#"
[agent]
name = "tester"
[tools]
allow = ["shell"]
[sandbox]
shell = true
[[capabilities]]
kind = "shell_exec"
argv = ["*", "**"]
[exec]
mode = "allowlist"
[[exec.allow]]
prefix = ["echo"]
examples = [["echo", "hi"], ["env", "echo", "hi"]]
counter_examples = [["cat", "/etc/passwd"], ["sh", "-c", "echo hi; cat /etc/passwd"]]
"#;

#[tokio::test]
async fn wrapped_commands_are_checked_and_refusals_audited() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let manifest = parse_manifest(MANIFEST, "agent.toml").unwrap();
    let setup = AgentSetup {
        exec: manifest.exec_policy(),
        ..unconfined()
    };
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session_with(dir.path(), policy(&registry, MANIFEST), &setup);
    async fn run(
        door: &bulwark_kernel::Door,
        s: &mut bulwark_kernel::Session,
        argv: Vec<&str>,
    ) -> bulwark_kernel::DispatchResult {
        let input = json!({ "argv": argv });
        door.dispatch(
            s,
            ToolCall {
                id: "1",
                name: "shell_exec",
                input: &input,
            },
        )
        .await
    }
    for argv in [
        vec!["echo", "hi"],
        vec!["env", "echo", "hi"],
        vec!["nice", "-n", "5", "echo", "x"],
    ] {
        let r = run(&door, &mut s, argv.clone()).await;
        assert_eq!(r.decision, Decision::Allowed, "{argv:?}: {}", r.content);
    }
    for (argv, says) in [
        (vec!["cat", "/etc/passwd"], "rule"),
        (vec!["env", "cat", "/etc/passwd"], "rule"),
        (vec!["sh", "-c", "echo hi; cat /etc/passwd"], "script"),
        (vec!["sh", "-c", "echo $(cat /etc/passwd)"], "script"),
        (vec!["sudo", "echo", "hi"], "sudo"),
        (
            vec!["env", "LD_PRELOAD=/tmp/x.so", "echo", "hi"],
            "LD_PRELOAD",
        ),
        (vec!["timeout", "5", "curl", "http://x"], "curl"),
    ] {
        let r = run(&door, &mut s, argv.clone()).await;
        assert_eq!(
            (r.decision, r.reason.as_str()),
            (Decision::Denied, "exec_policy"),
            "{argv:?}: {}",
            r.content
        );
        assert!(r.content.contains(says), "{argv:?}: {}", r.content);
    }
    let refused: Vec<_> = sink
        .records()
        .into_iter()
        .filter(|r| r.reason == "exec_policy")
        .collect();
    assert_eq!(refused.len(), 7);
    for r in refused {
        assert!(
            !r.detail.contains("/etc/passwd") && !r.detail.contains("curl"),
            "{}",
            r.detail
        );
    }
}
