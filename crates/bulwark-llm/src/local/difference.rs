//! The difference of two numbers a "how much more … than" question asks
//! for, worked out by the program from the row or rows it picked.
//!
//! Why: asked how much more the small room costs at weekends than on
//! weekday evenings, shown the row (`Weekend = £15.00`, `Weekday evening
//! = £13.50`), the 1.5B model named both prices and no difference.
//! Subtraction is the program's job, as counting is.

use super::mentions::{is_function_word, lowercase_words, mentioned};
use super::table::Table;

/// Words that, after "how much" or "how many", ask for a difference.
const BY_HOW_MUCH: &[&str] = &[
    "more", "less", "fewer", "cheaper", "dearer", "longer", "shorter", "higher", "lower", "bigger",
    "smaller", "older", "younger", "extra", "later", "earlier", "heavier", "lighter",
];

/// Whether `question` asks by how much two things differ.
pub(crate) fn asks_a_difference(question: &str) -> bool {
    let words = lowercase_words(question);
    words.iter().any(|w| w == "difference")
        // "Which one is cheaper, and *by how much*?"
        || words.windows(3).any(|w| {
            w[0] == "by" && w[1] == "how" && matches!(w[2].as_str(), "much" | "many")
        })
        || words.windows(2).enumerate().any(|(at, pair)| {
            pair[0] == "how"
                && matches!(pair[1].as_str(), "much" | "many")
                && words[at + 2..]
                    .iter()
                    .take(4)
                    .any(|w| BY_HOW_MUCH.contains(&w.as_str()))
        })
}

/// A cell's number: thousands commas, a currency sign before it and a
/// percent sign after it allowed; with how many decimals it was written.
pub(crate) fn number_in(cell: &str) -> Option<(f64, usize)> {
    let bare = cell
        .trim()
        .trim_start_matches(['£', '$', '€'])
        .trim_end_matches('%')
        .replace(',', "");
    let value: f64 = bare.parse().ok().filter(|v: &f64| v.is_finite())?;
    let decimals = bare.split_once('.').map_or(0, |(_, d)| d.len());
    Some((value, decimals))
}

/// `a − b` (the larger first) written with the decimals of its inputs.
pub(crate) fn difference(a: (f64, usize), b: (f64, usize)) -> String {
    let decimals = a.1.max(b.1);
    format!("{:.decimals$}", (a.0 - b.0).abs())
}

/// The columns of `table` whose every word (of three letters or more,
/// no function word) the question says, and that hold a number in every
/// one of `rows`.
fn named_numeric_columns(table: &Table, rows: &[&csv::StringRecord], question: &str) -> Vec<usize> {
    let spoken = question.to_lowercase();
    (0..table.header.len())
        .filter(|&column| {
            let words: Vec<String> = lowercase_words(&table.header[column])
                .into_iter()
                .filter(|w| w.chars().count() >= 3 && !is_function_word(w))
                .collect();
            !words.is_empty()
                && words.iter().all(|w| mentioned(&spoken, w))
                && rows
                    .iter()
                    .all(|r| r.get(column).and_then(number_in).is_some())
        })
        .collect()
}

/// The lines of the difference for `question` over the picked `rows` of
/// `table`: two named columns of one row, or one named column of two
/// rows, as `name − name = a − b = d` (the file's words, for the caller
/// to put inside the boundary tags). None when the question asks no
/// difference or the rows and columns do not say which two numbers.
pub(crate) fn difference_line(
    table: &Table,
    rows: &[&csv::StringRecord],
    question: &str,
) -> Option<String> {
    if !asks_a_difference(question) {
        return None;
    }
    let columns = named_numeric_columns(table, rows, question);
    let cell = |row: &csv::StringRecord, column: usize| -> Option<(String, (f64, usize))> {
        let text = row.get(column)?.trim().to_owned();
        let number = number_in(&text)?;
        Some((text, number))
    };
    let ((a_name, (a_text, a)), (b_name, (b_text, b))) = match (rows, columns.as_slice()) {
        ([row], [x, y]) => (
            (table.header[*x].clone(), cell(row, *x)?),
            (table.header[*y].clone(), cell(row, *y)?),
        ),
        ([first, second], [column]) => {
            let name = |row: &csv::StringRecord| {
                format!(
                    "{} ({})",
                    table.header[*column],
                    row.get(0).unwrap_or_default()
                )
            };
            (
                (name(first), cell(first, *column)?),
                (name(second), cell(second, *column)?),
            )
        }
        _ => return None,
    };
    let ((big_name, big_text, big), (small_name, small_text, small)) = if a.0 >= b.0 {
        ((a_name, a_text, a), (b_name, b_text, b))
    } else {
        ((b_name, b_text, b), (a_name, a_text, a))
    };
    Some(format!(
        "{big_name} - {small_name} = {big_text} - {small_text} = {}",
        difference(big, small)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_is_asked_by_how_much_or_by_the_word() {
        assert!(asks_a_difference(
            "How much more an hour is the small room at weekends than weekday evenings?"
        ));
        assert!(asks_a_difference(
            "What's the price difference between A and B?"
        ));
        assert!(asks_a_difference("how many more members joined in 2024?"));
        assert!(asks_a_difference("Which one is cheaper, and by how much?"));
        assert!(!asks_a_difference(
            "How much is the small room at weekends?"
        ));
        assert!(!asks_a_difference("Which room costs more?"));
    }

    #[test]
    fn numbers_keep_their_decimals_and_lose_their_signs() {
        assert_eq!(number_in("£13.50"), Some((13.5, 2)));
        assert_eq!(number_in(" 1,150 "), Some((1150.0, 0)));
        assert_eq!(number_in("4.5%"), Some((4.5, 1)));
        assert_eq!(number_in("n/a"), None);
        assert_eq!(difference((15.0, 2), (13.5, 2)), "1.50");
        assert_eq!(difference((3.0, 0), (4.5, 1)), "1.5");
    }

    proptest::proptest! {
        #[test]
        fn a_difference_is_never_negative(a in -1e6f64..1e6, b in -1e6f64..1e6, d in 0usize..4) {
            let shown = difference((a, d), (b, d));
            proptest::prop_assert!(!shown.starts_with('-'), "{}", shown);
        }
    }
}
