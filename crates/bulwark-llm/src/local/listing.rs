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

    proptest::proptest! {
        #[test]
        fn names_only_appear_inside_the_tags(name in "[^\t\n\r]{1,30}", size in 0u64..1_000_000) {
            let shown = readable_listing(&wrap(&format!("File\t{size}\t{name}\n"))).unwrap_or_default();
            proptest::prop_assert_eq!(shown, format!("{OPEN}\n{name} ({size} bytes)\n{CLOSE}"));
        }
    }
}
