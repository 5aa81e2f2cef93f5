//! A count of the lines or rows that hold what a "how many" question
//! narrows to: "how many appointments does *Dr Berg* have", "how many
//! times did the pump *start*", "how many *fixes*" in a changelog.
//!
//! Why: given the table's row count (or nothing, for a log), the 1.5B
//! model answered with the total: 5 appointments for Dr Berg's 3, and it
//! guessed at how often a log line repeats. Picking the lines is a
//! lookup and counting them is arithmetic: the program's job.
//!
//! Only the question's words that some line holds narrow the count ("how
//! many *songs* are on the setlist" names no word of the file, and the
//! list's own count answers it); a word in every line narrows nothing,
//! and a question that names a numeric column ("how many red widgets are
//! in *stock*") reads its answer from that column, so it gets no count.
//! The note quotes the question's words, never the file's.

use super::lines::asked_words;
use super::mentions::{mentioned, occurrences};
use super::table::Table;

/// Words of a count question that name the act of counting or a
/// generic unit, not what is counted.
const COUNTING_WORDS: &[&str] = &[
    "times",
    "time",
    "items",
    "item",
    "things",
    "thing",
    "entries",
    "entry",
    "rows",
    "row",
    "number",
    "total",
    "distinct",
    "unique",
    "yet",
    "still",
    "altogether",
    "listed",
    "mentioned",
];

/// The note for a read of `path` (its unwrapped `lines`) for `question`,
/// `None` when the question counts nothing the file's lines narrow.
pub(crate) fn narrowed_count_note(path: &str, question: &str, wrapped: &str) -> Option<String> {
    if !question.to_lowercase().contains("how many") || counts_a_measure(question) {
        return None;
    }
    let lines = super::shape::unwrapped_lines(wrapped);
    let lines = lines.as_slice();
    let words = counted_words(question, path);
    let table = Table::of_lines(path, lines);
    let (units, unit): (Vec<String>, &str) = match &table {
        Some(table) => {
            if table.names_a_numeric_column(question) {
                return None;
            }
            let rows = table
                .records
                .iter()
                .map(|r| r.iter().collect::<Vec<_>>().join(" ").to_lowercase());
            (rows.collect(), "row")
        }
        None => {
            let text = lines
                .iter()
                .map(|l| l.trim())
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_lowercase);
            (text.collect(), "line")
        }
    };
    let present: Vec<&String> = words
        .iter()
        .filter(|w| units.iter().any(|u| mentioned(u, w)))
        .collect();
    let matched = units
        .iter()
        .filter(|u| present.iter().all(|w| mentioned(u, w)))
        .count();
    if present.is_empty() {
        // No row has what the question narrows to, in its words ("still
        // *owe* their subs", "*empty* units"): a state column may say
        // it in its own ("subs paid = no", "status = vacant").
        return table
            .as_ref()
            .and_then(|table| whole_table_by_state(table, question, path, wrapped));
    }
    if matched == 0 || matched == units.len() || unit == "line" && states_a_count(&units, &present)
    {
        return None;
    }
    let quoted: Vec<String> = present.iter().map(|w| format!("\"{w}\"")).collect();
    let with = match quoted.as_slice() {
        [rest @ .., last] if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => quoted.join(""),
    };
    let plural = if matched == 1 { "" } else { "s" };
    // A condition no row states ("actually *going ahead*"): the rows'
    // own states tell which count it asks for.
    let unstated = words.iter().any(|w| !present.contains(&w));
    let split = table.as_ref().filter(|_| unstated).and_then(|table| {
        let rows: Vec<&csv::StringRecord> = table
            .records
            .iter()
            .filter(|r| {
                let row = r.iter().collect::<Vec<_>>().join(" ").to_lowercase();
                present.iter().all(|w| mentioned(&row, w))
            })
            .collect();
        split_by_state(table, &rows, wrapped)
    });
    Some(match split {
        Some(split) => format!(
            "(Counted by the program: {matched} {unit}{plural} with {with}; of these, by a column that differs among them:)\n{split}"
        ),
        None => format!("(Counted by the program: {matched} {unit}{plural} with {with}.)"),
    })
}

/// At most this many states of a column split a count.
const MAX_STATES: usize = 3;

/// Column names that say a row's state.
const STATE_COLUMNS: &[&str] = &["status", "state", "condition", "availability", "stage"];

/// At most this many states of a column split a whole table.
const MAX_TABLE_STATES: usize = 4;

