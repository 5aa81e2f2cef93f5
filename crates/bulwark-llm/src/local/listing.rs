//! A directory listing as the model reads it: one entry per line, its
//! name first, a folder marked by a trailing `/`, a size in words.
//!
//! Why: the kernel lists `File<TAB>490<TAB>2025-05.md`, and asked to list
//! the inspection notes, the 1.5B model answered "490, 419, 305,
//! 2025-05.md, …": the sizes read as entries. A note after the raw
//! listing with the names alone did not stop it (the raw lines still came
//! first), so the listing itself is rewritten. No count either: shown
//! "3 files", the model answered "list the design folder" with "3 files".
//! The names are file-system content, so they stay inside the kernel's
//! boundary tags; the program's words outside them are fixed.

use super::compare::boundary_tags;
use super::shape::unwrapped_lines;
use crate::{ChatRequest, PathKind};

/// At most this many entries are rewritten; a longer listing is left as
/// the kernel wrote it.
const MAX_ENTRIES: usize = 200;

/// The listing `wrapped` (the kernel's result, tags included) with each
/// `kind<TAB>size<TAB>name` line rewritten; None when some line is not
/// such an entry (then it is no listing, or one of a format this does
/// not know, and is shown unchanged).
pub(crate) fn readable_listing(wrapped: &str) -> Option<String> {
    let (open, close) = boundary_tags(wrapped)?;
    let mut entries: Vec<String> = Vec::new();
    for line in unwrapped_lines(wrapped) {
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = line.splitn(3, '\t');
        let (Some(kind), Some(size), Some(name)) = (fields.next(), fields.next(), fields.next())
        else {
            return None;
        };
        let bytes: u64 = size.parse().ok()?;
        if name.is_empty() {
            return None;
        }
        entries.push(match kind {
            "File" => format!("{name} ({bytes} bytes)"),
            "Dir" => format!("{name}/ (folder)"),
            "Symlink" => format!("{name} (link)"),
            "Other" => name.to_owned(),
            _ => return None,
        });
    }
    if entries.is_empty() || entries.len() > MAX_ENTRIES {
        return None;
    }
    Some(format!("{open}\n{}\n{close}", entries.join("\n")))
}

/// The tools that list a directory, once a file was read for a question
/// that asks for no listing: they are not offered to the model again.
///
/// Why: having read the file that answers "which dark-sky trip had the
/// darker sky?", the 1.5B model listed the workspace and answered with
/// the listing, the last result it saw. The grammar already names every
/// file it may read, so a listing after a read finds nothing new.
pub(crate) fn spent_listers(request: &ChatRequest) -> Vec<&str> {
    let Some(at) = super::latest_question(&request.messages) else {
        return Vec::new();
    };
    if super::file_words::asks_for_listing(&request.messages[at].text()) {
        return Vec::new();
    }
    let reads_a_file = |name: &str| {
        request
            .paths
            .for_tool(name)
            .any(|a| a.reads_only && a.kind == PathKind::File)
    };
    let mut read_ids: Vec<&str> = Vec::new();
    let mut read = false;
    for message in &request.messages[at + 1..] {
        read_ids.extend(
            message
                .tool_uses()
                .filter(|(_, name, _)| reads_a_file(name))
                .map(|(id, _, _)| id),
        );
        read |= message.ok_results().any(|(id, _)| read_ids.contains(&id));
    }
    if !read {
        return Vec::new();
    }
    request
        .paths
        .arguments
        .iter()
        .filter(|a| a.reads_only && a.kind == PathKind::Directory)
        .map(|a| a.tool.as_str())
        .filter(|tool| !reads_a_file(tool))
        .collect()
}

