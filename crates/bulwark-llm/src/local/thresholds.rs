//! A count of a table's rows past a bound the question sets: "how many
//! episodes run *longer than 50* minutes", "how many blocks did we pick
//! *before October*".
//!
//! Why: with the table in front of it, the 1.5B model answered 0 and 2
//! (3 and 4 were right): it does not compare a column of numbers or dates
//! with a bound any more than it sorts them (`extremes.rs`). Comparing is
//! the program's job.
//!
//! The rows are file content: they stand inside the read's boundary tags.
//! Outside stand only the program's words and the question's own words
//! for the column and the bound.

use super::compare::boundary_tags;
use super::mentions::{lowercase_words, month_of, stem};
use super::table::Table;

/// Words that set a lower bound ("more than 50", "over 3", "after
/// March"), and an upper one.
const ABOVE: &[&str] = &[
    "more",
    "longer",
    "greater",
    "higher",
    "bigger",
    "larger",
    "over",
    "above",
    "heavier",
    "older",
    "after",
    "exceeding",
];
const BELOW: &[&str] = &[
    "less", "fewer", "shorter", "lower", "smaller", "under", "below", "lighter", "younger",
    "before",
];

/// Words between a bound's direction and its value ("more *than* 50").
const FILLERS: &[&str] = &["than", "the", "of", "start", "end"];

/// Words of a question that mean a measure, and the column-name words
/// that hold it ("run *longer* than 50 minutes" of `length_min`, "the
/// most fruit *by weight*" of `tonnes`).
const MEASURES: &[(&[&str], &[&str])] = &[
    (
        &[
            "long", "longer", "longest", "shorter", "shortest", "length", "duration",
        ],
        &[
            "length", "duration", "min", "mins", "minutes", "hours", "runtime",
        ],
    ),
    (
        &[
            "weight", "weighs", "heavy", "heavier", "heaviest", "lighter", "lightest",
        ],
        &["weight", "kg", "kilos", "tonnes", "tons", "grams", "lbs"],
    ),
    (
        &["old", "older", "oldest", "younger", "youngest", "age"],
        &["age"],
    ),
];

/// Whether the question's `word` means a column whose name has `part`.
pub(crate) fn means_column(word: &str, part: &str) -> bool {
    MEASURES
        .iter()
        .any(|(words, parts)| words.contains(&word) && parts.contains(&part))
}

/// At most this many rows are shown with the count.
const MAX_ROWS: usize = 8;

/// A bound the question sets.
#[derive(Debug, Clone, PartialEq)]
enum Bound {
    /// A number: the column whose values it bounds is picked by name.
    Number(f64),
    /// A month (1–12), of the table's one date column.
    Month(u32),
}

/// The note for a read of the CSV file `path` (as wrapped) for a "how
/// many" `question` with one bound, `None` when there is none or it is
/// not clear which column it bounds.
pub(crate) fn threshold_note(path: &str, question: &str, wrapped: &str) -> Option<String> {
    let words = question_words(question);
    let asks_count = words.windows(2).any(|w| w[0] == "how" && w[1] == "many");
    if !asks_count {
        return None;
    }
    let (direction, above, bound, typed) = find_bound(question, &words)?;
    let table = Table::of(path, wrapped)?;
    let (open, close) = boundary_tags(wrapped)?;
    let passes: Vec<&csv::StringRecord> = match bound {
        Bound::Number(limit) => {
            let column = bounded_column(&table, &words, &direction)?;
            table
                .records
                .iter()
                .filter(|r| {
                    Table::number(r, column)
                        .is_some_and(|v| if above { v > limit } else { v < limit })
                })
                .collect()
        }
        Bound::Month(month) => {
            let column = table.date_column()?;
            let year =
                |r: &csv::StringRecord| r.get(column).and_then(|d| d.get(..4)).map(str::to_owned);
            let first = year(table.records.first()?)?;
            // "Before October" of dates across two years is not clear.
            if table
                .records
                .iter()
                .any(|r| year(r).as_deref() != Some(first.as_str()))
            {
                return None;
            }
            table
                .records
                .iter()
                .filter(|r| {
                    r.get(column)
                        .and_then(|d| d.get(5..7))
                        .and_then(|m| m.parse::<u32>().ok())
                        .is_some_and(|m| if above { m > month } else { m < month })
                })
                .collect()
        }
    };
    let count = passes.len();
    let rows: Vec<String> = passes
        .iter()
        .take(MAX_ROWS)
        .map(|r| table.row_line(r))
        .collect();
    let phrase = serde_json::Value::String(typed).to_string();
    let heading = format!(
        "(Counted by the program: {count} row{} of the table {} {phrase}{})",
        if count == 1 { "" } else { "s" },
        if count == 1 { "is" } else { "are" },
        if rows.is_empty() { "." } else { ":" },
    );
    if rows.is_empty() {
        return Some(heading);
    }
    Some(format!("{heading}\n{open}\n{}\n{close}", rows.join("\n")))
}

