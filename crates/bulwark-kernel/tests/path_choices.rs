//! The paths the kernel offers a constraining driver per model call
//! (`bulwark_kernel::path_choices`): only what exists, has the right kind
//! and passes the door's own check; and the door, unchanged, still refuses
//! what a driver without a grammar sends outside the grants.

use crate::common;

use bulwark_audit::{Action, AuditSink, Decision, MemorySink, Reason};
use bulwark_kernel::{
    AgentRuntime, Door, Kernel, Silent, ToolCall, ToolRegistry, TurnEnd, WalkBounds,
    path_choices_with,
};
use bulwark_llm::{AllowedPaths, LlmDriver, PathChoices, ScriptDriver};
use bulwark_policy::{Demand, EffectivePolicy, WorkspacePath};
use bulwark_store::{NewSession, Store};
use proptest::prelude::*;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

fn manifest(reads: &[&str], writes: &[&str]) -> String {
    let mut text = String::from("[agent]\nname = \"tester\"\n[tools]\nallow = [\"files\"]\n");
    for (kind, globs) in [("file_read", reads), ("file_write", writes)] {
        for glob in globs {
            text.push_str(&format!(
                "[[capabilities]]\nkind = \"{kind}\"\npath = \"{glob}\"\n"
            ));
        }
    }
    text
}

fn choices(
    registry: &ToolRegistry,
    policy: &EffectivePolicy,
    session: &bulwark_kernel::Session,
    bounds: &WalkBounds,
) -> PathChoices {
    let offered = registry.definitions_for(policy);
    path_choices_with(
        registry,
        &offered,
        policy,
        &session.resources().workspace,
        bounds,
    )
}

fn listed<'a>(choices: &'a PathChoices, tool: &str) -> Option<&'a Vec<String>> {
    match choices.for_argument(tool, "path") {
        Some(AllowedPaths::Listed(paths)) => Some(paths),
        _ => None,
    }
}

/// One entry of a generated tree: a path and whether it is a directory.
fn tree() -> impl Strategy<Value = Vec<(Vec<String>, bool)>> {
    let component = prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("notes.txt".to_string()),
        Just("x.csv".to_string()),
        Just(".hidden".to_string()),
        Just("sp ace.md".to_string()),
    ];
    proptest::collection::vec(
        (proptest::collection::vec(component, 1..4), any::<bool>()),
        0..16,
    )
}

fn glob() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("**"),
        Just("a/**"),
        Just("*.txt"),
        Just("**/*.csv"),
        Just("b/*"),
        Just("a"),
        Just("notes.txt"),
        Just(".hidden/**"),
        Just("a/b/**"),
    ]
}

/// Creates `entries` under `root`, skipping what a file already blocks;
/// returns the files and directories really created.
fn build_tree(
    root: &Path,
    entries: &[(Vec<String>, bool)],
) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut files, mut dirs) = (BTreeSet::new(), BTreeSet::new());
    for (components, is_dir) in entries {
        let rel = components.join("/");
        let path = root.join(&rel);
        let parent_ok = path
            .parent()
            .is_some_and(|p| std::fs::create_dir_all(p).is_ok());
        if !parent_ok || path.exists() {
            continue;
        }
        if *is_dir {
            if std::fs::create_dir(&path).is_err() {
                continue;
            }
        } else if std::fs::write(&path, "x").is_err() {
            continue;
        }
        let _ = (files.remove(&rel), dirs.remove(&rel));
        // Parents created on the way are directories too.
        for i in 1..components.len() {
            dirs.insert(components[..i].join("/"));
        }
        if *is_dir {
            dirs.insert(rel);
        } else {
            files.insert(rel);
        }
    }
    (files, dirs)
}

fn offerable(path: &str) -> bool {
    !path.split('/').any(|c| c.starts_with('.'))
}

fn may(policy: &EffectivePolicy, demand: Demand) -> bool {
    policy.check_demand(&demand).is_ok()
}