/// For a question that asks which file holds something ("which file has
/// the term dates, and when does the summer term start?"), the first
/// call: the workspace's root listed. Why: asked which file, the 1.5B
/// model read the one whose name matched and answered, having looked at
/// no other; a listing shows the user what was weighed, and is the step
/// such a question is checked for. `None` once any call was made for the
/// question, or when no tool lists the root with a path alone, or when
/// the driver will search for the question's words instead
/// (`search_first.rs`: it names no file): the search finds the file by
/// its content, where a listing first spent the call the search needed
/// ("which file mentions port 8088?" listed twice and read nothing).
pub(crate) fn which_file_listing(
    request: &ChatRequest,
    paths: &crate::PathChoices,
    max_calls: usize,
) -> Option<Vec<super::output::Call>> {
    let at = super::latest_question(&request.messages)?;
    if super::search_first::next_search(request, paths).is_some() {
        return None;
    }
    if max_calls == 0
        || request.messages[at + 1..]
            .iter()
            .any(|m| m.tool_uses().next().is_some())
        || !asks_which_file(&request.messages[at].text())
    {
        return None;
    }
    let lister = request.paths.arguments.iter().find(|a| {
        let root_listed = match &a.allowed {
            crate::AllowedPaths::Listed(paths) => paths.iter().any(String::is_empty),
            _ => false,
        };
        a.reads_only
            && a.kind == PathKind::Directory
            && root_listed
            && path_alone(request, &a.tool, &a.argument)
    })?;
    let mut arguments = serde_json::Map::new();
    arguments.insert(
        lister.argument.clone(),
        serde_json::Value::String(String::new()),
    );
    Some(vec![(lister.tool.clone(), arguments)])
}

/// For a question that asks what a folder holds ("what files have we got
/// in the orchard folder?", "which spreadsheets do we keep?", "what's in
/// the scripts folder?"), the first call: that folder listed when the
/// session can list a folder of that name, else the workspace's root.
///
/// Why: asked for "the orchard folder" (the workspace itself, called by
/// its name), the 1.5B model listed `notes`, a folder it could name, and
/// answered with its one file; asked which spreadsheets were kept, the
/// driver searched for "spreadsheet" and read a rules file. A listing is
/// what such a question is answered from. `None` once a call was made
/// for the question, when the question names a file the session can
/// read, or asks which files say something ("what files mention port
/// 8088?": a search finds that).
pub(crate) fn asked_listing(
    request: &ChatRequest,
    max_calls: usize,
) -> Option<Vec<super::output::Call>> {
    let at = super::latest_question(&request.messages)?;
    let question = request.messages[at].text();
    if max_calls == 0
        || request.messages[at + 1..]
            .iter()
            .any(|m| m.tool_uses().next().is_some())
        || !asks_for_listing(&question)
    {
        return None;
    }
    let listed = super::steering::listed_file_names(request);
    if listed
        .iter()
        .any(|p| super::steering::names_file(&question, p, &listed).is_some())
    {
        return None;
    }
    let (lister, folders) = request.paths.arguments.iter().find_map(|a| {
        let crate::AllowedPaths::Listed(folders) = &a.allowed else {
            return None;
        };
        (a.reads_only
            && a.kind == PathKind::Directory
            && folders.iter().any(String::is_empty)
            && path_alone(request, &a.tool, &a.argument))
        .then_some((a, folders))
    })?;
    let folder = named_folder(&question, folders).unwrap_or_default();
    let mut arguments = serde_json::Map::new();
    arguments.insert(lister.argument.clone(), serde_json::Value::String(folder));
    Some(vec![(lister.tool.clone(), arguments)])
}

/// Whether the latest question asks what a folder holds
/// ([`asked_listing`]) and a listing made for it came back: the next
/// turn answers. Why: shown the workspace's root for "what files have
/// we got in the orchard folder?", the 1.5B model listed `reports` too
/// and answered with that folder's two files alone.
pub(crate) fn listing_answered(request: &ChatRequest) -> bool {
    let Some(at) = super::latest_question(&request.messages) else {
        return false;
    };
    let question = request.messages[at].text();
    // A listing to be written somewhere, or a listing and something
    // more ("..., and how long is the README?"): not answered yet.
    if !asks_for_listing(&question)
        || asks_more(&question)
        || super::named_paths::asks_to_write(&question)
    {
        return false;
    }
    let listed = super::steering::listed_file_names(request);
    if listed
        .iter()
        .any(|p| super::steering::names_file(&question, p, &listed).is_some())
    {
        return false;
    }
    let since = &request.messages[at + 1..];
    let listers: Vec<&str> = request
        .paths
        .arguments
        .iter()
        .filter(|a| {
            a.reads_only
                && a.kind == PathKind::Directory
                && path_alone(request, &a.tool, &a.argument)
        })
        .map(|a| a.tool.as_str())
        .collect();
    let listing_ids: Vec<&str> = since
        .iter()
        .flat_map(|m| m.tool_uses())
        .filter(|(_, name, _)| listers.contains(name))
        .map(|(id, _, _)| id)
        .collect();
    since
        .iter()
        .flat_map(|m| m.ok_results())
        .any(|(id, _)| listing_ids.contains(&id))
}