/// The question's words, lowercased, with a decimal point kept ("4.5").
fn question_words(question: &str) -> Vec<String> {
    question
        .split_whitespace()
        .map(|raw| {
            raw.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// The one bound in `words`: its direction word, whether it is a lower
/// bound, the bound, and the bound as the user typed it. `None` for no
/// bound or two.
fn find_bound(question: &str, words: &[String]) -> Option<(String, bool, Bound, String)> {
    let typed: Vec<&str> = question
        .split_whitespace()
        .map(|raw| raw.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = None;
    for (at, word) in words.iter().enumerate() {
        let above = ABOVE.contains(&word.as_str());
        if !above && !BELOW.contains(&word.as_str()) {
            continue;
        }
        let mut next = at + 1;
        while words
            .get(next)
            .is_some_and(|w| FILLERS.contains(&w.as_str()))
        {
            next += 1;
        }
        let Some(value) = words.get(next) else {
            continue;
        };
        let bound = if let Ok(number) = value.replace(',', "").parse::<f64>() {
            Bound::Number(number)
        } else if let Some(month) = month_of(value).filter(|_| value.chars().count() >= 3) {
            Bound::Month(month)
        } else {
            continue;
        };
        if found.is_some() {
            return None;
        }
        let as_typed = typed
            .get(at..=next)
            .map_or_else(|| value.clone(), |span| span.join(" "));
        found = Some((word.clone(), above, bound, as_typed));
    }
    found
}

/// The numeric column a number bounds: the one whose name a word of the
/// question starts ("*min*utes" of `length_min`) or its comparative
/// means, else the table's only numeric column that is no identifier.
fn bounded_column(table: &Table, words: &[String], direction: &str) -> Option<usize> {
    let measures: Vec<usize> = (0..table.header.len())
        .filter(|&c| table.numeric(c) && !Table::is_identifier(&table.header[c]))
        .collect();
    let named: Vec<usize> = measures
        .iter()
        .copied()
        .filter(|&c| {
            lowercase_words(&table.header[c]).iter().any(|part| {
                part.chars().count() >= 3
                    && (means_column(direction, part)
                        || words
                            .iter()
                            .any(|w| w.starts_with(part.as_str()) || stem(w) == stem(part)))
            })
        })
        .collect();
    match (named.as_slice(), measures.as_slice()) {
        ([one], _) | ([], [one]) => Some(*one),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::test_wrap::{CLOSE, OPEN, wrap};

    const EPISODES: &str = "number,title,length_min,downloads\n41,Slow Bread,52,1840\n42,Night Shift,47,2210\n43,Old Radios,61,1575\n44,Beekeeping,38,2930\n";
    const HARVEST: &str =
        "block,picked_on,tonnes\nA1,2025-09-28,7.4\nA2,2025-09-19,4.1\nC1,2025-10-03,6.6\n";

    #[test]
    fn rows_past_a_number_of_the_column_the_question_names_are_counted() {
        let note = threshold_note(
            "episodes.csv",
            "How many episodes run longer than 50 minutes?",
            &wrap(EPISODES),
        );
        assert_eq!(
            note,
            Some(format!(
                "(Counted by the program: 2 rows of the table are \"longer than 50\":)\n{OPEN}\nnumber = 41, title = Slow Bread, length_min = 52, downloads = 1840\nnumber = 43, title = Old Radios, length_min = 61, downloads = 1575\n{CLOSE}"
            ))
        );
        let under = threshold_note(
            "episodes.csv",
            "How many episodes had fewer than 2000 downloads?",
            &wrap(EPISODES),
        )
        .unwrap_or_default();
        assert!(
            under.contains("2 rows") && under.contains("Old Radios"),
            "{under}"
        );
    }

    #[test]
    fn rows_before_or_after_a_month_are_counted() {
        let note = threshold_note(
            "harvest.csv",
            "how many blocks did we pick before October?",
            &wrap(HARVEST),
        )
        .unwrap_or_default();
        assert!(
            note.starts_with(
                "(Counted by the program: 2 rows of the table are \"before October\":)"
            ),
            "{note}"
        );
        let after = threshold_note(
            "harvest.csv",
            "How many were picked after September?",
            &wrap(HARVEST),
        )
        .unwrap_or_default();
        assert!(
            after.contains("1 row of") && after.contains("C1"),
            "{after}"
        );
        // Dates across two years: "before October" is not clear.
        let two_years = "block,picked_on\nA,2024-09-01\nB,2025-11-01\n";
        assert_eq!(
            threshold_note("h.csv", "How many before October?", &wrap(two_years)),
            None
        );
    }

    #[test]
    fn no_count_without_one_bound_one_column_and_a_how_many() {
        let w = wrap(EPISODES);
        for q in [
            "Which episode is longer than 50 minutes?",
            "How many episodes are there?",
            "How many episodes are longer than 50 minutes and shorter than 60?",
            "How many episodes have more than 2000 plays or fewer than 40 minutes?",
        ] {
            assert_eq!(threshold_note("episodes.csv", q, &w), None, "{q}");
        }
        // Two measures and nothing naming either: not clear.
        assert_eq!(
            threshold_note("episodes.csv", "How many are over 50?", &w),
            None
        );
        // A file that is no table.
        assert_eq!(
            threshold_note("notes.txt", "How many are longer than 50 minutes?", &w),
            None
        );
    }
}
