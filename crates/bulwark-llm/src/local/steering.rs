//! How the local driver steers a small model's calls, on top of what the
//! grammar already makes well-formed: which of the session's path choices
//! a turn offers, and what the model is told about paths it cannot read.
//! Every rule only ever *narrows* what the session may do (the door still
//! decides every call), and each was kept because the eval (`bulwark
//! eval`) measured it: the 0.5B model otherwise repeated calls, listed
//! directories instead of reading the file it was asked about, and read
//! some other file when asked about one outside its workspace.

use super::output::Call;
use crate::{AllowedPaths, Block, ChatRequest, PathChoices, PathKind, Role};

/// The request's path choices without the paths already called since the
/// user's last message: a call to `file_list ""` or `file_read notes.txt`
/// that was made once is not offered again in the same answer. Small
/// models otherwise repeat a call instead of taking the next step (the
/// 0.5B model listed the workspace twice, then answered from the listing,
/// on most questions of the eval); the result is in the history already.
/// Leaving out an optional directory argument is the root, so once the
/// root was listed the argument must name another directory (see the
/// grammar), or the tool cannot be called again. Only tools whose one
/// argument is the path: a call with other arguments (an edit) may well
/// name the same file twice.
pub(crate) fn uncalled_paths(request: &ChatRequest) -> PathChoices {
    let mut choices = request.paths.clone();
    let path_only = |tool: &str, argument: &str| {
        request.tools.iter().any(|t| {
            t.name == tool
                && t.input_schema
                    .get("properties")
                    .and_then(serde_json::Value::as_object)
                    .is_some_and(|p| p.len() == 1 && p.contains_key(argument))
        })
    };
    let since_user_text = super::latest_question(&request.messages).map_or(0, |i| i + 1);
    for message in &request.messages[since_user_text..] {
        for (_, name, input) in message.tool_uses() {
            for choice in choices
                .arguments
                .iter_mut()
                .filter(|c| c.tool == name && path_only(&c.tool, &c.argument))
            {
                let called = match input.get(&choice.argument) {
                    Some(serde_json::Value::String(path)) => path.as_str(),
                    None if choice.kind == PathKind::Directory => "",
                    _ => continue,
                };
                if let AllowedPaths::Listed(list) = &mut choice.allowed {
                    list.retain(|p| p != called);
                }
            }
        }
    }
    choices
}

/// `calls` without a repeat of an earlier call of the same turn to a tool
/// that only reads (the same file read twice). Why: asked who the on-call
/// engineer is, the 1.5B model wrote `app.env` twice in one turn, then
/// `errors.log` twice, and ran out of calls before the runbook; the grammar
/// cannot forbid a repeat within a turn, and a repeated read tells nothing
/// new. A tool that can change something keeps every call it was given.
pub(crate) fn without_repeated_reads(request: &ChatRequest, calls: Vec<Call>) -> Vec<Call> {
    let reads_only = |tool: &str| {
        let mut choices = request.paths.for_tool(tool).peekable();
        choices.peek().is_some() && choices.all(|c| c.reads_only)
    };
    let mut kept: Vec<Call> = Vec::with_capacity(calls.len());
    for call in calls {
        if !(reads_only(&call.0) && kept.contains(&call)) {
            kept.push(call);
        }
    }
    kept
}

