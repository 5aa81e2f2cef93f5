//! Two tables joined by a code: the row a question names in one ("which
//! unit does *Gareth Price* rent?" finds his row in `tenants.csv`, ref
//! `T-120`), and the one row of another table read for it that has the
//! same code (`units.csv`: `B03,...,130.00,let,T-120`).
//!
//! Why: shown both tables, the 1.5B model took the unit of the row
//! above (Gareth Pryce's `T-102`, unit A03 at £79): following a code from
//! one table into another is a lookup, the program's job. The rows are
//! the files' words, so they stand inside the read's boundary tags; only
//! the question's own names stand outside.

use super::table::Table;

/// The note after the read of `latest` (a path and its result as
/// wrapped) for `question`, given the other reads made for it: `None`
/// unless the question's names or codes pick exactly one row of one
/// table, a code of that row is in exactly one row of exactly one other
/// table, and `latest` is one of the two.
pub(crate) fn linked_rows_note(
    question: &str,
    latest: (&str, &str),
    earlier: &[(&str, &str)],
) -> Option<String> {
    let mut tables: Vec<(&str, Table)> = Vec::new();
    for (path, wrapped) in earlier.iter().chain(std::iter::once(&latest)) {
        if tables.iter().any(|(p, _)| p == path) {
            continue;
        }
        if let Some(table) = Table::of(path, wrapped) {
            tables.push((path, table));
        }
    }
    if tables.len() < 2 {
        return None;
    }
    let names = asked_names(question);
    let codes = asked_codes(question);
    if names.is_empty() && codes.is_empty() {
        return None;
    }
    // The asked row: the one row, of all the tables, with every name
    // the question gives (or one of its codes).
    let mut asked = tables.iter().enumerate().flat_map(|(t, (_, table))| {
        table
            .records
            .iter()
            .filter(|row| picks(row, &names, &codes))
            .map(move |row| (t, row))
    });
    let (from, row) = asked.next()?;
    if asked.next().is_some() {
        return None;
    }
    let mut links = row
        .iter()
        .map(str::trim)
        .filter(|cell| is_code(cell) && !codes.iter().any(|c| c.eq_ignore_ascii_case(cell)))
        .flat_map(|code| {
            tables
                .iter()
                .enumerate()
                .filter(move |(t, _)| *t != from)
                .flat_map(move |(t, (_, table))| {
                    table
                        .records
                        .iter()
                        .filter(move |other| {
                            other.iter().any(|c| c.trim().eq_ignore_ascii_case(code))
                        })
                        .map(move |other| (t, other))
                })
        });
    let (to, linked) = links.next()?;
    if links.next().is_some() {
        return None;
    }
    let latest_path = latest.0;
    if tables[from].0 != latest_path && tables[to].0 != latest_path {
        return None;
    }
    let (open, close) = super::compare::boundary_tags(latest.1)?;
    let shown = |t: usize, row: &csv::StringRecord| {
        let (path, table) = &tables[t];
        let cells: Vec<String> = table
            .header
            .iter()
            .zip(row.iter())
            .map(|(name, value)| format!("{} = {}", name.trim(), value.trim()))
            .collect();
        format!("{path}: {}", cells.join(", "))
    };
    let asked_by: Vec<String> = names
        .iter()
        .chain(&codes)
        .map(|w| serde_json::Value::String(w.clone()).to_string())
        .collect();
    Some(format!(
        "(Linked by the program: the one row with {}, and the one row of another file that has a code of it:)\n{open}\n{}\n{}\n{close}",
        asked_by.join(" "),
        shown(from, row),
        shown(to, linked)
    ))
}

/// The question's names: its capitalised words inside a sentence, in
/// lowercase ("Gareth", "Price").
fn asked_names(question: &str) -> Vec<String> {
    super::question_words::question_tokens(question)
        .iter()
        .filter(|t| t.is_name())
        .filter_map(|t| t.text)
        .filter(|t| !t.chars().any(|c| c.is_ascii_digit()))
        .map(str::to_lowercase)
        // "in *March*", "on *Tuesday*": a date, not a name a row has.
        .filter(|t| !super::dates::says_when(t))
        .collect()
}

/// The question's codes ("B03", "T-120"), as typed.
fn asked_codes(question: &str) -> Vec<String> {
    question
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .map(|w| {
            w.strip_suffix("'s")
                .or_else(|| w.strip_suffix("\u{2019}s"))
                .unwrap_or(w)
        })
        .filter(|w| is_code(w))
        .map(str::to_owned)
        .collect()
}

