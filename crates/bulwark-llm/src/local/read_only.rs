//! A request to change files, in a session whose tools only read: the
//! answer says at once that it cannot be done, and why.
//!
//! Why: asked "make a note in reminder.txt: ..." with tools that only
//! list, read and search, the 1.5B model answered with a line of its
//! system prompt ("I could not do it and gave the reason the tool
//! gave"); asked "can you move Mrs Okafor's appointment to 3pm?", it
//! read three files and wrote the call it would have made as text. The
//! user learned neither that nothing changed nor why. Not a security
//! control: the grants are, and a write no tool can make is refused by
//! the door whatever the model says.

use super::steering::{path_like, path_token};
use crate::ChatRequest;

/// The note after the user's question when [`refused_change`] holds.
pub(crate) const READ_ONLY_NOTE: &str = "(Note: your tools here can only read files; none of them can create, change or delete a file. Do not call a tool: answer that you cannot do this, because you can only read the files.)";

/// Whether the latest question asks to change files ([`asks_for_change`])
/// and no tool of the session can change one: every tool offered names
/// workspace paths, and only to read them.
pub(crate) fn refused_change(request: &ChatRequest) -> bool {
    let Some(at) = super::latest_question(&request.messages) else {
        return false;
    };
    !request.tools.is_empty()
        && request.tools.iter().all(|tool| {
            let mut arguments = request.paths.for_tool(&tool.name).peekable();
            arguments.peek().is_some() && arguments.all(|a| a.reads_only)
        })
        && asks_for_change(&request.messages[at].text())
}

/// Whether `question` opens with a request to change files: after an
/// optional "please" or "can you", a verb that changes something
/// ("move Mrs Okafor's appointment", "delete the old list"), or a verb
/// that writes followed by where to ("make a note *in reminder.txt*",
/// "save it *as* out.csv", "create *a file*"). "Write a summary of
/// notes.txt" asks for text, "can I cancel?" asks about a rule, and
/// neither is a request to change a file.
pub(crate) fn asks_for_change(question: &str) -> bool {
    // Each sentence may be the request: "K04's hatch has been fixed.
    // *Please change* its status to available in fleet.csv."
    // The first sentence's target may follow it ("Make a note. Put it
    // in reminder.txt"); a later one's must be its own, or "Note that
    // the dates in members.csv are day-first" would be a request.
    sentences(question).enumerate().any(|(at, sentence)| {
        sentence_asks_for_change(sentence, if at == 0 { question } else { sentence })
            || asked_clauses(sentence).any(|clause| sentence_asks_for_change(clause, clause))
    })
}

/// The clauses of `sentence` after a comma that open by asking ("Hartley
/// picked up order 1044 this morning, *can you mark it as collected in
/// orders.csv*?"): a statement first, the request after it. A clause
/// that does not open with "please" or "can/could/would/will you" is
/// left alone ("..., change is slow" tells).
fn asked_clauses(sentence: &str) -> impl Iterator<Item = &str> {
    sentence.split(',').skip(1).map(str::trim).filter(|clause| {
        let words = super::mentions::lowercase_words(clause);
        words.first().is_some_and(|w| w == "please")
            || words.first().is_some_and(|w| MODALS.contains(&w.as_str()))
                && words.get(1).is_some_and(|w| w == "you")
    })
}

/// Words that end in a full stop without ending a sentence.
const ABBREVIATIONS: &[&str] = &["dr", "mr", "mrs", "ms", "st", "eg", "ie", "etc", "no", "vs"];

/// The sentences of `text`, so that a request after a statement is seen
/// as one: split after a full stop, a question or an exclamation mark
/// followed by a space or a line's end ("4.50" and "notes.txt" stay
/// whole, and so do "Dr. Okafor" and "e.g. this").
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let ends_here = |after: usize| {
            let before = &rest[..after - 1];
            let word: String = before
                .rsplit(char::is_whitespace)
                .next()
                .unwrap_or_default()
                .chars()
                .filter(|c| c.is_alphanumeric())
                .collect::<String>()
                .to_lowercase();
            rest[after..].starts_with(char::is_whitespace)
                && !(rest.as_bytes()[after - 1] == b'.'
                    && (ABBREVIATIONS.contains(&word.as_str()) || word.chars().count() == 1))
        };
        let end = rest
            .match_indices(['.', '?', '!', '\n'])
            .map(|(at, _)| at + 1)
            .find(|&after| rest.as_bytes()[after - 1] == b'\n' || ends_here(after))
            .unwrap_or(rest.len());
        let (sentence, after) = rest.split_at(end);
        rest = after.trim_start();
        Some(sentence)
    })
}

