//! The files of a folder a question compares ("There are two quotes in
//! the *quotes folder*. Which one is cheaper, and by how much?"): read
//! together on the first turn, then compared (`compare.rs`).
//!
//! Why: the 1.5B model listed the folder, read the first quote, and
//! answered that it was the cheaper one, by a made-up amount; the other
//! was never read. The folder's files are known from the session's path
//! choices, so no listing is needed, and a read is only of a file the
//! session may read (the door still decides each call).

use super::output::Call;
use super::steering::{names_file, read_call, reader};
use crate::{AllowedPaths, ChatRequest, PathChoices, PathKind, Role};

/// At most this many files are read for one folder: a comparison of two
/// or three things, not a survey.
const MAX_FOLDER_FILES: usize = 3;

/// Words of a question that weighs things against each other.
const COMPARING: &[&str] = &[
    "cheaper",
    "cheapest",
    "dearer",
    "dearest",
    "expensive",
    "larger",
    "largest",
    "smaller",
    "smallest",
    "bigger",
    "biggest",
    "higher",
    "highest",
    "lower",
    "lowest",
    "longer",
    "shorter",
    "better",
    "best",
    "worse",
    "compare",
    "both",
    "differ",
    "difference",
    "same",
];

/// Whether `question` weighs things against each other ("which one is
/// cheaper", "compare the two", "which of them").
pub(crate) fn compares(question: &str) -> bool {
    let words = super::mentions::lowercase_words(question);
    let pair = |a: &str, b: &str| words.windows(2).any(|w| w[0] == a && w[1] == b);
    words.iter().any(|w| COMPARING.contains(&w.as_str()))
        || pair("which", "one")
        || pair("which", "of")
}

/// The folder `question` names by its name ("the *quotes* folder"), of
/// the directories a listing may show, when `path` is directly in it.
pub(crate) fn in_named_folder(question: &str, path: &str, folders: &[String]) -> bool {
    let Some((parent, _)) = path.rsplit_once('/') else {
        return false;
    };
    folders.iter().any(|f| f == parent) && names_folder(question, parent)
}

/// Whether `question` says the folder's last name as a word ("quotes",
/// or "quote" for `quotes/`).
fn names_folder(question: &str, folder: &str) -> bool {
    let last = folder.rsplit('/').next().unwrap_or(folder).to_lowercase();
    let singular = |w: &str| w.strip_suffix('s').unwrap_or(w).to_owned();
    super::mentions::lowercase_words(question)
        .iter()
        .any(|w| w.chars().count() >= 3 && singular(w) == singular(&last))
}

/// The listable directories of the session.
pub(crate) fn folders(paths: &PathChoices) -> Vec<String> {
    paths
        .arguments
        .iter()
        .filter(|c| c.kind == PathKind::Directory && c.reads_only)
        .find_map(|c| match &c.allowed {
            AllowedPaths::Listed(list) => Some(list.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// On the first turn of a question that compares and names a folder but
/// no file: reads of the folder's two or three files, at most
/// `max_calls`. `None` otherwise.
pub(crate) fn compared_folder_reads(
    request: &ChatRequest,
    paths: &PathChoices,
    max_calls: usize,
) -> Option<Vec<Call>> {
    let question = request.messages.last().filter(|m| m.role == Role::User)?;
    let text = question.text();
    if text.is_empty() || !compares(&text) {
        return None;
    }
    let (tool, argument, listed) = reader(request, paths)?;
    if listed
        .iter()
        .any(|p| names_file(&text, p, listed).is_some())
    {
        return None;
    }
    let folders = folders(&request.paths);
    let mut named: Vec<&String> = folders
        .iter()
        .filter(|f| !f.is_empty() && names_folder(&text, f))
        .collect();
    named.dedup();
    let [folder] = named.as_slice() else {
        return None;
    };
    let files: Vec<&String> = listed
        .iter()
        .filter(|p| {
            p.rsplit_once('/')
                .is_some_and(|(parent, _)| parent == folder.as_str())
        })
        .collect();
    if !(2..=MAX_FOLDER_FILES.min(max_calls)).contains(&files.len()) {
        return None;
    }
    Some(
        files
            .into_iter()
            .map(|path| read_call(tool, argument, path))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;
    use crate::local::test_requests::*;

    fn quoting(ask: &str, files: &[&str]) -> ChatRequest {
        let mut req = request(vec![Message::user_text(ask)]);
        req.paths = PathChoices {
            arguments: vec![
                listed("file_list", PathKind::Directory, &["", "quotes", "docs"]),
                listed("file_read", PathKind::File, files),
            ],
        };
        req
    }

    const FILES: &[&str] = &["quotes/a.md", "quotes/b.md", "docs/c.md", "notes.txt"];

    #[test]
    fn the_files_of_a_folder_compared_are_read_together() {
        let req = quoting(
            "There are two quotes in the quotes folder. Which one is cheaper, and by how much?",
            FILES,
        );
        let calls = compared_folder_reads(&req, &req.paths, 2).expect("reads");
        assert_eq!(read_paths(&calls), ["quotes/a.md", "quotes/b.md"]);
        assert!(in_named_folder(
            "which quote is cheaper?",
            "quotes/b.md",
            &folders(&req.paths)
        ));
        assert!(!in_named_folder(
            "which quote is cheaper?",
            "docs/c.md",
            &folders(&req.paths)
        ));
    }

    #[test]
    fn no_reads_without_a_comparison_a_folder_or_room_for_them_all() {
        let no_compare = quoting("What is in the quotes folder?", FILES);
        assert!(compared_folder_reads(&no_compare, &no_compare.paths, 2).is_none());
        let no_folder = quoting("Which one is cheaper?", FILES);
        assert!(compared_folder_reads(&no_folder, &no_folder.paths, 2).is_none());
        let named = quoting("Is quotes/a.md cheaper than the other quote?", FILES);
        assert!(compared_folder_reads(&named, &named.paths, 2).is_none());
        let budget = quoting("Which of the quotes is cheaper?", FILES);
        assert!(compared_folder_reads(&budget, &budget.paths, 1).is_none());
        let four = quoting(
            "Which of the quotes is cheaper?",
            &["quotes/a.md", "quotes/b.md", "quotes/c.md", "quotes/d.md"],
        );
        assert!(compared_folder_reads(&four, &four.paths, 4).is_none());
    }
}
