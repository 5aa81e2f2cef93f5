//! What the driver shows the local model after it reads a text file
//! (Markdown, notes, a config) for a question that looks something up:
//! the line or two that hold the question's words, or the section under
//! a heading that does.
//!
//! Why: with the whole file in front of it, the 1.5B model answered "What
//! is the extension of the IT help desk in guide.md?" with ".md", "What
//! should be harvested weekly?" with a sentence about the schedule, and
//! "What happened in April?" from the wrong month. Finding the line is
//! the program's job, as finding a table's row is (`table.rs`); the model
//! then reads the answer off one line.
//!
//! Left out on purpose:
//! - a question a word of whose subject the file lacks ("the wifi
//!   password" in a file of kitchen notes): a line that shares some other
//!   word would be read as the answer, and the absent-words note
//!   (`mentions.rs`) says what is missing instead;
//! - counts ("how many fixes"): the lines that share a word are not the
//!   things counted, and `shape.rs` counts ("how much milk" is a lookup);
//! - tables (`table.rs`) and questions naming two files (`compare.rs`).
//!
//! The lines are file content, so they stand inside the kernel's boundary
//! tags, copied from the read's result; outside is the program's heading.

use super::compare::boundary_tags;
use super::dates::{asked_dates, holds_asked_date};
use super::mentions::{
    Numbers, absent_words, is_file_type_word, is_function_word, lowercase_words, month_of,
    occurrences, subject_words,
};
use super::ranges::{Quantity, asked_quantities, range_holds};
use super::shape::unwrapped_lines;
use super::steering::is_path_word;
use super::table::Table;

/// A file this short is read whole at a glance: no note.
const MIN_FILE_LINES: usize = 4;

/// More best lines than this and the question's words do not pick one.
const MAX_PICKED: usize = 2;

/// At most this many lines of a section under a heading that matched.
const MAX_SECTION_LINES: usize = 4;

/// Verbs of the request itself ("read notes.txt and tell me"), not of
/// what it asks about.
const REQUEST_WORDS: &[&str] = &[
    "read",
    "find",
    "look",
    "check",
    "give",
    "write",
    "answer",
    "question",
    "please",
    "according",
    "line",
    "lines",
    "text",
    "says",
    "said",
];

/// The note after a read of `path` (its result as wrapped) for
/// `question`; `None` when it is not a lookup in a text file, or no line
/// stands out.
pub(crate) fn matching_lines_note(path: &str, question: &str, wrapped: &str) -> Option<String> {
    picked_lines(path, question, wrapped).map(|picked| picked.note)
}

/// The note [`matching_lines_note`] gives, and the asked word the one
/// line picked by a name lacks ([`lacking_word`]), for the answer turn.
pub(crate) struct PickedLines {
    pub(crate) note: String,
    pub(crate) lacking: Option<String>,
}

