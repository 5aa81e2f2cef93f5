//! What the driver tells the local model about the question's own words
//! in a file it read: how often each appears.
//!
//! Why: asked for something a file does not hold ("the price of the purple
//! widget", "what the guide says about parking", "Chen Wei's phone
//! number"), the 1.5B model answered with the nearest thing the file does
//! hold (the blue widget's price, the opening hours, the e-mail address):
//! it does not notice an absence. A count of 0 next to the word it was
//! asked about makes the absence something to read, not to notice.
//!
//! The words are the user's (trusted), the counts the program's: no byte
//! of the file is copied into the note, which stands outside the boundary.

/// At most this many words per note.
const MAX_WORDS: usize = 6;

/// Words after which a question names what it asks about ("the price of
/// the purple widget", "about parking", "Chen Wei's phone number", "which
/// engineer", "how many fixes"). Only the words of such a phrase are
/// counted: a verb ("which engineer *lives* in Lagos") is written
/// differently in the file ("Lagos" in a city column) and a 0 for it made
/// the model deny a fact the file holds.
const LEADS: &[&str] = &[
    "the",
    "a",
    "an",
    "about",
    "of",
    "for",
    "on",
    "in",
    "at",
    "to",
    "with",
    "any",
    "no",
    "which",
    "what",
    "many",
    "much",
    "his",
    "her",
    "their",
    "its",
    "s",
    "my",
    "our",
    "this",
    "that",
    "mention",
    "mentions",
    "mentioning",
    "contain",
    "contains",
    "containing",
    "say",
    "says",
];

/// Words that end a phrase, or never carry its subject.
const STOP_WORDS: &[&str] = &[
    "according",
    "all",
    "also",
    "and",
    "are",
    "can",
    "could",
    "did",
    "does",
    "do",
    "each",
    "file",
    "files",
    "from",
    "has",
    "have",
    "how",
    "into",
    "is",
    "it",
    "list",
    "listed",
    "more",
    "most",
    "not",
    "now",
    "or",
    "other",
    "please",
    "see",
    "show",
    "some",
    "tell",
    "than",
    "then",
    "there",
    "these",
    "those",
    "was",
    "were",
    "when",
    "where",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "would",
    "should",
    "shall",
    "may",
    "might",
    "must",
    "need",
    "needs",
    "you",
    "your",
    "workspace",
    "folder",
    "i",
    "me",
    "be",
    "been",
    "same",
    "different",
    "difference",
    "differ",
    "both",
    "between",
    "other",
    "another",
];

/// At most this many words of one phrase.
const PHRASE_WORDS: usize = 3;

/// Whether a number in the question is one of its subject words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Numbers {
    /// "port 8088": when the question searches files for it.
    Count,
    /// In a named file a number is more often a quantity the answer
    /// computes ("the 3 largest") than a string to find.
    Skip,
}

/// The words of the question's noun phrases ([`LEADS`]), lowercased, in
/// order, without repeats and without the words of the files' names.
/// An identifier stays whole ("max_connections").
pub(crate) fn subject_words(question: &str, named_paths: &[&str], numbers: Numbers) -> Vec<String> {
    let tokens: Vec<String> = question
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect();
    let names: Vec<String> = named_paths.iter().map(|p| p.to_lowercase()).collect();
    let mut words: Vec<String> = Vec::new();
    let mut in_phrase = 0usize;
    for token in &tokens {
        let lead = LEADS.contains(&token.as_str());
        let stop = STOP_WORDS.contains(&token.as_str());
        if lead || stop {
            in_phrase = if lead { PHRASE_WORDS } else { 0 };
            continue;
        }
        if in_phrase == 0 {
            continue;
        }
        in_phrase -= 1;
        // A file's name ends the phrase: what follows is about the file.
        if names.iter().any(|n| n.contains(token.as_str())) {
            in_phrase = 0;
            continue;
        }
        let number = token.chars().all(|c| c.is_ascii_digit());
        let worth = token.chars().count() >= 3 && (!number || numbers == Numbers::Count);
        if worth && !words.contains(token) {
            words.push(token.clone());
            if words.len() == MAX_WORDS {
                break;
            }
        }
    }
    words
}

/// Whether `word` (lowercase) is a word that carries no subject: a lead
/// ("the", "of", "which") or a stop word ("is", "has", "files").
pub(crate) fn is_function_word(word: &str) -> bool {
    LEADS.contains(&word) || STOP_WORDS.contains(&word)
}

/// The words of `text`, lowercased: runs of letters and digits.
pub(crate) fn lowercase_words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// How often `word` occurs in `haystack` (lowercase), counting a plural's
/// stem too ("fixes" is found in "Fixed", "meetings" in "Meeting").
pub(crate) fn occurrences(haystack: &str, word: &str) -> usize {
    haystack.matches(stem(word)).count()
}

/// `word` without a plural's `es` or `s`, when at least three letters
/// are left ("fixes" → "fix", "bus" stays).
pub(crate) fn stem(word: &str) -> &str {
    let long_enough = |s: &&str| s.chars().count() >= 3;
    word.strip_suffix("es")
        .filter(long_enough)
        .or_else(|| word.strip_suffix('s').filter(long_enough))
        .unwrap_or(word)
}

