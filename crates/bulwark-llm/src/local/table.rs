//! A CSV file's table, as the driver's notes read it (`shape.rs` counts
//! its rows, `extremes.rs` sorts a column), and the note that picks out
//! the rows holding the question's words.
//!
//! Why that note: asked "who on the ops team is in staff.csv?", the 1.5B
//! model answered with the first row (`Ivo Petrov, backend`); asked to
//! save the names of the blue items, it wrote the colour column. Finding
//! the rows whose cells are the question's words is a lookup, the
//! program's job; shown those rows as `column = value` pairs, the model
//! reads the answer off.
//!
//! The rows are file content: they go inside the same boundary tags as
//! the read that brought them (the kernel's tag, copied from the result).
//! Outside stand only the program's words and a count.

use super::compare::boundary_tags;
use super::dates::{asked_dates, clock_time, holds_asked_date, in_hours, part_of_day, says_when};
use super::mentions::{
    Numbers, absent_words, is_function_word, lowercase_words, month_of, ordinal_number,
    short_forms_of_day, stem, subject_words,
};
use super::shape::unwrapped_lines;

/// A CSV file that parses as one table with a header line.
pub(crate) struct Table {
    pub(crate) header: Vec<String>,
    pub(crate) records: Vec<csv::StringRecord>,
}

/// Column-name words of an identifier.
const IDENTIFIER_WORDS: &[&str] = &[
    "id", "no", "ref", "code", "zip", "phone", "sku", "isbn", "number",
];

/// At most this many rows in a note: more is no longer a lookup.
const MAX_ROWS: usize = 8;

impl Table {
    /// The table of a read of `path` (its result as wrapped), when the
    /// path is a `.csv` file that parses as one table of two or more
    /// columns and at least one row.
    pub(crate) fn of(path: &str, wrapped: &str) -> Option<Self> {
        Self::of_lines(path, &unwrapped_lines(wrapped))
    }

    /// [`Table::of`] for the file's lines, already unwrapped.
    pub(crate) fn of_lines(path: &str, lines: &[&str]) -> Option<Self> {
        if !path.to_ascii_lowercase().ends_with(".csv") {
            return None;
        }
        let body = lines.join("\n");
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(false)
            .trim(csv::Trim::All)
            .from_reader(body.as_bytes());
        let header: Vec<String> = reader.headers().ok()?.iter().map(str::to_owned).collect();
        let records: Vec<csv::StringRecord> = reader.records().collect::<Result<_, _>>().ok()?;
        (header.len() >= 2 && !records.is_empty()).then_some(Self { header, records })
    }

    /// The Markdown tables of a read (`| a | b |` lines under a `|---|`
    /// separator), each with the heading it stands under when the file
    /// has more than one ("## Kiln B (gas)"): two tables alike are told
    /// apart only by it.
    pub(crate) fn markdown(path: &str, wrapped: &str) -> Vec<(Option<String>, Self)> {
        let lower = path.to_ascii_lowercase();
        if !(lower.ends_with(".md") || lower.ends_with(".markdown")) {
            return Vec::new();
        }
        let lines = unwrapped_lines(wrapped);
        let cells = |line: &str| -> Vec<String> {
            let inner = line.trim().trim_start_matches('|');
            let inner = inner.strip_suffix('|').unwrap_or(inner);
            inner.split('|').map(|c| c.trim().to_owned()).collect()
        };
        let is_row = |line: &str| line.trim_start().starts_with('|');
        let is_separator = |line: &str| {
            is_row(line)
                && line.contains('-')
                && line
                    .trim()
                    .chars()
                    .all(|c| matches!(c, '|' | '-' | ':' | ' '))
        };
        let mut tables = Vec::new();
        let mut heading: Option<String> = None;
        let mut at = 0;
        while at < lines.len() {
            let line = lines[at];
            if line.starts_with('#') {
                heading = Some(line.trim_start_matches('#').trim().to_owned());
            }
            let starts_table =
                is_row(line) && lines.get(at + 1).is_some_and(|next| is_separator(next));
            if !starts_table {
                at += 1;
                continue;
            }
            let header = cells(line);
            let mut records = Vec::new();
            at += 2;
            while at < lines.len() && is_row(lines[at]) {
                let row = cells(lines[at]);
                if row.len() == header.len() {
                    records.push(csv::StringRecord::from(row));
                }
                at += 1;
            }
            if header.len() >= 2 && !records.is_empty() {
                tables.push((heading.clone(), Self { header, records }));
            }
        }
        if tables.len() < 2 {
            for (heading, _) in &mut tables {
                *heading = None;
            }
        }
        tables
    }

