//! Two tables joined by a code: the row a question names in one ("which
//! unit does *Gareth Price* rent?" finds his row in `tenants.csv`, ref
//! `T-120`), and the rows of another table read for it that have the
//! same code (`units.csv`: `B03,...,130.00,let,T-120`), with the total
//! of the column the question names when it asks for one.
//!
//! Why: shown both tables, the 1.5B model took the unit of the row
//! above (Gareth Pryce's `T-102`, unit A03 at £79): following a code from
//! one table into another is a lookup, the program's job. The rows are
//! the files' words, so they stand inside the read's boundary tags; only
//! the question's own names stand outside.

use super::output::Call;
use super::steering::{question_and_whether_called, read_call, reader};
use super::table::Table;
use crate::{ChatRequest, PathChoices};

/// The note after the read of `latest` (a path and its result as
/// wrapped) for `question`, given the other reads made for it: `None`
/// unless the question's names or codes pick exactly one row of one
/// table, a code of that row is in rows (at most [`MAX_LINKED_ROWS`]) of
/// exactly one other table, and `latest` is one of the two.
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
    let (from, row) = asked_row(&tables, &names, &codes)?;
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
    let (to, first) = links.next()?;
    let mut linked = vec![first];
    for (t, row) in links {
        // Rows of two other tables: no one link to follow.
        if t != to {
            return None;
        }
        // The same row found by two of its codes, not two equal rows.
        if !linked.iter().any(|seen| std::ptr::eq(*seen, row)) {
            linked.push(row);
        }
    }
    if linked.len() > MAX_LINKED_ROWS {
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
    let found = if linked.len() == 1 {
        "the one row of another file that has a code of it".to_owned()
    } else {
        format!(
            "the {} rows of {} that have a code of it",
            linked.len(),
            tables[to].0
        )
    };
    let mut lines: Vec<String> = vec![shown(from, row)];
    lines.extend(linked.iter().map(|other| shown(to, other)));
    if linked.len() > 1 {
        lines.extend(asked_total(question, &tables[to].1, &linked));
    }
    Some(format!(
        "(Linked by the program: the one row with {}, and {found}:)\n{open}\n{}\n{close}",
        asked_by.join(" "),
        lines.join("\n")
    ))
}

/// The asked row: the one row, of all `tables`, with every one of
/// `names` (or one of `codes`), as its table's index and the row.
fn asked_row<'t>(
    tables: &'t [(&str, Table)],
    names: &[String],
    codes: &[String],
) -> Option<(usize, &'t csv::StringRecord)> {
    let mut asked = tables.iter().enumerate().flat_map(|(t, (_, table))| {
        table
            .records
            .iter()
            .filter(|row| picks(row, names, codes))
            .map(move |row| (t, row))
    });
    let found = asked.next()?;
    asked.next().is_none().then_some(found)
}