/// [`matching_lines_note`] with what it found.
pub(crate) fn picked_lines(path: &str, question: &str, wrapped: &str) -> Option<PickedLines> {
    // A count ("how many fixes") is shown as one only when one line
    // holds the question's words and a number of its own: "22mm
    // compression elbows: 7" answers how many are left; lines that share
    // a word are otherwise the things counted, and `shape.rs` counts.
    let counting = question.to_lowercase().contains("how many");
    if question
        .split_whitespace()
        .filter(|w| is_path_word(w))
        .count()
        > 1
    {
        return None;
    }
    if Table::of(path, wrapped).is_some() {
        return None;
    }
    let (open, close) = boundary_tags(wrapped)?;
    let lines: Vec<&str> = unwrapped_lines(wrapped)
        .into_iter()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    if lines.len() < MIN_FILE_LINES {
        return None;
    }
    let subject = subject_words(question, &[path], Numbers::Skip);
    if lacks_the_subject(question, &subject, wrapped)
        || !super::mentions::absent_qualifying_numbers(question, wrapped).is_empty()
    {
        return None;
    }
    let mut words = asked_words(question, path);
    if words.is_empty() {
        return None;
    }
    // "What *can't* they repair?": the negation is what picks "We can't
    // repair: ..." over the title line that only says "Repair Café"; as
    // a word it was lost ("can" and "t" are function words).
    if is_negated(&question.to_lowercase(), NEGATING_IN_QUESTIONS) {
        words.push(NEGATION.to_owned());
    }
    let lower: Vec<String> = lines.iter().map(|l| l.to_lowercase()).collect();
    // A month's name is found in a date of that month, and the day asked
    // with it too ("on 19 April" in `2025-04-19`); that one day's line is
    // worth two words, as the question names it twice.
    let dates = asked_dates(question);
    let date_of = |w: &str| month_of(w).and_then(|m| dates.iter().find(|d| d.month == m).copied());
    let has = |at: usize, w: &str| match date_of(w) {
        Some(date) => holds_asked_date(&lower[at], &[date]),
        None if w == NEGATION => is_negated(&lower[at], NEGATING_IN_LINES),
        // "Van *2*" is not in "2025" nor in "KX21": a number is found
        // whole. As a part of words, "2" was on every van's line, and no
        // line stood out.
        None if w.chars().all(|c| c.is_ascii_digit()) => {
            super::mentions::absent_numbers(std::slice::from_ref(&w.to_owned()), &lower[at])
                .is_empty()
        }
        None => occurrences(&lower[at], w) > 0,
    };
    // A word on few lines tells them apart more than one on many: "coat"
    // and "matted" pick the matting rule's line, where "dog" and
    // "charge" each pick two others too. Scores are in units of the
    // lines' count so they stay whole numbers and ties stay exact.
    // Once per word, not per line: a long file's lines times its lines.
    let weights: Vec<usize> = words
        .iter()
        .map(|w| {
            let asked = match date_of(w) {
                Some(date) if date.day.is_some() => 2,
                _ => 1,
            };
            let lines_with = (0..lines.len()).filter(|&at| has(at, w)).count().max(1);
            asked * lines.len() / lines_with
        })
        .collect();
    let parents: Vec<Option<usize>> = (0..lines.len()).map(|at| parent(&lines, at)).collect();
    // A line's score counts the words of its parent too ("Dr Lind
    // (paediatrics)" under "## Doctors" for "the paediatrics doctor"), so
    // a question that names a section and an item picks the item.
    // A document's title ("# Release process") is about the whole file:
    // it picks no line, and under it the model was shown most of the file.
    // So is a plain first line set apart by a blank one and giving no
    // value ("Village Hall - key holders (from January 2025)"): it holds
    // "hall" and "key", and outscored the Sundays line that answers.
    let raw: Vec<&str> = unwrapped_lines(wrapped).into_iter().take(2).collect();
    let plain_title = matches!(raw.as_slice(), [first, second]
        if !first.trim().is_empty() && second.trim().is_empty() && !first.contains(':'));
    let title = |at: usize| at == 0 && (lines[0].starts_with("# ") || plain_title);
    // "If I cancel *10 days* before": a line whose range of days holds
    // 10 is the one, over lines with the same words whose ranges do not
    // (`ranges.rs`); those are out.
    let quantities = asked_quantities(question);
    let in_range = |at: usize| -> Option<bool> {
        let verdicts: Vec<bool> = quantities
            .iter()
            .filter_map(|q| range_holds(&lower[at], q))
            .collect();
        (!verdicts.is_empty()).then(|| verdicts.iter().all(|&holds| holds))
    };
    let scores: Vec<usize> = (0..lines.len())
        .map(|at| {
            if title(at) {
                return 0;
            }
            let range_bonus = match in_range(at) {
                Some(false) => return 0,
                Some(true) => 2 * lines.len(),
                None => 0,
            };
            range_bonus
                + words
                    .iter()
                    .zip(&weights)
                    .filter(|(w, _)| {
                        has(at, w) || parents[at].is_some_and(|p| !title(p) && has(p, w))
                    })
                    .map(|(_, weight)| weight)
                    .sum::<usize>()
        })
        .collect();
    let best = scores.iter().copied().max().unwrap_or(0);
    let picked: Vec<usize> = (0..lines.len()).filter(|&i| scores[i] == best).collect();
    // An item picked only with its picked parent is shown in the parent's
    // section.
    let picked: Vec<usize> = picked
        .iter()
        .copied()
        .filter(|&at| parents[at].is_none_or(|p| !picked.contains(&p)))
        .collect();
    if best == 0 || picked.len() > MAX_PICKED {
        return None;
    }
    if counting && !(picked.len() == 1 && holds_its_own_number(lines[picked[0]], question)) {
        return None;
    }
    let mut shown: Vec<usize> = Vec::new();
    // The parent that helped pick a line is not shown: under "## Reception"
    // the 1.5B model answered "who works reception in the afternoons?"
    // with the section's first item instead of the picked one. But lines
    // alike under different headings are told apart only by them: shown
    // "- Wheat flour: €0.95" and "- Wheat flour: €1.40" without the
    // suppliers' headings, the 1.5B model named the wrong supplier.
    let headed = headings_that_tell_apart(&lines, &picked, &parents, &scores);
    for (n, &at) in picked.iter().enumerate() {
        if let Some(heading) = headed.as_ref().map(|h| h[n]) {
            push_new(&mut shown, heading);
        }
        push_new(&mut shown, at);
        children(&lines, at)
            .take(MAX_SECTION_LINES)
            .for_each(|i| push_new(&mut shown, i));
    }
    if shown.len() + 1 >= lines.len() {
        return None;
    }
    // The range that picked the line, said in the question's words: shown
    // "50% refund if you cancel 7 to 13 days before" for "if I cancel 10
    // days before", the 1.5B model still answered from the "less than 7
    // days" line of the file above it.
    let in_its_range = match picked.as_slice() {
        [at] if in_range(*at) == Some(true) => quantities
            .iter()
            .find(|q| range_holds(&lower[*at], q) == Some(true))
            .map(Quantity::spoken),
        _ => None,
    };
    let heading = match shown.len() {
        1 if in_its_range.is_some() => format!(
            "(Found by the program: the line of the file whose range holds the question's \"{}\":)",
            in_its_range.unwrap_or_default()
        ),
        _ if headed.is_some() => "(Found by the program: the lines of the file with the question's words, under their headings:)".to_owned(),
        1 => "(Found by the program: the line of the file with the question's words:)".to_owned(),
        n => {
            format!("(Found by the program: the {n} lines of the file with the question's words:)")
        }
    };
    let body: Vec<&str> = shown.iter().map(|&i| lines[i].trim()).collect();
    let part = match (picked.as_slice(), shown.len()) {
        ([at], 1) => qualified_part(lines[*at], &words).map(|part| {
            format!("\n(The part of that line the question's words pick:)\n{open}\n{part}\n{close}")
        }),
        _ => None,
    };
    let lacking = match (picked.as_slice(), shown.len()) {
        ([at], 1) => lacking_word(question, &words, *at, &has, &lines),
        _ => None,
    };
    let lacking_note = lacking.as_deref().map(|word| {
        let quoted = serde_json::Value::String(word.to_owned());
        format!(
            "\n(Checked by the program: that line has no {quoted}; other lines have one. So the files do not give {quoted} for it.)"
        )
    });
    let months = super::month_ranges::month_span_note(question, &body);
    let note = format!(
        "{heading}\n{open}\n{}\n{close}{}{}{}",
        body.join("\n"),
        part.unwrap_or_default(),
        lacking_note.unwrap_or_default(),
        months.unwrap_or_default()
    );
    Some(PickedLines { note, lacking })
}

