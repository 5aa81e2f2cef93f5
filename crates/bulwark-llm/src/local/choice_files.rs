//! Two files a question weighs against each other without naming them:
//! by a word of each name ("did we order more Hidcote in *spring* or in
//! *autumn*?" of `orders/spring-order.csv` and `orders/autumn-order.csv`),
//! or as this year's against last ("has the rye loaf *gone up since last
//! year*?" of `prices-2024.csv` and `prices-2025.csv`). Both are read on
//! the first turn.
//!
//! Why: the 1.5B model, or the driver's search, read one of the two, and
//! the answer compared it with nothing: "Spring" from the autumn order
//! alone; "no, it has not gone up" from last year's list alone. The
//! files are known from the session's path choices, and each read still
//! passes the door.

use super::output::Call;
use super::steering::{read_call, reader};
use crate::{ChatRequest, PathChoices, Role};

/// The reads of the two files the latest question weighs, when it is
/// the last message (nothing called for it yet) and two calls are left.
pub(crate) fn weighed_file_reads(
    request: &ChatRequest,
    paths: &PathChoices,
    max_calls: usize,
) -> Option<Vec<Call>> {
    if max_calls < 2 {
        return None;
    }
    let asked = request
        .messages
        .last()
        .filter(|m| m.role == Role::User && super::asks(m))?;
    let question = asked.text();
    let (tool, argument, listed) = reader(request, paths)?;
    let (first, second) = weighed_files(&question, listed)?;
    Some(vec![
        read_call(tool, argument, first),
        read_call(tool, argument, second),
    ])
}

/// The two files `question` weighs against each other, of `listed`:
/// by a word of each name, or as two editions.
pub(crate) fn weighed_files<'a>(
    question: &str,
    listed: &'a [String],
) -> Option<(&'a str, &'a str)> {
    chosen_files(question, listed)
        .or_else(|| named_edition_and_its_successor(question, listed))
        .or_else(|| editions(question, listed))
}

/// Whether `word` stands within three words after "since" or "than" in
/// `asked`: "*since the summer* term", "*than on the 2023* list". Only
/// there does a word of a file's name say which edition is the old end
/// of a change; "who joined since March?" names no file.
fn named_after_since_or_than(asked: &[String], word: &str) -> bool {
    asked.iter().enumerate().any(|(at, w)| {
        (w == "since" || w == "than")
            && asked.iter().skip(at + 1).take(3).any(|later| later == word)
    })
}

/// The edition the question names by a word of its name, and the one
/// file beside it that stands for now, earlier first, when the question
/// asks how something changed over time: "how much more is a crown *now
/// than on the 2023* list?" of `fees-2023.md` and `fees.md`; "has chess
/// club moved *since the summer* term?" of `clubs-summer.md` and
/// `clubs-autumn.md`.
///
/// Why: the driver read the named edition alone (the question names it)
/// and the 1.5B model gave its price as the rise, and the summer day as
/// both the old and the new one. The successor is the name without the
/// named word (`fees.md`), or else the one name with another word in its
/// place; two such names and which one is now is not known.
fn named_edition_and_its_successor<'a>(
    question: &str,
    listed: &'a [String],
) -> Option<(&'a str, &'a str)> {
    let asked = super::mentions::lowercase_words(question);
    let over_time = asks_over_time(question);
    let successor_of = |named: &String, at: usize, words: &[String], place: (&str, &str)| {
        let mut without = words.to_vec();
        without.remove(at);
        let siblings: Vec<(&String, bool)> = listed
            .iter()
            .filter(|other| *other != named)
            .filter_map(|other| {
                let (folder, extension, theirs) = name_words(other)?;
                if (folder.as_str(), extension.as_str()) != place {
                    return None;
                }
                let dropped = theirs == without;
                let replaced = theirs.len() == words.len()
                    && theirs
                        .iter()
                        .zip(words)
                        .enumerate()
                        .all(|(i, (a, b))| (i == at) != (a == b))
                    && !asked.contains(&theirs[at]);
                (dropped || replaced).then_some((other, dropped))
            })
            .collect();
        match siblings.iter().find(|(_, dropped)| *dropped) {
            Some((other, _)) => Some(*other),
            None => match siblings.as_slice() {
                [(other, _)] => Some(*other),
                _ => None,
            },
        }
    };
    let mut pairs = listed.iter().filter_map(|named| {
        let (folder, extension, words) = name_words(named)?;
        if words.len() < 2 {
            return None;
        }
        let successor = words.iter().enumerate().find_map(|(at, word)| {
            let telling = asked.contains(word)
                && !super::question_words::is_function_word(word)
                && (over_time || named_after_since_or_than(&asked, word));
            telling
                .then(|| successor_of(named, at, &words, (&folder, &extension)))
                .flatten()
        })?;
        Some((named.as_str(), successor.as_str()))
    });
    let pair = pairs.next()?;
    // Two named editions: the question names both ends itself.
    pairs.next().is_none().then_some(pair)
}