/// The whole table's rows by the columns that take a few worded values,
/// for a count whose condition no row states in the question's words.
///
/// Why: asked "how many choir members still owe their subs?" of a table
/// whose column `subs paid` says yes or no, and "how many units are
/// *empty*?" of one whose status says "vacant", the 1.5B model was given
/// no count and answered 7 for 3 and 1 for 3. A question with nothing
/// past the thing counted ("how many members are there?") gets none.
fn whole_table_by_state(
    table: &Table,
    question: &str,
    path: &str,
    wrapped: &str,
) -> Option<String> {
    let conditions = condition_words(question, path);
    if conditions.is_empty() || table.records.len() < 3 {
        return None;
    }
    let rows: Vec<&csv::StringRecord> = table.records.iter().collect();
    // A column the question names ("subs" of `subs paid`) is counted by
    // its values alone (`shape::values_note`).
    let names_a_column = table.header.iter().any(|name| {
        let name = name.to_lowercase();
        conditions.iter().any(|w| occurrences(&name, w) > 0)
    });
    if names_a_column {
        return None;
    }
    // A column that holds a state by its name ("status") is the one: the
    // others' few values (a floor: "ground" ×4, "first" ×4) only offered
    // wrong counts, and the 1.5B model took one of them.
    let holds_a_state = |name: &str| STATE_COLUMNS.contains(&name.trim().to_lowercase().as_str());
    let split = split_by_state_up_to(table, &rows, wrapped, MAX_TABLE_STATES, &holds_a_state)
        .or_else(|| split_by_state_up_to(table, &rows, wrapped, MAX_TABLE_STATES, &|_| true))?;
    Some(format!(
        "(Counted by the program: {} rows in all; no row has the question's words, so here they are by the columns whose few values repeat. Answer with the count of the value that means what the question asks:)\n{split}",
        rows.len()
    ))
}

/// The counted `rows` split by the columns that take a few short, worded
/// values among them (a status: "confirmed" ×3, "cancelled" ×1), inside
/// the kernel's boundary tags: the column's name and its values are the
/// file's words. None when no column does.
///
/// Why: asked "how many Pilates classes are actually going ahead in
/// March?", the 1.5B model was told of 4 rows with "pilates" and
/// "march" and answered 4; one of them was cancelled.
fn split_by_state(table: &Table, rows: &[&csv::StringRecord], wrapped: &str) -> Option<String> {
    split_by_state_up_to(table, rows, wrapped, MAX_STATES, &|_| true)
}

fn split_by_state_up_to(
    table: &Table,
    rows: &[&csv::StringRecord],
    wrapped: &str,
    max_states: usize,
    column_kept: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let (open, close) = super::compare::boundary_tags(wrapped)?;
    let worded = |value: &str| {
        let value = value.trim();
        !value.is_empty()
            && value.chars().count() <= 24
            && value.chars().any(char::is_alphabetic)
            && !value.chars().any(|c| c.is_ascii_digit())
    };
    let mut lines: Vec<String> = Vec::new();
    for (column, name) in table.header.iter().enumerate() {
        if !column_kept(name) {
            continue;
        }
        let values: Vec<&str> = rows
            .iter()
            .filter_map(|r| r.get(column))
            .map(str::trim)
            .collect();
        if values.len() != rows.len() || !values.iter().all(|v| worded(v)) {
            continue;
        }
        let mut states: Vec<(&str, usize)> = Vec::new();
        for value in values {
            match states.iter_mut().find(|(v, _)| *v == value) {
                Some((_, n)) => *n += 1,
                None => states.push((value, 1)),
            }
        }
        if !(2..=max_states).contains(&states.len()) || states.len() == rows.len() {
            continue;
        }
        for (value, n) in states {
            let rows = if n == 1 { "row" } else { "rows" };
            lines.push(format!("{name} = {value}: {n} {rows}"));
        }
    }
    (!lines.is_empty()).then(|| format!("{open}\n{}\n{close}", lines.join("\n")))
}

/// The question's words that may narrow a count: those a line is
/// searched for ([`asked_words`]), less numbers and counting words.
/// Units of measure: "how many *grams* of food" asks for a quantity the
/// file states, not for lines to count (the 1.5B model answered with the
/// count of lines holding "food").
const MEASURES: &[&str] = &[
    "grams",
    "g",
    "kg",
    "kilos",
    "kilograms",
    "litres",
    "liters",
    "ml",
    "millilitres",
    "cups",
    "minutes",
    "mins",
    "hours",
    "seconds",
    "days",
    "weeks",
    "months",
    "years",
    "euros",
    "eur",
    "dollars",
    "pounds",
    "percent",
    "miles",
    "km",
    "kilometres",
    "metres",
    "meters",
    "calories",
    "points",
    "degrees",
    "bytes",
    "mb",
    "gb",
    "cm",
    "mm",
    "inches",
    "feet",
];