/// For the one line picked by a name the question asks about ("Dr
/// *Okafor*'s mobile"), the one asked word it lacks that other lines of
/// the file have: the file gives that for others, not for this one. Why:
/// shown Dr Okafor's line (an extension and an e-mail), the 1.5B model
/// gave the mobile number on Dr Okonkwo's line below it.
fn lacking_word(
    question: &str,
    words: &[String],
    at: usize,
    has: &dyn Fn(usize, &str) -> bool,
    lines: &[&str],
) -> Option<String> {
    // A day is no name: "on a *Sunday*" picks the Sundays line, and
    // "hall" on the file's title line is no other entry's.
    let names: Vec<String> = super::question_words::question_tokens(question)
        .iter()
        .filter(|t| t.is_name())
        .filter_map(|t| t.text.map(str::to_lowercase))
        .filter(|name| !super::dates::says_when(name))
        .collect();
    if !words.iter().any(|w| names.contains(w) && has(at, w)) {
        return None;
    }
    let heading = |other: usize| {
        let line = lines[other].trim();
        other == 0 || line.starts_with('#') || line.ends_with(':')
    };
    let lacking: Vec<&String> = words
        .iter()
        .filter(|w| !names.contains(w) && *w != NEGATION && !has(at, w))
        .filter(|w| (0..lines.len()).any(|other| other != at && !heading(other) && has(other, w)))
        .collect();
    match lacking.as_slice() {
        [word] => Some((*word).clone()),
        _ => None,
    }
}

