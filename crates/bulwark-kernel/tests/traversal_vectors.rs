//! Every line of the PayloadsAllTheThings traversal lists (kept, with their
//! licence, in bulwark-policy/tests/vectors/path-traversal) as the path of a
//! file read and a file write through the door. Each is refused as a path
//! denial with an audit record, or names a harmless file inside the
//! workspace; nothing outside is ever read or written.

use crate::common;

use bulwark_audit::{Decision, MemorySink};
use bulwark_kernel::{ToolCall, ToolRegistry};
use common::*;
use serde_json::json;
use std::sync::Arc;

const LISTS: [&str; 2] = [
    include_str!("../../bulwark-policy/tests/vectors/path-traversal/directory_traversal.txt"),
    include_str!(
        "../../bulwark-policy/tests/vectors/path-traversal/traversals-8-deep-exotic-encoding.txt"
    ),
];

const MANIFEST: &str = r#"
[agent]
name = "tester"
[tools]
allow = ["files"]
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "file_write"
path = "**"
[loop_guard]
max_tool_calls = 100000
warn_threshold = 100000
block_threshold = 100000
"#;

#[tokio::test]
async fn every_traversal_vector_is_refused_or_harmless() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    // Targets the vectors aim at, placed where a traversal would land.
    std::fs::write(tmp.path().join("passwd"), "OUTSIDE-SECRET").unwrap();
    let registry = ToolRegistry::builtin();
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(&home, policy(&registry, MANIFEST));
    let before: Vec<_> = walk(tmp.path());
    let (mut calls, mut denied) = (0usize, 0usize);
    for line in LISTS
        .iter()
        .flat_map(|l| l.lines())
        .filter(|l| !l.trim().is_empty())
    {
        for (tool, input) in [
            ("file_read", json!({ "path": line })),
            ("file_write", json!({ "path": line, "content": "PWNED" })),
        ] {
            let r = door
                .dispatch(
                    &mut s,
                    ToolCall {
                        id: "1",
                        name: tool,
                        input: &input,
                    },
                )
                .await;
            calls += 1;
            assert!(
                !r.content.contains("OUTSIDE-SECRET"),
                "{line:?} read outside"
            );
            match r.decision {
                // A write of a dotfile (`.htaccess`) that stays inside is a
                // capability denial: `**` does not name dotfiles for writes.
                Decision::Denied
                    if tool == "file_write" && r.reason == bulwark_audit::Reason::Capability =>
                {
                    assert!(
                        line.split('/')
                            .any(|c| c.starts_with('.') && c != "." && c != ".."),
                        "{tool} {line:?}: {}",
                        r.content
                    );
                    denied += 1;
                }
                Decision::Denied => {
                    assert_eq!(
                        r.reason,
                        bulwark_audit::Reason::Path,
                        "{tool} {line:?}: {}",
                        r.content
                    );
                    denied += 1;
                }
                // Allowed or failed: the path named something inside the
                // workspace (an oddly named file, or one that is absent).
                Decision::Allowed | Decision::Failed => {}
                other => panic!("{tool} {line:?}: unexpected {other:?}"),
            }
        }
    }
    // Nothing appeared or changed outside the workspace.
    let after: Vec<_> = walk(tmp.path())
        .into_iter()
        .filter(|p| !p.starts_with(&home))
        .collect();
    let before: Vec<_> = before
        .into_iter()
        .filter(|p| !p.starts_with(&home))
        .collect();
    assert_eq!(before, after);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("passwd")).unwrap(),
        "OUTSIDE-SECRET"
    );
    // One tool_call audit record per call.
    let audited = sink
        .records()
        .iter()
        .filter(|r| r.action == bulwark_audit::Action::ToolCall)
        .count();
    assert_eq!(audited, calls);
    eprintln!("{calls} calls, {denied} denied as path escapes, the rest stayed inside");
    assert!(
        denied * 2 > calls,
        "most vectors should be refused outright"
    );
}

fn walk(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}
