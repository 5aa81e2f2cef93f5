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

use super::question_words::{
    AUXILIARIES, COMMON_VERBS, CONTRACTED, DETERMINERS, FILE_TYPE_WORDS, LEADS, PARTICLES,
    QUESTION_WORDS, RANKING_WORDS, SCENE_WORDS, SEARCH_LEADS, STOP_WORDS, particle_follows,
    question_tokens,
};
pub(crate) use super::question_words::{is_file_type_word, is_function_word};

/// At most this many words per note.
const MAX_WORDS: usize = 6;

/// At most this many words of one phrase.
const PHRASE_WORDS: usize = 3;

/// Words a price is asked with, before "to" and the service priced
/// ("cost to neuter", "charge to hire").
const PRICE_WORDS: &[&str] = &["cost", "costs", "charge", "charges", "pay", "price", "fee"];

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
    let mut in_scene = false;
    let mut contracted = false;
    let day_words = super::dates::day_words(question);
    for (at, token) in tokens.iter().enumerate() {
        let prior = previous.clone();
        let Some(text) = token.text else {
            // A path ends the phrase: what follows is about the file.
            in_phrase = 0;
            in_scene = false;
            previous.clear();
            continue;
        };
        let lower = text.to_lowercase();
        let scene = numbers == Numbers::Skip && SCENE_WORDS.contains(&lower.as_str());
        if scene && !token.compound {
            in_phrase = 0;
            in_scene = true;
            previous = lower;
            continue;
        }
        if in_scene && DETERMINERS.contains(&lower.as_str()) {
            previous = lower;
            continue;
        }
        // "Who's", "what's": the `s` is "is", not a possessive.
        let is_contraction = lower == "s" && CONTRACTED.contains(&previous.as_str());
        let after_question = QUESTION_WORDS.contains(&previous.as_str())
            && (AUXILIARIES.contains(&lower.as_str()) || is_contraction);
        let lead = after_question
            || LEADS.contains(&lower.as_str()) && !is_contraction
            || numbers == Numbers::Count && SEARCH_LEADS.contains(&lower.as_str());
        let stop = STOP_WORDS.contains(&lower.as_str())
            || is_contraction
            || numbers == Numbers::Skip && COMMON_VERBS.contains(&lower.as_str());
        if lead || stop {
            in_scene = false;
            in_phrase = if lead { PHRASE_WORDS } else { 0 };
            // "How much *sugar*" names a substance the file would hold;
            // "how many *people*" a category it rarely names.
            counted = previous == "how" && lower == "many";
            contracted = after_question;
            previous = lower;
            continue;
        }
        // "What happened", "which changed", "what's planned": a past
        // verb, not a subject; "who's coming", "who is coming": a verb
        // in -ing.
        let long = lower.chars().count() >= 6;
        // "Which block *yielded*", "which customer *placed*": the verb
        // after the noun a which-question asks about.
        let word_at = |i: usize| tokens.get(i).and_then(|t| t.text).map(str::to_lowercase);
        let after_asked_noun = at >= 2
            && matches!(word_at(at - 2).as_deref(), Some("which" | "what"))
            && word_at(at - 1).is_some_and(|w| !is_function_word(&w));
        let past_verb = (matches!(previous.as_str(), "what" | "which" | "who" | "s")
            || after_asked_noun)
            && long
            && lower.ends_with("ed")
            && !lower.ends_with("eed");
        let doing = contracted && long && lower.ends_with("ing")
            // "Which company *shows up*", "the day the vet *comes in*".
            || lower.ends_with('s') && particle_follows(&tokens, at)
            // "When does the certificate *run out*?": a particle that
            // ends the question ends a verb (the file says "expiry").
            || !token.is_name()
                && tokens
                    .get(at + 1)
                    .and_then(|t| t.text)
                    .is_some_and(|t| PARTICLES.contains(&t.to_lowercase().as_str()))
                && tokens.get(at + 2).is_none_or(|t| t.starts_sentence);
        contracted = false;
        if in_scene && !token.is_name() {
            previous = lower;
            continue;
        }
        in_scene = false;
        previous = lower.clone();
        if past_verb || doing {
            in_phrase = 0;
            continue;
        }
        // "Where do we *buy* the Celadon Blue", "who *loaded* the kiln":
        // a word right before an article takes an object; a verb, not a
        // thing the file would hold. Said missing, the supplier's row
        // went unread ("buy" is in no row).
        // "How much does it cost *to neuter* a cat": after a price's "to"
        // the verb is the service the price list names ("Neutering"),
        // and the thing asked; a file without it has no such price.
        let priced_service = prior == "to"
            && at >= 2
            && word_at(at - 2).is_some_and(|w| PRICE_WORDS.contains(&w.as_str()))
            && !is_function_word(&lower);
        if priced_service {
            in_phrase = PHRASE_WORDS;
        }
        let takes_object = !token.is_name()
            && !priced_service
            && !DETERMINERS.contains(&prior.as_str())
            && tokens.get(at + 1).is_some_and(|next| {
                !next.starts_sentence
                    && next
                        .text
                        .is_some_and(|t| OBJECT_ARTICLES.contains(&t.to_lowercase().as_str()))
            });
        // "Who do we *buy* rye flour from", "what did you *order*": after
        // an auxiliary and its pronoun comes the verb, and then what the
        // file would hold. Said missing, "buy" sent the model reading on
        // past the line "Rye flour: Harrow Farm Mill".
        let verb_after_pronoun = at >= 2
            && SUBJECT_PRONOUNS.contains(&prior.as_str())
            && word_at(at - 2).is_some_and(|w| AUXILIARIES.contains(&w.as_str()))
            && !token.is_name();
        if takes_object || verb_after_pronoun {
            continue;
        }
        // "*What time* does it start?", "what date": the kind of answer
        // asked for, as "when" is; the file has the time, not the word.
        let answer_kind = matches!(prior.as_str(), "what" | "which")
            && matches!(
                lower.as_str(),
                "time"
                    | "times"
                    | "date"
                    | "dates"
                    | "day"
                    | "days"
                    | "year"
                    | "years"
                    | "month"
                    | "months"
            );
        // "At the *moment*", "for the *moment*": now, as "currently" is;
        // no file has the word. Said missing, the units table's count
        // by status was withheld and the 1.5B model read on.
        let now = lower == "moment"
            && prior == "the"
            && at >= 2
            && word_at(at - 2).is_some_and(|w| w == "at" || w == "for");
        if FILE_TYPE_WORDS.contains(&lower.as_str())
            || RANKING_WORDS.contains(&lower.as_str())
            || day_words.contains(&lower)
            || now
            || answer_kind
            || SUBJECT_PRONOUNS.contains(&lower.as_str()) && !token.is_name()
        {
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
        // "Could I borrow it *this weekend*": when, not what; the file
        // keeps no weekends.
        let time_frame = matches!(prior.as_str(), "this" | "next" | "last" | "coming")
            && TIME_FRAMES.contains(&lower.as_str());
        // "On sale *right now*", "*right away*": an adverb.
        let adverb = lower == "right"
            && tokens
                .get(at + 1)
                .and_then(|t| t.text)
                .is_some_and(|t| matches!(t.to_lowercase().as_str(), "now" | "away"));
        if (time_frame || adverb || HEDGES.contains(&lower.as_str())) && !a_name {
            continue;
        }
        // "Our *two* Dobsonians": a count spelled out is a number.
        let number =
            lower.chars().all(|c| c.is_ascii_digit()) || SPELLED_NUMBERS.contains(&lower.as_str());
        // "Episode *48*", "week *18*": a number after the noun it numbers
        // names one thing, as a name does ("the *3* largest" does not).
        let identifier = number
            && prior.chars().count() >= 3
            && !is_function_word(&prior)
            && !RANKING_WORDS.contains(&prior.as_str())
            && !prior.chars().all(|c| c.is_ascii_digit());
        let spelled = SPELLED_NUMBERS.contains(&lower.as_str());
        let worth = identifier
            || lower.chars().count() >= 3 && (!number || numbers == Numbers::Count && !spelled);
        if worth && !words.contains(&lower) {
            words.push(lower);
            if words.len() == MAX_WORDS {
                break;
            }
        }
    }
    words
}