/// Words that name what a listing shows, in the plural.
const LISTED_THINGS: &[&str] = &[
    "files",
    "spreadsheets",
    "sheets",
    "documents",
    "docs",
    "folders",
    "csvs",
];

/// Words that ask what files say, not which there are.
const ABOUT_CONTENT: &[&str] = &[
    "mention",
    "mentions",
    "mentioning",
    "contain",
    "contains",
    "containing",
    "say",
    "says",
    "about",
    "with",
    "hold",
    "holds",
    "where",
    "that",
    "talk",
    "refer",
    "refers",
    "changed",
    "biggest",
    "largest",
    "newest",
    "oldest",
    "latest",
];

/// Whether `question` asks what a folder holds: a question word and a
/// plural of what is listed followed by how they are kept ("which
/// *spreadsheets do we keep*", "what *files have we got*", "list the
/// *files in* the jobs folder"), or "what's in the ... folder"; nothing
/// asking what the files say ("which files *have the word* refund?",
/// "what documents *do I need*?").
fn asks_for_listing(question: &str) -> bool {
    let words = super::mentions::lowercase_words(&question.replace(['\'', '\u{2019}'], ""));
    let asking = words
        .iter()
        .take(3)
        .any(|w| matches!(w.as_str(), "what" | "whats" | "which" | "list" | "show"));
    let at = |i: usize| words.get(i).map(String::as_str);
    let pronoun = |w: Option<&str>| matches!(w, Some("we" | "i" | "you" | "they"));
    let keeping = |w: Option<&str>| {
        matches!(
            w,
            None | Some("have" | "got" | "keep" | "store" | "hold" | "own" | "save" | "share")
        )
    };
    let kept = |after: usize| match at(after) {
        None | Some("in" | "inside" | "here" | "there") => true,
        Some("are" | "is" | "were") => matches!(
            at(after + 1),
            None | Some("there" | "in" | "inside" | "here" | "kept" | "stored" | "saved")
        ),
        Some("do" | "does" | "did" | "have" | "has") => {
            pronoun(at(after + 1))
                && (keeping(at(after + 2))
                    || at(after + 2) == Some("have") && keeping(at(after + 3)))
        }
        Some(w) if pronoun(Some(w)) => keeping(at(after + 1)),
        Some(_) => false,
    };
    // "which *of the files* has the cheapest quote?" weighs them.
    let things = words.iter().enumerate().any(|(at, w)| {
        let of_them = at >= 1 && words[at - 1] == "of" || at >= 2 && words[at - 2] == "of";
        LISTED_THINGS.contains(&w.as_str()) && !of_them && kept(at + 1)
    });
    let in_folder = words.windows(2).enumerate().any(|(at, w)| {
        (w[0] == "whats" || w[0] == "is" && at >= 1 && words[at - 1] == "what")
            && w[1] == "in"
            && words
                .iter()
                .skip(at + 2)
                .take(3)
                .any(|w| matches!(w.as_str(), "folder" | "directory"))
    });
    asking && (things || in_folder) && !words.iter().any(|w| ABOUT_CONTENT.contains(&w.as_str()))
}

/// Whether `question` asks something after the listing: a second
/// question word past its first words ("what files are there, *and how*
/// long is the README?").
fn asks_more(question: &str) -> bool {
    super::mentions::lowercase_words(question)
        .iter()
        .skip(3)
        .any(|w| {
            matches!(
                w.as_str(),
                "how" | "when" | "who" | "why" | "where" | "whose"
            )
        })
}

