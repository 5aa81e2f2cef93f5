//! Which file a question means when it names none: the file whose name's
//! words it uses ("Rita's *tickets*" for `tickets.csv`). Read on the first
//! turn, or after a search that missed. Like every steering rule it only
//! chooses among the reads the session may make; the door decides the call.

use super::output::Call;
use super::steering::{named_by_type, names_file, question_and_whether_called, read_call, reader};
use crate::{ChatRequest, PathChoices};

/// The one listed file the question names by the words of its name
/// ("the *cellar door*" for `cellar-door.ini`, "Rita's *tickets*" for
/// `tickets.csv`, "who's *on call*" for `oncall.yaml`), when it names no
/// file outright: the file with the most name words in the question, and
/// of those, with the fewest name words left over; `None` on a tie or
/// when no name word is there. Why: asked without a file name, the 1.5B
/// model listed folders and read the first file it saw (`kb/vpn.md` for
/// "how many of Rita's tickets are still open?") and answered from it.
/// Only the first read is chosen; if the file lacks what is asked, the
/// search reads on (`enough.rs`).
pub(crate) fn named_by_words<'a>(text: &str, listed: &'a [String]) -> Option<&'a String> {
    let all = super::mentions::lowercase_words(text);
    let listing =
        |(at, w): (usize, &String)| LISTING_WORDS.contains(&w.as_str()) && !made_list(&all, at);
    if all.iter().enumerate().any(listing) {
        return None;
    }
    // A word after a subject pronoun or "to" is a verb ("before we
    // *deploy* to production"), not the thing a file is named for
    // (`deploy.env` was read, and the release notes never).
    let asked: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(at, w)| {
            let verb = at
                .checked_sub(1)
                .is_some_and(|before| VERB_CONTEXT.contains(&all[before].as_str()));
            !verb && !super::mentions::is_function_word(w)
        })
        .map(|(_, w)| w.clone())
        .collect();
    let joined: Vec<String> = super::mentions::lowercase_words(text)
        .windows(2)
        .map(|pair| pair.concat())
        .collect();
    let matches = |word: &str| {
        let stem = super::mentions::stem(word);
        asked.iter().any(|q| {
            q == word
                || super::mentions::stem(q) == stem
                || stem.chars().count() >= 5 && q.starts_with(stem)
        }) || joined.iter().any(|j| j == word)
    };
    let mut best: Option<(usize, usize, &String)> = None;
    let mut tied = false;
    for path in listed {
        if super::editions::superseded(path, listed, text) {
            continue;
        }
        let base = path.rsplit('/').next().unwrap_or(path);
        let stem = base.rsplit_once('.').map_or(base, |(stem, _)| stem);
        let words: Vec<String> = super::mentions::lowercase_words(stem)
            .into_iter()
            .filter(|w| {
                w.chars().count() >= 2
                    && !w.chars().all(|c| c.is_ascii_digit())
                    && !super::mentions::is_function_word(w)
                    && !super::mentions::is_file_type_word(w)
            })
            .collect();
        let hits = words.iter().filter(|w| matches(w)).count();
        if hits == 0 {
            continue;
        }
        let left = words.len() - hits;
        match best {
            Some((h, l, _)) if (h, std::cmp::Reverse(l)) > (hits, std::cmp::Reverse(left)) => {}
            Some((h, l, _)) if (h, l) == (hits, left) => tied = true,
            _ => {
                best = Some((hits, left, path));
                tied = false;
            }
        }
    }
    best.filter(|_| !tied).map(|(_, _, path)| path)
}

/// Whether `question` asks about folders and files ([`LISTING_WORDS`],
/// or "files"), not about what a file says.
pub(crate) fn asks_for_listing(question: &str) -> bool {
    let words = super::mentions::lowercase_words(question);
    words.iter().enumerate().any(|(at, w)| {
        (LISTING_WORDS.contains(&w.as_str())
            || w == "files" && !changed_files(&words, at)
            || listed_contents(&words, at))
            && !made_list(&words, at)
    })
}

