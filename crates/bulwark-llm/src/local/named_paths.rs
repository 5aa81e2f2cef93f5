//! Paths the user's question names, seen from the session's grants: the
//! ones it cannot read are named to the model as unreachable, and new
//! files it asked to have written become the only targets of a write
//! turn. Both only narrow what the model may say or call; the door still
//! decides every call.

use super::steering::{is_listed, path_like, path_token};
use crate::{AllowedPaths, Block, ChatRequest, PathChoices, PathKind};

/// Paths the user's latest message names that the session cannot read
/// (outside the workspace, or not there), said to the model after the
/// message: `None` when there are none.
///
/// Why: the grammar cannot write `/etc/passwd` or `../secret.txt`, so a
/// model asked about one used to read some other file and present it as
/// the one asked for ("The first line of /etc/passwd is name,role,..."):
/// the path grammar made it lie. Told plainly, it says it cannot. When the
/// session can write files, a relative name that does not exist yet may be
/// what the user wants written, and is not mentioned.
pub(crate) fn unreachable_note(request: &ChatRequest) -> Option<String> {
    let paths = unreachable_paths(request);
    if paths.is_empty() {
        return None;
    }
    let quoted = |outside: bool| -> Vec<String> {
        paths
            .iter()
            .filter(|p| path_like(p) == Some(outside))
            .map(|p| format!("`{p}`"))
            .collect()
    };
    let (beyond, missing) = (quoted(true), quoted(false));
    let mut parts = Vec::new();
    if !beyond.is_empty() {
        parts.push(format!(
            "{} is outside your workspace, and none of your tools can read anything outside it.",
            beyond.join(", ")
        ));
    }
    if !missing.is_empty() {
        parts.push(format!(
            "{} does not exist in your workspace.",
            missing.join(", ")
        ));
    }
    let reason = if beyond.is_empty() {
        "it does not exist"
    } else {
        "it is outside my workspace"
    };
    let first = beyond
        .first()
        .or(missing.first())
        .cloned()
        .unwrap_or_default();
    Some(format!(
        "(Note: {} Do not call a tool and do not answer from another file. Tell the user you cannot read it and why, as in: \"I can't read {first}: {reason}.\")",
        parts.join(" ")
    ))
}

/// The reads of the paths outside the workspace that the user's latest
/// message names, before anything else is called for it: the door
/// refuses them, and the refusal is in the audit and the transcript.
///
/// Why: the driver judging a path "outside" is a reading of its text;
/// the door is the one that decides (a grant may reach past the
/// workspace). Before, nothing was called, so nothing showed that the
/// boundary had been tried and held, and the model, told only by the
/// driver's note, copied the note's words as its answer.
pub(crate) fn outside_reads(
    request: &ChatRequest,
    paths: &crate::PathChoices,
    max_calls: usize,
) -> Option<Vec<super::output::Call>> {
    let (question, called) = super::steering::question_and_whether_called(request)?;
    if called || max_calls == 0 || names_a_readable_file(request, &question) {
        return None;
    }
    let (tool, argument, _) = super::steering::reader(request, paths)?;
    let calls: Vec<super::output::Call> = unreachable_paths(request)
        .into_iter()
        .filter(|p| path_like(p) == Some(true))
        .take(max_calls)
        .map(|p| super::steering::read_call(tool, argument, &p))
        .collect();
    (!calls.is_empty()).then_some(calls)
}

/// Whether `question` names a file the session can read: then that file
/// is read as ever ("compare ../x.txt with notes.txt"), and the note says
/// the other cannot be.
fn names_a_readable_file(request: &ChatRequest, question: &str) -> bool {
    let listed = super::steering::listed_file_names(request);
    listed
        .iter()
        .any(|p| super::steering::names_file(question, p, &listed).is_some())
}

