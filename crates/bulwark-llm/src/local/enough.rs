//! When the calls made for a question are all it needs, so the next turn
//! is the answer and not another call: every file the question names was
//! read, or a listing was asked for and made. (A search that found what
//! it looked for is the third such case, in `search.rs`.)
//!
//! Why: the budget leaves a second call for what a question may need next
//! (the other file of a comparison, a write after a read), and with that
//! call left the 1.5B model often spent it on a file nobody asked about:
//! asked which bin the fuses are in according to `inventory.csv`, it read
//! `staff.csv` too and answered "bin A1"; asked to list its files, it read
//! `README.md` and answered with its text. A question that asks for a
//! change ("save", "copy", "change"...) keeps its call for the change.

use std::collections::{HashMap, HashSet};

use super::mentions::{Numbers, lowercase_words, subject_words};
use super::steering::{named_by_type, names_file, names_only_listed_files};
use crate::{Block, ChatRequest, PathKind, Role};

/// Verbs of a question that asks for something to be changed or made.
const CHANGE_VERBS: &[&str] = &[
    "add", "append", "change", "copy", "create", "delete", "edit", "fix", "insert", "make", "move",
    "put", "record", "remove", "rename", "replace", "save", "set", "store", "update", "write",
];

/// Words of a question that asks for a listing ("list the files you can
/// see", "what files are in your workspace?").
const LISTING_WORDS: &[&str] = &[
    "list",
    "files",
    "folder",
    "folders",
    "directory",
    "directories",
    "contents",
];

/// What a question needs read before its answer.
enum Need<'a> {
    /// These files, all of them.
    Files(Vec<&'a str>),
    /// A directory listing.
    Listing,
    /// Not known: the model decides.
    Unknown,
}

/// The ids of the calls after whose result the question they answer has
/// all it needs. Only from the history, so every turn decides the same.
pub(crate) fn answered_after<'a>(
    request: &'a ChatRequest,
    reads: &HashMap<&'a str, &'a str>,
    listed: &'a [String],
) -> HashSet<&'a str> {
    let listings: HashSet<&str> = request
        .messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .filter(|(_, name, _)| {
            request
                .paths
                .for_tool(name)
                .any(|a| a.reads_only && a.kind == PathKind::Directory)
        })
        .map(|(id, _, _)| id)
        .collect();
    let mut answered = HashSet::new();
    let mut need = Need::Unknown;
    for message in request.messages.iter().filter(|m| m.role == Role::User) {
        for block in &message.blocks {
            let Block::ToolResult {
                tool_use_id,
                is_error: false,
                ..
            } = block
            else {
                continue;
            };
            let id = tool_use_id.as_str();
            let done = match &mut need {
                Need::Files(files) => {
                    let before = files.len();
                    files.retain(|f| reads.get(id) != Some(f));
                    files.is_empty() && before > 0
                }
                Need::Listing => listings.contains(id),
                Need::Unknown => false,
            };
            if done {
                answered.insert(id);
                need = Need::Unknown;
            }
        }
        let text = message.text();
        if !text.is_empty() {
            need = needs(&text, listed);
        }
    }
    answered
}

/// What `question` needs, given the session's readable files.
fn needs<'a>(question: &str, listed: &'a [String]) -> Need<'a> {
    let words = lowercase_words(question);
    if words.iter().any(|w| CHANGE_VERBS.contains(&w.as_str())) {
        return Need::Unknown;
    }
    let mut named: Vec<&str> = listed
        .iter()
        .filter(|p| names_file(question, p, listed).is_some())
        .map(String::as_str)
        .collect();
    if let Some(typed) = named_by_type(question, listed)
        && !named.contains(&typed)
    {
        named.push(typed);
    }
    if !named.is_empty() {
        // A name that is not a readable file (a path outside, a file
        // still to be made) leaves the model its call.
        return if names_only_listed_files(question, listed) {
            Need::Files(named)
        } else {
            Need::Unknown
        };
    }
    let asks_for_listing = words.iter().any(|w| LISTING_WORDS.contains(&w.as_str()))
        && subject_words(question, &[], Numbers::Count)
            .iter()
            .all(|w| LISTING_WORDS.contains(&w.as_str()))
        && names_only_listed_files(question, listed);
    if asks_for_listing {
        Need::Listing
    } else {
        Need::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed() -> Vec<String> {
        ["notes.txt", "prices.csv", "docs/install.md", "README.md"]
            .map(str::to_owned)
            .to_vec()
    }

    fn files(question: &str) -> Option<Vec<String>> {
        let listed = listed();
        match needs(question, &listed) {
            Need::Files(f) => Some(f.into_iter().map(str::to_owned).collect()),
            _ => None,
        }
    }

    fn listing(question: &str) -> bool {
        matches!(needs(question, &listed()), Need::Listing)
    }

    #[test]
    fn a_question_about_named_files_needs_just_those() {
        assert_eq!(
            files("What day are meetings on, according to notes.txt?"),
            Some(vec!["notes.txt".into()])
        );
        assert_eq!(
            files("Do notes.txt and install.md agree on the port?"),
            Some(vec!["notes.txt".into(), "docs/install.md".into()])
        );
        assert_eq!(
            files("What is the CSV file about?"),
            Some(vec!["prices.csv".into()])
        );
    }

    #[test]
    fn a_change_or_an_unreadable_name_leaves_the_model_its_calls() {
        for q in [
            "Save the names of the blue items in prices.csv to out/blue.txt.",
            "Change the meeting time in notes.txt to 11:00 UTC.",
            "Is /etc/passwd like notes.txt?",
            "Compare notes.txt with missing.txt.",
            "Which file mentions port 8088?",
        ] {
            assert_eq!(files(q), None, "{q}");
            assert!(!listing(q), "{q}");
        }
    }

    #[test]
    fn a_listing_question_needs_a_listing() {
        assert!(listing("List the files you can see."));
        assert!(listing("What files are in your workspace?"));
        assert!(listing("what's in this folder?"));
        assert!(listing("What's in the directory?"));
        assert!(!listing("Which files mention max_connections?"));
        assert!(!listing("List the files of /etc."));
        assert!(!listing("What is the budget?"));
    }
}