/// The word that stands for a negation among the asked words: it is no
/// word a line can hold, so only [`is_negated`] finds it.
const NEGATION: &str = "\u{0}not";

/// Words that negate a question ("what *can't* they fix", "what is *not*
/// included"), besides any ending in "n't".
const NEGATING_IN_QUESTIONS: &[&str] = &["not", "cannot", "never"];

/// Words that negate a line ("*No* refund if ...", "*Nothing* with a
/// cracked screen"), besides any ending in "n't".
const NEGATING_IN_LINES: &[&str] = &["not", "cannot", "never", "no", "none", "nothing"];

/// Whether `text` (lowercase) holds a negation: a word of `negating`, or
/// one ending in "n't" (straight or curly apostrophe).
fn is_negated(text: &str, negating: &[&str]) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '\u{2019}'))
        .any(|w| negating.contains(&w) || w.ends_with("n't") || w.ends_with("n\u{2019}t"))
}

/// Of a line that gives a value and then others for a kind of case
/// ("Term subs: £45, or £25 for students", "Adults £12; children £6"),
/// the one later part a word of the question is in when the first part
/// lacks it: "for students" picks £25. Why: shown the whole line, the
/// 1.5B model answered "£45, or £25 for students". `None` when no such
/// part stands out, or the parts carry no numbers.
fn qualified_part<'l>(line: &'l str, words: &[String]) -> Option<&'l str> {
    let parts: Vec<&str> = line
        .split([',', ';'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    let numbered = |p: &str| p.chars().any(|c| c.is_ascii_digit());
    if parts.len() < 2 || !parts.iter().all(|p| numbered(p)) {
        return None;
    }
    let has = |part: &str, w: &str| occurrences(&part.to_lowercase(), w) > 0;
    let picking: Vec<&str> = parts[1..]
        .iter()
        .copied()
        .filter(|part| words.iter().any(|w| has(part, w) && !has(parts[0], w)))
        .collect();
    match picking.as_slice() {
        [part] => Some(part),
        _ => None,
    }
}

/// Whether the file lacks what the question is about: a name or code of
/// its subject, or as many of the subject's words as it has. One plain
/// word of many ("how much *extra* is charged for a badly matted coat")
/// is the question's own phrasing, not a missing subject; the wifi
/// *password* in a file with only the wifi router is.
fn lacks_the_subject(question: &str, subject: &[String], wrapped: &str) -> bool {
    // The user's own thing ("*my party* at the hall is on a Sunday") is
    // no word of the file's: the question is about the hall's keys.
    let spoken = lowercase_words(question);
    let own = |w: &&str| {
        spoken
            .windows(2)
            .any(|pair| pair[0] == "my" && pair[1] == *w)
    };
    let absent: Vec<&str> = absent_words(subject, wrapped)
        .into_iter()
        .filter(|w| !own(w))
        .collect();
    let named = |w: &&str| w.chars().any(|c| c.is_ascii_digit());
    absent.iter().any(named) || !absent.is_empty() && absent.len() * 2 >= subject.len()
}

/// Whether `line` has a number the question does not: the count a line
/// of stock or a tally gives ("Ball valves: 5"), not the "22" of the
/// "22mm" asked about.
fn holds_its_own_number(line: &str, question: &str) -> bool {
    let numbers = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_ascii_digit())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let asked = numbers(question);
    numbers(line).iter().any(|n| !asked.contains(n))
}