/// The read that follows a code: after a table read for the question
/// whose one asked row has a code (Piet Hanson's `M02` in
/// `members.csv`), the unread table whose header, brought back by the
/// question's search, has that code's column (`harvest-2024.csv:1:
/// member_id,variety,crates,...`). `None` when no read table has one
/// asked row, when a read table already has the code (the note links
/// them), or when not exactly one such table is found: of several
/// editions, the one whose name has a word or number of the question.
///
/// Why: having read the members' table for "how many crates did Piet
/// Hanson pick in 2024?", the 1.5B model read a summary of 2023 and
/// answered that he picked none; the harvest rows keep members by id.
pub(crate) fn code_read(
    request: &ChatRequest,
    paths: &PathChoices,
    max_calls: usize,
) -> Option<Vec<Call>> {
    if max_calls == 0 {
        return None;
    }
    let (question, called) = question_and_whether_called(request)?;
    if !called {
        return None;
    }
    let (tool, argument, unread) = reader(request, paths)?;
    let at = super::latest_question(&request.messages)?;
    let since = &request.messages[at + 1..];
    let mut read_paths: Vec<(&str, &str)> = Vec::new();
    for (id, name, input) in since.iter().flat_map(|m| m.tool_uses()) {
        if name == tool
            && let Some(path) = input.get(argument).and_then(serde_json::Value::as_str)
        {
            read_paths.push((id, path));
        }
    }
    let mut tables: Vec<(&str, Table)> = Vec::new();
    let mut results: Vec<&str> = Vec::new();
    for (id, content) in since.iter().flat_map(|m| m.ok_results()) {
        match read_paths.iter().find(|(read, _)| *read == id) {
            Some((_, path)) => {
                if let Some(table) = Table::of(path, content) {
                    tables.push((path, table));
                }
            }
            None => results.push(content),
        }
    }
    let names = asked_names(&question);
    let codes = asked_codes(&question);
    if names.is_empty() && codes.is_empty() {
        return None;
    }
    let (from, row) = asked_row(&tables, &names, &codes)?;
    let coded: Vec<(String, &str)> = tables[from]
        .1
        .header
        .iter()
        .zip(row.iter())
        .map(|(name, cell)| (name.trim().to_lowercase(), cell.trim()))
        .filter(|(_, cell)| is_code(cell) && !codes.iter().any(|c| c.eq_ignore_ascii_case(cell)))
        .collect();
    let linked_already = tables.iter().enumerate().any(|(t, (_, table))| {
        t != from
            && table.records.iter().any(|other| {
                other.iter().any(|c| {
                    coded
                        .iter()
                        .any(|(_, code)| c.trim().eq_ignore_ascii_case(code))
                })
            })
    });
    if coded.is_empty() || linked_already {
        return None;
    }
    let years = years_in(&question);
    let read_shapes: Vec<String> = tables
        .iter()
        .map(|(path, _)| super::editions::shape(path))
        .collect();
    let mut candidates: Vec<&String> = unread
        .iter()
        .filter(|path| path.to_lowercase().ends_with(".csv"))
        .filter(|path| !tables.iter().any(|(read, _)| read == path))
        // Another edition of a table read is no new table: when 2024's
        // harvest lacks the code, 2023's is not the answer.
        .filter(|path| !read_shapes.contains(&super::editions::shape(path)))
        // A year the question names rules out a file of another year.
        .filter(|path| {
            let theirs = years_in(path);
            years.is_empty() || theirs.is_empty() || theirs.iter().any(|y| years.contains(y))
        })
        .filter(|path| {
            results.iter().any(|result| {
                result.lines().any(|line| {
                    line.strip_prefix(path.as_str())
                        .and_then(|rest| rest.strip_prefix(":1:"))
                        .is_some_and(|header| {
                            header.split(',').any(|column| {
                                let column = column.trim().to_lowercase();
                                coded.iter().any(|(name, _)| *name == column)
                            })
                        })
                })
            })
        })
        .collect();
    if candidates.len() > 1 {
        candidates.retain(|path| !super::editions::superseded(path, unread, &question));
    }
    if candidates.len() > 1 {
        let words = super::mentions::lowercase_words(&question);
        candidates.retain(|path| {
            super::mentions::lowercase_words(path)
                .iter()
                .any(|part| part.chars().count() >= 3 && words.contains(part))
        });
    }
    match candidates.as_slice() {
        [one] => Some(vec![read_call(tool, argument, one)]),
        _ => None,
    }
}

/// The four-digit years (1900 to 2199) in `text`.
fn years_in(text: &str) -> Vec<u32> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|n| n.len() == 4)
        .filter_map(|n| n.parse::<u32>().ok())
        .filter(|y| (1900..2200).contains(y))
        .collect()
}

/// At most this many rows of the other table are shown for one code.
const MAX_LINKED_ROWS: usize = 12;