/// A code: one word of letters and digits, with both, as a key column
/// holds (`T-120`, `B03`, `SUP1`); not a date or a phone number (no
/// letter), not a phrase, not a number with its unit (`3pm`, `7th`).
fn is_code(cell: &str) -> bool {
    let unit_after_number = cell.starts_with(|c: char| c.is_ascii_digit())
        && cell
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .chars()
            .all(|c| c.is_ascii_lowercase());
    !unit_after_number
        && (2..=20).contains(&cell.chars().count())
        && cell.chars().any(|c| c.is_ascii_digit())
        && cell.chars().any(|c| c.is_ascii_alphabetic())
        && cell
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '.'))
}

/// Whether `row` has every one of `names` as a whole word, or one of
/// `codes` as a cell.
fn picks(row: &csv::StringRecord, names: &[String], codes: &[String]) -> bool {
    let by_code = codes
        .iter()
        .any(|code| row.iter().any(|c| c.trim().eq_ignore_ascii_case(code)));
    let words: Vec<String> = row
        .iter()
        .flat_map(super::mentions::lowercase_words)
        .collect();
    let by_names = !names.is_empty() && names.iter().all(|n| words.contains(n));
    by_code || by_names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::test_wrap::{CLOSE, OPEN, wrap};

    const UNITS: &str = "unit,size,monthly_rate,status,tenant_ref\nA03,50,79.00,let,T-102\nB02,75,105.00,vacant,\nB03,100,130.00,let,T-120\n";
    const TENANTS: &str =
        "ref,name,phone\nT-102,Gareth Pryce,07700 900431\nT-120,Gareth Price,07700 900913\n";

    #[test]
    fn a_name_in_one_table_is_followed_by_its_code_into_the_other() {
        let (units, tenants) = (wrap(UNITS), wrap(TENANTS));
        let question = "Which unit does Gareth Price rent, and what does it cost him a month?";
        let note = linked_rows_note(
            question,
            ("tenants.csv", &tenants),
            &[("units.csv", &units)],
        );
        assert_eq!(
            note.as_deref(),
            Some(
                format!(
                    "(Linked by the program: the one row with \"gareth\" \"price\", and the one row of another file that has a code of it:)\n{OPEN}\ntenants.csv: ref = T-120, name = Gareth Price, phone = 07700 900913\nunits.csv: unit = B03, size = 100, monthly_rate = 130.00, status = let, tenant_ref = T-120\n{CLOSE}"
                )
                .as_str()
            )
        );
        // The other way: a code asked for leads to the name.
        let who = linked_rows_note(
            "Who rents unit B03?",
            ("units.csv", &units),
            &[("tenants.csv", &tenants)],
        )
        .unwrap_or_default();
        assert!(
            who.contains("tenants.csv: ref = T-120, name = Gareth Price"),
            "{who}"
        );
    }

    #[test]
    fn no_link_without_one_asked_row_one_linked_row_and_two_tables() {
        let (units, tenants) = (wrap(UNITS), wrap(TENANTS));
        // "Gareth" alone is in two rows.
        assert_eq!(
            linked_rows_note(
                "Which unit does Gareth rent?",
                ("tenants.csv", &tenants),
                &[("units.csv", &units)]
            ),
            None
        );
        // One table read; no name or code asked; a name no row has.
        for (question, earlier) in [
            ("Which unit does Gareth Price rent?", &[][..]),
            (
                "which unit is the biggest?",
                &[("units.csv", units.as_str())][..],
            ),
            (
                "Which unit does Ann Lee rent?",
                &[("units.csv", units.as_str())][..],
            ),
        ] {
            assert_eq!(
                linked_rows_note(question, ("tenants.csv", &tenants), earlier),
                None,
                "{question}"
            );
        }
        // A code in two rows of the other table is no link.
        let doubled = wrap("unit,tenant_ref\nA03,T-120\nB03,T-120\n");
        assert_eq!(
            linked_rows_note(
                "Which unit does Gareth Price rent?",
                ("tenants.csv", &tenants),
                &[("units.csv", &doubled)]
            ),
            None
        );
        // Phones and dates are no codes.
        assert!(!is_code("07700 900913") && !is_code("2021-03") && is_code("SUP1"));
        assert!(!is_code("3pm") && !is_code("7th") && is_code("2B") && is_code("T-120"));
        // A month in the question is no name: the link still holds.
        let march = linked_rows_note(
            "Which unit did Gareth Price rent in March?",
            ("tenants.csv", &tenants),
            &[("units.csv", &units)],
        )
        .unwrap_or_default();
        assert!(march.contains("units.csv: unit = B03"), "{march}");
    }
}