fn wp(path: &str) -> WorkspacePath {
    WorkspacePath::parse(path).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// For random trees and grants: every offered path exists, has the
    /// kind its argument wants and passes the door (checked by sending it
    /// through the door); every path that would pass is offered; a file
    /// created or removed between calls appears or disappears.
    #[test]
    fn offered_paths_exist_and_pass_the_door(
        entries in tree(),
        reads in proptest::collection::vec(glob(), 0..3),
        writes in proptest::collection::vec(glob(), 0..2),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let registry = ToolRegistry::builtin();
        let policy = common::policy(&registry, &manifest(&reads, &writes));
        let session = common::session(dir.path(), policy.clone());
        let root = session.resources().workspace.root().to_path_buf();
        let (files, dirs) = build_tree(&root, &entries);
        let bounds = WalkBounds::default();
        let got = choices(&registry, &policy, &session, &bounds);

        let read_files: BTreeSet<String> = files
            .iter()
            .filter(|f| offerable(f) && may(&policy, Demand::FileRead(wp(f))))
            .cloned()
            .collect();
        let edit_files: BTreeSet<String> = read_files
            .iter()
            .filter(|f| may(&policy, Demand::FileWrite(wp(f))))
            .cloned()
            .collect();
        let mut read_dirs: BTreeSet<String> = dirs
            .iter()
            .filter(|d| offerable(d) && may(&policy, Demand::FileRead(wp(d))))
            .cloned()
            .collect();
        if may(&policy, Demand::FileRead(WorkspacePath::root())) {
            read_dirs.insert(String::new());
        }
        let any_read = !reads.is_empty();
        let any_write = !writes.is_empty();
        let expect = |set: &BTreeSet<String>, granted: bool| {
            AllowedPaths::Listed(if granted { set.iter().cloned().collect() } else { Vec::new() })
        };
        prop_assert_eq!(got.for_argument("file_read", "path"), Some(&expect(&read_files, any_read)));
        prop_assert_eq!(got.for_argument("file_list", "path"), Some(&expect(&read_dirs, any_read)));
        prop_assert_eq!(got.for_argument("file_search", "path"), Some(&expect(&read_dirs, any_read)));
        prop_assert_eq!(
            got.for_argument("file_edit", "path"),
            Some(&expect(&edit_files, any_read && any_write))
        );
        let write = if any_write { AllowedPaths::Relative } else { AllowedPaths::Listed(Vec::new()) };
        prop_assert_eq!(got.for_argument("file_write", "path"), Some(&write));
        // Tools without paths get nothing.
        prop_assert!(got.arguments.iter().all(|a| a.tool.starts_with("file_")));

        // Each offered path on disk, of its kind, and through the door.
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let sink = Arc::new(MemorySink::new());
        let door = common::door(registry.clone(), sink, common::deny_all());
        let mut session = session;
        for (tool, paths, want_dir) in [
            ("file_read", listed(&got, "file_read"), false),
            ("file_list", listed(&got, "file_list"), true),
        ] {
            for path in paths.into_iter().flatten() {
                let meta = std::fs::symlink_metadata(root.join(path)).unwrap();
                prop_assert_eq!(meta.is_dir(), want_dir, "{}", path);
                prop_assert!(meta.is_dir() || meta.is_file());
                let input = json!({"path": path});
                let result = runtime.block_on(door.dispatch(
                    &mut session,
                    ToolCall { id: "c", name: tool, input: &input },
                ));
                prop_assert_eq!(result.decision, Decision::Allowed, "{} {:?}: {}", tool, path, result.content);
            }
        }

        // Between calls: a new granted file appears, a removed one goes.
        std::fs::write(root.join("fresh.txt"), "new").unwrap();
        if let Some(gone) = read_files.iter().next() {
            std::fs::remove_file(root.join(gone)).unwrap();
        }
        let again = choices(&registry, &policy, &session, &bounds);
        let now = listed(&again, "file_read").cloned().unwrap_or_default();
        prop_assert_eq!(
            now.contains(&"fresh.txt".to_string()),
            any_read && may(&policy, Demand::FileRead(wp("fresh.txt")))
        );
        if let Some(gone) = read_files.iter().next() {
            prop_assert!(!now.contains(gone));
        }
    }
}