/// Spans of time a question sets its scene in ("this *weekend*").
const TIME_FRAMES: &[&str] = &[
    "weekend",
    "week",
    "month",
    "year",
    "morning",
    "afternoon",
    "evening",
    "night",
    "season",
    "term",
    "quarter",
    "summer",
    "winter",
    "spring",
    "autumn",
];

/// Adverbs that say how sure or how current, not what: "is it
/// *definitely* going ahead?", "what is *currently* on loan?".
const HEDGES: &[&str] = &[
    "definitely",
    "actually",
    "currently",
    "really",
    "exactly",
    "probably",
    "certainly",
    "presently",
    "already",
    "still",
    "surely",
    "officially",
    "somewhere",
    "anywhere",
    "perhaps",
    "maybe",
];

/// Pronouns that can be the subject of a question's verb ("do *we* buy").
const SUBJECT_PRONOUNS: &[&str] = &["we", "you", "i", "they", "he", "she"];

/// Small counts spelled out.
const SPELLED_NUMBERS: &[&str] = &[
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
];

/// Articles that start an object ("buy *the* glaze"): "that" and "his"
/// or "her" start clauses and follow nouns too often to say a verb.
const OBJECT_ARTICLES: &[&str] = &["the", "a", "an", "my", "our", "their", "your"];

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
    let other_form = other_f_form(word);
    haystack.matches(root(word)).count()
        + other_form.map_or(0, |form| haystack.matches(form.as_str()).count())
        + spelled_out_group(word).map_or(0, |spelled| {
            spelled
                .iter()
                .map(|form| haystack.matches(form.as_str()).count())
                .sum()
        })
}

