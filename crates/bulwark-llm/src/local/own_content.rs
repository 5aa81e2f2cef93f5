//! Whether a request to write a file says, itself, what to write:
//! "Write 'book airport taxi' to out/todo.txt", "Save out/shopping.txt
//! that says: compost, slug pellets", "Create notes.md with the word
//! draft".
//!
//! Why: such a request needs nothing read. Searched and read like a
//! question that names no file, the 1.5B model wrote the rows of the file
//! read (`expenses.csv`) into the note instead of the user's words; left
//! to itself, it sometimes answered in text and wrote nothing. Its write
//! turn comes first instead (`named_paths::pending_write`). A request
//! whose content must be looked up ("save the members' names to
//! out/members.txt") is not one of these.

use super::mentions::lowercase_words;
use super::question_words::is_function_word;

/// Words after which the request's own text follows ("the word draft",
/// "that says: compost"), when a word that carries meaning comes next.
const TEXT_MARKERS: &[&str] = &["says", "saying", "text", "word", "words"];

/// Whether `question`, a request to have a file written, carries the text
/// to write: a quoted span, or a marker word followed by the text.
pub(crate) fn carries_own_content(question: &str) -> bool {
    if has_quoted_span(question) {
        return !gives_a_template(question);
    }
    let words = lowercase_words(question);
    words.windows(2).any(|pair| {
        TEXT_MARKERS.contains(&pair[0].as_str())
            && !is_function_word(&pair[1])
            && !super::question_words::QUESTION_WORDS.contains(&pair[1].as_str())
    })
}

/// Whether the quoted text is a shape to fill, not the words to write:
/// "save it, *something like* 'Anna Hansen: N crates'", "in the form
/// 'name - total'", a placeholder letter ("N", "X"). Why: the 1.5B model
/// wrote "Anna Hansen: N crates" at once, with nothing read; the number
/// has to be looked up first.
fn gives_a_template(question: &str) -> bool {
    let words = lowercase_words(question);
    let phrase = |wanted: &[&str]| {
        words
            .windows(wanted.len())
            .any(|w| w.iter().zip(wanted).all(|(a, b)| a == b))
    };
    // A placeholder is looked for inside the quotes alone: "Switch to
    // Plan B" and "Call J. Smith" are words to write.
    let placeholder = quoted_spans(question).iter().any(|span| {
        span.split(|c: char| !c.is_alphanumeric())
            .any(|w| matches!(w, "N" | "X" | "NN" | "XX"))
    });
    phrase(&["something", "like"])
        || phrase(&["in", "the", "form"])
        || phrase(&["along", "the", "lines"])
        || phrase(&["for", "example"])
        || words.iter().any(|w| w == "template")
        || placeholder
}

/// The texts between straight or curly quotes that open after no letter
/// and close before none (an apostrophe inside a word opens nothing).
fn quoted_spans(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut open: Option<(usize, char)> = None;
    let mut previous: Option<char> = None;
    for (at, c) in text.char_indices() {
        let next = text[at + c.len_utf8()..].chars().next();
        match open {
            Some((from, opener)) => {
                let closes = match opener {
                    '\u{201c}' => c == '\u{201d}',
                    '\u{2018}' => c == '\u{2019}',
                    other => c == other,
                };
                if closes && !next.is_some_and(char::is_alphanumeric) {
                    spans.push(&text[from..at]);
                    open = None;
                }
            }
            None => {
                let opener = matches!(c, '\'' | '"' | '\u{201c}' | '\u{2018}');
                if opener && !previous.is_some_and(char::is_alphanumeric) {
                    open = Some((at + c.len_utf8(), c));
                }
            }
        }
        previous = Some(c);
    }
    spans
}

