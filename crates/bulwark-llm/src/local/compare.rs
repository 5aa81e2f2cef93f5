//! What the driver tells the local model when a question names two files
//! and both were read: which lines only one of them has, and which both.
//!
//! Why: asked "Do config-old.ini and config-new.ini use the same port?"
//! with both files in front of it, the 1.5B model answered "No" (both say
//! `port = 8080`); asked what differs, it said `workers` was "not set" in
//! the old file (it is 4 there). Finding the lines two files differ in is
//! the program's job, as counting is (`shape.rs`); the model then only has
//! to read the answer off.
//!
//! The lines themselves are file content, so each group of them goes
//! inside the same boundary tags as the read that brought it (the
//! kernel's tag, with its session nonce, copied from the result); only the
//! program's own words, the two file names the user typed, and a count
//! stand outside. A result without the kernel's tags gets no note.

/// At most this many lines per file: a comparison of larger files would
/// crowd the context for little gain.
const MAX_LINES: usize = 60;

/// One successful read: the file's path as called, and the result as the
/// kernel wrapped it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Read<'a> {
    pub(crate) path: &'a str,
    pub(crate) wrapped: &'a str,
}

/// The note for `second`'s result, comparing it with `first` for
/// `question`; `None` when either result lacks the boundary tags, is
/// empty, or is too long.
pub(crate) fn comparison_note(question: &str, first: Read<'_>, second: Read<'_>) -> Option<String> {
    let note = compared(question, first, second)?;
    let tags = boundary_tags(second.wrapped)?;
    Some(match totals_note(question, first, second, tags) {
        Some(totals) => format!("{note}\n{totals}"),
        None => note,
    })
}

/// For a question that weighs two documents ("which one is cheaper, and
/// by how much?") each with one line of its total: the two lines, which
/// file has the higher and which the lower, and the difference. Why:
/// shown both quotes, the 1.5B model named the dearer one as cheaper, by
/// a made-up amount. Only the program's words, the paths and the
/// difference stand outside the tags.
fn totals_note(
    question: &str,
    first: Read<'_>,
    second: Read<'_>,
    (open, close): (&str, &str),
) -> Option<String> {
    if !(super::difference::asks_a_difference(question) || super::folder_files::compares(question))
    {
        return None;
    }
    let total = |read: Read<'_>| -> Option<(String, (f64, usize))> {
        let lines: Vec<&str> = content_lines(read.wrapped)
            .into_iter()
            .filter(|l| {
                super::mentions::lowercase_words(l)
                    .iter()
                    .any(|w| w == "total")
            })
            .collect();
        let [line] = lines.as_slice() else {
            return None;
        };
        Some((
            (*line).to_owned(),
            super::section_totals::last_number(line)?,
        ))
    };
    let (a_line, a) = total(first)?;
    let (b_line, b) = total(second)?;
    let name = |path: &str| serde_json::Value::String(path.to_owned()).to_string();
    let (higher, lower) = if a.0 >= b.0 {
        (first.path, second.path)
    } else {
        (second.path, first.path)
    };
    let verdict = if (a.0 - b.0).abs() < f64::EPSILON {
        "(The two totals are the same.)".to_owned()
    } else {
        format!(
            "(The higher total is in {}, the lower in {}; the difference is {}.)",
            name(higher),
            name(lower),
            super::difference::difference(a, b)
        )
    };
    Some(format!(
        "(Worked out by the program: the total line of each file:)\n{open}\n{a_line}\n{b_line}\n{close}\n{verdict}"
    ))
}