/// An age group's spelled-out forms ("under-12", "under 12") for the
/// short form the question is given in (`short_forms.rs`: "u12").
fn spelled_out_group(word: &str) -> Option<[String; 2]> {
    let age = word.strip_prefix('u')?;
    let digits = (1..=2).contains(&age.len()) && age.chars().all(|c| c.is_ascii_digit());
    digits.then(|| [format!("under-{age}"), format!("under {age}")])
}

/// The other number of a word whose plural turns `f` into `ves`: "half"
/// and "halves", "shelves" and "shelf", "knife" and "knives". Asked how
/// long "each half" is, a search read past "2 halves of 25 minutes".
fn other_f_form(word: &str) -> Option<String> {
    let long_enough = |s: &&str| s.chars().count() >= 3;
    if let Some(base) = word.strip_suffix("ves").filter(long_enough) {
        return Some(format!("{base}f"));
    }
    word.strip_suffix("fe")
        .or_else(|| word.strip_suffix('f'))
        .filter(long_enough)
        .map(|base| format!("{base}ves"))
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
    others: &[&str],
    table: bool,
) -> Option<String> {
    let words = subject_words(question, named_paths, Numbers::Skip);
    let mut absent = absent_words(&words, content);
    let numbers = absent_qualifying_numbers(question, content);
    absent.extend(numbers.iter().map(String::as_str));
    absent.retain(|w| {
        others
            .iter()
            .all(|other| !absent_words(&[(*w).to_owned()], other).is_empty())
    });
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
        .filter(|w| !mentioned(&haystack, w))
        .map(String::as_str)
        .collect()
}

/// The numbers of `question` that qualify the word after them ("the *26*
/// inch tube", "port *8088*" is not one): a file that has the word but
/// not the number has another thing of that kind ("16 inch tube"), and the
/// 1.5B model gave its price. A number before a ranking word ("the 3
/// largest") is a quantity the answer computes, not one to find.
pub(crate) fn qualifying_numbers(question: &str) -> Vec<String> {
    let tokens = question_tokens(question);
    let mut numbers: Vec<String> = Vec::new();
    for pair in tokens.windows(2) {
        let (Some(number), Some(word)) = (pair[0].text, pair[1].text) else {
            continue;
        };
        let word = word.to_lowercase();
        let qualifies = number.chars().all(|c| c.is_ascii_digit())
            && word.chars().count() >= 3
            && word.chars().all(char::is_alphabetic)
            && !is_function_word(&word)
            && !RANKING_WORDS.contains(&word.as_str())
            // "9 November" is a day, found in `2024-11-09` (`dates.rs`).
            && month_of(&word).is_none();
        if qualifies && !numbers.iter().any(|n| n == number) {
            numbers.push(number.to_owned());
        }
    }
    numbers
}

/// The [`qualifying_numbers`] of `question` that `content` (as wrapped)
/// lacks, save those a range the file states covers: "if I cancel *10*
/// days before" of a file that says "7 to 13 days" (`ranges.rs`).
pub(crate) fn absent_qualifying_numbers(question: &str, content: &str) -> Vec<String> {
    let numbers = qualifying_numbers(question);
    let absent = absent_numbers(&numbers, content);
    if absent.is_empty() {
        return Vec::new();
    }
    let lines: Vec<String> = super::shape::unwrapped_lines(content)
        .into_iter()
        .map(str::to_lowercase)
        .collect();
    absent
        .into_iter()
        .filter(|n| !super::ranges::in_a_stated_range(question, n, &lines))
        .map(str::to_owned)
        .collect()
}

/// Those of `numbers` that `content` (as wrapped) does not hold as a
/// whole number ("26" is not in "2026" or "26.5").
pub(crate) fn absent_numbers<'n>(numbers: &'n [String], content: &str) -> Vec<&'n str> {
    let held: Vec<&str> = super::shape::unwrapped_lines(content)
        .into_iter()
        .flat_map(|l| l.split(|c: char| !(c.is_ascii_digit() || c == '.')))
        .map(|t| t.trim_matches('.'))
        .collect();
    numbers
        .iter()
        .filter(|n| !held.contains(&n.as_str()))
        .map(String::as_str)
        .collect()
}