/// Whether `sentence` opens with a request to change files, `target`
/// being the text that may say where to write.
fn sentence_asks_for_change(sentence: &str, target: &str) -> bool {
    let Some((verb, next)) = opening(sentence) else {
        return false;
    };
    // "can you update *me* on ...?" asks for news; "*note that* ..."
    // and "*mark that* ..." tell, they do not ask for a note.
    let about_the_asker = next.as_deref().is_some_and(|w| w == "me" || w == "us");
    let telling = next.as_deref() == Some("that");
    // "*Add up* the crates on the list" sums; it writes nothing.
    let summing = verb == "add" && next.as_deref() == Some("up");
    CHANGING_VERBS.contains(&verb.as_str()) && !about_the_asker
        || WRITING_VERBS.contains(&verb.as_str())
            && !telling
            && !summing
            && (names_a_target(target)
                || RECORDING_VERBS.contains(&verb.as_str()) && names_a_record(sentence))
}

/// The verb a request opens with, after an optional "please" or "can
/// you": "*add* it to the list", "could you *move* it". `None` for a
/// question ("can I cancel?", "what did Dev add?").
pub(crate) fn opening_verb(question: &str) -> Option<String> {
    opening(question).map(|(verb, _)| verb)
}

/// [`opening_verb`], and the word after it.
fn opening(question: &str) -> Option<(String, Option<String>)> {
    let words = super::mentions::lowercase_words(&question.replace(['\'', '\u{2019}'], ""));
    let mut at = 0;
    let skip = |at: &mut usize, options: &[&str]| {
        while words
            .get(*at)
            .is_some_and(|w| options.contains(&w.as_str()))
        {
            *at += 1;
        }
    };
    skip(
        &mut at,
        &["please", "kindly", "just", "now", "ok", "okay", "hi", "hey"],
    );
    if words.get(at).is_some_and(|w| MODALS.contains(&w.as_str()))
        && words.get(at + 1).is_some_and(|w| w == "you")
    {
        at += 2;
    }
    skip(&mut at, &["please", "kindly", "just"]);
    let verb = words.get(at)?.clone();
    Some((verb, words.get(at + 1).cloned()))
}

/// "can *you*", "could *you*": a request, where "can *I*" is a question.
const MODALS: &[&str] = &["can", "could", "would", "will"];

/// Verbs that, opening a request, change what is there.
const CHANGING_VERBS: &[&str] = &[
    "change",
    "edit",
    "modify",
    "update",
    "amend",
    "delete",
    "remove",
    "erase",
    "move",
    "rename",
    "replace",
    "overwrite",
    "fix",
    "correct",
    "reschedule",
    "cancel",
];

/// Verbs that write only when the request says where to.
const WRITING_VERBS: &[&str] = &[
    "write", "save", "put", "create", "store", "copy", "append", "add", "export", "record", "make",
    "jot", "note", "log", "insert", "mark", "start", "leave", "draft",
];

/// Whether `question` says where something is to be written: a file path
/// after "to", "in", "into", "as", "called" or "named", or "a file", "a
/// new file", "a note".
fn names_a_target(question: &str) -> bool {
    let tokens: Vec<&str> = question.split_whitespace().collect();
    let path_after_preposition = tokens.windows(2).any(|pair| {
        let preposition = pair[0].to_lowercase();
        matches!(
            preposition.as_str(),
            "to" | "in" | "into" | "onto" | "as" | "called" | "named"
        ) && path_like(path_token(pair[1])) == Some(false)
    });
    let words = super::mentions::lowercase_words(question);
    let a_file = words.windows(2).any(|pair| {
        matches!(pair[0].as_str(), "a" | "new")
            && matches!(pair[1].as_str(), "file" | "note" | "document")
    });
    path_after_preposition || a_file
}

/// Verbs that put an entry into a kept record ("*add* Maya to the
/// roster", "*put* her on the rota"); "make a list *of* everyone on the
/// rota" and "note the times on the timetable" do not.
const RECORDING_VERBS: &[&str] = &["add", "put", "record", "mark", "insert", "append", "enter"];

/// Whether `sentence` names a kept record as where the entry goes ("add
/// Maya *to the roster*", "put it *on the rota*"), and nothing that sums
/// ("add the hours in the register *together*").
fn names_a_record(sentence: &str) -> bool {
    let words = super::mentions::lowercase_words(sentence);
    !words.iter().any(|w| w == "together")
        && words.windows(3).any(|w| {
            matches!(w[0].as_str(), "to" | "in" | "into" | "onto" | "on")
                && matches!(w[1].as_str(), "the" | "our" | "my")
                && RECORDS.contains(&w[2].as_str())
        })
}