/// [`comparison_note`] without the totals.
fn compared(question: &str, first: Read<'_>, second: Read<'_>) -> Option<String> {
    let (open, close) = boundary_tags(second.wrapped)?;
    boundary_tags(first.wrapped)?;
    if let Some(note) = keyed_tables_note(question, first, second, (open, close)) {
        return Some(note);
    }
    let a = content_lines(first.wrapped);
    let b = content_lines(second.wrapped);
    if a.is_empty() || b.is_empty() || a.len() > MAX_LINES || b.len() > MAX_LINES {
        return None;
    }
    let in_other =
        |line: &str, other: &[&str]| other.iter().any(|o| item_text(o) == item_text(line));
    let mut only_a: Vec<&str> = a.iter().copied().filter(|l| !in_other(l, &b)).collect();
    let mut only_b: Vec<&str> = b.iter().copied().filter(|l| !in_other(l, &a)).collect();
    let changed = changed_settings(&mut only_a, &mut only_b);
    let mut both: Vec<&str> = a.iter().copied().filter(|l| in_other(l, &b)).collect();
    both.dedup();
    let name = |path: &str| serde_json::Value::String(path.to_owned()).to_string();
    let mut note = String::from("(Compared by the program, line by line.)");
    let files = (name(first.path), name(second.path));
    for verdict in asked_settings(question, &a, &b, &files, (open, close)) {
        note.push_str(&format!("\n{verdict}"));
    }
    if let Some(verdict) = asked_end(question, &a, &b, &files, (open, close)) {
        note.push_str(&format!("\n{verdict}"));
    }
    if both.is_empty() && changed.is_empty() {
        // No line in common: each file would be listed again whole, and
        // "Lines in both files: none" read as "nothing in common" where
        // a name stands in both ("Northwind - pizza" and
        // "Lena Fischer,Northwind,speaker").
        let shared = shared_values(&a, &b);
        let verdicts = note.split_once('\n').map(|(_, rest)| rest.to_owned());
        // Nothing in common is no answer to "which quarter had the higher
        // revenue?": told so, the 1.5B model named the wrong quarter.
        if shared.is_empty() && verdicts.is_none() {
            return None;
        }
        let mut note = if shared.is_empty() {
            "(Compared by the program: no line and no value is in both files.)".to_owned()
        } else {
            format!(
                "(Compared by the program: the values in both files:)\n{open}\n{}\n{close}",
                shared.join("\n")
            )
        };
        if asks_what_is_missing(question) {
            for (table, other, names) in [
                (&first, &b, &files),
                (&second, &a, &(files.1.clone(), files.0.clone())),
            ] {
                let lines = content_lines(table.wrapped);
                let mut missing = column_values_missing(table.path, &lines, other, &shared);
                if missing.is_empty() {
                    missing = keyed_values_missing(&lines, other, &shared);
                }
                if !missing.is_empty() {
                    note.push_str(&format!(
                        "\n(Values of the same kind in {} that are in no line of {}:)\n{open}\n{}\n{close}",
                        names.0,
                        names.1,
                        missing.join("\n")
                    ));
                }
            }
        }
        if let Some(verdicts) = verdicts {
            note.push_str(&format!("\n{verdicts}"));
        }
        return Some(note);
    }
    let mut group = |heading: String, lines: &[&str]| {
        if lines.is_empty() {
            note.push_str(&format!("\n({heading}: none.)"));
            return;
        }
        note.push_str(&format!("\n({heading}:)\n{open}\n"));
        note.push_str(&lines.join("\n"));
        note.push_str(&format!("\n{close}"));
    };
    if !changed.is_empty() {
        let changed: Vec<&str> = changed.iter().map(String::as_str).collect();
        group(
            format!(
                "Settings that changed, as {} has them \u{2192} as {} has them",
                name(first.path),
                name(second.path)
            ),
            &changed,
        );
    }
    group(format!("Lines only in {}", name(first.path)), &only_a);
    group(format!("Lines only in {}", name(second.path)), &only_b);
    group("Lines in both files".to_owned(), &both);
    Some(note)
}

/// Two tables with the same columns (a squad a year, donations a
/// month), compared by the column the question names ("which *donor*
/// gave in February but not in January"), else their first: the values
/// in both, and those in only one. Why: line by line, every row differs
/// (the shirt number, the date) and only the header was "in both", so the
/// 1.5B model said no player was in both squads.
fn keyed_tables_note(
    question: &str,
    first: Read<'_>,
    second: Read<'_>,
    (open, close): (&str, &str),
) -> Option<String> {
    let a = super::table::Table::of(first.path, first.wrapped)?;
    let b = super::table::Table::of(second.path, second.wrapped)?;
    if a.header != b.header {
        return None;
    }
    let asked = super::mentions::lowercase_words(question);
    let column = a
        .header
        .iter()
        .position(|h| {
            let h = h.to_lowercase();
            let stem = super::mentions::stem(&h);
            !h.is_empty() && asked.iter().any(|w| super::mentions::stem(w) == stem)
        })
        .unwrap_or(0);
    let values = |t: &super::table::Table| -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for value in t.records.iter().filter_map(|r| r.get(column)) {
            let value = value.trim();
            if !value.is_empty() && !seen.iter().any(|s| normalized(s) == normalized(value)) {
                seen.push(value.to_owned());
            }
        }
        seen
    };
    let (in_a, in_b) = (values(&a), values(&b));
    let has = |list: &[String], v: &str| list.iter().any(|o| normalized(o) == normalized(v));
    let both: Vec<&str> = in_a
        .iter()
        .filter(|v| has(&in_b, v))
        .map(String::as_str)
        .collect();
    let only_a: Vec<&str> = in_a
        .iter()
        .filter(|v| !has(&in_b, v))
        .map(String::as_str)
        .collect();
    let only_b: Vec<&str> = in_b
        .iter()
        .filter(|v| !has(&in_a, v))
        .map(String::as_str)
        .collect();
    let name = |path: &str| serde_json::Value::String(path.to_owned()).to_string();
    let mut note = format!(
        "(Compared by the program, row by row, by the {} column of both tables.)",
        if column == 0 { "first" } else { "asked" }
    );
    for (heading, values) in [
        ("In both files".to_owned(), &both),
        (format!("Only in {}", name(first.path)), &only_a),
        (format!("Only in {}", name(second.path)), &only_b),
    ] {
        push_listed(&mut note, &heading, values, (open, close));
    }
    if asks_about_change(question)
        && let Some(changes) = changed_rows(&a, &b, column, &both, (open, close))
    {
        note.push_str(&changes);
    }
    Some(note)
}

