//! What the program writes after the result of a file read, for the
//! local model: the notes of `shape.rs` (counts), `mentions.rs` (the
//! question's words a named file lacks) and `compare.rs` (two named files
//! side by side). Each is computed from the conversation's history only,
//! so every turn renders an earlier result with the same notes and the KV
//! cache stays valid.
//!
//! Why only after reads of files the question *names* (for the words and
//! the comparison): after a read the question did not ask for, the 1.5B
//! model took "the question's words are not in this file" as an answer
//! about the file it was asked about, and said no engineer lives in Lagos
//! while the named file lists one.

use std::collections::HashMap;

use serde_json::Value;

use super::compare::{Read, comparison_note};
use super::mentions::mentions_note;
use super::shape::shape_note;
use super::steering::names_file;
use crate::{Block, ChatRequest, Role};

/// The reads of a request and the comparisons between them.
pub(crate) struct ReadNotes<'a> {
    /// Path read, by the id of the call that read it.
    reads: HashMap<&'a str, &'a str>,
    /// Every path read, whose words are not the question's subject.
    paths: Vec<&'a str>,
    /// The comparison after the second of two named files, by call id.
    compared: HashMap<&'a str, String>,
}

impl<'a> ReadNotes<'a> {
    pub(crate) fn new(request: &'a ChatRequest) -> Self {
        let reads = file_reads(request);
        let compared = comparisons(request, &reads);
        let mut paths: Vec<&str> = reads.values().copied().collect();
        paths.sort_unstable();
        paths.dedup();
        Self {
            reads,
            paths,
            compared,
        }
    }

    /// The notes after a successful result of call `id` (empty when the
    /// call was no file read), each on its own line, for `question` (the
    /// user's text the call answers).
    pub(crate) fn after(&self, id: &str, question: &str, content: &str) -> String {
        let Some(&path) = self.reads.get(id) else {
            return String::new();
        };
        let named = names_file(question, path, &[]).is_some();
        let notes = [
            shape_note(path, question, content),
            named
                .then(|| mentions_note(question, &self.paths, content))
                .flatten(),
            self.compared.get(id).cloned(),
        ];
        notes
            .into_iter()
            .flatten()
            .map(|n| format!("\n{n}"))
            .collect()
    }
}

/// The ids of the calls that read one file (a read-only tool's file
/// argument, as the request's path choices describe it). Their results
/// get the program's notes.
fn file_reads(request: &ChatRequest) -> HashMap<&str, &str> {
    let mut reads = HashMap::new();
    for message in &request.messages {
        for (id, name, input) in message.tool_uses() {
            let reads_a_file = request
                .paths
                .for_tool(name)
                .filter(|a| a.reads_only && a.kind == crate::PathKind::File)
                .find_map(|a| input.get(&a.argument).and_then(Value::as_str));
            if let Some(path) = reads_a_file {
                reads.insert(id, path);
            }
        }
    }
    reads
}