/// For a question asking a total ("how many crates did Piet pick *in
/// total*?", "*add up* Anna's crates"), the sum of the column it names
/// over the linked rows, when every one holds a number there. Why:
/// shown Anna's two rows (14 and 6 crates), the 1.5B model wrote "N
/// crates", and for Piet it answered from one row; adding is the
/// program's job.
fn asked_total(question: &str, table: &Table, rows: &[&csv::StringRecord]) -> Option<String> {
    let words = super::mentions::lowercase_words(question);
    let totalling = words
        .iter()
        .any(|w| matches!(w.as_str(), "total" | "altogether" | "sum" | "overall"))
        || words
            .windows(2)
            .any(|w| w[0] == "add" && w[1] == "up" || w[0] == "in" && w[1] == "all");
    // "How many crates did Piet pick *in October*?": the rows were not
    // narrowed by the month, so their sum is not the answer.
    if !totalling || !super::dates::asked_dates(question).is_empty() {
        return None;
    }
    let named = |column: &str| {
        let column = column.trim().to_lowercase();
        words.iter().any(|w| {
            *w == column
                || w.strip_suffix('s') == Some(column.as_str())
                || column.strip_suffix('s') == Some(w.as_str())
        })
    };
    let mut columns = table.header.iter().enumerate().filter(|(_, c)| named(c));
    let (at, name) = columns.next()?;
    if columns.next().is_some() {
        return None;
    }
    let mut total = 0.0_f64;
    for row in rows {
        let cell = row.get(at)?.trim().replace(',', "");
        total += cell.parse::<f64>().ok()?;
    }
    let shown = if total.fract() == 0.0 {
        format!("{total:.0}")
    } else {
        format!("{total:.2}")
    };
    Some(format!(
        "{} added up over these {} rows = {shown}",
        name.trim(),
        rows.len()
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
    fn every_row_of_the_other_table_with_the_code_is_shown_and_a_total_added() {
        let members =
            wrap("member_id,name,plot\nM01,Anna Hansen,North 3\nM02,Piet Hanson,South 1\n");
        let harvest = wrap(
            "member_id,variety,crates,picked_on\nM01,Bramley,14,2024-09-12\nM02,Cox,9,2024-09-14\nM01,Gala,6,2024-09-28\nM02,Gala,10,2024-10-10\n",
        );
        let note = linked_rows_note(
            "How many crates did Piet Hanson pick in total in 2024?",
            ("harvest-2024.csv", &harvest),
            &[("members.csv", &members)],
        )
        .expect("a note");
        let inside = note.split_once(OPEN).expect("the tags").1;
        assert!(
            inside.contains("members.csv: member_id = M02, name = Piet Hanson"),
            "{note}"
        );
        assert!(
            inside.contains("crates = 9") && inside.contains("crates = 10"),
            "{note}"
        );
        assert!(!inside.contains("crates = 14"), "{note}");
        assert!(
            inside.contains("crates added up over these 2 rows = 19"),
            "{note}"
        );
        assert!(note.starts_with("(Linked by the program: the one row with \"piet\" \"hanson\", and the 2 rows of harvest-2024.csv"), "{note}");
        // A month narrows the question, not the rows: no total.
        let october = linked_rows_note(
            "How many crates did Piet Hanson pick in total in October?",
            ("harvest-2024.csv", &harvest),
            &[("members.csv", &members)],
        )
        .expect("a note");
        assert!(!october.contains("added up"), "{october}");
        // Two equal rows are two rows.
        let twice = wrap("member_id,variety,crates\nM02,Gala,10\nM02,Gala,10\n");
        let doubled = linked_rows_note(
            "How many crates did Piet Hanson pick in total?",
            ("harvest-2024.csv", &twice),
            &[("members.csv", &members)],
        )
        .expect("a note");
        assert!(doubled.contains("over these 2 rows = 20"), "{doubled}");
        // No total asked: the rows alone.
        let rows = linked_rows_note(
            "Which varieties did Anna Hansen pick?",
            ("harvest-2024.csv", &harvest),
            &[("members.csv", &members)],
        )
        .expect("a note");
        assert!(!rows.contains("added up"), "{rows}");
        assert!(
            rows.contains("variety = Bramley") && rows.contains("variety = Gala"),
            "{rows}"
        );
    }

    fn orchard(question: &str, search: &str, read: &[(&str, &str)]) -> ChatRequest {
        use crate::local::test_requests::{listed, request, tool};
        use crate::{Block, Message, PathKind, Role};
        use serde_json::json;
        let result = |id: String, content: String| Message {
            role: Role::User,
            blocks: vec![Block::ToolResult {
                tool_use_id: id,
                content,
                is_error: false,
                taint: Vec::new(),
            }],
        };
        let mut messages = vec![
            Message::user_text(question),
            crate::local::test_requests::call("file_search", json!({"query": "piet"})),
            result("c-file_search".into(), wrap(search)),
        ];
        for (i, (path, body)) in read.iter().enumerate() {
            messages.push(Message {
                role: Role::Assistant,
                blocks: vec![Block::ToolUse {
                    id: format!("r-{i}"),
                    name: "file_read".into(),
                    input: json!({ "path": path }),
                }],
            });
            messages.push(result(format!("r-{i}"), wrap(body)));
        }
        let mut asked = request(messages);
        asked.tools.push(tool(
            "file_search",
            json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        ));
        asked.paths.arguments = vec![
            listed("file_list", PathKind::Directory, &[""]),
            listed(
                "file_read",
                PathKind::File,
                &[
                    "members.csv",
                    "harvest-2024.csv",
                    "harvest-2023.csv",
                    "README.txt",
                ],
            ),
            listed("file_search", PathKind::Directory, &[""]),
        ];
        asked
    }

    const MEMBERS: &str = "member_id,name,plot\nM01,Anna Hansen,North 3\nM02,Piet Hanson,South 1\n";
    const HEADERS: &str = "members.csv:3: M02,Piet Hanson,South 1\nharvest-2024.csv:1: member_id,variety,crates,picked_on\nharvest-2023.csv:1: member_id,variety,crates,picked_on\n";

    #[test]
    fn a_code_of_the_asked_row_is_followed_into_the_table_whose_header_has_its_column() {
        let read_next = |question: &str, search: &str, read: &[(&str, &str)]| {
            let asked = orchard(question, search, read);
            let uncalled = crate::local::steering::uncalled_paths(&asked);
            code_read(&asked, &uncalled, 3).map(|calls| calls[0].1["path"].clone())
        };
        let piet = "How many crates did Piet Hanson pick in total in 2024?";
        assert_eq!(
            read_next(piet, HEADERS, &[("members.csv", MEMBERS)]),
            Some(serde_json::json!("harvest-2024.csv"))
        );
        // Two editions, no year asked: the later one stands for now.
        assert_eq!(
            read_next(
                "How many crates did Piet Hanson pick?",
                HEADERS,
                &[("members.csv", MEMBERS)]
            ),
            Some(serde_json::json!("harvest-2024.csv"))
        );
        // Last year asked for by its number: that edition.
        assert_eq!(
            read_next(
                "How many crates did Piet Hanson pick in 2023?",
                HEADERS,
                &[("members.csv", MEMBERS)]
            ),
            Some(serde_json::json!("harvest-2023.csv"))
        );
        // The year's edition lacks the code: the other year is not read.
        assert_eq!(
            read_next(
                piet,
                HEADERS,
                &[
                    ("members.csv", MEMBERS),
                    ("harvest-2024.csv", "member_id,variety,crates\nM01,Cox,9\n")
                ]
            ),
            None
        );
        // No header with the code's column came back; no asked row; the
        // other table already read.
        assert_eq!(
            read_next(
                piet,
                "members.csv:3: M02,Piet Hanson,South 1\n",
                &[("members.csv", MEMBERS)]
            ),
            None
        );
        assert_eq!(
            read_next(
                "How many crates were picked in 2024?",
                HEADERS,
                &[("members.csv", MEMBERS)]
            ),
            None
        );
        assert_eq!(
            read_next(
                piet,
                HEADERS,
                &[
                    ("members.csv", MEMBERS),
                    ("harvest-2024.csv", "member_id,variety,crates\nM02,Cox,9\n")
                ]
            ),
            None
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
        // A code in rows of two other tables is no link.
        let doubled = wrap("unit,tenant_ref\nA03,T-120\n");
        let other = wrap("locker,tenant_ref\nL1,T-120\n");
        assert_eq!(
            linked_rows_note(
                "Which unit does Gareth Price rent?",
                ("tenants.csv", &tenants),
                &[("units.csv", &doubled), ("lockers.csv", &other)]
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
