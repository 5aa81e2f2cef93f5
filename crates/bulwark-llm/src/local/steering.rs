//! How the local driver steers a small model's calls, on top of what the
//! grammar already makes well-formed: which of the session's path choices
//! a turn offers, and which file a turn reads for the model (paths the
//! question names that the session cannot read, or wants written, are
//! in `named_paths`).
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
    // A path the question names that is no listed file is one to write
    // ("save them to out/trial.txt"); one it cannot reach is said so
    // instead (`named_paths`), and nothing is read for it.
    let only_new_paths = named_by_type(&text, listed).is_none()
        && super::named_paths::unreachable_paths(request).is_empty();
    // Two files weighed against each other are read together
    // (`choice_files.rs`), not the one a word names.
    if named.is_empty()
        && only_new_paths
        && (max_calls < 2 || super::choice_files::weighed_files(&text, listed).is_none())
    {
        named.extend(super::file_words::named_by_words(&text, listed).map(|path| (0, path)));
    }
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
pub(crate) fn question_and_whether_called(request: &ChatRequest) -> Option<(String, bool)> {
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

/// The session's listed files as owned names, the form [`names_file`]
/// and [`is_listed`] weigh a question against (one copy per turn, where
/// three rules each made their own).
pub(crate) fn listed_file_names(request: &ChatRequest) -> Vec<String> {
    request
        .paths
        .listed_files()
        .into_iter()
        .map(str::to_owned)
        .collect()
}

pub(crate) fn read_call(tool: &str, argument: &str, path: &str) -> Call {
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
        (a, b) => a.or(b).or_else(|| month_named(text, path, listed)),
    }
}

/// Where `text` names the month a file is named for ("in *January*" for
/// `donations/jan.csv`, "March" for `march.md`), when no other listed
/// file is named for that month. Why: asked which donor gave in February
/// but not in January, the searches for the months found nothing (the
/// rows say `2025-01-06`) and the 1.5B model read the opening hours.
fn month_named(text: &str, path: &str, listed: &[String]) -> Option<usize> {
    let month_of_file = |p: &str| {
        let base = p.rsplit('/').next().unwrap_or(p);
        let stem = base.rsplit_once('.').map_or(base, |(stem, _)| stem);
        let stem = stem.to_lowercase();
        let stem = if stem == "sept" {
            "sep".to_owned()
        } else {
            stem
        };
        match stem.as_str() {
            "mar" => Some(3),
            "may" => Some(5),
            _ => super::mentions::month_of(&stem),
        }
    };
    let month = month_of_file(path)?;
    if listed
        .iter()
        .filter(|p| month_of_file(p) == Some(month))
        .count()
        > 1
    {
        return None;
    }
    const PRONOUNS: &[&str] = &["i", "we", "you", "he", "she", "they", "it"];
    let words: Vec<(usize, String)> = text
        .split_inclusive(|c: char| !c.is_alphanumeric())
        .scan(0, |at, word| {
            let start = *at;
            *at += word.len();
            let bare = word.trim_end_matches(|c: char| !c.is_alphanumeric());
            Some((start, bare.to_lowercase()))
        })
        .filter(|(_, w)| !w.is_empty())
        .collect();
    words.iter().enumerate().find_map(|(n, (at, word))| {
        // The month's whole name ("Jan" may be a person); "may" beside a
        // pronoun is the verb ("may I", "you may").
        let whole = super::mentions::MONTHS.get(month as usize - 1) == Some(&word.as_str());
        let beside_pronoun = [n.checked_sub(1), Some(n + 1)]
            .into_iter()
            .flatten()
            .filter_map(|i| words.get(i))
            .any(|(_, w)| PRONOUNS.contains(&w.as_str()));
        (whole && !(word == "may" && beside_pronoun)).then_some(*at)
    })
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
pub(crate) fn is_listed(token: &str, listed: &[String]) -> bool {
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
pub(crate) fn path_token(raw: &str) -> &str {
    raw.trim_matches(|c: char| "\"'`()[]{}<>,;:!?*".contains(c))
        .trim_end_matches('.')
}

/// Whether `token` reads as a file path, and if so whether it leaves the
/// workspace (absolute, home-relative, `..`, a scheme): `None` for words,
/// numbers, versions, e-mail addresses.
pub(crate) fn path_like(token: &str) -> Option<bool> {
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
    use crate::Message;
    use crate::local::test_requests::*;
    use serde_json::json;

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

    #[test]
    fn a_month_names_the_one_file_named_for_it() {
        let listed = vec![
            "donations/jan.csv".to_owned(),
            "donations/feb.csv".to_owned(),
            "may.md".to_owned(),
            "stock.csv".to_owned(),
        ];
        let ask = "Which donor gave in February but not in January?";
        assert_eq!(names_file(ask, "donations/feb.csv", &listed), Some(20));
        assert_eq!(names_file(ask, "donations/jan.csv", &listed), Some(40));
        assert_eq!(names_file(ask, "stock.csv", &listed), None);
        assert_eq!(
            names_file("What happened in May?", "may.md", &listed),
            Some(17)
        );
        // "may" the verb names no month; nor does "Jan" the name.
        assert_eq!(names_file("May I see the notes?", "may.md", &listed), None);
        assert_eq!(
            names_file("What did Jan give?", "donations/jan.csv", &listed),
            None
        );
        // Two files for one month: neither is named by it.
        let twice = vec!["2024/jan.csv".to_owned(), "2025/jan.csv".to_owned()];
        assert_eq!(names_file("in January", "2024/jan.csv", &twice), None);
    }
}