    /// The number in `column` of `record`, thousands commas allowed.
    pub(crate) fn number(record: &csv::StringRecord, column: usize) -> Option<f64> {
        record
            .get(column)
            .and_then(|v| v.replace(',', "").parse::<f64>().ok())
            .filter(|v| v.is_finite())
    }

    /// Whether every row has a number in `column`.
    pub(crate) fn numeric(&self, column: usize) -> bool {
        self.records
            .iter()
            .all(|r| Self::number(r, column).is_some())
    }

    /// Whether `question` names one of the numeric columns ("how many
    /// red widgets are in *stock*"): its answer is a value there, not a
    /// count of rows.
    pub(crate) fn names_a_numeric_column(&self, question: &str) -> bool {
        let question = question.to_lowercase();
        let asked: Vec<&str> = question
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() >= 3)
            .collect();
        self.header.iter().enumerate().any(|(column, name)| {
            self.numeric(column)
                && name
                    .to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| w.len() >= 3)
                    .any(|w| asked.iter().any(|a| a == &w || stem(a) == stem(w)))
        })
    }

    /// The table's one column of ISO dates (`2025-09-28`) in every row;
    /// `None` for none or two (which one a question means is not the
    /// program's call).
    pub(crate) fn date_column(&self) -> Option<usize> {
        let is_date = |v: &str| {
            let b = v.as_bytes();
            b.len() == 10
                && b.iter().enumerate().all(|(i, c)| {
                    if i == 4 || i == 7 {
                        *c == b'-'
                    } else {
                        c.is_ascii_digit()
                    }
                })
        };
        let dated: Vec<usize> = (0..self.header.len())
            .filter(|&c| self.records.iter().all(|r| r.get(c).is_some_and(is_date)))
            .collect();
        match dated.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// Whether a column names its rows rather than measures them
    /// (`order_id`, `ref`, `zip_code`): its highest value is the newest
    /// number handed out, not the largest thing, and no bound applies.
    pub(crate) fn is_identifier(header: &str) -> bool {
        lowercase_words(header)
            .iter()
            .any(|w| IDENTIFIER_WORDS.contains(&w.as_str()))
    }

    /// `record` as `column = value` pairs, one line.
    pub(crate) fn row_line(&self, record: &csv::StringRecord) -> String {
        self.header
            .iter()
            .zip(record.iter())
            .map(|(h, v)| format!("{h} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The note for a read of `path` for `question`: the rows with the most
/// cells that are words of the question, when that picks out some rows
/// but not all. None when a word the question asks about is missing from
/// the file close to a word that picked the rows (`mentions.rs` says it
/// is missing, and the near row would mislead: asked for the purple
/// widget's price, the blue widget's row; asked for Chen Wei's phone
/// number, the row with his e-mail address).
pub(crate) fn matching_rows_note(path: &str, question: &str, wrapped: &str) -> Option<String> {
    let tables: Vec<(Option<String>, Table)> = match Table::of(path, wrapped) {
        Some(table) => vec![(None, table)],
        None => Table::markdown(path, wrapped),
    };
    if tables.is_empty() {
        return None;
    }
    let (open, close) = boundary_tags(wrapped)?;
    // File names are not words of the content ("out/blue.txt").
    let text = without_paths(question);
    let asked: Vec<String> = words(&text);
    let dates = asked_dates(&text);
    let cell_words = |cell: &str| words(cell);
    let telling = |w: &String, least: usize| {
        w.chars().count() >= least && !w.chars().all(|c| c.is_ascii_digit()) && !is_function_word(w)
    };
    // Codes the question names whole ("ticket *HD-303*", "block B1"):
    // too short or too numeric to be telling words, but a cell that is
    // one names its row, and a cell that lists one ("H3, H4") names it
    // too.
    let codes: Vec<String> = text
        .split_whitespace()
        .map(|raw| {
            raw.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|t| t.chars().any(|c| c.is_ascii_digit()) && t.chars().any(char::is_alphabetic))
        .collect();
    let times: Vec<String> = text
        .split_whitespace()
        .filter_map(|raw| clock_time(raw.trim_matches(|c: char| !c.is_alphanumeric())))
        .collect();
    // "Thursday the 13th" of a schedule's "Thu 13 Mar": the weekday in
    // any of its forms, and the day's number beside a weekday or a month.
    let weekdays: Vec<&str> = asked
        .iter()
        .flat_map(|w| {
            let short = short_forms_of_day(w);
            let full = (!short.is_empty()).then_some(w.trim_end_matches('s'));
            short.iter().copied().chain(full)
        })
        .collect();
    let day_numbers: Vec<&str> = asked.iter().filter_map(|w| ordinal_number(w)).collect();
    let has_weekday = |cell: &[String]| {
        cell.iter()
            .any(|w| weekdays.contains(&w.trim_end_matches('s')))
    };
    let is_the_day = |cell: &[String]| {
        cell.iter().any(|w| day_numbers.contains(&w.as_str()))
            && (has_weekday(cell)
                || weekdays.is_empty() && cell.iter().any(|w| month_of(w).is_some()))
    };
    let cell_is_asked = |cell: &str| {
        let whole = cell.trim().to_lowercase();
        let cell = cell_words(cell);
        if is_the_day(&cell) {
            return true;
        }
        codes.contains(&whole)
            || clock_time(&whole).is_some_and(|t| times.contains(&t))
            || cell.iter().any(|w| telling(w, 3)) && cell.iter().all(|w| asked.contains(w))
            || dates.iter().any(|d| d.day.is_some()) && holds_asked_date(&whole, &dates)
    };
    // A cell one of whose words the question names ("the Brompton" for
    // `Brompton M6L`) counts half as much as a cell it names whole; so
    // does a cell that starts with a short word the question names ("car
    // return fare" for `Car (up to 5 m)`), a code in a list, or a date in
    // the month asked.
    // A year the question counts within ("joined *in 2025*") names the
    // rows whose ISO date is in it; asked to write those members, the
    // 1.5B model copied every row.
    let spoken = lowercase_words(&text);
    let years: Vec<&String> = spoken
        .iter()
        .filter(|w| super::counted::is_year_in(&spoken, w))
        .collect();
    let in_asked_year = |cell: &str| {
        let cell = cell.trim();
        years.iter().any(|year| {
            cell.strip_prefix(year.as_str())
                .is_some_and(|rest| rest.len() == 6 && rest.starts_with('-'))
        })
    };
    let cell_is_named = |cell: &str| {
        let named = cell_words(cell);
        if in_asked_year(cell) || has_weekday(&named) {
            return true;
        }
        named.iter().any(|w| telling(w, 4) && asked.contains(w))
            || named
                .first()
                .is_some_and(|w| telling(w, 3) && asked.contains(w))
            || named.iter().any(|w| codes.contains(w))
            || holds_asked_date(&cell.to_lowercase(), &dates)
    };
    // "On the *evening* of the 21st": of that day's bookings, the one
    // that starts then (its first time of day). Without it the two main
    // hall rows of the day tied, and the 1.5B model named a third.
    let hours = part_of_day(&spoken);
    let starts_then = |record: &csv::StringRecord| {
        hours.is_some_and(|hours| {
            record
                .iter()
                .find_map(|cell| clock_time(cell.trim()))
                .is_some_and(|time| in_hours(&time, hours))
        })
    };
    let score = |record: &csv::StringRecord| -> usize {
        record
            .iter()
            .map(|cell| {
                if cell_is_asked(cell) {
                    2
                } else {
                    usize::from(cell_is_named(cell))
                }
            })
            .sum::<usize>()
            + usize::from(starts_then(record))
    };
    let rows: Vec<(&Option<String>, &Table, &csv::StringRecord, usize)> = tables
        .iter()
        .flat_map(|(heading, table)| table.records.iter().map(move |r| (heading, table, r)))
        .map(|(heading, table, record)| {
            // The heading a table stands under is one more cell of its
            // rows ("who served *downstairs*").
            let under = heading.as_deref().map_or(0, |h| {
                if cell_is_asked(h) {
                    2
                } else {
                    usize::from(cell_is_named(h))
                }
            });
            (heading, table, record, score(record) + under)
        })
        .collect();
    let best = rows.iter().map(|r| r.3).max().unwrap_or(0);
    let picked: Vec<_> = rows.iter().filter(|r| r.3 == best).collect();
    if best == 0 || picked.len() == rows.len() || picked.len() > MAX_ROWS {
        return None;
    }
    let picking: Vec<String> = picked
        .iter()
        .flat_map(|r| {
            r.2.iter()
                .filter(|cell| cell_is_named(cell) || cell_is_asked(cell))
        })
        .flat_map(cell_words)
        .filter(|w| asked.contains(w))
        .collect();
    // The file's name is what its rows are ("the beekeeping *episode*"
    // in `episodes.csv`), not a word a cell would hold.
    // The noun a which-question asks for ("which *telescope* did Anne
    // use") is the kind of the answer, a column's, not a word its row
    // would hold: said to be missing, it hid the row that answers.
    let asked_kind: Option<&String> = asked
        .windows(2)
        .find(|pair| matches!(pair[0].as_str(), "which" | "what"))
        .map(|pair| &pair[1]);
    let absent: Vec<String> = absent_words(&subject_words(&text, &[path], Numbers::Skip), wrapped)
        .into_iter()
        .filter(|w| asked_kind.is_none_or(|kind| kind != w))
        // A day or a part of it ("*Saturday* 21st June", "the
        // *evening*") is in a table as a date and a time, not a word.
        .filter(|w| !says_when(w))
        .map(|w| stem(w).to_owned())
        .collect();
    // Near, and not across a preposition that sets a scope: "the
    // *studio* in *2025*" is when, not which studio.
    let near = |at: usize| {
        let from = at.saturating_sub(NEAR);
        let to = (at + NEAR + 1).min(asked.len());
        (from..to).any(|j| {
            let (low, high) = (at.min(j), at.max(j));
            picking.contains(&asked[j])
                && !asked[low + 1..high]
                    .iter()
                    .any(|w| SCOPE_PREPOSITIONS.contains(&w.as_str()))
        })
    };
    // A noun right after a name or code that picks the row says what
    // kind of thing it is ("the *U14 game*", "the *Brompton bike*"): the
    // row is one, whatever it calls it. After a plain word it does not
    // ("the purple *widget*" of a purple gadget's row).
    let names: Vec<String> = super::question_words::question_tokens(&text)
        .iter()
        .filter(|t| t.is_name())
        .filter_map(|t| t.text.map(str::to_lowercase))
        .collect();
    let kind_of_a_name = |at: usize| {
        at.checked_sub(1)
            .map(|before| &asked[before])
            .is_some_and(|before| picking.contains(before) && names.contains(before))
    };
    if asked
        .iter()
        .enumerate()
        .any(|(at, w)| absent.contains(w) && near(at) && !kind_of_a_name(at))
    {
        return None;
    }
    let lines: Vec<String> = picked
        .iter()
        .map(|(heading, table, record, _)| match heading {
            Some(h) => format!("{h}: {}", table.row_line(record)),
            None => table.row_line(record),
        })
        .collect();
    let larger = match picked.as_slice() {
        [a, b] if std::ptr::eq(a.1, b.1) => larger_of_two(a.1, [a.2, b.2], &text)
            .map(|(word, high, row)| {
                let which = if high { "more" } else { "less" };
                format!(
                    "\n(Compared by the program: of these 2 rows, this one has {which} \"{word}\":)\n{open}\n{}\n{close}",
                    a.1.row_line(row)
                )
            }),
        _ => None,
    };
    let worked_out = picked
        .first()
        .filter(|first| picked.iter().all(|r| std::ptr::eq(r.1, first.1)))
        .and_then(|first| {
            let records: Vec<&csv::StringRecord> = picked.iter().map(|r| r.2).collect();
            super::difference::difference_line(first.1, &records, &text)
        })
        .map(|line| format!("\n(Worked out by the program:)\n{open}\n{line}\n{close}"));
    let asked_cell = match picked.as_slice() {
        [only] => asked_cell(only.1, only.2, &text)
            .map(|line| format!("\n(The column the question names:)\n{open}\n{line}\n{close}")),
        _ => None,
    };
    let heading = match lines.len() {
        1 => "(Found by the program: the row of the table with the question's words:)".to_owned(),
        n => {
            format!("(Found by the program: the {n} rows of the table with the question's words:)")
        }
    };
    Some(format!(
        "{heading}\n{open}\n{}\n{close}{}{}{}",
        lines.join("\n"),
        larger.unwrap_or_default(),
        worked_out.unwrap_or_default(),
        asked_cell.unwrap_or_default()
    ))
}

/// `column = value` of the one column of `record` whose name the
/// question says whole (every word of three letters or more), when
/// exactly one does and the question asks no difference.
///
/// Why: asked the price of a pint of the session IPA, shown its row
/// (`Pint = £4.30, 4-pint carry-out = £15.00`), the 1.5B model answered
/// £15.00 as often as not: "pint" is in both names.
fn asked_cell(table: &Table, record: &csv::StringRecord, question: &str) -> Option<String> {
    if super::difference::asks_a_difference(question) {
        return None;
    }
    let spoken = question.to_lowercase();
    let named: Vec<usize> = (0..table.header.len())
        .filter(|&column| {
            let words: Vec<String> = lowercase_words(&table.header[column])
                .into_iter()
                .filter(|w| w.chars().count() >= 3 && !is_function_word(w))
                .collect();
            !words.is_empty() && words.iter().all(|w| super::mentions::mentioned(&spoken, w))
        })
        .collect();
    let [column] = named.as_slice() else {
        return None;
    };
    let value = record.get(*column)?.trim();
    // A cell the question names is how the row was picked, not asked.
    if value.is_empty() || spoken.contains(&value.to_lowercase()) {
        return None;
    }
    Some(format!("{} = {value}", table.header[*column]))
}

/// Words that ask which of two has more, and which has less.
const MORE: &[&str] = &[
    "more", "most", "higher", "highest", "bigger", "biggest", "larger", "largest", "greater",
];
const LESS: &[&str] = &[
    "less", "least", "fewer", "fewest", "lower", "lowest", "smaller", "smallest",
];

/// For "which gave more honey, H2 or H5?" with those two rows picked: the
/// question's word for the one numeric column it names, whether it asks
/// for more, and the row with more (or less) there. Shown both rows, the
/// 1.5B model named the first; comparing two numbers is the program's
/// job. None for a tie, no comparative, or no single column named.
fn larger_of_two<'r>(
    table: &Table,
    rows: [&'r csv::StringRecord; 2],
    question: &str,
) -> Option<(String, bool, &'r csv::StringRecord)> {
    let spoken = lowercase_words(question);
    let says = |list: &[&str]| spoken.iter().any(|w| list.contains(&w.as_str()));
    let high = match (says(MORE), says(LESS)) {
        (true, false) => true,
        (false, true) => false,
        _ => return None,
    };
    let named: Vec<(usize, &String)> = (0..table.header.len())
        .filter_map(|column| {
            let parts = lowercase_words(&table.header[column]);
            let word = spoken.iter().find(|w| {
                w.chars().count() >= 3
                    && !is_function_word(w)
                    && !MORE.contains(&w.as_str())
                    && !LESS.contains(&w.as_str())
                    && parts.iter().any(|p| stem(p) == stem(w))
            })?;
            rows.iter()
                .all(|r| Table::number(r, column).is_some())
                .then_some((column, word))
        })
        .collect();
    let [(column, word)] = named.as_slice() else {
        return None;
    };
    let [a, b] = rows.map(|r| Table::number(r, *column).unwrap_or(0.0));
    if a == b {
        return None;
    }
    let first = (a > b) == high;
    Some(((*word).clone(), high, if first { rows[0] } else { rows[1] }))
}

/// Prepositions between a missing word and a picking one that part
/// them ("joined the studio *in* 2025").
const SCOPE_PREPOSITIONS: &[&str] = &["in", "during", "since", "from", "at"];

/// How many words apart a missing word still qualifies a picking one.
const NEAR: usize = 2;

/// The lowercase stems of `text`'s words.
fn words(text: &str) -> Vec<String> {
    lowercase_words(text)
        .iter()
        .map(|w| stem(w).to_owned())
        .collect()
}

/// `text` without the words that read as file paths.
fn without_paths(text: &str) -> String {
    text.split_whitespace()
        .filter(|raw| !super::steering::is_path_word(raw))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