/// The folder of `folders` (the session's listable directories) that
/// `question` names before "folder" or "directory" ("the *scripts*
/// folder"), by its last component; `None` for the workspace itself or
/// a name no such folder has ("the orchard folder": the workspace, as
/// its owner calls it).
fn named_folder(question: &str, folders: &[String]) -> Option<String> {
    let words = super::mentions::lowercase_words(question);
    // The word before "folder", after "called" or "named", or after "in
    // (the)": "the *scripts* folder", "the folder called *scripts*",
    // "which files are in *scripts*?".
    let mut named: Vec<&str> = Vec::new();
    for (at, word) in words.iter().enumerate() {
        let next = words.get(at + 1).map(String::as_str);
        if matches!(next, Some("folder" | "directory")) {
            named.push(word);
        }
        if matches!(word.as_str(), "called" | "named" | "in") {
            match next {
                Some("the" | "our" | "my") => named.extend(words.get(at + 2).map(String::as_str)),
                Some(w) => named.push(w),
                None => {}
            }
        }
    }
    let same = |a: &str, b: &str| {
        a == b || a.strip_suffix('s') == Some(b) || b.strip_suffix('s') == Some(a)
    };
    folders
        .iter()
        .filter(|f| !f.is_empty())
        .find(|f| {
            f.trim_end_matches('/')
                .rsplit('/')
                .next()
                .map(str::to_lowercase)
                .is_some_and(|last| named.iter().any(|w| same(w, &last)))
        })
        .cloned()
}

/// After a listing asked for files of one kind ("which *spreadsheets* do
/// we keep?"), the entries of that kind, so the answer need not sort
/// them: the 1.5B model, shown the whole listing, answers with all of
/// it or none. The names stay inside the listing's boundary tags.
pub(crate) fn kind_note(question: &str, wrapped: &str) -> Option<String> {
    if !asks_for_listing(question) {
        return None;
    }
    let words = super::mentions::lowercase_words(question);
    let (kind, extensions): (&str, &[&str]) = if words
        .iter()
        .any(|w| matches!(w.as_str(), "spreadsheet" | "spreadsheets" | "csv" | "csvs"))
    {
        ("spreadsheets", &["csv", "tsv", "xlsx", "xls", "ods"])
    } else if words.iter().any(|w| w == "markdown") {
        ("Markdown files", &["md", "markdown"])
    } else if words.windows(2).any(|w| w[0] == "text" && w[1] == "files") {
        ("text files", &["txt"])
    } else {
        return None;
    };
    let (open, close) = boundary_tags(wrapped)?;
    let names: Vec<&str> = unwrapped_lines(wrapped)
        .into_iter()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            let (Some("File"), Some(_), Some(name)) = (fields.next(), fields.next(), fields.next())
            else {
                return None;
            };
            let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
            extensions.contains(&extension.as_str()).then_some(name)
        })
        .collect();
    let found = if names.is_empty() {
        format!(
            "(The program's filter: none of the entries listed is one of the {kind} asked for.)"
        )
    } else {
        format!(
            "(The program's filter: the {kind} listed, by their extension:)\n{open}\n{}\n{close}",
            names.join("\n")
        )
    };
    Some(found)
}

/// "Which file has ...", "what document mentions ...".
fn asks_which_file(question: &str) -> bool {
    super::mentions::lowercase_words(question)
        .windows(2)
        .any(|pair| {
            matches!(pair[0].as_str(), "which" | "what")
                && matches!(pair[1].as_str(), "file" | "document")
        })
}