/// Whether `question` asks "how many" of a unit of measure.
pub(crate) fn counts_a_measure(question: &str) -> bool {
    let words = super::mentions::lowercase_words(question);
    words
        .windows(3)
        .any(|w| w[0] == "how" && w[1] == "many" && MEASURES.contains(&w[2].as_str()))
}

/// Whether a line already states the count of one of `present`'s words
/// ("142 passed, 2 failed", "errors: 3", "failed=2"): counting the lines
/// that hold the word would count that summary too, and the file's own
/// number is the answer.
fn states_a_count(units: &[String], present: &[&String]) -> bool {
    let number = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit());
    let counts = |w: &str| present.iter().any(|p| occurrences(w, p) > 0);
    units.iter().any(|unit| {
        let words: Vec<&str> = unit
            .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
            .filter(|w| !w.is_empty())
            .collect();
        words.windows(2).any(|pair| {
            let labelled = pair[0].ends_with([':', '=']) && counts(pair[0]) && number(pair[1]);
            number(pair[0]) && counts(pair[1]) || labelled
        }) || words.iter().any(|w| {
            w.split_once('=')
                .or_else(|| w.split_once(':'))
                .is_some_and(|(key, value)| counts(key) && number(value))
        })
    })
}

/// The words of a "how many" question that narrow what it counts, past
/// the thing counted ("how many *bookings* are still *waiting* on a
/// *deposit*": waiting, deposit): none for "how many people are listed".
pub(crate) fn condition_words(question: &str, path: &str) -> Vec<String> {
    let counted = counted_noun(question);
    counted_words(question, path)
        .into_iter()
        .filter(|w| Some(w) != counted.as_ref())
        .collect()
}

/// The thing a "how many" question counts: the first word after "how
/// many" that names a thing ("how many *different* parts": parts), in
/// lowercase; `None` for any other question.
pub(crate) fn counted_noun(question: &str) -> Option<String> {
    let words = super::mentions::lowercase_words(question);
    words
        .windows(2)
        .position(|w| w[0] == "how" && w[1] == "many")
        .and_then(|at| {
            words[at + 2..].iter().find(|w| {
                !super::mentions::is_function_word(w) && !COUNTING_WORDS.contains(&w.as_str())
            })
        })
        .cloned()
}

/// What a "how many" question counts, past a measure of it: "how many
/// *tins of sweetcorn*" counts sweetcorn, not the tins of beans.
pub(crate) fn counted_thing(question: &str) -> Option<String> {
    let noun = counted_noun(question)?;
    let words = super::mentions::lowercase_words(question);
    let of = words
        .windows(3)
        .find(|w| w[0] == noun && w[1] == "of" && !super::mentions::is_function_word(&w[2]))
        .map(|w| w[2].clone());
    Some(of.unwrap_or(noun))
}

fn counted_words(question: &str, path: &str) -> Vec<String> {
    let spoken = super::mentions::lowercase_words(question);
    asked_words(question, path)
        .into_iter()
        .filter(|w| !w.chars().all(|c| c.is_ascii_digit()) || is_year_in(&spoken, w))
        .filter(|w| !COUNTING_WORDS.contains(&w.as_str()))
        .collect()
}

