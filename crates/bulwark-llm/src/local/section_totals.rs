//! One document with two options, each with a total under its own
//! heading (a quote's "Option A" and "Option B"): for a question that
//! weighs them, the program says which total is lower and by how much.
//!
//! Why: asked "Jenny Alder got two options; which one is cheaper, and by
//! how much?", shown her quote, the 1.5B model listed both totals and
//! named neither, nor the difference. Comparing two numbers is the
//! program's job, as it is across two files (`compare.rs`).
//!
//! The headings and total lines are file content: they stand inside the
//! read's boundary tags. Outside are the program's words and the
//! difference it worked out.

use super::compare::boundary_tags;
use super::difference::{asks_a_difference, difference, number_in};
use super::mentions::lowercase_words;
use super::shape::unwrapped_lines;

/// The note after a read of `path` (its result as wrapped) for
/// `question`; `None` unless the question weighs things and the file has
/// exactly two total lines, each with a number, under two headings.
pub(crate) fn section_totals_note(path: &str, question: &str, wrapped: &str) -> Option<String> {
    if !(asks_a_difference(question) || super::folder_files::compares(question)) {
        return None;
    }
    if super::table::Table::of(path, wrapped).is_some() {
        return None;
    }
    let (open, close) = boundary_tags(wrapped)?;
    let lines: Vec<&str> = unwrapped_lines(wrapped)
        .into_iter()
        .map(str::trim)
        .collect();
    let heading_of = |at: usize| -> Option<&str> {
        lines[..at]
            .iter()
            .rev()
            .find(|l| l.starts_with('#'))
            .copied()
    };
    let totals: Vec<(usize, (f64, usize))> = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| !line.starts_with('#'))
        .filter(|(_, line)| lowercase_words(line).iter().any(|w| w == "total"))
        .filter_map(|(at, line)| Some((at, last_number(line)?)))
        .collect();
    let [(a_at, a), (b_at, b)] = totals.as_slice() else {
        return None;
    };
    let (a_heading, b_heading) = (heading_of(*a_at)?, heading_of(*b_at)?);
    if a_heading == b_heading {
        return None;
    }
    let (a_part, b_part) = (
        format!("{a_heading}\n{}", lines[*a_at]),
        format!("{b_heading}\n{}", lines[*b_at]),
    );
    if (a.0 - b.0).abs() < f64::EPSILON {
        return Some(format!(
            "(Worked out by the program: the two totals are the same:)\n{open}\n{a_part}\n{b_part}\n{close}"
        ));
    }
    // The lower first, under its own heading: told only "the first one",
    // the 1.5B model answered "the first option is cheaper".
    let (lower, higher) = if a.0 < b.0 {
        (a_part, b_part)
    } else {
        (b_part, a_part)
    };
    Some(format!(
        "(Worked out by the program: the lower total, under its heading:)\n{open}\n{lower}\n{close}\n(The higher total, under its heading:)\n{open}\n{higher}\n{close}\n(The difference between them is {}.)",
        difference(*a, *b)
    ))
}

/// The last number on `line` ("Total: £119.00" → 119.00).
pub(crate) fn last_number(line: &str) -> Option<(f64, usize)> {
    let token = line
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .map(|t| t.trim_matches([',', '.']))
        .rfind(|t| t.chars().any(|c| c.is_ascii_digit()))?;
    number_in(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::test_wrap::{CLOSE, OPEN, wrap};

    const QUOTE: &str = "# Quote Q-031\nCustomer: Jenny Alder\n\n## Option A - full service + new chain\n- Full service: £95.00\n- Chain: £24.00\nTotal: £119.00\n\n## Option B - basic service + parts\n- Basic service: £45.00\n- Cassette: £38.00\nTotal: £123.00\n\nValid for 30 days.\n";

    #[test]
    fn two_totals_under_two_headings_are_weighed() {
        let asked = "Jenny Alder got two options. Which one is cheaper, and by how much?";
        let note = section_totals_note("q.md", asked, &wrap(QUOTE)).unwrap_or_default();
        assert_eq!(
            note,
            format!(
                "(Worked out by the program: the lower total, under its heading:)\n{OPEN}\n## Option A - full service + new chain\nTotal: £119.00\n{CLOSE}\n(The higher total, under its heading:)\n{OPEN}\n## Option B - basic service + parts\nTotal: £123.00\n{CLOSE}\n(The difference between them is 4.00.)"
            )
        );
        // The lower second in the file is still shown first.
        let swapped = QUOTE.replace("£119.00", "£130.00");
        let note = section_totals_note("q.md", asked, &wrap(&swapped)).unwrap_or_default();
        assert!(
            note.starts_with(&format!("(Worked out by the program: the lower total, under its heading:)\n{OPEN}\n## Option B")),
            "{note}"
        );
        assert!(
            note.ends_with("(The difference between them is 7.00.)"),
            "{note}"
        );
    }

    #[test]
    fn no_weighing_or_no_two_headed_totals_is_no_note() {
        let plain = "What is on Jenny Alder's quote?";
        assert_eq!(section_totals_note("q.md", plain, &wrap(QUOTE)), None);
        let asked = "Which one is cheaper, and by how much?";
        let one_total = "# Quote\n## Option A\nTotal: £10\n";
        assert_eq!(section_totals_note("q.md", asked, &wrap(one_total)), None);
        let one_heading = "# Quote\nSubtotal: £10\nTotal: £12\n";
        assert_eq!(section_totals_note("q.md", asked, &wrap(one_heading)), None);
        assert_eq!(section_totals_note("q.md", asked, QUOTE), None);
    }
}