/// Whether `text` has a span in quotes with a letter or digit inside. An
/// opening quote follows no letter or digit and a closing one is followed
/// by none, so the apostrophes of "members' names" or "don't" open
/// nothing. One pass: the earliest opening quote of a kind is the only
/// one that matters (a letter after a later one is after it too), so a
/// long question of quotes costs linear time, not quadratic.
fn has_quoted_span(text: &str) -> bool {
    const KINDS: [(char, char); 4] = [
        ('\'', '\''),
        ('"', '"'),
        ('\u{201c}', '\u{201d}'),
        ('\u{2018}', '\u{2019}'),
    ];
    // Per kind: opened, and a letter or digit seen since.
    let mut state = [(false, false); 4];
    let mut previous_is_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let next_is_word = chars.peek().is_some_and(|n| n.is_alphanumeric());
        for (kind, (open, close)) in KINDS.iter().enumerate() {
            let (opened, inside) = state[kind];
            if c == *close && opened && inside && !next_is_word {
                return true;
            }
            if c == *open && !opened && !previous_is_word {
                state[kind] = (true, false);
            }
        }
        if c.is_alphanumeric() {
            for (opened, inside) in &mut state {
                *inside |= *opened;
            }
        }
        previous_is_word = c.is_alphanumeric();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn requests_with_their_own_text() {
        for ask in [
            "Write 'book airport taxi' to out/todo.txt.",
            "Save a file out/shopping.txt that says: compost, slug pellets",
            "Create notes.md at the top of your workspace with the word draft.",
            "Create the file out/hello.txt containing the text: Hello from Bulwark",
            "Save a file out/shopping.txt containing \"olive oil\".",
            "Create out/reminder.txt with the text \u{201c}bring 5 euros\u{201d}.",
            "Write the word done to done.txt in the top folder of your workspace.",
            "Put a note saying back at 3 in out/door.txt",
            "Write 'Switch to Plan B' to out/plan.txt",
            "Save 'Sign the form at reception' to out/door.txt",
            "Write 'Back in 5 minutes...' to out/door.txt",
            "Write 'Call J. Smith' to out/todo.txt",
        ] {
            assert!(carries_own_content(ask), "{ask}");
        }
    }

    #[test]
    fn requests_whose_text_must_be_looked_up() {
        for ask in [
            "Make a list of the chess club members' names and save it to out/members.txt.",
            "Save the names of everyone who's on a trial membership to out/trial.txt.",
            "Write the customers whose repair is done to out/collect.txt, one per line.",
            "Put the keys contact's number in out/contacts.txt",
            "Write a file that says which bills are due to out/due.txt",
            "Write the words of the song to out/song.txt",
            "Create a file overdue.txt listing the loans that have not been returned yet.",
            "Add up how many crates Anna Hansen picked this season and save it in reports/anna-2024.txt, something like 'Anna Hansen: N crates'.",
            "Write each member to out/m.txt in the form 'name - plot'.",
            "Save the total to out/t.txt as 'Total: X'.",
        ] {
            assert!(!carries_own_content(ask), "{ask}");
        }
    }

    /// The reference: every opening quote tried against every later
    /// closing one.
    fn every_opening_quote(text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let word = |i: Option<usize>| {
            i.and_then(|i| chars.get(i))
                .is_some_and(|c| c.is_alphanumeric())
        };
        chars.iter().enumerate().any(|(open_at, open)| {
            let close = match open {
                '\'' => '\'',
                '"' => '"',
                '\u{201c}' => '\u{201d}',
                '\u{2018}' => '\u{2019}',
                _ => return false,
            };
            !word(open_at.checked_sub(1))
                && (open_at + 1..chars.len()).any(|at| {
                    chars[at] == close
                        && !word(Some(at + 1))
                        && chars[open_at + 1..at].iter().any(|c| c.is_alphanumeric())
                })
        })
    }

    #[test]
    fn a_long_run_of_quotes_is_no_quoted_span() {
        let text = "' ".repeat(200_000);
        assert!(!has_quoted_span(&text));
    }

    proptest! {
        /// Apostrophes inside or after words never make a quoted span.
        #[test]
        fn apostrophes_quote_nothing(words in proptest::collection::vec("[a-z]{1,8}('s|s'|'t)?", 1..12)) {
            prop_assert!(!has_quoted_span(&words.join(" ")));
        }

        /// The one pass finds what trying every opening quote finds.
        #[test]
        fn one_pass_agrees_with_trying_every_quote(text in "[a' \"\u{201c}\u{201d}\u{2018}\u{2019}.]{0,24}") {
            prop_assert_eq!(has_quoted_span(&text), every_opening_quote(&text));
        }

        /// Any text in quotes is found, wherever it stands.
        #[test]
        fn quoted_text_is_found(
            before in "[a-z ]{0,30}",
            quoted in "[a-z][a-z ]{0,20}",
            after in "[ .,!?][a-z ]{0,30}",
        ) {
            let text = format!("{before} '{quoted}'{after}");
            prop_assert!(has_quoted_span(&text));
        }
    }
}
