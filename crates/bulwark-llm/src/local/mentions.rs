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
    "per",
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
    "one",
    "ones",
    // The request's own verbs ("*check* your files", "*look* through").
    "check",
    "look",
    "search",
    "find",
    "give",
];

/// Verbs too common to be what a question asks about a named file
/// ("which amp does the guitar *use*", "how much milk *goes* in", "what
/// did the tower entry *cost*?" of a table whose column is `amount_eur`),
/// and nouns that name a part of any file ("the *names* of the blue
/// *items*"): the file names the thing, not these, and one said to be
/// missing hid the line with the answer, or was repeated as "not listed".
/// A search keeps them: a word one file has and another lacks tells the
/// two apart.
const COMMON_VERBS: &[&str] = &[
    "use",
    "uses",
    "used",
    "using",
    "get",
    "gets",
    "got",
    "make",
    "makes",
    "made",
    "take",
    "takes",
    "took",
    "go",
    "goes",
    "went",
    "want",
    "wants",
    "keep",
    "keeps",
    "cost",
    "costs",
    "pay",
    "paid",
    "spend",
    "spent",
    "name",
    "names",
    "value",
    "values",
    "details",
    "information",
    "info",
    "item",
    "items",
    "thing",
    "things",
    "row",
    "rows",
];

/// At most this many words of one phrase.
const PHRASE_WORDS: usize = 3;

/// Whether a number (or a [`COMMON_VERBS`] verb) in the question is one
/// of its subject words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Numbers {
    /// "port 8088": when the question searches files for it.
    Count,
    /// In a named file a number is more often a quantity the answer
    /// computes ("the 3 largest") than a string to find.
    Skip,
}

/// The words of the question's noun phrases ([`LEADS`]), of a phrase
/// after a question word and its auxiliary ("where *should* olive oil be
/// ordered"), and its names (a capitalised word inside a sentence: "who
/// wrote Hamlet"), lowercased, in order, without repeats and without the
/// words of the files' names. An identifier stays whole
/// ("max_connections"). What a count counts ("how many *people*") is left
/// out: it is a category the file rarely names, and a 0 for it made the
/// model answer 0.
pub(crate) fn subject_words(question: &str, named_paths: &[&str], numbers: Numbers) -> Vec<String> {
    let tokens = question_tokens(question);
    let names: Vec<String> = named_paths.iter().map(|p| p.to_lowercase()).collect();
    let mut words: Vec<String> = Vec::new();
    let mut in_phrase = 0usize;
    let mut counted = false;
    let mut previous = String::new();
    for token in &tokens {
        let Some(text) = token.text else {
            // A path ends the phrase: what follows is about the file.
            in_phrase = 0;
            previous.clear();
            continue;
        };
        let lower = text.to_lowercase();
        let lead = LEADS.contains(&lower.as_str())
            || QUESTION_WORDS.contains(&previous.as_str()) && AUXILIARIES.contains(&lower.as_str());
        let stop = STOP_WORDS.contains(&lower.as_str())
            || numbers == Numbers::Skip && COMMON_VERBS.contains(&lower.as_str());
        if lead || stop {
            in_phrase = if lead { PHRASE_WORDS } else { 0 };
            // "How much *sugar*" names a substance the file would hold;
            // "how many *people*" a category it rarely names.
            counted = previous == "how" && lower == "many";
            previous = lower;
            continue;
        }
        // "What happened", "which changed", "what's planned": a past
        // verb, not a subject.
        let past_verb = matches!(previous.as_str(), "what" | "which" | "who" | "s")
            && lower.chars().count() >= 6
            && lower.ends_with("ed")
            && !lower.ends_with("eed");
        previous = lower.clone();
        if past_verb {
            in_phrase = 0;
            continue;
        }
        if FILE_TYPE_WORDS.contains(&lower.as_str()) || RANKING_WORDS.contains(&lower.as_str()) {
            continue;
        }
        let a_name = token.is_name();
        if in_phrase == 0 && !a_name {
            continue;
        }
        in_phrase = in_phrase.saturating_sub(1);
        // A file's name ends the phrase: what follows is about the file.
        if names.iter().any(|n| n.contains(lower.as_str())) {
            in_phrase = 0;
            continue;
        }
        if counted && !a_name {
            continue;
        }
        let number = lower.chars().all(|c| c.is_ascii_digit());
        let worth = lower.chars().count() >= 3 && (!number || numbers == Numbers::Count);
        if worth && !words.contains(&lower) {
            words.push(lower);
            if words.len() == MAX_WORDS {
                break;
            }
        }
    }
    words
}