/// The calls that open an answer when the user's message names files the
/// session can read: one call to a *reader* (a read-only tool whose one
/// argument is a listed file path, like `file_read`) per named file, in
/// the order the message names them, at most `max_calls`. The driver makes
/// them itself, without running the model: `None` when there is nothing
/// to read (no file named, no reader, or not the first turn of the answer).
///
/// Why: asked "What is the default port in docs/install.md?", the 0.5B
/// model listed directories instead of reading the file it was told to
/// read, then answered from the listing ("4096"); asked to compare two
/// named files, both models often read one and answered anyway. A file
/// the user names is a file the answer needs, so reading it first is
/// never wrong, and only a tool that cannot change anything is ever
/// picked. The grammar would have forced these exact calls anyway (one
/// tool, listed paths); writing them directly also saves generating ~25
/// tokens per call, seconds on two cores. The budget still leaves a call
/// for what the question asks next (a write, another file), and the door
/// checks these calls like any other.
pub(crate) fn named_file_reads(
    request: &ChatRequest,
    paths: &PathChoices,
    max_calls: usize,
) -> Option<Vec<Call>> {
    let question = request.messages.last().filter(|m| m.role == Role::User)?;
    let text = user_text(question)?;
    let (tool, argument, listed) = reader(request, paths)?;
    let mut named: Vec<(usize, &String)> = listed
        .iter()
        .filter_map(|path| names_file(&text, path, listed).map(|at| (at, path)))
        .collect();
    named.sort();
    let calls: Vec<Call> = named
        .into_iter()
        .take(max_calls)
        .map(|(_, path)| read_call(tool, argument, path))
        .collect();
    (!calls.is_empty()).then_some(calls)
}

/// A later turn's read of the file the question names by its type ("tell
/// me what the CSV file is about"), when it is the only file of that type
/// and was not read yet. Not on the first turn: a question like "look at
/// your files and tell me what the CSV is about" asks for a listing
/// first, and the model makes that call; then the file the question means
/// is read, where the 1.5B model read `README.md` and answered from it.
pub(crate) fn typed_file_read(
    request: &ChatRequest,
    paths: &PathChoices,
    max_calls: usize,
) -> Option<Vec<Call>> {
    let (text, called) = question_and_whether_called(request)?;
    if !called || max_calls == 0 {
        return None;
    }
    let (tool, argument, listed) = reader(request, paths)?;
    let (_, path) = names_only_file_of_its_type(&text, listed)?;
    Some(vec![read_call(tool, argument, path)])
}

/// How many calls the model may make in this turn: the budget, less one on
/// the first turn of an answer whose question names a file by its type, so
/// that [`typed_file_read`] has a call left after the model's own first
/// step. Why: asked to "look at the files in your workspace and tell me
/// what the CSV file is about", the 1.5B model spent both calls in its
/// first turn (the listing, then `README.md`) and answered from the wrong
/// file.
pub(crate) fn model_calls_this_turn(
    request: &ChatRequest,
    paths: &PathChoices,
    max_calls: usize,
) -> usize {
    let typed_file_waits = question_and_whether_called(request).is_some_and(|(text, called)| {
        !called
            && reader(request, paths)
                .is_some_and(|(_, _, listed)| names_only_file_of_its_type(&text, listed).is_some())
    });
    if typed_file_waits && max_calls > 1 {
        max_calls - 1
    } else {
        max_calls
    }
}

/// The text of the user's latest question, and whether a call was made
/// since it.
fn question_and_whether_called(request: &ChatRequest) -> Option<(String, bool)> {
    let asked = super::latest_question(&request.messages)?;
    let called = request.messages[asked + 1..]
        .iter()
        .any(|m| m.tool_uses().next().is_some());
    Some((user_text(&request.messages[asked])?, called))
}

/// The text of a user message, `None` when it has none (tool results).
fn user_text(message: &crate::Message) -> Option<String> {
    let text: String = message
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    (message.role == Role::User && !text.is_empty()).then_some(text)
}

/// The first offered *reader*: a tool whose one argument is a listed file
/// path and which only reads it. Its name, argument and listed files.
pub(crate) fn reader<'a>(
    request: &'a ChatRequest,
    paths: &'a PathChoices,
) -> Option<(&'a str, &'a str, &'a [String])> {
    request.tools.iter().find_map(|tool| {
        let props = tool
            .input_schema
            .get("properties")
            .and_then(serde_json::Value::as_object)?;
        let argument = props.keys().next().filter(|_| props.len() == 1)?;
        let choice = paths.arguments.iter().find(|c| {
            c.tool == tool.name
                && &c.argument == argument
                && c.kind == PathKind::File
                && c.reads_only
        })?;
        match &choice.allowed {
            AllowedPaths::Listed(listed) => {
                Some((tool.name.as_str(), argument.as_str(), listed.as_slice()))
            }
            AllowedPaths::Relative => None,
        }
    })
}

