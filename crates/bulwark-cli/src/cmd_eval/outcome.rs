//! What one task's run left behind, read from the home it ran in: the
//! final answer from the session's transcript, the tool calls and the
//! door's decisions from its audit records, the workspace's files.
//!
//! Calls come from the audit log, not from the run's terminal output: the
//! log is what the door decided, whichever driver or printer ran. The eval
//! home sets `[audit] record_arguments = true`, so each `tool_call` record
//! is preceded by an `arguments` record with the same digest, which gives
//! the path a call named.

use bulwark_audit::StoredRecord;
use bulwark_llm::{Message, Role};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The most files and bytes read back from a workspace after a run.
const MAX_SNAPSHOT_FILES: usize = 2_000;
const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024;

/// One tool call as the door recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Call {
    pub tool: String,
    /// The `path` argument as sent (`None`: the call had none).
    pub path: Option<String>,
    /// `allowed`, `denied`, `failed`, `approved`, ...
    pub decision: String,
    /// The door's reason class (`ok`, `path`, `capability`, ...).
    pub reason: String,
}

/// Everything the checks look at.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    pub session: Option<String>,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub seconds: f64,
    /// The text of the session's last assistant message.
    pub answer: String,
    pub calls: Vec<Call>,
    /// Workspace files after the run: relative path -> content (lossy
    /// UTF-8). Not serialized: the report carries the checks' verdicts.
    #[serde(skip)]
    pub files: BTreeMap<String, String>,
    /// The last lines of the run's stderr, for a failure's reason.
    pub stderr_tail: String,
}

/// The final answer: the text of the last assistant message of `messages`
/// (stored `content_json` rows, oldest first).
pub fn final_answer<'a>(messages: impl IntoIterator<Item = &'a str>) -> String {
    messages
        .into_iter()
        .filter_map(|json| serde_json::from_str::<Message>(json).ok())
        .filter(|m| m.role == Role::Assistant)
        .last()
        .map(|m| m.text().trim().to_owned())
        .unwrap_or_default()
}

/// The tool calls of one session's audit records (in order), each with the
/// path of its `arguments` record when there is one.
pub fn calls(records: &[StoredRecord]) -> Vec<Call> {
    // (tool, digest) -> the arguments of calls not yet matched, oldest first.
    let mut pending: BTreeMap<(String, String), Vec<Option<String>>> = BTreeMap::new();
    let mut out = Vec::new();
    for stored in records {
        let r = &stored.record;
        match r.action.as_str() {
            "arguments" => {
                let path = serde_json::from_str::<serde_json::Value>(&r.detail)
                    .ok()
                    .and_then(|v| v.get("path").and_then(|p| p.as_str()).map(str::to_owned));
                pending
                    .entry((r.tool.clone(), r.args_digest.clone()))
                    .or_default()
                    .push(path);
            }
            "tool_call" => {
                let key = (r.tool.clone(), r.args_digest.clone());
                let path = pending
                    .get_mut(&key)
                    .filter(|q| !q.is_empty())
                    .and_then(|q| q.remove(0));
                out.push(Call {
                    tool: r.tool.clone(),
                    path,
                    decision: r.decision.as_str().to_owned(),
                    reason: r.reason.to_string(),
                });
            }
            _ => {}
        }
    }
    out
}

/// The files under `root` (relative path -> content), bounded. Links are
/// recorded as present with empty content, never followed.
pub fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if files.len() >= MAX_SNAPSHOT_FILES {
                return files;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push((entry.path(), rel));
            } else if kind.is_file() {
                let content = read_bounded(&entry.path());
                files.insert(rel, content);
            } else {
                files.insert(rel, String::new());
            }
        }
    }
    files
}

fn read_bounded(path: &Path) -> String {
    use std::io::Read;
    let mut bytes = Vec::new();
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.take(MAX_SNAPSHOT_BYTES).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulwark_audit::{Action, AuditRecord, Decision, Event, Identity, Reason};

    fn record(seq: u64, action: Action, tool: &str, digest: &str, detail: &str) -> StoredRecord {
        let identity = Identity {
            session: "s".into(),
            agent: "a".into(),
            user: "local".into(),
        };
        StoredRecord {
            seq,
            record: AuditRecord::new(
                identity,
                Event::new(action, Decision::Denied, Reason::Path)
                    .tool(tool)
                    .digest(digest)
                    .detail(detail),
            ),
        }
    }

    #[test]
    fn calls_take_their_path_from_the_arguments_record_with_the_same_digest() {
        let records = vec![
            record(1, Action::SessionStart, "", "", "model x"),
            record(
                2,
                Action::Arguments,
                "file_read",
                "d1",
                r#"{"path":"../secret"}"#,
            ),
            record(3, Action::Arguments, "file_list", "d2", r#"{}"#),
            record(4, Action::ToolCall, "file_list", "d2", "refused"),
            record(5, Action::ToolCall, "file_read", "d1", "refused"),
            record(6, Action::ToolCall, "shell_exec", "d3", "not granted"),
        ];
        let calls = calls(&records);
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].tool, "file_list");
        assert_eq!(calls[0].path, None);
        assert_eq!(calls[1].path.as_deref(), Some("../secret"));
        assert_eq!(calls[1].decision, "denied");
        assert_eq!(calls[1].reason, "path");
        assert_eq!(calls[2].path, None, "no arguments record: no path");
    }

    #[test]
    fn the_answer_is_the_last_assistant_text() {
        let rows = [
            r#"{"role":"user","blocks":[{"type":"text","text":"q"}]}"#.to_owned(),
            serde_json::to_string(&Message::assistant_text("Let me look.")).unwrap(),
            r#"{"role":"user","blocks":[{"type":"tool_result","tool_use_id":"1","content":"x","is_error":false}]}"#.to_owned(),
            serde_json::to_string(&Message::assistant_text("  It is 4.50.\n")).unwrap(),
        ];
        assert_eq!(final_answer(rows.iter().map(String::as_str)), "It is 4.50.");
        assert_eq!(final_answer(rows.iter().take(1).map(String::as_str)), "");
    }

    #[test]
    fn a_snapshot_reads_nested_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("out/deep")).unwrap();
        std::fs::write(dir.path().join("a.txt"), "A").unwrap();
        std::fs::write(dir.path().join("out/deep/b.txt"), "B").unwrap();
        let files = snapshot(dir.path());
        assert_eq!(files.get("a.txt").map(String::as_str), Some("A"));
        assert_eq!(files.get("out/deep/b.txt").map(String::as_str), Some("B"));
        assert_eq!(files.len(), 2);
    }
}