/// Words that ask ("where", "who"); after one, an auxiliary verb leads
/// the phrase of what is asked about ("when *does* the room close").
const QUESTION_WORDS: &[&str] = &["who", "where", "when", "why", "how"];

/// The auxiliary and modal verbs that follow a [`QUESTION_WORDS`] word.
const AUXILIARIES: &[&str] = &[
    "is", "are", "was", "were", "does", "do", "did", "should", "can", "could", "will", "would",
    "may", "must", "shall", "might",
];

/// Words that rank what the file holds ("the *largest* order"): the
/// program or the model computes them, a file rarely spells them out,
/// and said to be missing they read as "the file does not say".
const RANKING_WORDS: &[&str] = &[
    "largest", "biggest", "smallest", "highest", "lowest", "newest", "oldest", "latest",
    "earliest", "cheapest", "dearest", "longest", "shortest", "greatest", "fewest", "least",
    "best", "worst", "first", "last", "next", "previous", "top", "bottom", "total",
];

/// Words that name a kind of file ("the CSV", "the README"): what they
/// name is the file, not a word its text would hold.
const FILE_TYPE_WORDS: &[&str] = &[
    "csv",
    "tsv",
    "md",
    "markdown",
    "txt",
    "json",
    "yaml",
    "yml",
    "toml",
    "ini",
    "xml",
    "html",
    "pdf",
    "readme",
    "changelog",
    "log",
];

/// One word of the question as typed: a run of letters, digits and `_`
/// (`None` for a word that reads as a path), and whether it begins a
/// sentence (a capital there is no name).
struct Token<'q> {
    text: Option<&'q str>,
    starts_sentence: bool,
}

impl Token<'_> {
    /// A capitalised word inside a sentence ("Hamlet", "RAM"), not "I".
    fn is_name(&self) -> bool {
        !self.starts_sentence
            && self
                .text
                .is_some_and(|t| t != "I" && t.chars().next().is_some_and(char::is_uppercase))
    }
}

/// The words of `question`; a path ("notes.txt") is one token without
/// text, so a capital in "README.md" is no name.
fn question_tokens(question: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut sentence_ended = true;
    for raw in question.split_whitespace() {
        let starts_sentence = sentence_ended;
        sentence_ended = raw.ends_with(['.', '?', '!', ':']);
        if super::steering::is_path_word(raw) {
            tokens.push(Token {
                text: None,
                starts_sentence,
            });
            continue;
        }
        let mut first = true;
        for text in raw
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|t| !t.is_empty())
        {
            tokens.push(Token {
                text: Some(text),
                starts_sentence: starts_sentence && first,
            });
            first = false;
        }
    }
    tokens
}

/// Whether `word` (lowercase) is a word that carries no subject: a lead
/// ("the", "of", "which") or a stop word ("is", "has", "files").
pub(crate) fn is_function_word(word: &str) -> bool {
    LEADS.contains(&word) || STOP_WORDS.contains(&word)
}

/// Whether `word` (lowercase) names a kind of file ("csv", "readme").
pub(crate) fn is_file_type_word(word: &str) -> bool {
    FILE_TYPE_WORDS.contains(&word)
}

/// The words of `text`, lowercased: runs of letters and digits.
pub(crate) fn lowercase_words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// How often `word` occurs in `haystack` (lowercase), counting its root
/// too ("fixes" is found in "Fixed", "meetings" in "Meeting", "ordered"
/// in "Order"): a word said to be missing that the file has in another
/// form made the model deny what the file says.
pub(crate) fn occurrences(haystack: &str, word: &str) -> usize {
    haystack.matches(root(word)).count()
}