/// Whether the reads of [`outside_reads`] are all that was called for the
/// latest question, each was refused, and it names no file the session
/// can read: the next turn answers (the refusal and the note say why),
/// where the model had gone on to read some other file and answer from
/// it. A read that succeeded (a grant that reaches there) is answered
/// from as any other.
pub(crate) fn outside_tried(request: &ChatRequest) -> bool {
    let Some(asked) = super::latest_question(&request.messages) else {
        return false;
    };
    let outside: Vec<String> = unreachable_paths(request)
        .into_iter()
        .filter(|p| path_like(p) == Some(true))
        .collect();
    let since = &request.messages[asked + 1..];
    let uses: Vec<(&str, &serde_json::Value)> = since
        .iter()
        .flat_map(|m| m.tool_uses())
        .map(|(id, _, input)| (id, input))
        .collect();
    if outside.is_empty() || uses.is_empty() {
        return false;
    }
    let refused = |id: &str| {
        since.iter().flat_map(|m| &m.blocks).any(|b| {
            matches!(b, Block::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == id)
        })
    };
    let question = request.messages[asked].text();
    !names_a_readable_file(request, &question)
        && uses.iter().all(|(id, input)| {
            refused(id)
                && input.as_object().is_some_and(|o| {
                    o.values()
                        .any(|v| v.as_str().is_some_and(|v| outside.iter().any(|p| p == v)))
                })
        })
}

/// At most this many paths in the note.
const MAX_UNREACHABLE: usize = 3;

/// The paths the user's latest message names that do not exist yet and
/// that a write tool of the session may create: files the user wants
/// written ("put the names of the unpaid clients into out/reminders.txt").
pub(crate) fn new_write_targets(request: &ChatRequest) -> Vec<String> {
    if writers(request).next().is_none() {
        return Vec::new();
    }
    let Some(question) = super::latest_question(&request.messages).map(|i| &request.messages[i])
    else {
        return Vec::new();
    };
    let known = super::steering::listed_file_names(request);
    let mut targets: Vec<String> = Vec::new();
    for raw in question.text().split_whitespace() {
        let token = path_token(raw).trim_start_matches("./");
        if path_like(token) != Some(false) || is_listed(token, &known) {
            continue;
        }
        if !targets.iter().any(|t| t == token) {
            targets.push(token.to_owned());
        }
    }
    targets
}

/// The path arguments that write a file the session may create: not
/// read-only, any relative path ([`AllowedPaths::Relative`]).
fn writers(request: &ChatRequest) -> impl Iterator<Item = &crate::PathArgumentChoices> {
    request.paths.arguments.iter().filter(|a| {
        !a.reads_only && a.kind == PathKind::File && a.allowed == AllowedPaths::Relative
    })
}

/// The files the user asked to have written, when the session has read a
/// file since the question and has not yet called a tool that writes:
/// the turn must write one of them; or at once, when the request says
/// what to write. Why: asked to write the customers
/// whose repair is done to `out/collect.txt`, the 1.5B model read the
/// table and then answered with the names in text, twice; no file was
/// written.
pub(crate) fn pending_write(request: &ChatRequest) -> Vec<String> {
    match write_request(request) {
        // A request that says what to write needs nothing read first
        // (`own_content.rs`).
        Some(asked) if asked.read || super::own_content::carries_own_content(&asked.question) => {
            asked.targets
        }
        _ => Vec::new(),
    }
}

/// Whether the user asked for new files written, nothing is read yet,
/// and the request does not say what to write: the turn may not write
/// yet. Why: asked to list in `out/new-members.txt` everyone who joined
/// in 2025, the 1.5B model wrote three invented names at once, to a path
/// of its own.
pub(crate) fn write_waits_for_a_read(request: &ChatRequest) -> bool {
    write_request(request).is_some_and(|asked| {
        !asked.read && !super::own_content::carries_own_content(&asked.question)
    })
}

/// The tools that write the files a session may create.
pub(crate) fn writer_tools(request: &ChatRequest) -> Vec<&str> {
    writers(request).map(|a| a.tool.as_str()).collect()
}

/// A request to write new files, not yet written.
struct WriteRequest {
    targets: Vec<String>,
    question: String,
    /// A file was read since the question.
    read: bool,
}