/// The one dated file whose name, without its number and words like
/// "old", is another listed file's name: the old edition and the current
/// one (`price-list-2024.md` and `price-list.md`,
/// `timetable_2024_OLD.csv` and `timetable.csv`). Why: "how much more do
/// 500 cards cost now compared with last year's prices?" read the
/// current list alone, the files being no family of dated editions, and
/// the answer gave today's price as the rise. Two such pairs: which one
/// is asked about is not known.
fn dated_and_undated(listed: &[String]) -> Option<(&str, &str)> {
    let mut pairs = listed.iter().filter_map(|dated| {
        let (folder, extension, words) = name_words(dated)?;
        let numbered = |w: &String| w.chars().any(|c| c.is_ascii_digit());
        if !words.iter().any(numbered) {
            return None;
        }
        let plain: Vec<&String> = words
            .iter()
            .filter(|w| !numbered(w) && !super::editions::OLDER_WORDS.contains(&w.as_str()))
            .collect();
        if plain.is_empty() {
            return None;
        }
        let current = listed.iter().find(|other| {
            name_words(other).is_some_and(|(f, e, theirs)| {
                f == folder && e == extension && theirs.iter().collect::<Vec<_>>() == plain
            })
        })?;
        Some((dated.as_str(), current.as_str()))
    });
    let pair = pairs.next()?;
    pairs.next().is_none().then_some(pair)
}

/// A path's folder, extension and the lowercase words of its name: two
/// editions share the first two and differ in one word of the third.
fn name_words(path: &str) -> Option<(String, String, Vec<String>)> {
    let lower = path.to_lowercase();
    let (folder, base) = lower.rsplit_once('/').unwrap_or(("", &lower));
    let (stem, extension) = base.rsplit_once('.')?;
    let words: Vec<String> = stem
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    (!words.is_empty()).then(|| (folder.to_owned(), extension.to_owned(), words))
}

/// The two files named by the words on either side of the question's
/// "or" ("in *spring* or in *autumn*"), each the only listed file with
/// that word in its name.
fn chosen_files<'a>(question: &str, listed: &'a [String]) -> Option<(&'a str, &'a str)> {
    let words = super::mentions::lowercase_words(question);
    let or = words.iter().position(|w| w == "or")?;
    let telling = |w: &&String| !super::question_words::is_function_word(w);
    let left = words[..or].iter().rev().find(telling)?;
    let right = words[or + 1..].iter().find(telling)?;
    let (a, b) = (
        only_file_named(left, listed)?,
        only_file_named(right, listed)?,
    );
    (a != b).then_some((a, b))
}

/// The one listed file with `word` as a word of its name.
fn only_file_named<'a>(word: &str, listed: &'a [String]) -> Option<&'a str> {
    let mut named = listed.iter().filter(|path| {
        let name = path.rsplit('/').next().unwrap_or(path).to_lowercase();
        name.split(|c: char| !c.is_alphanumeric())
            .any(|part| part == word)
    });
    let one = named.next()?;
    named.next().is_none().then_some(one.as_str())
}

