//! "Add The Safekeep to suggestions.md": a write that adds to a file the
//! session has read keeps what the file held. The turn that writes it
//! may only call the write tool on that file, and the grammar makes the
//! new content begin with the old.
//!
//! Why: asked to add a book to a list of three, the 1.5B model read the
//! list, then called `file_write` with the new line alone; the three
//! suggestions were gone. A request to add is not one to replace, and a
//! tool that replaces whole files is what the session had. Not a
//! security control: the grants decide whether the file may be written
//! at all, and the door checks the call as any other.

use super::grammar::ArgumentPrefix;
use super::steering::names_file;
use crate::{AllowedPaths, ChatRequest, PathArgumentChoices, PathChoices, PathKind, ToolDef};
use serde_json::Value;

/// Files larger than this are not rewritten whole to add to them: the
/// read may have been cut, and the model would copy too much.
const MAX_APPENDED_BYTES: usize = 4096;

/// The turn that adds to a file: its one tool, its path, and the prefix
/// of its content argument.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AppendTurn {
    pub(crate) tool: ToolDef,
    pub(crate) paths: PathChoices,
    pub(crate) prefix: ArgumentPrefix,
}

/// The turn that adds to a file, when the latest question opens with
/// "add", "append" or "insert" ([`super::read_only::opening_verb`]),
/// names a file the session read since and may write with a tool that
/// takes the whole content, and nothing has written since the question.
pub(crate) fn append_turn(request: &ChatRequest) -> Option<AppendTurn> {
    let at = super::latest_question(&request.messages)?;
    let question = request.messages[at].text();
    let verb = super::read_only::opening_verb(&question)?;
    if !matches!(verb.as_str(), "add" | "append" | "insert") {
        return None;
    }
    let since = &request.messages[at + 1..];
    let wrote = since.iter().any(|m| {
        m.tool_uses()
            .any(|(_, name, _)| request.paths.for_tool(name).any(|a| !a.reads_only))
    });
    if wrote {
        return None;
    }
    // The files read since the question, by call id.
    let mut read: Vec<(&str, &str)> = Vec::new();
    for message in since {
        for (id, name, input) in message.tool_uses() {
            let path = request
                .paths
                .for_tool(name)
                .filter(|a| a.reads_only && a.kind == PathKind::File)
                .find_map(|a| input.get(&a.argument).and_then(Value::as_str));
            if let Some(path) = path {
                read.push((id, path));
            }
        }
    }
    let listed = super::steering::listed_file_names(request);
    for message in since {
        for (id, content) in message.ok_results() {
            let Some(&(_, path)) = read.iter().find(|(called, _)| *called == id) else {
                continue;
            };
            if names_file(&question, path, &listed).is_none() {
                continue;
            }
            let Some(held) = file_text(content) else {
                continue;
            };
            if let Some(turn) = writer_of(request, path, held) {
                return Some(turn);
            }
        }
    }
    None
}

/// The file's text inside the kernel's boundary tags, when it is whole
/// and small ([`MAX_APPENDED_BYTES`]), ending with a line break.
fn file_text(wrapped: &str) -> Option<String> {
    let (_, inside) = wrapped.split_once('\n')?;
    let end = inside.rfind("\n</untrusted_")?;
    let text = &inside[..end];
    let tagged = text.to_ascii_lowercase().contains("untrusted_");
    if tagged || text.len() > MAX_APPENDED_BYTES || !wrapped.starts_with("<untrusted_") {
        return None;
    }
    let mut text = text.to_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    // A list goes on as a list: its last item's marker starts the new
    // line. Without it the 1.5B model wrote "Joyce's suggestion" under
    // the list and stopped.
    let marker = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .and_then(|last| ["- ", "* ", "+ "].into_iter().find(|m| last.starts_with(m)));
    if let Some(marker) = marker {
        text.push_str(marker);
    }
    Some(text)
}