/// Words of a question about what changed between two files ("which fee
/// *stayed the same*", "what *went up*").
const CHANGE_WORDS: &[&str] = &[
    "same",
    "stayed",
    "unchanged",
    "change",
    "changed",
    "changes",
    "differ",
    "differs",
    "different",
    "difference",
    "differences",
    "went",
    "rose",
    "fell",
    "increased",
    "decreased",
    "raised",
    "lowered",
];

fn asks_about_change(question: &str) -> bool {
    super::mentions::lowercase_words(question)
        .iter()
        .any(|w| CHANGE_WORDS.contains(&w.as_str()))
}

/// Of the rows in both tables (by `keys` in `column`), those whose other
/// columns have the same values in both, and those whose values changed,
/// with both values. Why: asked "which membership fee stayed the same",
/// shown only that every membership was in both files, the 1.5B model
/// answered "the membership fee". `None` unless every key is on one row
/// of each table.
fn changed_rows(
    a: &super::table::Table,
    b: &super::table::Table,
    column: usize,
    keys: &[&str],
    (open, close): (&str, &str),
) -> Option<String> {
    let row_of = |t: &super::table::Table, key: &str| -> Option<csv::StringRecord> {
        let mut rows = t.records.iter().filter(|r| {
            r.get(column)
                .is_some_and(|v| normalized(v.trim()) == normalized(key))
        });
        let row = rows.next()?.clone();
        rows.next().is_none().then_some(row)
    };
    let (mut same, mut changed) = (Vec::new(), Vec::new());
    for key in keys {
        let (old, new) = (row_of(a, key)?, row_of(b, key)?);
        let mut differences = Vec::new();
        let mut kept = Vec::new();
        for (at, name) in a.header.iter().enumerate().filter(|(at, _)| *at != column) {
            let (before, after) = (
                old.get(at).unwrap_or("").trim(),
                new.get(at).unwrap_or("").trim(),
            );
            if normalized(before) == normalized(after) {
                kept.push(format!("{name} = {before}"));
            } else {
                differences.push(format!("{name}: {before} -> {after}"));
            }
        }
        if kept.is_empty() && differences.is_empty() {
            return None;
        }
        if differences.is_empty() {
            same.push(format!("{key}: {}", kept.join(", ")));
        } else {
            changed.push(format!("{key}: {}", differences.join(", ")));
        }
    }
    let mut note = String::from("\n(Of the rows in both, from the first file to the second:)");
    for (heading, rows) in [("The same in both", &same), ("Changed", &changed)] {
        push_listed(&mut note, heading, rows, (open, close));
    }
    Some(note)
}

/// `heading` and `values` (file content, so inside the tags), or "none".
fn push_listed<S: AsRef<str>>(
    note: &mut String,
    heading: &str,
    values: &[S],
    (open, close): (&str, &str),
) {
    if values.is_empty() {
        note.push_str(&format!("\n({heading}: none.)"));
    } else {
        let values: Vec<&str> = values.iter().map(AsRef::as_ref).collect();
        note.push_str(&format!(
            "\n({heading}:)\n{open}\n{}\n{close}",
            values.join("\n")
        ));
    }
}