/// Whether the word at `at` ("files") is what a change verb acts on
/// ("don't *change any files*"), not what is to be listed.
fn changed_files(words: &[String], at: usize) -> bool {
    words[at.saturating_sub(2)..at]
        .iter()
        .any(|w| super::named_paths::is_change_verb(w))
}

/// Whether the word at `at` is "contents" as a folder's ("the contents of
/// the folder", "show the folder contents"), not the first half of a
/// thing's name ("the *contents cover*", "home contents insurance").
fn listed_contents(words: &[String], at: usize) -> bool {
    words[at] == "contents"
        && words
            .get(at + 1)
            .is_none_or(|next| super::question_words::is_function_word(next))
}

/// Whether the word at `at` is "list" as a noun: "make *a list* of", a
/// thing to write, or a list of the files' own ("the price on the
/// *taproom list*", "the *waiting list*"), not a listing asked for.
fn made_list(words: &[String], at: usize) -> bool {
    let Some(before) = at.checked_sub(1).map(|b| words[b].as_str()) else {
        return false;
    };
    let after_a_noun = before.chars().all(char::is_alphabetic)
        && !super::question_words::is_function_word(before)
        && !REQUEST_WORDS.contains(&before);
    // "Make me a file out/on-loan.txt *listing* the asset codes": what
    // the file to write holds.
    let what_a_file_holds = words[at] == "listing" && after_a_noun;
    words[at] == "list" && (before == "a" || after_a_noun) || what_a_file_holds
}

/// Words that may come right before "list" as a verb ("please list the
/// files", "just list them").
const REQUEST_WORDS: &[&str] = &[
    "please", "pls", "just", "now", "then", "also", "and", "simply",
];

/// Words after which a question's next word is a verb.
const VERB_CONTEXT: &[&str] = &[
    "i", "we", "you", "they", "he", "she", "to", "will", "should", "can", "must", "could", "would",
];

/// Words of a question about folders and files, not about what a file
/// says ("what's in the *cleaning folder*?"): it is answered by a
/// listing, and no file is read for it.
const LISTING_WORDS: &[&str] = &[
    "folder",
    "folders",
    "directory",
    "directories",
    "dir",
    "list",
    "listing",
];