/// The note for one read file's `content` (as wrapped), `None` when the
/// question names nothing worth counting.
pub(crate) fn mentions_note(question: &str, named_paths: &[&str], content: &str) -> Option<String> {
    if asks_a_count(question) {
        return None;
    }
    let words = subject_words(question, named_paths, Numbers::Skip);
    let absent = absent_words(&words, content);
    (!absent.is_empty()).then(|| {
        format!(
            "(Searched by the program: the question's {} not in this file.)",
            these_words_are(&absent)
        )
    })
}

/// "How many people...": what is counted is a category the file rarely
/// names ("people" in a list of names), and a 0 for it made the model
/// answer 0.
pub(crate) fn asks_a_count(question: &str) -> bool {
    let lower = question.to_lowercase();
    lower.contains("how many") || lower.contains("how much")
}

/// Those of `words` that a read's `content` (as wrapped) lacks.
pub(crate) fn absent_words<'w>(words: &'w [String], content: &str) -> Vec<&'w str> {
    let haystack = super::shape::unwrapped_lines(content)
        .join("\n")
        .to_lowercase();
    words
        .iter()
        .filter(|w| occurrences(&haystack, w) == 0)
        .map(String::as_str)
        .collect()
}

/// `word "a" is` or `words "a", "b" and "c" are`, for the notes.
pub(crate) fn these_words_are(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
    match quoted.as_slice() {
        [one] => format!("word {one} is"),
        [rest @ .., last] => format!("words {} and {last} are", rest.join(", ")),
        [] => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrap(body: &str) -> String {
        format!("<untrusted_0123456789abcdef>\n{body}\n</untrusted_0123456789abcdef>")
    }

    #[test]
    fn an_absent_word_is_named() {
        let csv = wrap("item,colour,price_eur\nwidget,blue,4.50\n");
        assert_eq!(
            mentions_note(
                "What is the price of the purple widget in prices.csv?",
                &["prices.csv"],
                &csv
            )
            .as_deref(),
            Some("(Searched by the program: the question's word \"purple\" is not in this file.)")
        );
    }

    #[test]
    fn no_note_when_every_word_is_there() {
        let csv = wrap("name,role,city\nBen Okafor,engineer,Lagos\n");
        let q = "Which engineer in contacts.csv lives in Lagos?";
        assert_eq!(mentions_note(q, &["contacts.csv"], &csv), None);
        let q = "What is the phone number of the engineer?";
        assert_eq!(
            mentions_note(q, &["contacts.csv"], &csv).as_deref(),
            Some(
                "(Searched by the program: the question's words \"phone\" and \"number\" are not in this file.)"
            )
        );
    }

    #[test]
    fn only_the_words_of_what_is_asked_about_are_counted() {
        let words = |q: &str| {
            subject_words(
                q,
                &["contacts.csv", "guide.md", "docs/changelog.md"],
                Numbers::Skip,
            )
        };
        assert_eq!(
            words("Which engineer in contacts.csv lives in Lagos?"),
            ["engineer", "lagos"]
        );
        assert_eq!(words("What does guide.md say about parking?"), ["parking"]);
        assert_eq!(
            words("What is Chen Wei's phone number in contacts.csv?"),
            ["phone", "number"]
        );
        assert_eq!(
            words("How many fixes are listed in docs/changelog.md?"),
            ["fixes"]
        );
        assert!(words("What files are in your workspace?").is_empty());
        // A modal verb is no subject: "should" was said to be missing.
        assert!(words("What should be harvested weekly according to guide.md?").is_empty());
    }

    #[test]
    fn a_plural_is_found_by_its_stem() {
        assert_eq!(occurrences("- fixed the login", "fixes"), 1);
        assert_eq!(occurrences("meetings move", "meetings"), 1);
        assert_eq!(occurrences("the bus", "bus"), 1);
    }

    proptest::proptest! {
        /// Whatever the file holds, the note is the program's fixed words
        /// around words of the question: no byte of the file reaches it.
        #[test]
        fn the_note_carries_only_the_questions_words(
            body in "[a-z ,.<>/\n]{0,200}",
            question in "(what|which|the|of|about|in|[a-z]{3,8})( (what|which|the|of|about|in|[a-z]{3,8})){0,8}",
        ) {
            if let Some(note) = mentions_note(&question, &[], &wrap(&body)) {
                let mut quoted = note.split('"');
                let fixed = quoted.next().unwrap_or_default();
                proptest::prop_assert!(
                    ["(Searched by the program: the question's word ", "(Searched by the program: the question's words "].contains(&fixed),
                    "{fixed:?}"
                );
                for (i, part) in quoted.enumerate() {
                    if i % 2 == 0 {
                        proptest::prop_assert!(question.split(' ').any(|w| w == part), "{part:?} not a word of {question:?}");
                    } else {
                        proptest::prop_assert!(
                            [" is not in this file.)", " and ", ", ", " are not in this file.)"].contains(&part),
                            "{part:?}"
                        );
                    }
                }
            }
        }
    }
}