fn read_call(tool: &str, argument: &str, path: &str) -> Call {
    let mut arguments = serde_json::Map::new();
    arguments.insert(
        argument.to_owned(),
        serde_json::Value::String(path.to_owned()),
    );
    (tool.to_owned(), arguments)
}

/// File types people name instead of the file ("what is the CSV file
/// about?"), as a word of the question and the extensions it stands for.
const TYPE_WORDS: &[(&str, &[&str])] = &[
    ("csv", &["csv"]),
    ("markdown", &["md", "markdown"]),
    ("json", &["json"]),
    ("yaml", &["yaml", "yml"]),
    ("toml", &["toml"]),
    ("ini", &["ini"]),
];

/// The file the question means by its type ("the CSV file", "the
/// Markdown"): when the question has the type as a word of its own and
/// exactly one listed file has that type. Where the word stands, for the
/// order of reads. Two CSV files: the question does not say which, and
/// nothing is read for it.
fn names_only_file_of_its_type<'a>(
    text: &str,
    listed: &'a [String],
) -> Option<(usize, &'a String)> {
    let lower = text.to_lowercase();
    let words: Vec<(usize, &str)> = lower
        .split(|c: char| !c.is_alphanumeric())
        .scan(0usize, |at, word| {
            let start = *at;
            *at += word.len() + 1;
            Some((start, word))
        })
        .filter(|(_, w)| !w.is_empty())
        .collect();
    let mut found = Vec::new();
    let mut types_named = 0;
    for (word, extensions) in TYPE_WORDS {
        let Some(&(at, _)) = words.iter().find(|(_, w)| w == word) else {
            continue;
        };
        types_named += 1;
        let mut of_type = listed.iter().filter(|p| {
            p.rsplit_once('.')
                .is_some_and(|(_, ext)| extensions.contains(&ext.to_lowercase().as_str()))
        });
        if let (Some(only), None) = (of_type.next(), of_type.next()) {
            found.push((at, only));
        }
    }
    // One type named, one file: anything else is not clear enough.
    match found.as_slice() {
        [one] if types_named == 1 => Some(*one),
        _ => None,
    }
}

/// Where `text` first names `path`: the whole path, or its file name when
/// no other listed path has the same one, standing as a word of its own.
pub(crate) fn names_file(text: &str, path: &str, listed: &[String]) -> Option<usize> {
    let base = path.rsplit('/').next().unwrap_or(path);
    let unique_base = base != path
        && listed
            .iter()
            .filter(|p| p.rsplit('/').next() == Some(base))
            .count()
            == 1;
    let word = |needle: &str| {
        if needle.is_empty() {
            return None;
        }
        text.match_indices(needle)
            .find(|(at, _)| {
                let before = text[..*at].chars().next_back();
                let after = text[at + needle.len()..].chars().next();
                let joins = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | '\\');
                !before.is_some_and(|c| joins(c) || c == '.')
                    && !after.is_some_and(|c| {
                        joins(c)
                            || (c == '.'
                                && text[at + needle.len() + 1..]
                                    .starts_with(|n: char| n.is_alphanumeric()))
                    })
            })
            .map(|(at, _)| at)
    };
    match (word(path), unique_base.then(|| word(base)).flatten()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whether `text` names a file at all: a word that reads as a path (in
/// the workspace or not), or the only listed file of a type ("the CSV").
pub(crate) fn names_some_file(text: &str, listed: &[String]) -> bool {
    text.split_whitespace().any(is_path_word) || names_only_file_of_its_type(text, listed).is_some()
}

/// Whether every word of `text` that reads as a path is one of the
/// `listed` files (the whole path, or its file name).
pub(crate) fn names_only_listed_files(text: &str, listed: &[String]) -> bool {
    text.split_whitespace().all(|raw| {
        let token = path_token(raw);
        path_like(token).is_none() || is_listed(token, listed)
    })
}

/// Whether `token` (as the user wrote it) is one of the `listed` paths.
fn is_listed(token: &str, listed: &[String]) -> bool {
    let local = token.trim_start_matches("./");
    !local.is_empty()
        && listed
            .iter()
            .any(|k| k == local || k.rsplit('/').next() == Some(local))
}

/// The only listed file of the type `text` names ("the CSV file").
pub(crate) fn named_by_type<'a>(text: &str, listed: &'a [String]) -> Option<&'a str> {
    names_only_file_of_its_type(text, listed).map(|(_, path)| path.as_str())
}