/// What a workspace keeps as a file, named by what it is.
const RECORDS: &[&str] = &[
    "roster",
    "rota",
    "register",
    "spreadsheet",
    "inventory",
    "calendar",
    "diary",
    "schedule",
    "timetable",
    "records",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::ToolChoice;
    use crate::local::test_requests::{listed, request, tool};
    use crate::local::{TurnKind, turn_kind};
    use crate::{Message, PathChoices, PathKind};
    use serde_json::json;

    #[test]
    fn requests_to_change_files_are_recognised() {
        for asked in [
            "Make a note in reminder.txt: book van 2 in for its MOT.",
            "Can you move Mrs Okafor's appointment on the 10th to 3pm?",
            "please delete old.txt",
            "Create a file called hello.txt containing the word hi.",
            "Replace everything in notes.txt with the word EMPTY.",
            "Write the word done to done.txt in the top folder.",
            "Could you add Joyce's suggestion to suggestions.md?",
            "Start a new file with the totals.",
            "Change the meeting time in notes.txt to 11:00 UTC.",
            "K04's hatch has been fixed. Please change its status to available in fleet.csv.",
            "The price went up to 4.50 today! Update prices.csv for me.",
            "Dr. Okafor is back\nplease change her status in staff.csv",
            "Hartley picked up order 1044 this morning, can you mark it as collected in orders.csv?",
            "Please add Maya Lind to the roster, she's 10 and joining the Badgers.",
            "Put the new volunteer on the rota for Saturday.",
        ] {
            assert!(asks_for_change(asked), "{asked}");
        }
    }

    #[test]
    fn questions_and_requests_for_text_are_not_changes() {
        for asked in [
            "Write a one-line summary of notes.txt.",
            "Can I cancel my booking?",
            "If I cancel 10 days before, do I get any money back?",
            "What make is van 2?",
            "List the files in the jobs folder.",
            "Can you update me on the rides?",
            "Make a list of the members who have paid.",
            "How do I change my password?",
            "What does notes.txt say about moving the meeting?",
            "The hatch was fixed. Is K04 available now?",
            "Who joined in 2024? Note that the dates in members.csv are day-first.",
            "Is Dr. Okafor in today? Dr. Okonkwo said to ask.",
            "Version 2.3.0 changed the login. What else changed?",
            "Is Maya on the roster, and which patrol is she in?",
            "Order 1044 was collected, can I still change it?",
            "Add up the crates on the list, please.",
            "Which orders are in the spreadsheet, could you tell me?",
            "Can you make a list of everyone on the rota?",
            "Can you add the prices on the list?",
            "Could you make sense of what's in the file?",
            "Note the times on the timetable are UTC. When is the last bus?",
            "Quick one, could you add the hours in the register together?",
            "",
        ] {
            assert!(!asks_for_change(asked), "{asked}");
        }
    }

    fn read_only(question: &str) -> ChatRequest {
        let mut asked = request(vec![Message::user_text(question)]);
        asked.tools = vec![
            tool("file_list", json!({"type": "object"})),
            tool("file_read", json!({"type": "object"})),
        ];
        asked.paths = PathChoices {
            arguments: vec![
                listed("file_list", PathKind::Directory, &[""]),
                listed("file_read", PathKind::File, &["vans.txt"]),
            ],
        };
        asked
    }

    #[test]
    fn a_change_asked_of_reading_tools_is_answered_at_once_with_the_reason() {
        let asked = read_only("Make a note in reminder.txt: book van 2 in for its MOT.");
        assert!(refused_change(&asked));
        assert_eq!(turn_kind(&asked, 2, ToolChoice::Auto), TurnKind::Text);
        let prompt = crate::local::rendered_prompt(&asked, 2);
        assert!(prompt.contains(READ_ONLY_NOTE), "{prompt}");
        // The note replaces the one that would call the file unreadable.
        assert!(
            !prompt.contains("does not exist in your workspace"),
            "{prompt}"
        );
    }

    #[test]
    fn a_session_that_can_write_or_a_plain_question_is_not_refused() {
        // `request` offers file_edit, which writes.
        let writer = request(vec![Message::user_text(
            "Change the time in notes.txt to 11:00.",
        )]);
        assert!(!refused_change(&writer));
        let question = read_only("When is van 2 due its MOT?");
        assert!(!refused_change(&question));
        assert_ne!(turn_kind(&question, 2, ToolChoice::Auto), TurnKind::Text);
        // A tool that names no workspace path may change something else.
        let mut other = read_only("Delete old.txt");
        other.tools.push(tool("shell", json!({"type": "object"})));
        assert!(!refused_change(&other));
    }
}