/// For each setting (`key = value`, `key: value`, set once in each file)
/// that the question names by its key: whether the two files give it the
/// same value. Why: asked "do they use the same port?" with `port = 8080`
/// under "Lines in both files", the 1.5B model still answered "No"; a
/// sentence that says it is read off. The key is written as the question
/// has it, so no file byte stands outside the tags.
fn asked_settings(
    question: &str,
    a: &[&str],
    b: &[&str],
    files: &(String, String),
    (open, close): (&str, &str),
) -> Vec<String> {
    let settings = |lines: &[&str]| {
        let mut found: Vec<(String, String, usize, String)> = Vec::new();
        for line in lines {
            let Some((key, value)) = line.split_once(['=', ':']) else {
                continue;
            };
            let key = key.trim().to_lowercase();
            let value = value.trim().to_owned();
            match found.iter_mut().find(|(k, _, _, _)| *k == key) {
                Some(seen) => seen.2 += 1,
                None => found.push((key, value, 1, (*line).to_owned())),
            }
        }
        found.retain(|(_, _, times, _)| *times == 1);
        found
    };
    let (in_a, in_b) = (settings(a), settings(b));
    let asks = YesNo::of(question);
    let mut verdicts = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let words = question
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().count() >= 2);
    for word in words {
        let lower = word.to_lowercase();
        if seen.contains(&lower) {
            continue;
        }
        seen.push(lower.clone());
        let setting = |settings: &[(String, String, usize, String)]| {
            settings
                .iter()
                .find(|(k, _, _, _)| *k == lower)
                .map(|(_, v, _, line)| (v.clone(), line.clone()))
        };
        let (Some((va, line_a)), Some((vb, line_b))) = (setting(&in_a), setting(&in_b)) else {
            continue;
        };
        let same = va == vb;
        let word = serde_json::Value::String(word.to_owned()).to_string();
        let answer = asks.map(|asks| asks.answer(same)).unwrap_or_default();
        if same {
            verdicts.push(format!(
                "(Checked by the program: {word} has the same value in both files{answer}.)"
            ));
        } else {
            // Which file has which value, each line under its file's name
            // (the user's words): asked "which of api.toml and worker.toml
            // has debug turned on?", the 1.5B model misread the arrow of
            // the changed settings and named the wrong file.
            verdicts.push(format!(
                "(Checked by the program: {word} has a different value in each file{answer}:)\n{open}\n{}: {line_a}\n{}: {line_b}\n{close}",
                files.0, files.1
            ));
        }
    }
    verdicts
}

/// For a yes/no question about how two files begin or end ("do they
/// *open with* the same song?"): whether their first (or last) items are
/// the same, list items if both have any, else lines. Why: with "1. Neon
/// Rain" under "Lines in both files", the 1.5B model answered "No".
fn asked_end(
    question: &str,
    a: &[&str],
    b: &[&str],
    files: &(String, String),
    (open, close): (&str, &str),
) -> Option<String> {
    let asks = YesNo::of(question)?;
    let words = super::mentions::lowercase_words(question);
    let has = |options: &[&str]| words.iter().any(|w| options.contains(&w.as_str()));
    let first = has(&[
        "first", "open", "opens", "start", "starts", "begin", "begins", "top",
    ]);
    let last = has(&["last", "end", "ends", "finish", "finishes", "bottom"]);
    if first == last {
        return None;
    }
    let items = |lines: &[&str]| -> Vec<String> {
        let listed: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| super::shape::list_item(l).is_some())
            .collect();
        let from = if listed.is_empty() { lines } else { &listed };
        from.iter().map(|l| (*l).to_owned()).collect()
    };
    let (ia, ib) = (items(a), items(b));
    let pick = |lines: &[String]| {
        if first {
            lines.first().cloned()
        } else {
            lines.last().cloned()
        }
    };
    let (ea, eb) = (pick(&ia)?, pick(&ib)?);
    let which = if first { "first" } else { "last" };
    let same = item_text(&ea) == item_text(&eb);
    let answer = asks.answer(same);
    Some(if same {
        format!(
            "(Checked by the program: the {which} item is the same in both files{answer}:)\n{open}\n{ea}\n{close}"
        )
    } else {
        format!(
            "(Checked by the program: the {which} item differs{answer}:)\n{open}\n{}: {ea}\n{}: {eb}\n{close}",
            files.0, files.1
        )
    })
}