#[test]
fn symlinks_hidden_entries_and_odd_names_are_not_offered() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let policy = common::policy(&registry, &manifest(&["**"], &[]));
    let session = common::session(dir.path(), policy.clone());
    let root = session.resources().workspace.root().to_path_buf();
    std::fs::write(root.join("real.txt"), "x").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/inner.txt"), "x").unwrap();
    std::fs::write(root.join(".env"), "SECRET=1").unwrap();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/config"), "x").unwrap();
    std::fs::write(root.join("back\\slash"), "x").unwrap();
    std::os::unix::fs::symlink("real.txt", root.join("link.txt")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("passwd")).unwrap();
    std::os::unix::fs::symlink("sub", root.join("linkdir")).unwrap();
    let got = choices(&registry, &policy, &session, &WalkBounds::default());
    assert_eq!(
        got.for_argument("file_read", "path"),
        Some(&AllowedPaths::Listed(vec![
            "real.txt".into(),
            "sub/inner.txt".into()
        ]))
    );
    assert_eq!(
        got.for_argument("file_list", "path"),
        Some(&AllowedPaths::Listed(vec!["".into(), "sub".into()]))
    );
    // No file_write grant: no write target at all (the tool is still shown
    // when the policy allows the operation; only the grammar narrows).
    assert_eq!(
        got.for_argument("file_write", "path"),
        Some(&AllowedPaths::Listed(vec![]))
    );
    // Only tools that cannot change what they name are marked read-only
    // (a driver may call those on the model's behalf).
    for choice in &got.arguments {
        let reads_only = matches!(
            choice.tool.as_str(),
            "file_read" | "file_list" | "file_search"
        );
        assert_eq!(choice.reads_only, reads_only, "{}", choice.tool);
    }
    assert!(
        got.arguments
            .iter()
            .any(|c| c.tool == "file_edit" && !c.reads_only)
    );
}

#[test]
fn a_tree_over_the_bounds_is_offered_as_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let policy = common::policy(&registry, &manifest(&["**"], &["out/**"]));
    let session = common::session(dir.path(), policy.clone());
    let root = session.resources().workspace.root().to_path_buf();
    for i in 0..10 {
        std::fs::write(root.join(format!("f{i}.txt")), "x").unwrap();
    }
    let few = WalkBounds {
        max_entries: 5,
        ..WalkBounds::default()
    };
    let got = choices(&registry, &policy, &session, &few);
    assert_eq!(
        got.for_argument("file_read", "path"),
        Some(&AllowedPaths::Relative)
    );
    assert_eq!(
        got.for_argument("file_list", "path"),
        Some(&AllowedPaths::Relative)
    );
    std::fs::create_dir_all(root.join("a/b/c")).unwrap();
    let shallow = WalkBounds {
        max_depth: 2,
        ..WalkBounds::default()
    };
    let got = choices(&registry, &policy, &session, &shallow);
    assert_eq!(
        got.for_argument("file_read", "path"),
        Some(&AllowedPaths::Relative)
    );
    let got = choices(&registry, &policy, &session, &WalkBounds::default());
    assert_eq!(listed(&got, "file_read").map(Vec::len), Some(10));
    // Empty workspace, read grants: nothing to read, root to list.
    let empty = tempfile::tempdir().unwrap();
    let session = common::session(empty.path(), policy.clone());
    let got = choices(&registry, &policy, &session, &WalkBounds::default());
    assert_eq!(
        got.for_argument("file_read", "path"),
        Some(&AllowedPaths::Listed(vec![]))
    );
    assert_eq!(
        got.for_argument("file_list", "path"),
        Some(&AllowedPaths::Listed(vec!["".into()]))
    );
}

/// The script driver, remembering the path choices of every request.
struct Recorder {
    inner: ScriptDriver,
    seen: Mutex<Vec<PathChoices>>,
}

#[async_trait::async_trait]
impl LlmDriver for Recorder {
    fn provider(&self) -> &str {
        "script"
    }
    async fn chat(
        &self,
        request: &bulwark_llm::ChatRequest,
        on_event: &mut (dyn FnMut(bulwark_llm::StreamEvent) + Send),
    ) -> Result<bulwark_llm::ChatResponse, bulwark_llm::LlmError> {
        self.seen.lock().unwrap().push(request.paths.clone());
        self.inner.chat(request, on_event).await
    }
}

/// A driver with no grammar sends what the grammar would never produce:
/// the door refuses it (or the tool fails), the audit shows each decision,
/// and the listed paths work. The kernel sends fresh choices each call.
const ATTACKS: &str = r#"
{"tool_calls": [{"name": "file_read", "input": {"path": "../x"}}]}
{"tool_calls": [{"name": "file_read", "input": {"path": "/etc/passwd"}}]}
{"tool_calls": [{"name": "file_read", "input": {"path": "file:///etc/passwd"}}]}
{"tool_calls": [{"name": "file_list", "input": {"path": "workspace:///"}}]}
{"tool_calls": [{"name": "file_read", "input": {"path": "secret.txt"}}]}
{"tool_calls": [{"name": "file_read", "input": {"path": "data"}}]}
{"tool_calls": [{"name": "file_list", "input": {"path": "data/b.csv"}}]}
{"tool_calls": [{"name": "file_read", "input": {"path": "notes.txt"}}]}
{"tool_calls": [{"name": "file_list", "input": {"path": "data"}}]}
{"tool_calls": [{"name": "file_write", "input": {"path": "data/new.txt", "content": "hi"}}]}
{"tool_calls": [{"name": "file_write", "input": {"path": "notes.txt", "content": "overwrite"}}]}
{"text": "done"}
"#;