/// `word`'s [`stem`] without a past's `ed` or a gerund's `ing`, when at
/// least four letters are left ("ordered" → "order", "red" stays), and
/// without a silent `e` then ("close" is found in "closing_hour").
fn root(word: &str) -> &str {
    let long_enough = |s: &&str| s.chars().count() >= 4;
    let root = word
        .strip_suffix("ing")
        .filter(long_enough)
        .or_else(|| word.strip_suffix("ed").filter(long_enough))
        .unwrap_or_else(|| stem(word));
    root.strip_suffix('e').filter(long_enough).unwrap_or(root)
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

/// The note for one read file's `content` (as wrapped, `table` when it
/// is a CSV table), `None` when the question names nothing the file
/// lacks. It says in plain words that no row (or line) has them: told
/// only that "fuses" was not in the file, the 1.5B model named the bin
/// of another part. Tried and dropped: ", so the file does not say",
/// which it took over where the missing word was only the question's own
/// ("what's *planned* for day 2").
pub(crate) fn mentions_note(
    question: &str,
    named_paths: &[&str],
    content: &str,
    table: bool,
) -> Option<String> {
    let words = subject_words(question, named_paths, Numbers::Skip);
    let absent = absent_words(&words, content);
    (!absent.is_empty()).then(|| {
        let unit = if table { "row" } else { "line" };
        let them = if absent.len() == 1 { "it" } else { "them" };
        format!(
            "(Searched by the program: the question's {} not in this file; there is no {unit} with {them}.)",
            these_words_are(&absent)
        )
    })
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
                &csv,
                true
            )
            .as_deref(),
            Some(
                "(Searched by the program: the question's word \"purple\" is not in this file; there is no row with it.)"
            )
        );
    }

    #[test]
    fn common_verbs_are_subject_words_of_a_search_only() {
        let named = |q: &str| subject_words(q, &[], Numbers::Skip);
        let searched = |q: &str| subject_words(q, &[], Numbers::Count);
        assert_eq!(named("What did the tower entry cost?"), ["tower", "entry"]);
        assert_eq!(named("Which amp does the guitar use?"), ["amp", "guitar"]);
        assert_eq!(
            searched("Which file says what the guitar uses?"),
            ["guitar", "uses"]
        );
        assert_eq!(named("Which file says what the guitar uses?"), ["guitar"]);
        // Ranking words are computed, never looked for.
        assert_eq!(
            named("Which customer placed the largest order?"),
            ["customer", "placed", "order"]
        );
        // "What's planned": a past verb after "what's".
        assert_eq!(named("What's planned for day 2?"), ["day"]);
    }

    #[test]
    fn no_note_when_every_word_is_there() {
        let csv = wrap("name,role,city\nBen Okafor,engineer,Lagos\n");
        let q = "Which engineer in contacts.csv lives in Lagos?";
        assert_eq!(mentions_note(q, &["contacts.csv"], &csv, true), None);
        let q = "What is the phone number of the engineer?";
        assert_eq!(
            mentions_note(q, &["contacts.csv"], &csv, true).as_deref(),
            Some(
                "(Searched by the program: the question's words \"phone\" and \"number\" are not in this file; there is no row with them.)"
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
            ["chen", "wei", "phone", "number"]
        );
        // What a count counts is left out; what it is counted of is not.
        assert!(words("How many fixes are listed in docs/changelog.md?").is_empty());
        assert_eq!(
            words("How many copies of Hamlet are in books.csv?"),
            ["hamlet"]
        );
        // A name inside a sentence, and the phrase after a question word's
        // auxiliary.
        assert_eq!(
            words("Who wrote Hamlet, according to books.csv?"),
            ["hamlet"]
        );
        assert_eq!(
            words("Where should olive oil be ordered from?"),
            ["olive", "oil"]
        );
        // A capital that begins a sentence, or names a kind of file, is no name.
        assert_eq!(
            words("Look in the CSV. Which city is Ana in?"),
            ["city", "ana"]
        );
        assert_eq!(words("What does the README say about Docker?"), ["docker"]);
        assert_eq!(words("What happened in April?"), ["april"]);
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
            if let Some(note) = mentions_note(&question, &[], &wrap(&body), false) {
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
                            [" is not in this file; there is no line with it.)", " and ", ", ", " are not in this file; there is no line with them.)"].contains(&part),
                            "{part:?}"
                        );
                    }
                }
            }
        }
    }
}