/// A question that asks whether a setting is the same, or differs: the
/// program's check answers it, so the note says the answer in words.
/// Why: shown "port has the same value in both files", the 1.5B model
/// still answered "Do they use the same port?" with "No".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum YesNo {
    Same,
    Different,
}

impl YesNo {
    fn of(question: &str) -> Option<Self> {
        let words = super::mentions::lowercase_words(question);
        let yes_no = words.first().is_some_and(|w| {
            matches!(
                w.as_str(),
                "is" | "are" | "do" | "does" | "did" | "has" | "have" | "was" | "were"
            )
        });
        let has = |options: &[&str]| words.iter().any(|w| options.contains(&w.as_str()));
        if !yes_no {
            None
        } else if has(&["same", "identical", "equal", "match"]) {
            Some(Self::Same)
        } else if has(&["different", "differ", "differs", "change", "changed"]) {
            Some(Self::Different)
        } else {
            None
        }
    }

    fn answer(self, same: bool) -> &'static str {
        match (self, same) {
            (Self::Same, true) => ", so yes, it is the same",
            (Self::Same, false) => ", so no, it is not the same",
            (Self::Different, true) => ", so no, it does not differ",
            (Self::Different, false) => ", so yes, it differs",
        }
    }
}

/// Lines of the form `key = value` or `key: value` that both files have
/// with different values, as `old line \u{2192} new line`, taken out of the
/// two "only in" lists. Why: shown `workers = 4` only in one list and
/// `workers = 8` in the other, the 1.5B model still said the old file did
/// not set `workers`; one line with both values is read off directly.
fn changed_settings(only_a: &mut Vec<&str>, only_b: &mut Vec<&str>) -> Vec<String> {
    let key = |line: &str| {
        line.split_once(['=', ':'])
            .map(|(k, _)| k.trim().to_owned())
            .filter(|k| !k.is_empty())
    };
    let mut changed = Vec::new();
    only_a.retain(|old| {
        let Some(k) = key(old) else { return true };
        let same_key: Vec<usize> = only_b
            .iter()
            .enumerate()
            .filter(|(_, new)| key(new).as_deref() == Some(k.as_str()))
            .map(|(i, _)| i)
            .collect();
        match same_key.as_slice() {
            [i] => {
                changed.push(format!("{old} \u{2192} {}", only_b.remove(*i)));
                false
            }
            _ => true,
        }
    });
    changed
}

/// Words of a question about what one file has and the other lacks
/// ("which grape has *no* price", "who is on the rota but has *no*
/// tickets").
const MISSING_WORDS: &[&str] = &[
    "no", "not", "without", "missing", "lacks", "lack", "lacking", "isn", "doesn", "hasn", "only",
    "never", "absent",
];

fn asks_what_is_missing(question: &str) -> bool {
    super::mentions::lowercase_words(question)
        .iter()
        .any(|w| MISSING_WORDS.contains(&w.as_str()))
}

/// The cells of the CSV table's (`path`, its `lines`) one column that
/// holds two or more of the `shared` values, that no line of `other`
/// holds. Why: asked which grape of a harvest table has no price in an
/// INI file, the 1.5B model named one of the priced ones; given the
/// values both files have, it still has to find the one left over.
fn column_values_missing(
    path: &str,
    lines: &[&str],
    other: &[&str],
    shared: &[String],
) -> Vec<String> {
    let Some(table) = super::table::Table::of_lines(path, lines) else {
        return Vec::new();
    };
    let shared: Vec<String> = shared.iter().map(|v| normalized(v)).collect();
    let holds_shared = |column: usize| {
        table
            .records
            .iter()
            .filter(|r| {
                r.get(column)
                    .is_some_and(|v| shared.contains(&normalized(v)))
            })
            .count()
            >= 2
    };
    let columns: Vec<usize> = (0..table.header.len())
        .filter(|&c| holds_shared(c))
        .collect();
    let [column] = columns.as_slice() else {
        return Vec::new();
    };
    let other_values = normalized_values(other);
    let mut missing: Vec<String> = Vec::new();
    for record in &table.records {
        let Some(value) = record.get(*column) else {
            continue;
        };
        if !other_values.contains(&normalized(value)) && !missing.iter().any(|m| m == value) {
            missing.push(value.to_owned());
        }
    }
    if missing.len() > MAX_SHARED || missing.len() == table.records.len() {
        return Vec::new();
    }
    missing
}