/// Whether a word of the user's text (as split on whitespace) reads as a
/// file path.
pub(crate) fn is_path_word(raw: &str) -> bool {
    path_like(path_token(raw)).is_some()
}

/// A word of the user's text without the quotes, brackets and sentence
/// punctuation around it, as a path would be written.
fn path_token(raw: &str) -> &str {
    raw.trim_matches(|c: char| "\"'`()[]{}<>,;:!?*".contains(c))
        .trim_end_matches('.')
}

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
    let quoted: Vec<String> = paths.iter().map(|p| format!("`{p}`")).collect();
    Some(format!(
        "(Note: {} is not a file you can read: it is outside your workspace or does not exist. Do not answer from another file.)",
        quoted.join(", ")
    ))
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
    let known: Vec<String> = request
        .paths
        .listed_files()
        .into_iter()
        .map(str::to_owned)
        .collect();
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
/// the turn must write one of them. Why: asked to write the customers
/// whose repair is done to `out/collect.txt`, the 1.5B model read the
/// table and then answered with the names in text, twice; no file was
/// written.
pub(crate) fn pending_write(request: &ChatRequest) -> Vec<String> {
    let targets = new_write_targets(request);
    let asks_to_write = super::latest_question(&request.messages).is_some_and(|i| {
        super::mentions::lowercase_words(&request.messages[i].text())
            .iter()
            .any(|w| WRITE_VERBS.contains(&w.as_str()))
    });
    if targets.is_empty() || !asks_to_write {
        return Vec::new();
    }
    let since = super::latest_question(&request.messages).map_or(0, |i| i + 1);
    let mut read = false;
    for message in &request.messages[since..] {
        for (_, name, _) in message.tool_uses() {
            let arguments = || request.paths.for_tool(name);
            if arguments().any(|a| !a.reads_only) {
                return Vec::new();
            }
            read |= arguments().any(|a| a.reads_only && a.kind == PathKind::File);
        }
    }
    if read { targets } else { Vec::new() }
}

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