fn write_request(request: &ChatRequest) -> Option<WriteRequest> {
    let targets = new_write_targets(request);
    let at = super::latest_question(&request.messages)?;
    let question = request.messages[at].text();
    if targets.is_empty() || !asks_to_write(&question) {
        return None;
    }
    let mut read = false;
    for message in &request.messages[at + 1..] {
        for (_, name, _) in message.tool_uses() {
            let arguments = || request.paths.for_tool(name);
            if arguments().any(|a| !a.reads_only) {
                return None;
            }
            read |= arguments().any(|a| a.reads_only && a.kind == PathKind::File);
        }
    }
    Some(WriteRequest {
        targets,
        question,
        read,
    })
}

/// Whether `question` has a verb of a request to write ([`WRITE_VERBS`]).
pub(crate) fn asks_to_write(question: &str) -> bool {
    super::mentions::lowercase_words(question)
        .iter()
        .any(|w| WRITE_VERBS.contains(&w.as_str()))
        || super::read_only::opening_verb(question)
            .is_some_and(|verb| OPENING_WRITE_VERBS.contains(&verb.as_str()))
}

/// Verbs that ask to write only when they open the request ("*leave* a
/// note in handover.txt"): elsewhere they are nouns ("days of *leave*",
/// `app.log`, a *note*).
const OPENING_WRITE_VERBS: &[&str] = &["leave", "note", "log", "draft"];

/// The tools that change files, when the latest question says not to
/// ("just tell me, *don't change any files*"): they are not offered.
///
/// Why: told exactly that, with a grant to write everywhere, the 1.5B
/// model wrote its answer to a new file. The door would allow the
/// write; the user forbade it, so the grammar does not offer it. Not a
/// security control: the grants are.
pub(crate) fn forbidden_changers(request: &ChatRequest) -> Vec<&str> {
    let Some(at) = super::latest_question(&request.messages) else {
        return Vec::new();
    };
    if !forbids_changes(&request.messages[at].text()) {
        return Vec::new();
    }
    let mut tools: Vec<&str> = Vec::new();
    for argument in request.paths.arguments.iter().filter(|a| !a.reads_only) {
        if !tools.contains(&argument.tool.as_str()) {
            tools.push(argument.tool.as_str());
        }
    }
    tools
}

/// Whether `question` says not to change anything: a negation ("don't",
/// "do not", "never", "without") right before a verb that changes files
/// ("don't *forget* to save it" asks for a change).
pub(crate) fn forbids_changes(question: &str) -> bool {
    let words = super::mentions::lowercase_words(&question.replace(['\'', '\u{2019}'], ""));
    words.iter().enumerate().any(|(at, w)| {
        let negation = matches!(w.as_str(), "dont" | "never" | "without")
            || w == "not" && at.checked_sub(1).is_some_and(|b| words[b] == "do");
        negation && words.get(at + 1).is_some_and(|v| is_change_verb(v))
    })
}

/// Whether `word` (lowercase) is a verb that changes files.
pub(crate) fn is_change_verb(word: &str) -> bool {
    CHANGE_VERBS.contains(&word)
}

/// Verbs that change files, as a request forbids them.
const CHANGE_VERBS: &[&str] = &[
    "change",
    "changing",
    "write",
    "writing",
    "edit",
    "editing",
    "modify",
    "modifying",
    "touch",
    "touching",
    "save",
    "saving",
    "create",
    "creating",
    "delete",
    "deleting",
    "update",
    "updating",
    "alter",
    "altering",
];

/// Verbs of a request to have a file written: a new path named in a
/// question without one ("is there an old/notes.txt?") is no such request.
const WRITE_VERBS: &[&str] = &[
    "write", "save", "put", "create", "store", "copy", "append", "add", "export", "record", "make",
    "generate", "dump", "output", "produce", "jot", "list",
];

/// The tools and path choices of a turn that must write one of
/// `targets`: only the tools that create files, their path limited to
/// the targets.
pub(crate) fn write_turn(
    request: &ChatRequest,
    targets: &[String],
) -> (Vec<crate::ToolDef>, PathChoices) {
    let writing: Vec<&crate::PathArgumentChoices> = writers(request).collect();
    let tools = request
        .tools
        .iter()
        .filter(|t| writing.iter().any(|a| a.tool == t.name))
        .cloned()
        .collect();
    let mut paths = request.paths.clone();
    for argument in &mut paths.arguments {
        if writing
            .iter()
            .any(|w| w.tool == argument.tool && w.argument == argument.argument)
        {
            argument.allowed = AllowedPaths::Listed(targets.to_vec());
        }
    }
    (tools, paths)
}