/// Whether `word` is a year the question counts within ("joined *in
/// 2025*"): it narrows a count as a name does, its rows' dates have it.
/// Not a year compared ("published *before 2015*": the 1.5B model, told
/// of the one row with 2015, answered 1), nor other numbers ("over 100",
/// "week 18").
pub(crate) fn is_year_in(spoken: &[String], word: &str) -> bool {
    let year = word.len() == 4 && (word.starts_with("19") || word.starts_with("20"));
    year && spoken
        .windows(2)
        .any(|pair| pair[1] == word && matches!(pair[0].as_str(), "in" | "during" | "of" | "for"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(path: &str, question: &str, body: &str) -> Option<String> {
        narrowed_count_note(path, question, body)
    }

    const APPOINTMENTS: &str = "patient,doctor,day\nHana Ito,Dr Berg,Monday\nOmar Said,Dr Lind,Monday\nEva Rossi,Dr Berg,Wednesday\nLea Vogel,Dr Berg,Friday\n";

    #[test]
    fn a_verb_after_a_word_of_counting_is_not_what_is_counted() {
        // "items *got* fixed": the verb is passed over, the state counted.
        assert_eq!(
            counted_noun("How many items got fixed at the April session?").as_deref(),
            Some("fixed")
        );
        assert_eq!(
            counted_noun("How many dogs have been groomed?").as_deref(),
            Some("dogs")
        );
    }

    #[test]
    fn a_condition_no_row_states_gets_the_rows_split_by_their_state() {
        use crate::local::test_wrap::{CLOSE, OPEN, wrap};
        let bookings = "date,room,hirer,status\n2024-03-02,Hall,Pilates,confirmed\n2024-03-09,Hall,Pilates,confirmed\n2024-03-16,Hall,Pilates,cancelled\n2024-03-16,Kitchen,Lions,confirmed\n2024-04-06,Hall,Pilates,confirmed\n";
        let going = note(
            "bookings.csv",
            "how many Pilates classes are actually going ahead in March?",
            &wrap(bookings),
        )
        .unwrap_or_default();
        assert_eq!(
            going,
            format!(
                "(Counted by the program: 3 rows with \"pilates\" and \"march\"; of these, by a column that differs among them:)\n{OPEN}\nstatus = confirmed: 2 rows\nstatus = cancelled: 1 row\n{CLOSE}"
            )
        );
        // Every word stated by the rows: the count alone.
        assert_eq!(
            note(
                "bookings.csv",
                "How many Pilates bookings in March?",
                &wrap(bookings)
            )
            .as_deref(),
            Some("(Counted by the program: 3 rows with \"pilates\" and \"march\".)")
        );
    }

    #[test]
    fn a_condition_in_words_no_row_or_column_has_gets_the_whole_table_by_state() {
        use crate::local::test_wrap::{CLOSE, OPEN, wrap};
        let units = "unit,floor,status\nA01,ground,let\nA02,ground,vacant\nA03,first,let\nB01,first,vacant\nB02,first,overlocked\n";
        let empty = note(
            "units.csv",
            "How many storage units are empty at the moment?",
            &wrap(units),
        )
        .unwrap_or_default();
        assert!(
            empty.starts_with("(Counted by the program: 5 rows in all;"),
            "{empty}"
        );
        assert!(
            empty.ends_with(&format!(
                "\n{OPEN}\nstatus = let: 2 rows\nstatus = vacant: 2 rows\nstatus = overlocked: 1 row\n{CLOSE}"
            )),
            "{empty}"
        );
        // Nothing past the thing counted, or a column the question names
        // (counted by its values elsewhere): none.
        for plain in [
            "How many units are there?",
            "How many units have a status of vacant or let?",
        ] {
            assert_eq!(note("units.csv", plain, &wrap(units)), None, "{plain}");
        }
        // Without a column named for a state, every column of few values.
        let units = "unit,floor,kind\nA01,ground,let\nA02,ground,vacant\nA03,first,let\n";
        let empty =
            note("units.csv", "How many units are empty?", &wrap(units)).unwrap_or_default();
        assert!(
            empty.ends_with(&format!(
                "\n{OPEN}\nfloor = ground: 2 rows\nfloor = first: 1 row\nkind = let: 2 rows\nkind = vacant: 1 row\n{CLOSE}"
            )),
            "{empty}"
        );
        // Words each in some row but in no row together: a true 0, not
        // a split to pick a wrong count from.
        let members = "name,part,joined\nAna,soprano,2019\nBen,tenor,2019\nCy,soprano,2021\n";
        assert_eq!(
            note(
                "members.csv",
                "How many tenors joined in 2021?",
                &wrap(members)
            ),
            None
        );
        // Every value its own, or more than a few: no state to split by.
        let people = "name,town\nAna,Leeds\nBen,York\nCy,Hull\n";
        assert_eq!(
            note(
                "people.csv",
                "How many people still owe money?",
                &wrap(people)
            ),
            None
        );
    }

    #[test]
    fn the_rows_a_year_narrows_to_are_counted() {
        let members = "name,joined\nAisha,2023-04-12\nChloe,2025-01-15\nElena,2025-03-02\nFarid,2024-12-28\nJames,2026-01-08\n";
        assert_eq!(
            note("members.csv", "How many members joined in 2025?", members).as_deref(),
            Some("(Counted by the program: 2 rows with \"2025\".)")
        );
        // Not a year, or a year compared: not found.
        assert_eq!(
            note("members.csv", "How many members are in week 18?", members),
            None
        );
        assert_eq!(
            note(
                "members.csv",
                "How many members joined before 2025?",
                members
            ),
            None
        );
    }

    #[test]
    fn the_rows_a_name_narrows_to_are_counted() {
        assert_eq!(
            note(
                "appointments.csv",
                "How many appointments does Dr Berg have in appointments.csv?",
                APPOINTMENTS
            )
            .as_deref(),
            Some("(Counted by the program: 3 rows with \"berg\".)")
        );
        assert_eq!(
            note(
                "a.csv",
                "How many appointments are on Monday and with Dr Lind?",
                APPOINTMENTS
            )
            .as_deref(),
            Some("(Counted by the program: 1 row with \"monday\" and \"lind\".)")
        );
    }

    #[test]
    fn a_logs_lines_are_counted_by_the_questions_verb() {
        let log = "06:00 INFO pump started\n06:20 INFO pump stopped\n07:00 INFO pump started\n07:03 ERROR pressure low\n";
        assert_eq!(
            note(
                "pump.log",
                "How many times did the pump start, according to pump.log?",
                log
            )
            .as_deref(),
            Some("(Counted by the program: 2 lines with \"start\".)")
        );
        let changelog = "# Changelog\n\n## 2.3.0\n- Added CSV export.\n- Fixed the login timeout.\n\n## 2.2.1\n- Fixed a crash.\n\n## 2.2.0\n- New dark theme.\n";
        assert_eq!(
            note(
                "docs/changelog.md",
                "How many fixes are listed in docs/changelog.md?",
                changelog
            )
            .as_deref(),
            Some("(Counted by the program: 2 lines with \"fixes\".)")
        );
    }

    #[test]
    fn no_count_when_nothing_narrows_or_a_numeric_column_answers() {
        let setlist = "1. Neon Rain\n2. Glass Hearts\n3. Wild Harbour\n";
        // The counted thing is not a word of the file; the file's name is
        // no narrowing word.
        assert_eq!(
            note(
                "setlist-saturday.txt",
                "How many songs are on the Saturday setlist?",
                setlist
            ),
            None
        );
        assert_eq!(
            note("a.csv", "How many appointments are there?", APPOINTMENTS),
            None
        );
        // A word in every row narrows nothing.
        assert_eq!(
            note(
                "a.csv",
                "How many appointments with a doctor?",
                APPOINTMENTS
            ),
            None
        );
        // Not a count.
        assert_eq!(
            note("a.csv", "Which patients does Dr Berg see?", APPOINTMENTS),
            None
        );
        let stock = "item,colour,stock\nwidget,red,0\nwidget,blue,3\ngadget,red,2\n";
        assert_eq!(
            note("p.csv", "How many red widgets are in stock?", stock),
            None
        );
        assert_eq!(
            note("p.csv", "How many red items are there?", stock).as_deref(),
            Some("(Counted by the program: 2 rows with \"red\".)")
        );
    }

    #[test]
    fn conditions_are_the_words_past_the_thing_counted() {
        let words = |q: &str, path: &str| condition_words(q, path);
        assert!(
            words(
                "How many different parts are listed in inventory.csv?",
                "inventory.csv"
            )
            .is_empty()
        );
        assert!(words("How many of the dogs in dogs.csv are there?", "dogs.csv").is_empty());
        assert_eq!(
            words(
                "How many bookings in clients.csv are still waiting on a deposit?",
                "clients.csv"
            ),
            ["waiting", "deposit"]
        );
        assert!(counts_a_measure(
            "How many grams of food does each cat get?"
        ));
        assert!(!counts_a_measure("How many cats get food?"));
    }

    #[test]
    fn a_log_that_states_its_count_gets_none() {
        let log = "[test] FAILED parser\n[test] FAILED cache\n[test] 142 passed, 2 failed\n[lint] passed\n";
        assert_eq!(note("build.log", "How many tests failed?", log), None);
        let log = "[test] FAILED parser\n[test] FAILED cache\n[lint] passed\n";
        assert_eq!(
            note("build.log", "How many tests failed?", log).as_deref(),
            Some("(Counted by the program: 2 lines with \"tests\" and \"failed\".)")
        );
    }

    proptest::proptest! {
        /// Whatever the file holds, the note is fixed words, a number and
        /// the question's own words: nothing of the file is copied.
        #[test]
        fn the_note_quotes_only_the_question(body in "[a-z ,\n#-]{0,200}") {
            if let Some(n) = note("f.txt", "How many zebras start here?", &body) {
                let rest = n
                    .trim_start_matches("(Counted by the program: ")
                    .trim_start_matches(|c: char| c.is_ascii_digit());
                proptest::prop_assert!(
                    [" line with ", " lines with "].iter().any(|p| rest.starts_with(p)),
                    "{n}"
                );
                let quoted = rest.split('"').skip(1).step_by(2);
                for word in quoted {
                    proptest::prop_assert!(["zebras", "start"].contains(&word), "{n}");
                }
            }
        }
    }
}