/// For two or more picked lines under different Markdown headings or INI
/// sections that picked nothing themselves (score 0), those headings, one
/// per picked line; `None` otherwise.
fn headings_that_tell_apart(
    lines: &[&str],
    picked: &[usize],
    parents: &[Option<usize>],
    scores: &[usize],
) -> Option<Vec<usize>> {
    if picked.len() < 2 {
        return None;
    }
    let headings: Vec<usize> = picked
        .iter()
        .map(|&at| {
            parents[at]
                .filter(|&p| (is_heading(lines[p]) || is_section(lines[p])) && scores[p] == 0)
        })
        .collect::<Option<_>>()?;
    let distinct = headings
        .iter()
        .enumerate()
        .all(|(i, h)| !headings[..i].contains(h));
    distinct.then_some(headings)
}

/// The question's words worth finding in a line: not function words,
/// not the request's own verbs, not the file's name or kind.
pub(crate) fn asked_words(question: &str, path: &str) -> Vec<String> {
    let name = path.to_lowercase();
    let text: Vec<&str> = question
        .split_whitespace()
        .filter(|w| !is_path_word(w))
        .collect();
    let mut words: Vec<String> = Vec::new();
    let mut previous = String::new();
    for word in lowercase_words(&text.join(" ")) {
        // "Episode *48*": a number after the noun it numbers names one
        // line ("Ep 48: Hugo"), where the noun alone picked both items.
        let numbers_a_noun = word.chars().all(|c| c.is_ascii_digit())
            && previous.chars().count() >= 3
            && !is_function_word(&previous)
            && !previous.chars().all(|c| c.is_ascii_digit());
        previous.clone_from(&word);
        // A code ("H6", "B12") names its line however short it is.
        let code =
            word.chars().any(|c| c.is_ascii_digit()) && word.chars().any(char::is_alphabetic);
        let worth = (word.chars().count() >= 3 || numbers_a_noun || code)
            && !is_function_word(&word)
            && !is_file_type_word(&word)
            && !REQUEST_WORDS.contains(&word.as_str())
            && !name.contains(word.as_str());
        if worth && !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

fn is_heading(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

/// An INI file's `[section]` line.
fn is_section(line: &str) -> bool {
    let line = line.trim();
    line.starts_with('[') && line.ends_with(']')
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The line `at` stands under: for an indented line the nearest line
/// above it indented less (a YAML key, a list's item); else the nearest
/// Markdown heading or INI section above. A heading has none.
fn parent(lines: &[&str], at: usize) -> Option<usize> {
    let line = lines[at];
    if is_heading(line) || is_section(line) {
        return None;
    }
    let own = indent(line);
    if own > 0 {
        return (0..at).rev().find(|&i| indent(lines[i]) < own);
    }
    (0..at)
        .rev()
        .find(|&i| is_heading(lines[i]) || is_section(lines[i]))
}

/// The lines that stand under line `at`: a heading's or section's up to
/// the next one, or the lines indented deeper right after it.
fn children<'l>(lines: &'l [&str], at: usize) -> impl Iterator<Item = usize> + 'l {
    let line = lines[at];
    let header = is_heading(line) || is_section(line);
    let own = indent(line);
    (at + 1..lines.len()).take_while(move |&i| {
        if header {
            !is_heading(lines[i]) && !is_section(lines[i])
        } else {
            indent(lines[i]) > own
        }
    })
}

fn push_new(shown: &mut Vec<usize>, at: usize) {
    if !shown.contains(&at) {
        shown.push(at);
    }
}

#[cfg(test)]
#[path = "lines_tests.rs"]
mod tests;
