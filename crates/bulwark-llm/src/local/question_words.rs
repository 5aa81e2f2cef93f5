//! The kinds of words a question is made of, as the notes about it
//! sort them: which words lead a phrase naming what is asked about, which
//! carry no subject, which only set the scene or rank what a file holds;
//! and the question split into words with where its sentences begin.
//! Each list grew from an eval task whose note went wrong without it.

/// Words after which a question names what it asks about ("the price of
/// the purple widget", "about parking", "Chen Wei's phone number", "which
/// engineer", "how many fixes"). Only the words of such a phrase are
/// counted: a verb ("which engineer *lives* in Lagos") is written
/// differently in the file ("Lagos" in a city column) and a 0 for it made
/// the model deny a fact the file holds.
pub(super) const LEADS: &[&str] = &[
    "the",
    "a",
    "an",
    "about",
    "against",
    "of",
    "in",
    "for",
    "with",
    "each",
    "every",
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
    "your",
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
pub(super) const STOP_WORDS: &[&str] = &[
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
    "file",
    "files",
    "from",
    "get",
    "gets",
    "getting",
    "got",
    "been",
    "being",
    "had",
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
    "here",
    "this",
    "that",
    "those",
    "to",
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
    "only",
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
pub(super) const COMMON_VERBS: &[&str] = &[
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
    "time",
    "times",
    "date",
    "dates",
];

/// Words that ask ("where", "who"); after one, an auxiliary verb leads
/// the phrase of what is asked about ("when *does* the room close").
pub(super) const QUESTION_WORDS: &[&str] = &["who", "where", "when", "why", "how"];

/// Words after which an `s` is "is" ("who's", "what's", "there's").
pub(super) const CONTRACTED: &[&str] = &[
    "who", "what", "where", "when", "why", "how", "there", "here", "it", "that",
];

/// Prepositions of place and time ("at the shelter", "on the calendar",
/// "during the week"): in a named file, their phrase sets the scene of the
/// question, not what it asks about, and said to be missing ("the question's word
/// "shelter" is not in this file") the 1.5B model answered that the file
/// did not exist. A name there ("on Saturdays", "in Lagos") still counts.
pub(super) const SCENE_WORDS: &[&str] = &[
    "at", "on", "during", "inside", "within", "near", "since", "until", "before", "after",
];

/// Particles of a phrasal verb ("shows *up*", "comes *in*").
pub(super) const PARTICLES: &[&str] = &[
    "up", "out", "off", "down", "over", "back", "around", "ahead",
];

/// Whether the word after `at` is a phrasal verb's particle: one of
/// [`PARTICLES`], or an "in" that ends its sentence ("when the vet comes
/// *in*?"), not one before a place ("employees *in* staff.csv").
pub(super) fn particle_follows(tokens: &[Token<'_>], at: usize) -> bool {
    let Some(next) = tokens.get(at + 1).and_then(|t| t.text) else {
        return false;
    };
    let next = next.to_lowercase();
    PARTICLES.contains(&next.as_str())
        || next == "in" && tokens.get(at + 2).is_none_or(|t| t.starts_sentence)
}

/// Leads of a search only: a search looks through files for any word
/// that tells them apart ("who has *to sign off* before we deploy *to
/// production*?"), scene or not.
pub(super) const SEARCH_LEADS: &[&str] = &["at", "on", "in", "to", "this", "that"];

/// Words that keep a scene's phrase open ("at *the* shelter").
pub(super) const DETERMINERS: &[&str] = &[
    "the", "a", "an", "my", "our", "their", "his", "her", "its", "this", "that", "these", "those",
];

/// The auxiliary and modal verbs that follow a [`QUESTION_WORDS`] word.
pub(super) const AUXILIARIES: &[&str] = &[
    "is", "are", "was", "were", "does", "do", "did", "should", "can", "could", "will", "would",
    "may", "must", "shall", "might",
];

/// Words that rank what the file holds ("the *largest* order"): the
/// program or the model computes them, a file rarely spells them out,
/// and said to be missing they read as "the file does not say".
pub(super) const RANKING_WORDS: &[&str] = &[
    "largest", "biggest", "smallest", "highest", "lowest", "newest", "oldest", "latest",
    "earliest", "cheapest", "dearest", "longest", "shortest", "greatest", "fewest", "least",
    "best", "worst", "first", "last", "next", "previous", "top", "bottom", "total", "second",
    "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "higher", "lower",
    "larger", "bigger", "smaller", "greater", "fewer", "cheaper", "dearer", "earlier", "later",
    "longer", "shorter", "older", "newer",
];

/// Words that name a kind of file ("the CSV", "the README"): what they
/// name is the file, not a word its text would hold.
pub(super) const FILE_TYPE_WORDS: &[&str] = &[
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
pub(super) struct Token<'q> {
    pub(super) text: Option<&'q str>,
    pub(super) starts_sentence: bool,
    /// Part of a hyphenated word ("on-call"): no preposition.
    pub(super) compound: bool,
}

impl Token<'_> {
    /// A capitalised word inside a sentence ("Hamlet", "RAM"), not "I".
    pub(super) fn is_name(&self) -> bool {
        !self.starts_sentence
            && self
                .text
                .is_some_and(|t| t != "I" && t.chars().next().is_some_and(char::is_uppercase))
    }
}

/// The words of `question`; a path ("notes.txt") is one token without
/// text, so a capital in "README.md" is no name.
pub(super) fn question_tokens(question: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut sentence_ended = true;
    for raw in question.split_whitespace() {
        let starts_sentence = sentence_ended;
        sentence_ended = raw.ends_with(['.', '?', '!', ':']);
        if super::steering::is_path_word(raw) {
            tokens.push(Token {
                text: None,
                starts_sentence,
                compound: false,
            });
            continue;
        }
        let mut first = true;
        let compound = raw
            .trim_matches(|c: char| !c.is_alphanumeric())
            .contains('-');
        for text in raw
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|t| !t.is_empty())
        {
            tokens.push(Token {
                text: Some(text),
                starts_sentence: starts_sentence && first,
                compound,
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