/// Whether `tool` takes `argument` and nothing else: a lister, not a
/// search (which needs a query) nor a reader.
fn path_alone(request: &ChatRequest, tool: &str, argument: &str) -> bool {
    request.tools.iter().any(|t| {
        let Some(props) = t
            .input_schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
        else {
            return false;
        };
        t.name == tool && props.len() == 1 && props.contains_key(argument)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::test_wrap::{CLOSE, OPEN, wrap};

    #[test]
    fn a_listing_is_shown_name_first_inside_the_tags() {
        let listed = wrap("File\t490\t2025-05.md\nFile\t419\t2025-06.md\nDir\t0\told\n");
        assert_eq!(
            readable_listing(&listed).as_deref(),
            Some(
                format!(
                    "{OPEN}\n2025-05.md (490 bytes)\n2025-06.md (419 bytes)\nold/ (folder)\n{CLOSE}"
                )
                .as_str()
            )
        );
    }

    #[test]
    fn anything_else_is_left_as_it_is() {
        assert_eq!(readable_listing(&wrap("(empty directory)")), None);
        assert_eq!(readable_listing(&wrap("name,size\na,1")), None);
        assert_eq!(readable_listing(&wrap("File\tbig\ta.txt")), None);
        assert_eq!(
            readable_listing(&wrap("File\t1\ta.txt\nnot an entry")),
            None
        );
        assert_eq!(readable_listing("File\t1\ta.txt"), None, "no tags");
    }

    #[test]
    fn a_listing_is_not_offered_after_a_read_unless_one_was_asked_for() {
        use crate::local::test_requests::{call, request};
        use crate::{Block, Message, Role};
        use serde_json::json;
        let read = |question: &str, ok: bool| {
            request(vec![
                Message::user_text(question),
                call("file_read", json!({"path": "notes.txt"})),
                Message {
                    role: Role::User,
                    blocks: vec![Block::ToolResult {
                        tool_use_id: "c-file_read".into(),
                        content: wrap("hello"),
                        is_error: !ok,
                        taint: Vec::new(),
                    }],
                },
            ])
        };
        assert_eq!(
            spent_listers(&read("Which trip had the darker sky?", true)),
            ["file_list"]
        );
        // Asked for a listing, before any read, or after a failed one:
        // still offered.
        assert!(spent_listers(&read("List the files, then read notes.txt", true)).is_empty());
        assert!(spent_listers(&read("Which trip had the darker sky?", false)).is_empty());
        assert!(
            spent_listers(&request(vec![Message::user_text("Which trip was darker?")])).is_empty()
        );
    }

    #[test]
    fn a_question_of_which_file_lists_the_workspace_first() {
        use crate::Message;
        use crate::local::test_requests::{call, request};
        use serde_json::json;
        let asked = |question: &str| {
            let asking = request(vec![Message::user_text(question)]);
            which_file_listing(&asking, &asking.paths, 3)
        };
        let listed = asked("Which file has the term dates, and when does the summer term start?")
            .expect("a listing");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].0, "file_list");
        assert_eq!(
            serde_json::Value::Object(listed[0].1.clone()),
            json!({"path": ""})
        );
        // Not asked which file; a call already made; no call left.
        assert_eq!(asked("When does the summer term start?"), None);
        assert_eq!(asked("What is in the file notes.txt?"), None);
        let after_a_call = request(vec![
            Message::user_text("Which file mentions port 8088?"),
            call("file_read", json!({"path": "notes.txt"})),
        ]);
        assert_eq!(
            which_file_listing(&after_a_call, &after_a_call.paths, 3),
            None
        );
        let question = request(vec![Message::user_text("Which file mentions port 8088?")]);
        assert_eq!(which_file_listing(&question, &question.paths, 0), None);
        assert!(which_file_listing(&question, &question.paths, 1).is_some());
        // With a search tool, a question naming no file is searched for
        // instead; one that names a file by its words is still listed.
        let mut searching = request(vec![Message::user_text("Which file mentions port 8088?")]);
        searching.tools.push(crate::local::test_requests::tool(
            "file_search",
            json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        ));
        searching
            .paths
            .arguments
            .push(crate::local::test_requests::listed(
                "file_search",
                PathKind::Directory,
                &[""],
            ));
        assert_eq!(which_file_listing(&searching, &searching.paths, 3), None);
        for choices in &mut searching.paths.arguments {
            if let (crate::AllowedPaths::Listed(paths), "file_read") =
                (&mut choices.allowed, choices.tool.as_str())
            {
                paths.push("term-dates.txt".into());
            }
        }
        searching.messages = vec![Message::user_text(
            "Which file has the term dates, and when does the summer term start?",
        )];
        assert!(which_file_listing(&searching, &searching.paths, 3).is_some());
    }

    #[test]
    fn a_question_of_what_a_folder_holds_lists_it_or_the_workspace() {
        use crate::Message;
        use crate::local::test_requests::{call, request};
        use serde_json::json;
        let listed = |question: &str| {
            asked_listing(&request(vec![Message::user_text(question)]), 3)
                .map(|calls| serde_json::Value::Object(calls[0].1.clone()))
        };
        // The workspace called by its owner's name is its root.
        assert_eq!(
            listed(
                "What files have we got in the orchard folder? Just the names, I don't need what's in them."
            ),
            Some(json!({"path": ""}))
        );
        assert_eq!(
            listed("Which spreadsheets do we keep for the tool shed?"),
            Some(json!({"path": ""}))
        );
        assert_eq!(
            listed("What's in the docs folder?"),
            Some(json!({"path": "docs"}))
        );
        assert_eq!(
            listed("List the files in the Docs directory."),
            Some(json!({"path": "docs"}))
        );
        assert_eq!(
            listed("Which files are in docs?"),
            Some(json!({"path": "docs"}))
        );
        assert_eq!(
            listed("What's in the folder called Docs?"),
            Some(json!({"path": "docs"}))
        );
        assert_eq!(
            listed("What's in the doc folder?"),
            Some(json!({"path": "docs"}))
        );
        // Questions about what files say, or weighing them, or naming one.
        for question in [
            "Which files have the word refund?",
            "What files use port 8088?",
            "What documents do I need for the visa appointment?",
            "What files do I need to edit to change the port?",
            "Which sheets of plywood are in stock?",
            "What is in the first-aid kit? The list is in the docs folder.",
            "What files mention port 8088?",
            "Which file has the term dates?",
            "Which of the files has the cheapest quote?",
            "What does notes.txt say?",
            "Which files are about the harvest?",
            "What is the newest of the documents?",
            "How much is a return ticket?",
        ] {
            assert_eq!(listed(question), None, "{question}");
        }
        // Not once a call was made, nor without a call left.
        let after_a_call = request(vec![
            Message::user_text("What files are there?"),
            call("file_list", json!({"path": ""})),
        ]);
        assert_eq!(asked_listing(&after_a_call, 3), None);
        // Its result back, the next turn answers; an error is no listing.
        let result = |is_error: bool| Message {
            role: crate::Role::User,
            blocks: vec![crate::Block::ToolResult {
                tool_use_id: "c-file_list".into(),
                content: "x".into(),
                is_error,
                taint: Vec::new(),
            }],
        };
        let mut answered = after_a_call.clone();
        answered.messages.push(result(false));
        assert!(listing_answered(&answered));
        let mut failed = after_a_call.clone();
        failed.messages.push(result(true));
        assert!(!listing_answered(&failed));
        // More asked than the listing, or the listing to be written.
        for question in [
            "What files are there, and how long is the guide?",
            "List the files into out/files.txt.",
        ] {
            let mut more = request(vec![
                Message::user_text(question),
                call("file_list", json!({"path": ""})),
            ]);
            more.messages.push(result(false));
            assert!(!listing_answered(&more), "{question}");
        }
        assert_eq!(
            asked_listing(
                &request(vec![Message::user_text("What files are there?")]),
                0
            ),
            None
        );
    }

    #[test]
    fn a_listing_asked_for_one_kind_gets_those_entries_inside_the_tags() {
        let wrapped = format!(
            "{OPEN}\nFile\t90\tloans.csv\nFile\t40\trules.md\nDir\t0\tarchive\nFile\t70\tinventory.CSV\n{CLOSE}"
        );
        let note = kind_note("Which spreadsheets do we keep?", &wrapped).expect("a note");
        let inside = note.split_once(OPEN).expect("open tag").1;
        assert!(
            inside.contains("loans.csv") && inside.contains("inventory.CSV"),
            "{note}"
        );
        assert!(
            !note.contains("rules.md") && !note.contains("archive"),
            "{note}"
        );
        let markdown = kind_note("What markdown files are there?", &wrapped).expect("a note");
        assert!(markdown.contains("rules.md") && !markdown.contains("loans.csv"));
        let none = kind_note("Which text files do we have?", &wrapped).expect("a note");
        assert!(none.contains("none of the entries"), "{none}");
        assert_eq!(kind_note("What files are there?", &wrapped), None);
    }

    proptest::proptest! {
        #[test]
        fn names_only_appear_inside_the_tags(name in "[^\t\n\r]{1,30}", size in 0u64..1_000_000) {
            let shown = readable_listing(&wrap(&format!("File\t{size}\t{name}\n"))).unwrap_or_default();
            proptest::prop_assert_eq!(shown, format!("{OPEN}\n{name} ({size} bytes)\n{CLOSE}"));
        }
    }
}