/// Whether `haystack` (lowercase) has `word` ([`occurrences`]), or, for
/// a month's name, a date in that month ("february" in `2026-02-11`): a
/// month said to be missing from a table of dates made the model count
/// none.
pub(crate) fn mentioned(haystack: &str, word: &str) -> bool {
    occurrences(haystack, word) > 0
        || month_of(word).is_some_and(|m| has_date_in(haystack, m))
        || short_forms_of_day(word)
            .iter()
            .any(|short| has_whole_word(haystack, short))
        || ordinal_number(word).is_some_and(|number| has_whole_word(haystack, number))
        || unit_symbol(word).is_some_and(|symbol| has_unit(haystack, symbol))
        || same_meaning(word)
            .iter()
            .any(|other| occurrences(haystack, other) > 0)
}

/// How a table or a rota shortens a weekday ("Thu 13 Mar" for
/// "Thursday"): said to be missing, the weekday sent the search on past
/// the rehearsal schedule that had the row.
pub(crate) fn short_forms_of_day(word: &str) -> &'static [&'static str] {
    match word.trim_end_matches('s') {
        "monday" => &["mon"],
        "tuesday" => &["tue", "tues"],
        "wednesday" => &["wed"],
        "thursday" => &["thu", "thur", "thurs"],
        "friday" => &["fri"],
        "saturday" => &["sat"],
        "sunday" => &["sun"],
        _ => &[],
    }
}

/// The number of an ordinal ("13" of "13th"): "the 13th" is "Thu 13 Mar"
/// in a schedule.
pub(crate) fn ordinal_number(word: &str) -> Option<&str> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    (matches!(suffix, "st" | "nd" | "rd" | "th")
        && !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit()))
    .then_some(digits)
}

/// Whether `word` stands in `haystack` as a word of its own, not inside
/// another ("thu" in "Thu 13", not in "thumb"; "13" in "13 Mar", not in
/// "2013").
fn has_whole_word(haystack: &str, word: &str) -> bool {
    haystack.match_indices(word).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// Words files use for what a question calls otherwise: the log says
/// "delayed" where the question asks why it was "late", the price list
/// has a "fee" or a "fare" where the question asks what it "costs". Said
/// to be missing, the word stopped the line note and sent the model to
/// another file. Kept to pairs that mean the same in any workspace.
fn same_meaning(word: &str) -> &'static [&'static str] {
    match word {
        "late" | "later" => &["delay"],
        "delay" | "delayed" | "delays" => &["late"],
        "cost" | "costs" | "price" | "prices" | "priced" => {
            &["cost", "price", "fee", "fare", "rate"]
        }
        "expire" | "expires" | "expired" | "expiry" | "expiration" => &["expir"],
        "deductible" | "deductibles" => &["excess"],
        "excess" => &["deductible"],
        _ => &[],
    }
}

/// The symbol files write for a unit the question spells out ("kilos" in
/// a `honey_kg` column): said to be missing, the unit sent the search on
/// to another file, whose lines the model then answered from.
fn unit_symbol(word: &str) -> Option<&'static str> {
    let symbol = match word {
        "kilo" | "kilos" | "kilogram" | "kilograms" | "kilogramme" | "kilogrammes" => "kg",
        "kilometre" | "kilometres" | "kilometer" | "kilometers" => "km",
        "minute" | "minutes" => "min",
        "percent" | "percentage" => "%",
        _ => return None,
    };
    Some(symbol)
}

/// Whether `haystack` has `symbol` as a unit: after a number ("7.5 kg",
/// "12km", "40%") or as a word of a name (`honey_kg`, "(kg)").
fn has_unit(haystack: &str, symbol: &str) -> bool {
    haystack.match_indices(symbol).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + symbol.len()..].chars().next();
        let starts = before.is_none_or(|c| !c.is_alphabetic());
        let ends = after.is_none_or(|c| !c.is_alphanumeric());
        starts && (ends || symbol == "%")
    })
}

pub(crate) const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The month (1 to 12) `word` (lowercase) names, in full or as its first
/// three letters ("feb"), but not "may" or "march" as the verbs they
/// also are unless in full.
pub(crate) fn month_of(word: &str) -> Option<u32> {
    let at = MONTHS.iter().position(|m| {
        *m == word || word.len() == 3 && m.starts_with(word) && !matches!(word, "mar" | "may")
    })?;
    u32::try_from(at + 1).ok()
}

/// Whether `text` holds an ISO date (`YYYY-MM-DD`) in `month`.
fn has_date_in(text: &str, month: u32) -> bool {
    let bytes = text.as_bytes();
    let digits = |from: usize, n: usize| bytes[from..from + n].iter().all(u8::is_ascii_digit);
    (0..bytes.len().saturating_sub(9)).any(|at| {
        digits(at, 4)
            && bytes[at + 4] == b'-'
            && digits(at + 5, 2)
            && bytes[at + 7] == b'-'
            && digits(at + 8, 2)
            && text.get(at + 5..at + 7).and_then(|m| m.parse::<u32>().ok()) == Some(month)
    })
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
#[path = "mentions_tests.rs"]
mod tests;
