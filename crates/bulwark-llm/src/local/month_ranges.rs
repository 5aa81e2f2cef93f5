//! A month the question asks about ("a bonfire *in March*") and a line
//! that gives a span of months ("permitted only between 1 November and
//! 28 February"): the program says whether the month falls inside it.
//!
//! Why: shown the bonfire rule, the 1.5B model answered "Yes, you are
//! allowed to have a bonfire in March". Whether March lies between
//! November and February, across the turn of the year, is arithmetic on
//! the calendar, the program's job. Only month names from the program's
//! own list stand outside the boundary tags.

use super::mentions::{MONTHS, lowercase_words, month_of};

/// Words after which "March" and "May" are months, not verbs.
const BEFORE_A_MONTH: &[&str] = &[
    "in",
    "during",
    "throughout",
    "until",
    "till",
    "before",
    "after",
    "by",
    "over",
    "of",
];

/// The one month `question` asks about: a month's name, with "March" and
/// "May" only after a word like "in"; `None` when none or several.
pub(crate) fn asked_month(question: &str) -> Option<u32> {
    let words = lowercase_words(question);
    let mut months = words.iter().enumerate().filter_map(|(at, word)| {
        let month = month_of(word)?;
        let ambiguous = matches!(word.as_str(), "march" | "may" | "mar");
        let after_a_preposition = at
            .checked_sub(1)
            .is_some_and(|before| BEFORE_A_MONTH.contains(&words[before].as_str()));
        (!ambiguous || after_a_preposition).then_some(month)
    });
    let first = months.next()?;
    months.all(|m| m == first).then_some(first)
}

/// The span of months `line` gives: exactly two month names joined as a
/// span ("between 1 November and 28 February", "from April to October",
/// "Nov - Feb"), as (first, last).
pub(crate) fn month_span(line: &str) -> Option<(u32, u32)> {
    let words = lowercase_words(line);
    let months: Vec<(usize, u32)> = words
        .iter()
        .enumerate()
        .filter_map(|(at, w)| month_of(w).map(|m| (at, m)))
        .collect();
    let [(a_at, a), (b_at, b)] = months.as_slice() else {
        return None;
    };
    let joined = words[*a_at..*b_at]
        .iter()
        .any(|w| matches!(w.as_str(), "and" | "to" | "until" | "till" | "through"))
        || dash_between(&line.to_lowercase(), &words[*a_at], &words[*b_at])
        || words
            .get(a_at.saturating_sub(2)..*a_at)
            .is_some_and(|before| before.iter().any(|w| w == "between" || w == "from"));
    (joined && a != b).then_some((*a, *b))
}

/// Whether a dash stands between the first `from` and the last `to` of
/// `line` (lowercase): "Nov - Feb", not the "HG-71" of a part name
/// elsewhere on the line.
fn dash_between(line: &str, from: &str, to: &str) -> bool {
    match (line.find(from), line.rfind(to)) {
        (Some(start), Some(end)) if start + from.len() <= end => {
            line[start + from.len()..end].contains(['-', '\u{2013}'])
        }
        _ => false,
    }
}

/// Whether `month` is within `(first, last)`, the span running on past
/// December when `last` comes before `first`.
pub(crate) fn within((first, last): (u32, u32), month: u32) -> bool {
    if first <= last {
        (first..=last).contains(&month)
    } else {
        month >= first || month <= last
    }
}

/// The program's note on the one line of `lines` that gives a span of
/// months, for the month `question` asks about; `None` unless exactly one
/// line gives a span.
pub(crate) fn month_span_note(question: &str, lines: &[&str]) -> Option<String> {
    let month = asked_month(question)?;
    let spans: Vec<(u32, u32)> = lines.iter().filter_map(|l| month_span(l)).collect();
    let [span] = spans.as_slice() else {
        return None;
    };
    let name = |m: u32| {
        let lower = MONTHS[(m as usize).saturating_sub(1) % 12];
        let mut chars = lower.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect::<String>())
            .unwrap_or_default()
    };
    let inside = if within(*span, month) { "is" } else { "is not" };
    Some(format!(
        "\n(Checked by the program: {} {inside} within the months that line gives, {} to {}.)",
        name(month),
        name(span.0),
        name(span.1)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_month_asked_is_checked_against_the_span_a_line_gives() {
        let rule = "- Bonfires are permitted only between 1 November and 28 February.";
        let note = month_span_note("Am I allowed a bonfire on my plot in March?", &[rule]);
        assert_eq!(
            note.as_deref(),
            Some(
                "\n(Checked by the program: March is not within the months that line gives, November to February.)"
            )
        );
        let january = month_span_note("can I have a bonfire in January?", &[rule]);
        assert!(january.is_some_and(|n| n.contains("January is within")));
        let water = "Water troughs are on from April to October.";
        assert!(
            month_span_note("is the water on in July?", &[water])
                .is_some_and(|n| n.contains("July is within"))
        );
        assert!(
            month_span_note("is the water on in November?", &[water])
                .is_some_and(|n| n.contains("is not"))
        );
    }

    #[test]
    fn no_month_asked_or_no_one_span_is_no_note() {
        let rule = "Bonfires are permitted between 1 November and 28 February.";
        // "may" and "march" are verbs unless a word like "in" comes first.
        assert_eq!(month_span_note("May I have a bonfire?", &[rule]), None);
        assert_eq!(month_span_note("Can we march to the plot?", &[rule]), None);
        assert_eq!(asked_month("a bonfire in May?"), Some(5));
        // Two months asked, or lines with one month or two spans.
        assert_eq!(month_span_note("In June or in July?", &[rule]), None);
        assert_eq!(month_span_note("in March?", &["Meeting on 3 March."]), None);
        assert_eq!(
            month_span_note("in March?", &[rule, "From April to October."]),
            None
        ); // A dash joins two months only between them.
        assert_eq!(month_span("Open Nov \u{2013} Feb"), Some((11, 2)));
        assert_eq!(
            month_span("HG-71 chain fitted in May, checked in June"),
            None
        );
    }

    proptest! {
        /// Every month is in a span or in the months outside it, never
        /// both, across the turn of the year too.
        #[test]
        fn a_month_is_within_a_span_or_outside_it(first in 1u32..=12, last in 1u32..=12, month in 1u32..=12) {
            let next = |m: u32| m % 12 + 1;
            let before = |m: u32| (m + 10) % 12 + 1;
            prop_assume!(first != last && next(last) != first);
            let outside = (next(last), before(first));
            prop_assert_eq!(within((first, last), month), !within(outside, month));
        }
    }
}