/// The two latest editions of the one family of files the workspace has
/// (`editions.rs`), earlier first, when the question asks how something
/// changed over time ([`asks_over_time`]).
fn editions<'a>(question: &str, listed: &'a [String]) -> Option<(&'a str, &'a str)> {
    if !asks_over_time(question) {
        return None;
    }
    let mut families: Vec<(String, Vec<&str>)> = Vec::new();
    for path in listed
        .iter()
        .filter(|p| p.contains(|c: char| c.is_ascii_digit()))
    {
        let shape = super::editions::shape(path);
        match families.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, members)) => members.push(path),
            None => families.push((shape, vec![path])),
        }
    }
    let mut family = families.into_iter().filter(|(_, m)| m.len() >= 2);
    let Some((_, mut members)) = family.next() else {
        return dated_and_undated(listed);
    };
    // Two families: which one is asked about is not known.
    if family.next().is_some() {
        return None;
    }
    members.sort_by(|a, b| {
        if super::editions::later_edition(a, b, "") {
            std::cmp::Ordering::Greater
        } else if super::editions::later_edition(b, a, "") {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Equal
        }
    });
    let newest = members.pop()?;
    Some((members.pop()?, newest))
}

/// "Has it *gone up since last year*", "did it *rise*", "*compared
/// with last year*": a question about what changed between editions.
pub(crate) fn asks_over_time(question: &str) -> bool {
    let words = super::mentions::lowercase_words(question);
    let pair = |a: &[&str], b: &[&str]| {
        words
            .windows(2)
            .any(|w| a.contains(&w[0].as_str()) && b.contains(&w[1].as_str()))
    };
    let moved = pair(&["gone", "go", "went", "come", "gotten"], &["up", "down"]);
    let before = pair(
        &["last", "previous", "a"],
        &["year", "years", "month", "season", "term", "time"],
    ) && words
        .iter()
        .any(|w| matches!(w.as_str(), "last" | "previous" | "ago" | "since"));
    let changed = words.iter().any(|w| {
        matches!(
            w.as_str(),
            "rise"
                | "risen"
                | "rose"
                | "increase"
                | "increased"
                | "decrease"
                | "decreased"
                | "drop"
                | "dropped"
                | "fallen"
                | "fell"
        )
    });
    moved || before || changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;
    use crate::PathKind;
    use crate::local::test_requests::{listed, read_paths, request};

    fn asked(question: &str, files: &[&str]) -> ChatRequest {
        let mut req = request(vec![Message::user_text(question)]);
        for argument in &mut req.paths.arguments {
            if argument.tool == "file_read" {
                *argument = listed("file_read", PathKind::File, files);
            }
        }
        req
    }

    fn reads(question: &str, files: &[&str]) -> Option<Vec<String>> {
        let req = asked(question, files);
        weighed_file_reads(&req, &req.paths, 2)
            .map(|calls| read_paths(&calls).iter().map(|p| (*p).to_owned()).collect())
    }

    const ORDERS: &[&str] = &[
        "care-guide.md",
        "orders/autumn-order.csv",
        "orders/spring-order.csv",
        "stock.csv",
    ];
    const PRICES: &[&str] = &["hours.md", "prices-2024.csv", "prices-2025.csv"];

    #[test]
    fn a_dated_edition_beside_the_undated_current_file_is_read_with_it() {
        let cards = &[
            "orders.csv",
            "presses.md",
            "price-list-2024.md",
            "price-list.md",
        ][..];
        assert_eq!(
            reads(
                "How much more do 500 business cards cost now compared with last year's prices?",
                cards
            ),
            Some(vec![
                "price-list-2024.md".to_owned(),
                "price-list.md".to_owned()
            ])
        );
        let old = &["timetable.csv", "timetable_2024_OLD.csv", "notices.txt"][..];
        assert_eq!(
            reads(
                "Has the first sailing gone up or down since last year?",
                old
            ),
            Some(vec![
                "timetable_2024_OLD.csv".to_owned(),
                "timetable.csv".to_owned()
            ])
        );
        // Two such pairs: not known which; no change asked: nothing.
        let both = &[
            "timetable.csv",
            "timetable_2024_OLD.csv",
            "fares.md",
            "fares-2024.md",
        ][..];
        assert_eq!(reads("Has it gone up since last year?", both), None);
        assert_eq!(reads("How much do 500 business cards cost?", cards), None);
    }

    #[test]
    fn two_files_chosen_between_by_a_word_of_each_name_are_both_read() {
        assert_eq!(
            reads(
                "Did we order more Hidcote lavender in spring or in autumn?",
                ORDERS
            ),
            Some(vec![
                "orders/spring-order.csv".to_owned(),
                "orders/autumn-order.csv".to_owned()
            ])
        );
        // A choice of things, not of files.
        assert_eq!(reads("Is Hidcote or Munstead cheaper?", ORDERS), None);
        assert_eq!(reads("What is in stock?", ORDERS), None);
    }

    #[test]
    fn a_question_of_change_over_time_reads_the_two_latest_editions() {
        assert_eq!(
            reads("Has the big rye loaf gone up since last year?", PRICES),
            Some(vec![
                "prices-2024.csv".to_owned(),
                "prices-2025.csv".to_owned()
            ])
        );
        assert_eq!(
            reads(
                "Did the rent rise?",
                &["rent-2023.csv", "rent-2025.csv", "rent-2024.csv"]
            ),
            Some(vec!["rent-2024.csv".to_owned(), "rent-2025.csv".to_owned()])
        );
        // Not about change, or no editions, or two families.
        assert_eq!(reads("How much is a rye loaf?", PRICES), None);
        assert_eq!(reads("Has it gone up since last year?", ORDERS), None);
        assert_eq!(
            reads(
                "Has it gone up since last year?",
                &["a-2024.csv", "a-2025.csv", "b-2024.csv", "b-2025.csv"]
            ),
            None
        );
    }

    #[test]
    fn a_named_edition_is_read_with_the_file_that_stands_for_now() {
        let dental = &["appointments.csv", "fees-2023.md", "fees.md", "staff.md"];
        assert_eq!(
            reads(
                "How much more is a porcelain crown now than on the 2023 price list?",
                dental
            ),
            Some(vec!["fees-2023.md".to_owned(), "fees.md".to_owned()])
        );
        let clubs = &["clubs-autumn.md", "clubs-summer.md", "signups.csv"];
        assert_eq!(
            reads(
                "Has chess club moved to a different day since the summer term?",
                clubs
            ),
            Some(vec![
                "clubs-summer.md".to_owned(),
                "clubs-autumn.md".to_owned()
            ])
        );
        // Not a question of change; a name with no edition beside it;
        // two other names either of which could be now.
        assert_eq!(
            reads("What does a crown cost on the 2023 list?", dental),
            None
        );
        assert_eq!(
            reads(
                "Who has been in the choir since 2019?",
                &["members.csv", "notes.txt"]
            ),
            None
        );
        assert_eq!(
            reads(
                "Has chess moved since the summer term?",
                &["clubs-autumn.md", "clubs-spring.md", "clubs-summer.md"]
            ),
            None
        );
        // "Since" with no edition word after it is no change between
        // files: who joined since March reads no subs lists.
        assert_eq!(
            reads(
                "Who joined since March?",
                &["members.csv", "subs-2024.csv", "subs-2025.csv"]
            ),
            None
        );
        // Two dated editions and an undated one: the named one and now.
        assert_eq!(
            reads(
                "How much more is a crown now than on the 2023 list?",
                &["fees-2022.md", "fees-2023.md", "fees.md"]
            ),
            Some(vec!["fees-2023.md".to_owned(), "fees.md".to_owned()])
        );
        // Both ends named: the question says which two itself.
        assert_eq!(
            reads(
                "Has chess moved since the summer term, or since spring?",
                &["clubs-spring.md", "clubs-summer.md", "clubs.md"]
            ),
            None
        );
    }

    #[test]
    fn nothing_is_read_with_fewer_than_two_calls_or_after_a_call() {
        let req = asked("Has the rye loaf gone up since last year?", PRICES);
        assert!(weighed_file_reads(&req, &req.paths, 1).is_none());
        let mut called = req.clone();
        called.messages.push(crate::local::test_requests::call(
            "file_read",
            serde_json::json!({"path": "hours.md"}),
        ));
        assert!(weighed_file_reads(&called, &called.paths, 2).is_none());
    }
}