/// The values of a `key: value` or `key = value` file (`lines`) under
/// the keys that hold one of the `shared` values, that no line of `other`
/// holds. Why: asked who on an on-call rota (`primary: Sam`) has no
/// tickets in a table of tickets, the 1.5B model answered "no one"; the
/// rota's names under the keys that hold the shared ones are the people
/// it asked about.
fn keyed_values_missing(lines: &[&str], other: &[&str], shared: &[String]) -> Vec<String> {
    let shared: Vec<String> = shared.iter().map(|v| normalized(v)).collect();
    let pairs: Vec<(String, &str)> = lines
        .iter()
        .filter_map(|line| {
            let line = item_text(line.trim());
            let (key, value) = line.split_once(": ").or_else(|| line.split_once(" = "))?;
            let value = value.trim().trim_matches(|c: char| "\"'`".contains(c));
            let telling = value.chars().count() >= 3 && value.chars().any(char::is_alphabetic);
            telling.then(|| (normalized(key.trim()), value))
        })
        .collect();
    let keys: Vec<&String> = pairs
        .iter()
        .filter(|(_, v)| shared.contains(&normalized(v)))
        .map(|(k, _)| k)
        .collect();
    if keys.is_empty() {
        return Vec::new();
    }
    let other_values = normalized_values(other);
    let mut missing: Vec<String> = Vec::new();
    for (key, value) in &pairs {
        if keys.contains(&key)
            && !other_values.contains(&normalized(value))
            && !missing.iter().any(|m| m == value)
        {
            missing.push((*value).to_owned());
        }
    }
    if missing.len() > MAX_SHARED {
        return Vec::new();
    }
    missing
}

/// Every value of `lines` ([`values_of`]), [`normalized`].
fn normalized_values(lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .flat_map(|l| values_of(l))
        .map(normalized)
        .collect()
}

/// A value as [`shared_values`] compares it: lowercase, with `_` and `-`
/// read as spaces (`pinot_noir` is "Pinot Noir").
fn normalized(value: &str) -> String {
    value
        .to_lowercase()
        .chars()
        .map(|c| if c == '_' || c == '-' { ' ' } else { c })
        .collect()
}

/// At most this many values in common are shown.
const MAX_SHARED: usize = 8;

/// The values both files hold, in `a`'s order: a line's parts between
/// separators (a CSV line's cells, the two sides of `key = value` or
/// `name: role`, a heading's text), compared without case; only parts
/// with a letter and at least three characters.
fn shared_values(a: &[&str], b: &[&str]) -> Vec<String> {
    let b_values = normalized_values(b);
    let mut shared: Vec<String> = Vec::new();
    for value in a.iter().flat_map(|l| values_of(l)) {
        let lower = normalized(value);
        if b_values.contains(&lower) && !shared.iter().any(|s| normalized(s) == lower) {
            shared.push(value.to_owned());
            if shared.len() == MAX_SHARED {
                break;
            }
        }
    }
    shared
}

/// The parts of one line that [`shared_values`] compares.
fn values_of(line: &str) -> Vec<&str> {
    let line = item_text(line.trim_start_matches('#').trim());
    let mut parts = vec![line];
    for separator in [
        ",", ";", " | ", "|", " - ", " = ", "=", ": ", " vs. ", " vs ",
    ] {
        parts = parts
            .into_iter()
            .flat_map(|p| p.split(separator))
            .map(str::trim)
            .collect();
    }
    parts
        .into_iter()
        .map(|p| p.trim_matches(|c: char| "\"'`()[]".contains(c)))
        .filter(|p| p.chars().count() >= 3 && p.chars().any(char::is_alphabetic))
        .collect()
}

/// A line without its list marker: an item moved to another place of a
/// numbered list ("2. Paper Moon", "5. Paper Moon") is in both files.
/// Why: listed as only in each file under its two numbers, the moved song
/// was named as the one the second list added.
fn item_text(line: &str) -> &str {
    super::shape::list_item(line).map_or(line, str::trim)
}

/// The kernel's opening and closing tag lines around a result.
pub(crate) fn boundary_tags(wrapped: &str) -> Option<(&str, &str)> {
    let open = wrapped
        .lines()
        .next()
        .filter(|l| l.starts_with("<untrusted_"))?;
    let close = wrapped
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("</untrusted_"))?;
    Some((open, close))
}

/// The result's non-blank lines inside the tags, trimmed.
fn content_lines(wrapped: &str) -> Vec<&str> {
    super::shape::unwrapped_lines(wrapped)
        .into_iter()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