/// A tool that writes `path` whole: a file path argument that may name
/// it, a string `content` argument, and no other required argument.
fn writer_of(request: &ChatRequest, path: &str, held: String) -> Option<AppendTurn> {
    request.paths.arguments.iter().find_map(|argument| {
        let may_write = !argument.reads_only
            && argument.kind == PathKind::File
            && match &argument.allowed {
                AllowedPaths::Listed(paths) => paths.iter().any(|p| p == path),
                AllowedPaths::Relative => true,
            };
        if !may_write {
            return None;
        }
        let tool = request.tools.iter().find(|t| t.name == argument.tool)?;
        let properties = tool.input_schema.get("properties")?.as_object()?;
        let content_is_text = properties
            .get("content")?
            .get("type")
            .and_then(Value::as_str)
            == Some("string");
        let others_optional = tool
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .is_none_or(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .all(|n| n == argument.argument || n == "content")
            });
        (content_is_text && others_optional).then(|| AppendTurn {
            tool: tool.clone(),
            paths: PathChoices {
                arguments: vec![PathArgumentChoices {
                    allowed: AllowedPaths::Listed(vec![path.to_owned()]),
                    ..argument.clone()
                }],
            },
            prefix: ArgumentPrefix {
                tool: tool.name.clone(),
                argument: "content".into(),
                prefix: held.clone(),
            },
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::test_requests::{call, listed, request, tool};
    use crate::{Block, Message, Role};
    use serde_json::json;

    const LIST: &str = "# Suggestions\n\n- Intermezzo (Dev)\n- Orbital (Malik)\n";

    fn session(question: &str, writable: &[&str]) -> ChatRequest {
        let mut req = request(vec![Message::user_text(question)]);
        req.tools = vec![
            tool(
                "file_read",
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ),
            tool(
                "file_write",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
            ),
        ];
        req.paths = PathChoices {
            arguments: vec![
                listed("file_read", PathKind::File, &["suggestions.md", "list.csv"]),
                PathArgumentChoices {
                    reads_only: false,
                    ..listed("file_write", PathKind::File, writable)
                },
            ],
        };
        req
    }

    fn after_reading(mut req: ChatRequest, path: &str, text: &str) -> ChatRequest {
        req.messages
            .push(call("file_read", json!({ "path": path })));
        req.messages.push(Message {
            role: Role::User,
            blocks: vec![Block::ToolResult {
                tool_use_id: "c-file_read".into(),
                content: format!(
                    "<untrusted_0123456789abcdef tool=\"file_read\" source=\"workspace\">\n{text}\n</untrusted_0123456789abcdef>"
                ),
                is_error: false,
                taint: Vec::new(),
            }],
        });
        req
    }

    #[test]
    fn adding_to_a_read_file_keeps_what_it_held() {
        let asked = session(
            "Add The Safekeep to suggestions.md, it's Joyce's suggestion.",
            &["suggestions.md"],
        );
        // Nothing read yet: no such turn.
        assert_eq!(append_turn(&asked), None);
        let turn = append_turn(&after_reading(asked, "suggestions.md", LIST)).expect("a turn");
        assert_eq!(turn.tool.name, "file_write");
        // The list goes on with its marker.
        assert_eq!(turn.prefix.prefix, format!("{LIST}- "));
        assert_eq!(turn.prefix.argument, "content");
        assert_eq!(
            turn.paths.arguments[0].allowed,
            AllowedPaths::Listed(vec!["suggestions.md".into()])
        );
        let grammar = crate::local::grammar::call_grammar_with_prefix(
            std::slice::from_ref(&turn.tool),
            &turn.paths,
            1,
            &turn.prefix,
        )
        .expect("a grammar");
        assert!(
            grammar.contains(r##""\"# Suggestions\\n\\n- Intermezzo (Dev)\\n- Orbital (Malik)\\n- " [^"\\\x00-\x20] json-char* "\"""##),
            "{grammar}"
        );
        assert!(!grammar.contains("text ::="), "{grammar}");
    }

    #[test]
    fn no_append_turn_for_a_question_another_file_or_no_writer() {
        let read = |question: &str, writable: &[&str]| {
            append_turn(&after_reading(
                session(question, writable),
                "suggestions.md",
                LIST,
            ))
        };
        assert_eq!(
            read("What did Dev add to suggestions.md?", &["suggestions.md"]),
            None
        );
        assert_eq!(read("Add Orbital to list.csv", &["suggestions.md"]), None);
        assert_eq!(read("Add The Safekeep to suggestions.md", &[]), None);
        let tagged = append_turn(&after_reading(
            session("Add X to suggestions.md", &["suggestions.md"]),
            "suggestions.md",
            "a </untrusted_x> b",
        ));
        assert_eq!(tagged, None);
        let big = "x\n".repeat(MAX_APPENDED_BYTES);
        let too_big = append_turn(&after_reading(
            session("Add X to suggestions.md", &["suggestions.md"]),
            "suggestions.md",
            &big,
        ));
        assert_eq!(too_big, None);
    }
}
