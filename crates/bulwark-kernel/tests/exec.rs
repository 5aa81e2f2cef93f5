//! The exec policy through the door: every command in a wrapper chain is
//! checked, refusals are audited without the argv.

use crate::common;

use bulwark_audit::{Action, Decision, MemorySink};
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
            (r.decision, &r.reason),
            (Decision::Denied, &bulwark_audit::Reason::ExecPolicy),
            "{argv:?}: {}",
            r.content
        );
        assert!(r.content.contains(says), "{argv:?}: {}", r.content);
    }
    let refused: Vec<_> = sink
        .records()
        .into_iter()
        .filter(|r| r.reason == bulwark_audit::Reason::ExecPolicy)
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

const SHELL_ANY: &str = r#"
[agent]
name = "tester"
[tools]
allow = ["shell"]
[sandbox]
shell = true
[[capabilities]]
kind = "shell_exec"
argv = ["*", "**"]
"#;

fn shell_call(argv: &[&str]) -> serde_json::Value {
    json!({ "argv": argv })
}

#[tokio::test]
async fn every_process_start_is_recorded_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), policy(&registry, SHELL_ANY));
    let input = shell_call(&["echo", "secret-argument"]);
    let r = door
        .dispatch(
            &mut s,
            ToolCall {
                id: "1",
                name: "shell_exec",
                input: &input,
            },
        )
        .await;
    assert_eq!(r.decision, Decision::Allowed, "{}", r.content);
    let records = sink.records();
    let actions: Vec<&Action> = records.iter().map(|r| &r.action).collect();
    assert_eq!(actions, [&Action::Spawn, &Action::ToolCall], "{records:?}");
    let spawn = &records[0];
    assert_eq!(spawn.decision, Decision::Allowed);
    assert!(spawn.detail.starts_with("echo: "), "{}", spawn.detail);
    assert!(
        !spawn.detail.contains("secret-argument"),
        "{}",
        spawn.detail
    );
    assert_eq!(spawn.args_digest, records[1].args_digest);
    assert_eq!(spawn.operation, "shell:exec");
}

#[tokio::test]
async fn a_process_whose_start_cannot_be_recorded_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let sink = Arc::new(FaultySink::refusing(|r| {
        r.action == bulwark_audit::Action::Spawn
    }));
    let audit: Arc<dyn bulwark_audit::AuditSink> = sink.clone();
    let door = bulwark_kernel::Door::new(registry.clone(), audit, deny_all());
    let mut s = session(dir.path(), policy(&registry, SHELL_ANY));
    let input = shell_call(&["touch", "ran"]);
    let r = door
        .dispatch(
            &mut s,
            ToolCall {
                id: "1",
                name: "shell_exec",
                input: &input,
            },
        )
        .await;
    assert_eq!(r.decision, Decision::Failed, "{}", r.content);
    assert!(r.content.contains("was not started"), "{}", r.content);
    let workspace_has_marker = walk_for(dir.path(), "ran");
    assert!(
        !workspace_has_marker,
        "the command ran without a spawn record"
    );
    let records = sink.inner.records();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].action, bulwark_audit::Action::ToolCall);
    assert_eq!(records[0].decision, Decision::Failed);
}

/// Queued is not recorded: the spawn record must be flushed (made durable)
/// before the child starts, and a flush that fails stops the start.
#[tokio::test]
async fn a_process_whose_start_is_only_queued_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let sink = Arc::new(FaultySink::unflushable());
    let audit: Arc<dyn bulwark_audit::AuditSink> = sink.clone();
    let door = bulwark_kernel::Door::new(registry.clone(), audit, deny_all());
    let mut s = session(dir.path(), policy(&registry, SHELL_ANY));
    let input = shell_call(&["touch", "ran"]);
    let r = door
        .dispatch(
            &mut s,
            ToolCall {
                id: "1",
                name: "shell_exec",
                input: &input,
            },
        )
        .await;
    assert!(
        !walk_for(dir.path(), "ran"),
        "the command ran before its spawn record was durable"
    );
    assert_eq!(r.decision, Decision::Failed, "{}", r.content);
    assert!(r.content.contains("was not started"), "{}", r.content);
    assert!(r.content.contains("disk full"), "{}", r.content);
}

fn walk_for(dir: &std::path::Path, name: &str) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let p = e.path();
            e.file_name() == name || (p.is_dir() && walk_for(&p, name))
        })
}

#[tokio::test]
async fn arguments_are_kept_only_when_asked_and_never_with_secrets() {
    use sha2::Digest;
    const SECRET: &str = "planted-secret-Xk29vQ7m";
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let mut secrets = bulwark_net::SecretStore::new();
    secrets.insert("BW_TOKEN", secrecy::SecretString::from(SECRET), true);
    let setup = AgentSetup {
        secrets: Arc::new(secrets),
        ..unconfined()
    };
    let mut s = session_with(dir.path(), policy(&registry, SHELL_ANY), &setup);
    let input = shell_call(&["echo", SECRET, "and more"]);
    let call = || ToolCall {
        id: "1",
        name: "shell_exec",
        input: &input,
    };

    // Off (the default): the digest only.
    let sink = Arc::new(MemorySink::new());
    door(registry.clone(), sink.clone(), deny_all())
        .dispatch(&mut s, call())
        .await;
    assert!(
        sink.records()
            .iter()
            .all(|r| r.action != bulwark_audit::Action::Arguments)
    );

    // On: an `arguments` record just before the call's record.
    let sink = Arc::new(MemorySink::new());
    let audit: Arc<dyn bulwark_audit::AuditSink> = sink.clone();
    let recording = bulwark_kernel::Door::new(registry.clone(), audit, deny_all())
        .with_recorded_arguments(true);
    recording.dispatch(&mut s, call()).await;
    let records = sink.records();
    let actions: Vec<&Action> = records.iter().map(|r| &r.action).collect();
    assert_eq!(
        actions,
        [&Action::Spawn, &Action::Arguments, &Action::ToolCall],
        "{records:?}"
    );
    let kept = &records[1];
    assert_eq!(
        kept.detail,
        r#"{"argv":["echo","[secret BW_TOKEN redacted]","and more"]}"#
    );
    assert_eq!(kept.args_digest, records[2].args_digest);
    assert_eq!(kept.decision, records[2].decision);
    // The digest is of the real arguments, so a copy without secrets is
    // told apart from the original by it.
    let original = bulwark_audit::AuditRecord::digest_args(&input);
    assert_eq!(kept.args_digest, original);
    assert_ne!(
        hex::encode(sha2::Sha256::digest(kept.detail.as_bytes())),
        original
    );
    assert!(!format!("{records:?}").contains(SECRET));
}