pub(crate) fn unreachable_paths(request: &ChatRequest) -> Vec<String> {
    if request.paths.is_empty() {
        return Vec::new();
    }
    let Some(question) = super::latest_question(&request.messages).map(|i| &request.messages[i])
    else {
        return Vec::new();
    };
    let mut known: Vec<&str> = Vec::new();
    let mut can_create = false;
    for choice in &request.paths.arguments {
        match &choice.allowed {
            AllowedPaths::Listed(list) => known.extend(list.iter().map(String::as_str)),
            AllowedPaths::Relative => can_create = true,
        }
    }
    let mut found = Vec::new();
    for block in &question.blocks {
        let Block::Text { text } = block else {
            continue;
        };
        for raw in text.split_whitespace() {
            let token = path_token(raw);
            let Some(outside) = path_like(token) else {
                continue;
            };
            let local = token.trim_start_matches("./");
            let reachable = known
                .iter()
                .any(|k| *k == local || k.rsplit('/').next() == Some(local) && !local.is_empty());
            if reachable || (!outside && can_create) || found.iter().any(|f| f == token) {
                continue;
            }
            found.push(token.to_owned());
            if found.len() == MAX_UNREACHABLE {
                return found;
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_note_left_in_a_file_is_a_request_to_write() {
        for asked in [
            "Leave a note in handover.txt for the next shift: Night Shift is cancelled.",
            "Note in log.txt that the boiler was serviced.",
            "Draft a reply in out/reply.txt.",
        ] {
            assert!(super::asks_to_write(asked), "{asked}");
        }
        for asked in [
            "When does Ana go on holiday?",
            "What does app.log say about the crash?",
            "How many days of leave does Zara have left?",
            "Is there a note about the boiler in notes.txt?",
        ] {
            assert!(!super::asks_to_write(asked), "{asked}");
        }
    }

    #[test]
    fn a_request_not_to_change_files_withholds_exactly_the_tools_that_change_them() {
        use crate::Message;
        use crate::local::test_requests::request;
        let forbidding = request(vec![Message::user_text(
            "Does notes.txt match a.csv? Just tell me, don't change any files.",
        )]);
        // `file_edit` is the one tool whose path argument is not read-only.
        assert_eq!(super::forbidden_changers(&forbidding), ["file_edit"]);
        let asking = request(vec![Message::user_text("Fix the typo in notes.txt.")]);
        assert!(super::forbidden_changers(&asking).is_empty());
        assert!(super::forbidden_changers(&request(Vec::new())).is_empty());
    }

    #[test]
    fn a_request_not_to_change_files_is_told_from_one_that_asks_for_a_change() {
        for forbidding in [
            "Does it match? Just tell me, don't change any files.",
            "Check the prices but do not edit anything.",
            "Answer without writing a file.",
            "Don\u{2019}t touch the files, what is the ABV?",
        ] {
            assert!(super::forbids_changes(forbidding), "{forbidding}");
        }
        for allowing in [
            "Write the total to out/total.txt.",
            "Don't forget to save it to out/a.txt.",
            "Update the price; do not skip any row.",
        ] {
            assert!(!super::forbids_changes(allowing), "{allowing}");
        }
    }

    use super::*;
    use crate::local::test_requests::{call, listed_of, read_paths, request, tool};
    use crate::{Message, PathArgumentChoices};
    use serde_json::json;

    #[test]
    fn a_file_asked_for_is_written_after_a_read() {
        let writing = |messages: Vec<Message>| {
            let mut req = request(messages);
            req.tools.push(tool(
                "file_write",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}),
            ));
            req.paths.arguments.push(PathArgumentChoices {
                tool: "file_write".into(),
                argument: "path".into(),
                kind: PathKind::File,
                reads_only: false,
                allowed: AllowedPaths::Relative,
            });
            req
        };
        let ask = "Write the names in a.csv to out/names.txt, one per line.";
        let read = call("file_read", json!({"path": "a.csv"}));
        // Nothing read yet: the model picks its first step.
        assert!(pending_write(&writing(vec![Message::user_text(ask)])).is_empty());
        let after_read = writing(vec![Message::user_text(ask), read.clone()]);
        assert_eq!(pending_write(&after_read), ["out/names.txt"]);
        let (tools, paths) = write_turn(&after_read, &["out/names.txt".to_owned()]);
        assert_eq!(
            tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["file_write"]
        );
        assert_eq!(listed_of(&paths, "file_write"), ["out/names.txt"]);
        // Written: nothing is pending.
        let written = call(
            "file_write",
            json!({"path": "out/names.txt", "content": "x"}),
        );
        assert!(
            pending_write(&writing(vec![
                Message::user_text(ask),
                read.clone(),
                written
            ]))
            .is_empty()
        );
        // Until something is read, the write tools are held back; a
        // request that says what to write, or a read, releases them.
        assert!(write_waits_for_a_read(&writing(vec![Message::user_text(
            ask
        )])));
        assert_eq!(writer_tools(&writing(vec![])), ["file_write"]);
        assert!(!write_waits_for_a_read(&writing(vec![
            Message::user_text(ask),
            read.clone()
        ])));
        assert!(!write_waits_for_a_read(&writing(vec![Message::user_text(
            "Write 'book airport taxi' to out/todo.txt."
        )])));
        assert!(!write_waits_for_a_read(&writing(vec![Message::user_text(
            "What is in a.csv?"
        )])));
        // A new path named without a request to write, or a session that
        // cannot write, is no write.
        let asks = "Is there an out/names.txt? Look at a.csv.";
        assert!(pending_write(&writing(vec![Message::user_text(asks), read.clone()])).is_empty());
        assert!(pending_write(&request(vec![Message::user_text(ask), read])).is_empty());
        // A request that says what to write is written at once, and only
        // where the session can write.
        let own = "Write 'book airport taxi' to out/todo.txt.";
        assert_eq!(
            pending_write(&writing(vec![Message::user_text(own)])),
            ["out/todo.txt"]
        );
        assert!(pending_write(&request(vec![Message::user_text(own)])).is_empty());
        // Its text is no way out: a path outside the workspace is never a
        // write target, quoted content or not; the model is told it cannot.
        for outside in [
            "Write 'pwned' to ../outside.txt",
            "Save a file /etc/cron.d/job that says: hello",
            "Write the word hi to ~/.bashrc",
        ] {
            let req = writing(vec![Message::user_text(outside)]);
            assert!(pending_write(&req).is_empty(), "{outside}");
            assert!(unreachable_note(&req).is_some(), "{outside}");
        }
    }

    #[test]
    fn an_outside_path_is_tried_at_the_door_once_then_answered() {
        let reads = |messages: Vec<Message>| {
            let req = request(messages);
            outside_reads(&req, &req.paths, 2).map(|calls| {
                read_paths(&calls)
                    .iter()
                    .map(|p| (*p).to_owned())
                    .collect::<Vec<_>>()
            })
        };
        let pin = "The PIN is in ../gate-pins.txt, just outside your folder. What is it?";
        assert_eq!(
            reads(vec![Message::user_text(pin)]),
            Some(vec!["../gate-pins.txt".to_owned()])
        );
        assert_eq!(
            reads(vec![Message::user_text(
                "Open ~/Documents/bank.txt and /etc/passwd"
            )]),
            Some(vec![
                "~/Documents/bank.txt".to_owned(),
                "/etc/passwd".to_owned()
            ])
        );
        // A missing name inside the workspace is no door's question, a
        // readable one is read as ever, and nothing is tried twice.
        assert_eq!(
            reads(vec![Message::user_text("What does budget.xlsx say?")]),
            None
        );
        assert_eq!(
            reads(vec![Message::user_text("What does notes.txt say?")]),
            None
        );
        let tried = call("file_read", json!({"path": "../gate-pins.txt"}));
        assert_eq!(reads(vec![Message::user_text(pin), tried.clone()]), None);
        let result = |is_error: bool| Message {
            role: crate::Role::User,
            blocks: vec![Block::ToolResult {
                tool_use_id: "c-file_read".into(),
                content: "path refused".into(),
                is_error,
                taint: Vec::new(),
            }],
        };
        // Tried and refused: the next turn answers; not when the read
        // succeeded (a grant reached there), nor before the result, nor
        // when something else was called.
        assert!(outside_tried(&request(vec![
            Message::user_text(pin),
            tried.clone(),
            result(true)
        ])));
        assert!(!outside_tried(&request(vec![
            Message::user_text(pin),
            tried.clone(),
            result(false)
        ])));
        assert!(!outside_tried(&request(vec![
            Message::user_text(pin),
            tried.clone()
        ])));
        assert!(!outside_tried(&request(vec![Message::user_text(pin)])));
        assert!(!outside_tried(&request(vec![
            Message::user_text(pin),
            call("file_read", json!({"path": "a.csv"})),
            result(true)
        ])));
        // A question that also names a readable file: that file is read
        // as ever, the outside one is only said to be unreadable.
        let both = "Compare ../gate-pins.txt with notes.txt";
        assert_eq!(reads(vec![Message::user_text(both)]), None);
        assert!(!outside_tried(&request(vec![
            Message::user_text(both),
            call("file_read", json!({"path": "../gate-pins.txt"})),
            result(true)
        ])));
        // The note gives the words of an answer, not an instruction the
        // model could copy as one.
        let note = unreachable_note(&request(vec![Message::user_text(pin)])).unwrap_or_default();
        assert!(
            note.contains("\"I can't read `../gate-pins.txt`: it is outside my workspace.\""),
            "{note}"
        );
    }

    #[test]
    fn paths_the_session_cannot_read_are_named_to_the_model() {
        let note = |q: &str| unreachable_note(&request(vec![Message::user_text(q)]));
        let paths = |q: &str| unreachable_paths(&request(vec![Message::user_text(q)]));
        assert_eq!(paths("Show me /etc/passwd."), ["/etc/passwd"]);
        assert_eq!(paths("What is in ../secret.txt?"), ["../secret.txt"]);
        assert_eq!(
            paths("Read ~/.ssh/id_rsa and file:///etc/hosts"),
            ["~/.ssh/id_rsa", "file:///etc/hosts"]
        );
        assert_eq!(paths("What does budget.xlsx say?"), ["budget.xlsx"]);
        assert!(
            note("What does budget.xlsx say?")
                .is_some_and(|n| n.contains("`budget.xlsx` does not exist"))
        );
        // Outside and missing are told apart: "outside" is why the user
        // gets no answer, and the model says that rather than "no file".
        let both = note("Compare ../payroll.txt with budget.xlsx").unwrap_or_default();
        assert!(
            both.contains("`../payroll.txt` is outside your workspace"),
            "{both}"
        );
        assert!(both.contains("`budget.xlsx` does not exist"), "{both}");
        assert!(!both.contains("`budget.xlsx` is outside"), "{both}");
        // What the session can read, and what is not a path, is not named.
        for q in [
            "What does notes.txt say?",
            "Summarize guide.md",
            "What is in docs/guide.md and ./a.csv?",
            "Is the price 4.50 or version 2.3.0? Mail chen@example.org.",
            "What files are there?",
        ] {
            assert!(paths(q).is_empty(), "{q}: {:?}", paths(q));
            assert!(note(q).is_none());
        }
        // A session that can create files may be asked to write a new
        // one; outside paths are still named.
        let mut writer = request(vec![Message::user_text(
            "Write hi to out/new.txt, not /tmp/x.txt",
        )]);
        writer.paths.arguments.push(PathArgumentChoices {
            tool: "file_write".into(),
            argument: "path".into(),
            kind: PathKind::File,
            reads_only: false,
            allowed: AllowedPaths::Relative,
        });
        assert_eq!(unreachable_paths(&writer), ["/tmp/x.txt"]);
        // No path choices (another driver's request, no file tools): nothing.
        let mut bare = request(vec![Message::user_text("Show me /etc/passwd")]);
        bare.paths = PathChoices::default();
        assert!(unreachable_paths(&bare).is_empty());
    }
}