/// The program's comparison ([`comparison_note`]) for the second of two
/// different files read for one question that names both, by the id of
/// the call that read the second. Only from the history, so every turn
/// renders it the same way.
fn comparisons<'a>(
    request: &'a ChatRequest,
    reads: &HashMap<&'a str, &'a str>,
) -> HashMap<&'a str, String> {
    let mut notes = HashMap::new();
    let mut question = String::new();
    let mut read: Vec<Read<'a>> = Vec::new();
    for message in request.messages.iter().filter(|m| m.role == Role::User) {
        for block in &message.blocks {
            let Block::ToolResult {
                tool_use_id,
                content,
                is_error: false,
                ..
            } = block
            else {
                continue;
            };
            let Some(&path) = reads.get(tool_use_id.as_str()) else {
                continue;
            };
            let this = Read {
                path,
                wrapped: content,
            };
            if let [first] = read.as_slice() {
                let named = |p: &str| super::steering::names_file(&question, p, &[]).is_some();
                if first.path != path
                    && named(first.path)
                    && named(path)
                    && let Some(note) = comparison_note(*first, this)
                {
                    notes.insert(tool_use_id.as_str(), note);
                }
            }
            read.push(this);
        }
        let text = message.text();
        if !text.is_empty() {
            question = text;
            read.clear();
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AllowedPaths, Message, PathArgumentChoices, PathChoices, PathKind};
    use serde_json::json;

    use crate::local::test_wrap::wrap;

    /// The question, one assistant turn reading `files`, their results.
    fn request(question: &str, files: &[(&str, &str)]) -> ChatRequest {
        let calls = files
            .iter()
            .enumerate()
            .map(|(i, (path, _))| Block::ToolUse {
                id: i.to_string(),
                name: "file_read".into(),
                input: json!({ "path": path }),
            })
            .collect();
        let results = files
            .iter()
            .enumerate()
            .map(|(i, (_, body))| Block::ToolResult {
                tool_use_id: i.to_string(),
                content: wrap(body),
                is_error: false,
                taint: vec![],
            })
            .collect();
        ChatRequest {
            model: "m".into(),
            system: String::new(),
            messages: vec![
                Message::user_text(question),
                Message {
                    role: Role::Assistant,
                    blocks: calls,
                },
                Message {
                    role: Role::User,
                    blocks: results,
                },
            ],
            tools: vec![],
            max_tokens: 10,
            paths: PathChoices {
                arguments: vec![PathArgumentChoices {
                    tool: "file_read".into(),
                    argument: "path".into(),
                    kind: PathKind::File,
                    reads_only: true,
                    allowed: AllowedPaths::Relative,
                }],
            },
        }
    }

    fn after(request: &ChatRequest, id: &str) -> String {
        let notes = ReadNotes::new(request);
        let Some(Block::ToolResult { content, .. }) = request.messages[2]
            .blocks
            .iter()
            .find(|b| matches!(b, Block::ToolResult { tool_use_id, .. } if tool_use_id == id))
        else {
            panic!("no result {id}");
        };
        notes.after(id, &request.messages[0].text(), content)
    }

    #[test]
    fn missing_words_are_noted_only_for_the_file_the_question_names() {
        let req = request(
            "Which engineer in contacts.csv lives in Lagos?",
            &[
                ("contacts.csv", "name,role,city\nBen,engineer,Lagos"),
                ("notes.txt", "Meetings on Thursdays."),
            ],
        );
        assert_eq!(after(&req, "0"), "");
        assert_eq!(after(&req, "1"), "", "notes.txt was not asked about");
        let req = request(
            "What is the price of the purple widget in prices.csv?",
            &[("prices.csv", "item,colour,price\nwidget,blue,4.50")],
        );
        assert_eq!(
            after(&req, "0"),
            "\n(Searched by the program: the question's word \"purple\" is not in this file.)"
        );
    }

    #[test]
    fn two_named_files_are_compared_after_the_second() {
        let req = request(
            "Do old.ini and new.ini use the same port?",
            &[
                ("old.ini", "port = 80\nworkers = 4"),
                ("new.ini", "port = 80\nworkers = 8"),
            ],
        );
        assert_eq!(after(&req, "0"), "");
        let second = after(&req, "1");
        assert!(second.starts_with("\n(Compared by the program"), "{second}");
        assert!(
            second.contains("workers = 4 \u{2192} workers = 8"),
            "{second}"
        );
        // A file read that the question does not name is compared with
        // nothing.
        let req = request(
            "What port does old.ini use?",
            &[("old.ini", "port = 80"), ("new.ini", "port = 81")],
        );
        assert_eq!(after(&req, "1"), "");
    }

    #[test]
    fn a_call_that_read_no_file_gets_no_note() {
        let req = request("How many items?", &[("todo.md", "- a\n- b")]);
        assert_eq!(
            ReadNotes::new(&req).after("9", "How many items?", &wrap("- a\n- b")),
            ""
        );
        assert_eq!(
            after(&req, "0"),
            "\n(Counted by the program: 2 list items.)"
        );
    }
}