/// After a search that missed (the file read lacks the question's words
/// and the turn must call again), the read of the unread file the
/// question names by the words of its name ([`named_by_words`]). Why:
/// asked whether "the episode with the Hearthstone Coffee *ad*" was out,
/// the 1.5B model read `episodes.csv`, then listed two folders instead of
/// reading `ad-reads.txt`. `paths` are the uncalled ones, so a file is
/// never read twice.
pub(crate) fn worded_read_on(
    request: &ChatRequest,
    paths: &PathChoices,
    max_calls: usize,
) -> Option<Vec<Call>> {
    let (text, called) = question_and_whether_called(request)?;
    if !called || max_calls == 0 || !super::named_paths::pending_write(request).is_empty() {
        return None;
    }
    let (tool, argument, listed) = reader(request, paths)?;
    let named = listed
        .iter()
        .any(|p| names_file(&text, p, listed).is_some());
    if named
        || named_by_type(&text, listed).is_some()
        || !super::named_paths::unreachable_paths(request).is_empty()
    {
        return None;
    }
    let path = named_by_words(&text, listed)?;
    Some(vec![read_call(tool, argument, path)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;
    use crate::local::steering::{named_file_reads, uncalled_paths};
    use crate::local::test_requests::*;
    use serde_json::json;

    #[test]
    fn a_file_named_by_the_words_of_its_name_is_read_first() {
        let listed: Vec<String> = [
            "tickets.csv",
            "oncall.yaml",
            "cellar-door.ini",
            "cellar/cellar.log",
            "cleaning/cleaning.log",
            "members.csv",
            "ad-reads.txt",
            "episodes.csv",
        ]
        .map(str::to_owned)
        .to_vec();
        let by_words = |q: &str| named_by_words(q, &listed).map(String::as_str);
        assert_eq!(
            by_words("how many of Rita's tickets are still open?"),
            Some("tickets.csv")
        );
        assert_eq!(by_words("who's on call in week 18?"), Some("oncall.yaml"));
        // The most name words, then the fewest left over.
        assert_eq!(
            by_words("How much is a bottle of rosé at the cellar door?"),
            Some("cellar-door.ini")
        );
        assert_eq!(
            by_words("Who is on a trial membership?"),
            Some("members.csv")
        );
        assert_eq!(
            by_words("Has the episode with the Hearthstone ad been published?"),
            Some("episodes.csv")
        );
        // A verb is no name word ("before we deploy").
        let deploy = ["deploy.env".to_owned(), "docs/release.md".to_owned()];
        assert_eq!(
            named_by_words(
                "Who has to sign off before we deploy to production?",
                &deploy
            ),
            None
        );
        assert_eq!(
            named_by_words("Which deploy target is set?", &deploy).map(String::as_str),
            Some("deploy.env")
        );
        // "Make a list of" asks for no listing.
        assert_eq!(
            by_words("Make a list of the members and save it to out/m.txt."),
            Some("members.csv")
        );
        assert!(!asks_for_listing("Make a list of the members."));
        assert!(!asks_for_listing(
            "Does the saison's strength on the taproom list match the batch?"
        ));
        assert!(asks_for_listing("Please list the files."));
        assert!(!asks_for_listing(
            "Does the price match? Just tell me, don't change any files."
        ));
        assert!(!asks_for_listing(
            "Could you make me a file out/on-loan.txt listing the asset codes of the kit on loan?"
        ));
        assert!(asks_for_listing("Show me a listing of the docs folder."));
        assert!(asks_for_listing("Can you list the files?"));
        assert!(asks_for_listing("what's in the list folder?"));
        assert!(asks_for_listing("List the files."));
        // "Contents" of a folder, not of an insurance policy's name.
        assert!(asks_for_listing(
            "What are the contents of the notes folder?"
        ));
        assert!(asks_for_listing("show me the workspace contents"));
        assert!(!asks_for_listing("deductible on the contents cover?"));
        // A listing question, no name word, or a tie: the model chooses.
        assert_eq!(by_words("what's in the cleaning folder?"), None);
        assert_eq!(by_words("What pace should Gwen run at?"), None);
        let two = ["a/notes.txt".to_owned(), "b/notes.md".to_owned()];
        assert_eq!(named_by_words("What do the notes say?", &two), None);
        // Only on the first turn, and only when no file is named outright.
        let req = request(vec![Message::user_text("What does the guide say?")]);
        let calls = named_file_reads(&req, &paths(), 2).expect("steered");
        assert_eq!(read_paths(&calls), ["docs/guide.md"]);
        let tied = request(vec![Message::user_text("What do the notes say?")]);
        assert!(named_file_reads(&tied, &paths(), 2).is_none());
        let named = request(vec![Message::user_text(
            "What does the guide say in a.csv?",
        )]);
        let calls = named_file_reads(&named, &paths(), 2).expect("steered");
        assert_eq!(read_paths(&calls), ["a.csv"]);
    }

    #[test]
    fn a_missed_search_reads_on_in_the_file_its_name_words_point_to() {
        let ask = "What does the guide say about parking?";
        let after_read = request(vec![
            Message::user_text(ask),
            call("file_read", json!({"path": "notes.txt"})),
        ]);
        let calls = worded_read_on(&after_read, &uncalled_paths(&after_read), 1).expect("steered");
        assert_eq!(read_paths(&calls), ["docs/guide.md"]);
        // Not before a call, not with no call left, not once read.
        let fresh = request(vec![Message::user_text(ask)]);
        assert!(worded_read_on(&fresh, &paths(), 1).is_none());
        assert!(worded_read_on(&after_read, &paths(), 0).is_none());
        let read = request(vec![
            Message::user_text(ask),
            call("file_read", json!({"path": "docs/guide.md"})),
        ]);
        assert!(worded_read_on(&read, &uncalled_paths(&read), 1).is_none());
    }
}