#[tokio::test]
async fn the_door_refuses_what_no_grammar_stopped_and_listed_paths_work() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let p = common::policy(
        &registry,
        &manifest(&["notes.txt", "data/**"], &["data/**"]),
    );
    let store = Store::open(&dir.path().join("bulwark.db")).unwrap();
    let audit: Arc<dyn AuditSink> = Arc::new(store.audit_sink());
    let kernel = Kernel::new(
        Door::new(registry, audit.clone(), common::deny_all()),
        store.clone(),
    );
    store
        .create_session(&NewSession {
            id: "s1".into(),
            agent: "tester".into(),
            user: "local".into(),
        })
        .unwrap();
    let mut s = common::session(dir.path(), p);
    let root = s.resources().workspace.root().to_path_buf();
    std::fs::write(root.join("notes.txt"), "code name BLUE HERON").unwrap();
    std::fs::write(root.join("secret.txt"), "do not read").unwrap();
    std::fs::create_dir(root.join("data")).unwrap();
    std::fs::write(root.join("data/b.csv"), "a,b\n1,2\n").unwrap();
    let driver = Arc::new(Recorder {
        inner: ScriptDriver::from_jsonl(ATTACKS, "inline").unwrap(),
        seen: Mutex::new(Vec::new()),
    });
    let agent = AgentRuntime {
        name: "tester".into(),
        system_prompt: "test".into(),
        model: "script".into(),
        driver: driver.clone(),
        max_turns: 20,
        max_tokens: 1000,
    };
    let outcome = kernel
        .run_turn(&mut s, &mut Vec::new(), &agent, "go", &mut Silent)
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::Completed);

    let calls: Vec<(String, Decision, Reason)> = audit
        .tail(200)
        .unwrap()
        .into_iter()
        .filter(|r| r.record.action == Action::ToolCall)
        .map(|r| (r.record.tool, r.record.decision, r.record.reason))
        .collect();
    let expected = [
        ("file_read", Decision::Denied, Reason::Path),
        ("file_read", Decision::Denied, Reason::Path),
        ("file_read", Decision::Denied, Reason::Capability),
        ("file_list", Decision::Denied, Reason::Capability),
        ("file_read", Decision::Denied, Reason::Capability),
        ("file_read", Decision::Failed, Reason::ToolError),
        ("file_list", Decision::Failed, Reason::ToolError),
        ("file_read", Decision::Allowed, Reason::Ok),
        ("file_list", Decision::Allowed, Reason::Ok),
        ("file_write", Decision::Allowed, Reason::Ok),
        ("file_write", Decision::Denied, Reason::Capability),
    ];
    let expected: Vec<(String, Decision, Reason)> = expected
        .into_iter()
        .map(|(t, d, r)| (t.to_string(), d, r))
        .collect();
    assert_eq!(calls, expected);

    // What the grammar was told, call by call: the readable files (never
    // the ungranted one), the readable directories, a relative write
    // target; and the file written mid-turn from the next call on.
    let seen = driver.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 12);
    let files = |c: &PathChoices| listed(c, "file_read").cloned().unwrap_or_default();
    assert_eq!(files(&seen[0]), ["data/b.csv", "notes.txt"]);
    assert_eq!(
        seen[0].for_argument("file_list", "path"),
        Some(&AllowedPaths::Listed(vec!["data".into()]))
    );
    assert_eq!(
        seen[0].for_argument("file_write", "path"),
        Some(&AllowedPaths::Relative)
    );
    assert_eq!(
        seen[0].for_argument("file_edit", "path"),
        Some(&AllowedPaths::Listed(vec!["data/b.csv".into()]))
    );
    assert_eq!(files(&seen[9]), ["data/b.csv", "notes.txt"]);
    assert_eq!(
        files(&seen[10]),
        ["data/b.csv", "data/new.txt", "notes.txt"]
    );
    for choices in &seen {
        for attack in [
            "../x",
            "/etc/passwd",
            "file:///etc/passwd",
            "secret.txt",
            "data",
        ] {
            assert!(!files(choices).iter().any(|f| f == attack));
        }
    }
}