/// Whether `token` reads as a file path, and if so whether it leaves the
/// workspace (absolute, home-relative, `..`, a scheme): `None` for words,
/// numbers, versions, e-mail addresses.
fn path_like(token: &str) -> Option<bool> {
    if token.is_empty() || token.contains('@') {
        return None;
    }
    let outside = token.starts_with('/')
        || token.starts_with('~')
        || token.starts_with('\\')
        || token.contains("://")
        || token.split(['/', '\\']).any(|seg| seg == "..");
    if outside {
        return Some(true);
    }
    let name = token.rsplit(['/', '\\']).next().unwrap_or(token);
    let (stem, extension) = name.rsplit_once('.')?;
    let is_file = !stem.is_empty()
        && (1..=5).contains(&extension.len())
        && extension.chars().all(|c| c.is_ascii_alphanumeric())
        && extension.chars().any(|c| c.is_ascii_alphabetic());
    is_file.then_some(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, PathArgumentChoices, ToolDef};
    use serde_json::json;

    fn tool(name: &str, schema: serde_json::Value) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: String::new(),
            input_schema: schema,
        }
    }

    fn tools() -> Vec<ToolDef> {
        vec![
            tool(
                "file_list",
                json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            ),
            tool(
                "file_read",
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ),
            tool(
                "file_edit",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"}}, "required": ["path", "old"]}),
            ),
        ]
    }

    fn listed(tool: &str, kind: PathKind, paths: &[&str]) -> PathArgumentChoices {
        PathArgumentChoices {
            tool: tool.into(),
            argument: "path".into(),
            kind,
            reads_only: tool != "file_edit",
            allowed: AllowedPaths::Listed(paths.iter().map(|p| (*p).to_owned()).collect()),
        }
    }

    fn paths() -> PathChoices {
        PathChoices {
            arguments: vec![
                listed("file_list", PathKind::Directory, &["", "docs"]),
                listed(
                    "file_read",
                    PathKind::File,
                    &["notes.txt", "docs/guide.md", "docs/notes.txt", "a.csv"],
                ),
                listed("file_edit", PathKind::File, &["notes.txt"]),
            ],
        }
    }

    fn request(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            tools: tools(),
            messages,
            paths: paths(),
            ..ChatRequest::default()
        }
    }

    fn call(name: &str, input: serde_json::Value) -> Message {
        Message {
            role: Role::Assistant,
            blocks: vec![Block::ToolUse {
                id: format!("c-{name}"),
                name: name.into(),
                input,
            }],
        }
    }

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
        // A new path named without a request to write, or a session that
        // cannot write, is no write.
        let asks = "Is there an out/names.txt? Look at a.csv.";
        assert!(pending_write(&writing(vec![Message::user_text(asks), read.clone()])).is_empty());
        assert!(pending_write(&request(vec![Message::user_text(ask), read])).is_empty());
    }

    fn listed_of<'a>(choices: &'a PathChoices, tool: &str) -> &'a [String] {
        match choices.for_argument(tool, "path") {
            Some(AllowedPaths::Listed(list)) => list,
            other => panic!("{tool}: {other:?}"),
        }
    }

    #[test]
    fn a_read_repeated_within_a_turn_is_made_once_an_edit_is_not() {
        let req = request(vec![Message::user_text("go")]);
        let args = |path: &str| {
            json!({"path": path})
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        let read = |p: &str| ("file_read".to_owned(), args(p));
        let edit = ("file_edit".to_owned(), args("notes.txt"));
        assert_eq!(
            without_repeated_reads(
                &req,
                vec![
                    read("a.csv"),
                    read("a.csv"),
                    read("notes.txt"),
                    edit.clone(),
                    edit.clone()
                ]
            ),
            vec![read("a.csv"), read("notes.txt"), edit.clone(), edit]
        );
        // A tool without path choices is no known reader: kept as called.
        let other = ("web_fetch".to_owned(), args("x"));
        assert_eq!(
            without_repeated_reads(&req, vec![other.clone(), other.clone()]).len(),
            2
        );
    }

    #[test]
    fn a_call_made_since_the_question_is_not_offered_again() {
        let fresh = request(vec![Message::user_text("go")]);
        assert_eq!(uncalled_paths(&fresh), paths());
        let after = request(vec![
            Message::user_text("go"),
            call("file_list", json!({})),
            call("file_read", json!({"path": "docs/guide.md"})),
            call("file_edit", json!({"path": "notes.txt", "old": "a"})),
        ]);
        let left = uncalled_paths(&after);
        // Leaving the path out listed the root.
        assert_eq!(listed_of(&left, "file_list"), ["docs"]);
        assert_eq!(
            listed_of(&left, "file_read"),
            ["notes.txt", "docs/notes.txt", "a.csv"]
        );
        // An edit has more than the path: the same file may be edited again.
        assert_eq!(listed_of(&left, "file_edit"), ["notes.txt"]);
        // A new question offers everything again.
        let mut next = after.messages.clone();
        next.push(Message::user_text("and now?"));
        assert_eq!(uncalled_paths(&request(next)), paths());
    }

    fn read_paths(calls: &[Call]) -> Vec<&str> {
        calls
            .iter()
            .map(|(tool, args)| {
                assert_eq!(tool, "file_read");
                assert_eq!(args.len(), 1, "{args:?}");
                args["path"].as_str().expect("a path")
            })
            .collect()
    }

    #[test]
    fn named_readable_files_are_read_first() {
        let ask = |q: &str| named_file_reads(&request(vec![Message::user_text(q)]), &paths(), 2);
        let calls = ask("What is the port in docs/guide.md?").expect("steered");
        assert_eq!(read_paths(&calls), ["docs/guide.md"]);
        // A unique file name stands for its path; an ambiguous one only
        // as the whole path. Files are read in the order they are named.
        let calls = ask("Summarize a.csv and guide.md.").expect("steered");
        assert_eq!(read_paths(&calls), ["a.csv", "docs/guide.md"]);
        let calls = ask("Compare guide.md with a.csv.").expect("steered");
        assert_eq!(read_paths(&calls), ["docs/guide.md", "a.csv"]);
        let calls = ask("What does notes.txt say?").expect("steered");
        assert_eq!(read_paths(&calls), ["notes.txt"]);
        // Never more than the calls left.
        let three = "Read notes.txt, a.csv and docs/guide.md.";
        let calls = named_file_reads(&request(vec![Message::user_text(three)]), &paths(), 2)
            .expect("steered");
        assert_eq!(read_paths(&calls), ["notes.txt", "a.csv"]);
        assert!(named_file_reads(&request(vec![Message::user_text(three)]), &paths(), 0).is_none());
        // Not a word of its own, not listed, or nothing named: no steering.
        for q in [
            "What files are there?",
            "Is there a xnotes.txt?",
            "What does notes.txt.bak say?",
            "Read /etc/passwd",
            "Read ../notes.txt2",
            "",
        ] {
            assert!(ask(q).is_none(), "{q}");
        }
        // Only on the first turn of an answer.
        let later = request(vec![
            Message::user_text("What does notes.txt say?"),
            call("file_list", json!({})),
        ]);
        assert!(named_file_reads(&later, &paths(), 2).is_none());
        // A tool with more than the path (file_edit) is never the reader.
        let mut no_reader = request(vec![Message::user_text("Fix notes.txt")]);
        no_reader.tools.retain(|t| t.name != "file_read");
        assert!(named_file_reads(&no_reader, &paths(), 2).is_none());
    }

    #[test]
    fn a_file_named_by_its_type_is_read_after_the_first_call() {
        let listed_first = |q: &str| {
            request(vec![
                Message::user_text(q),
                call("file_list", json!({})),
                Message {
                    role: Role::User,
                    blocks: vec![Block::ToolResult {
                        tool_use_id: "c-file_list".into(),
                        content: "a.csv\nnotes.txt".into(),
                        is_error: false,
                        taint: Vec::new(),
                    }],
                },
            ])
        };
        let typed = |q: &str| typed_file_read(&listed_first(q), &paths(), 1);
        let calls = typed("Look at your files: what is the CSV file about?").expect("steered");
        assert_eq!(read_paths(&calls), ["a.csv"]);
        let calls = typed("Summarize the markdown file.").expect("steered");
        assert_eq!(read_paths(&calls), ["docs/guide.md"]);
        // Not on the first turn (the model lists first if it wants to),
        // not with no call left, not once read.
        let first = request(vec![Message::user_text("What is the CSV file about?")]);
        assert!(typed_file_read(&first, &paths(), 2).is_none());
        assert!(typed_file_read(&listed_first("What is the CSV about?"), &paths(), 0).is_none());
        let mut read = listed_first("What is the CSV about?");
        read.messages
            .push(call("file_read", json!({"path": "a.csv"})));
        assert!(typed_file_read(&read, &uncalled_paths(&read), 1).is_none());
        // Two files of the type, two types, or not a word of its own.
        let mut two_csv = paths();
        two_csv.arguments[1].allowed = AllowedPaths::Listed(vec!["a.csv".into(), "b.csv".into()]);
        assert!(typed_file_read(&listed_first("What is the CSV about?"), &two_csv, 1).is_none());
        for q in [
            "Is there a csvfile?",
            "Write it as CSV and JSON.",
            "What files are there?",
        ] {
            assert!(typed(q).is_none(), "{q}");
        }
    }

    #[test]
    fn a_call_is_kept_for_the_typed_file_on_the_first_turn() {
        let first = |q: &str| request(vec![Message::user_text(q)]);
        let q = "Look at your files and tell me what the CSV file is about.";
        // The model may take one step of its own; the other is the file's.
        assert_eq!(model_calls_this_turn(&first(q), &paths(), 2), 1);
        assert_eq!(model_calls_this_turn(&first(q), &paths(), 3), 2);
        // A single call is never taken away.
        assert_eq!(model_calls_this_turn(&first(q), &paths(), 1), 1);
        // No type named, or not clear which file: the whole budget.
        assert_eq!(
            model_calls_this_turn(&first("What files are there?"), &paths(), 2),
            2
        );
        let mut two_csv = paths();
        two_csv.arguments[1].allowed = AllowedPaths::Listed(vec!["a.csv".into(), "b.csv".into()]);
        assert_eq!(model_calls_this_turn(&first(q), &two_csv, 2), 2);
        // After the first call, the typed read itself is what is left.
        let later = request(vec![Message::user_text(q), call("file_list", json!({}))]);
        assert_eq!(model_calls_this_turn(&later, &paths(), 1), 1);
    }

    #[test]
    fn only_a_read_only_tool_is_ever_called_for_the_model() {
        // A one-argument tool that changes the file (a delete) is listed
        // first and names the same files: it is never picked.
        let mut req = request(vec![Message::user_text("What does notes.txt say?")]);
        req.tools.insert(
            0,
            tool(
                "file_delete",
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ),
        );
        let mut choices = paths();
        let mut delete = listed("file_delete", PathKind::File, &["notes.txt"]);
        delete.reads_only = false;
        choices.arguments.insert(0, delete);
        let calls = named_file_reads(&req, &choices, 2).expect("steered");
        assert_eq!(read_paths(&calls), ["notes.txt"]);
        // Without a read-only reader, nothing is called.
        for c in &mut choices.arguments {
            c.reads_only = false;
        }
        assert!(named_file_reads(&req, &choices, 2).is_none());
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
        assert!(note("What does budget.xlsx say?").is_some_and(|n| n.contains("`budget.xlsx`")));
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

    #[test]
    fn names_file_needs_word_boundaries() {
        let listed = vec!["notes.txt".to_owned(), "docs/guide.md".to_owned()];
        assert_eq!(names_file("see notes.txt.", "notes.txt", &listed), Some(4));
        assert_eq!(names_file("(notes.txt)", "notes.txt", &listed), Some(1));
        assert_eq!(names_file("`guide.md`?", "docs/guide.md", &listed), Some(1));
        assert_eq!(
            names_file("guide.md, docs/guide.md", "docs/guide.md", &listed),
            Some(0)
        );
        assert_eq!(names_file("my-notes.txt", "notes.txt", &listed), None);
        assert_eq!(names_file("old/notes.txt", "notes.txt", &listed), None);
        assert_eq!(names_file("notes.txts", "notes.txt", &listed), None);
    }
}
