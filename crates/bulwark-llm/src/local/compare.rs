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
    let (open, close) = boundary_tags(second.wrapped)?;
    boundary_tags(first.wrapped)?;
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
mod tests {
    use super::*;

    use crate::local::test_wrap::{CLOSE, OPEN, wrap};

    /// The note after reading `a`, then `b` (each a path and a body).
    fn compare(a: (&str, &str), b: (&str, &str)) -> Option<String> {
        let (wa, wb) = (wrap(a.1), wrap(b.1));
        comparison_note(
            "",
            Read {
                path: a.0,
                wrapped: &wa,
            },
            Read {
                path: b.0,
                wrapped: &wb,
            },
        )
    }

    #[test]
    fn a_question_about_how_two_lists_open_is_answered() {
        let (fri, sat) = (
            wrap("Friday\n1. Neon Rain\n2. Paper Moon\n"),
            wrap("Saturday\n1. Neon Rain\n2. Glass Hearts\n"),
        );
        let note = |question: &str| {
            comparison_note(
                question,
                Read {
                    path: "fri.txt",
                    wrapped: &fri,
                },
                Read {
                    path: "sat.txt",
                    wrapped: &sat,
                },
            )
            .expect("a note")
        };
        let opens = note("Do fri.txt and sat.txt open with the same song?");
        assert!(
            opens.contains(&format!("(Checked by the program: the first item is the same in both files, so yes, it is the same:)\n{OPEN}\n1. Neon Rain\n{CLOSE}")),
            "{opens}"
        );
        let ends = note("Do fri.txt and sat.txt end with the same song?");
        assert!(
            ends.contains(&format!("(Checked by the program: the last item differs, so no, it is not the same:)\n{OPEN}\n\"fri.txt\": 2. Paper Moon\n\"sat.txt\": 2. Glass Hearts\n{CLOSE}")),
            "{ends}"
        );
        // Not a yes/no question, or no end named: no verdict.
        assert!(!note("Which songs are in fri.txt and sat.txt?").contains("Checked"));
        assert!(!note("Do fri.txt and sat.txt have the same songs?").contains("item"));
    }

    #[test]
    fn a_moved_list_item_is_in_both_files() {
        let note = compare(
            ("fri.txt", "1. Neon Rain\n2. Paper Moon\n3. Last Train\n"),
            (
                "sat.txt",
                "1. Neon Rain\n2. Glass Hearts\n3. Last Train\n4. Paper Moon\n",
            ),
        )
        .expect("a note");
        assert!(
            note.contains(&format!("(Lines only in \"fri.txt\": none.)\n(Lines only in \"sat.txt\":)\n{OPEN}\n2. Glass Hearts\n{CLOSE}")),
            "{note}"
        );
    }

    #[test]
    fn two_configs_differ_in_one_line() {
        let note = compare(
            ("old.ini", "[server]\nport = 8080\nworkers = 4\n"),
            ("new.ini", "[server]\nport = 8080\nworkers = 8\n"),
        )
        .expect("a note");
        assert_eq!(
            note,
            format!(
                "(Compared by the program, line by line.)\n(Settings that changed, as \"old.ini\" has them \u{2192} as \"new.ini\" has them:)\n{OPEN}\nworkers = 4 \u{2192} workers = 8\n{CLOSE}\n(Lines only in \"old.ini\": none.)\n(Lines only in \"new.ini\": none.)\n(Lines in both files:)\n{OPEN}\n[server]\nport = 8080\n{CLOSE}"
            )
        );
    }

    #[test]
    fn a_setting_the_question_names_is_checked() {
        let (old, new) = (
            wrap("port = 8080\nworkers = 4\nhost: a"),
            wrap("port = 8080\nworkers = 8\nhost: a"),
        );
        let note = comparison_note(
            "Do old.ini and new.ini use the same port? And workers, Workers?",
            Read {
                path: "old.ini",
                wrapped: &old,
            },
            Read {
                path: "new.ini",
                wrapped: &new,
            },
        )
        .expect("a note");
        assert!(
            note.starts_with(&format!("(Compared by the program, line by line.)\n(Checked by the program: \"port\" has the same value in both files, so yes, it is the same.)\n(Checked by the program: \"workers\" has a different value in each file, so no, it is not the same:)\n{OPEN}\n\"old.ini\": workers = 4\n\"new.ini\": workers = 8\n{CLOSE}\n")),
            "{note}"
        );
        assert!(!note.contains("\"host\""), "not asked: {note}");
    }

    #[test]
    fn equal_files_and_disjoint_files() {
        let note = compare(("a", "x\ny"), ("b", "x\ny")).expect("a note");
        assert!(note.contains("(Lines only in \"a\": none.)"), "{note}");
        assert!(note.contains("(Lines only in \"b\": none.)"), "{note}");
        assert_eq!(compare(("a", "x\ny"), ("b", "z")), None);
    }

    #[test]
    fn a_value_two_disjoint_files_share_is_named() {
        let sponsors = "Sponsors\nNorthwind - pizza and drinks\nUmbrella Labs - projector";
        let rsvps = "name,company\nLena Fischer,Northwind\nRaj Patel,Contoso";
        let note = compare(("sponsors.txt", sponsors), ("rsvps.csv", rsvps)).expect("a note");
        assert!(
            note.ends_with(&format!(
                "(Compared by the program: the values in both files:)\n{OPEN}\nNorthwind\n{CLOSE}"
            )),
            "{note}"
        );
        let rota = "## Wednesday\n- Chloe: dog walking";
        let vet = "[vet]\nvisit_day = Wednesday";
        let note = compare(("rota.md", rota), ("vet.ini", vet)).expect("a note");
        assert!(
            note.contains(&format!("{OPEN}\nWednesday\n{CLOSE}")),
            "{note}"
        );
    }

    #[test]
    fn the_values_of_a_column_the_other_file_lacks_are_named_when_asked() {
        let harvest = "block,grape,tonnes\nA1,Riesling,7.4\nA2,Pinot Noir,4.1\nC2,Silvaner,5.0\n";
        let prices = "[prices_eur]\nriesling = 12.50\npinot_noir = 19.00";
        let (wa, wb) = (wrap(harvest), wrap(prices));
        let ask = |question: &str| {
            comparison_note(
                question,
                Read {
                    path: "harvest.csv",
                    wrapped: &wa,
                },
                Read {
                    path: "cellar-door.ini",
                    wrapped: &wb,
                },
            )
            .unwrap_or_default()
        };
        let note = ask("Which grape from harvest.csv has no price in cellar-door.ini?");
        // `pinot_noir` is "Pinot Noir".
        assert!(
            note.starts_with(&format!(
                "(Compared by the program: the values in both files:)\n{OPEN}\nRiesling\nPinot Noir\n{CLOSE}"
            )),
            "{note}"
        );
        assert!(
            note.ends_with(&format!(
                "(Values of the same kind in \"harvest.csv\" that are in no line of \"cellar-door.ini\":)\n{OPEN}\nSilvaner\n{CLOSE}"
            )),
            "{note}"
        );
        // A rota's names under the keys that hold shared ones.
        let rota = "rota:\n  week_15:\n    primary: Rita\n    backup: Owen\n  week_17:\n    primary: Sam\n    backup: Rita";
        let tickets = "ticket,status,assignee\nHD-301,open,Owen\nHD-302,closed,Rita\n";
        let (wr, wt) = (wrap(rota), wrap(tickets));
        let note = comparison_note(
            "Is anybody on the rota in oncall.yaml who has no tickets in tickets.csv?",
            Read {
                path: "oncall.yaml",
                wrapped: &wr,
            },
            Read {
                path: "tickets.csv",
                wrapped: &wt,
            },
        )
        .unwrap_or_default();
        assert!(
            note.ends_with(&format!(
                "(Values of the same kind in \"oncall.yaml\" that are in no line of \"tickets.csv\":)\n{OPEN}\nSam\n{CLOSE}"
            )),
            "{note}"
        );
        // Not asked what is missing: only the shared values.
        assert!(!ask("What do harvest.csv and cellar-door.ini share?").contains("same kind"));
    }

    #[test]
    fn no_note_without_the_kernels_tags_or_for_long_files() {
        let tagged = wrap("a");
        let bare = "a\nb";
        let note = |a: &str, b: &str| {
            comparison_note(
                "",
                Read {
                    path: "a",
                    wrapped: a,
                },
                Read {
                    path: "b",
                    wrapped: b,
                },
            )
        };
        assert!(note(bare, &tagged).is_none());
        assert!(note(&tagged, bare).is_none());
        let long = (0..=MAX_LINES)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(compare(("a", "a"), ("b", &long)).is_none());
    }

    proptest::proptest! {
        /// Every line of either file that the note repeats stands between
        /// the kernel's tags: outside them are only the program's words and
        /// the two names.
        #[test]
        fn file_lines_only_appear_inside_the_tags(
            a in "[a-z=<>/ \n]{1,120}",
            b in "[a-z=<>/ \n]{1,120}",
        ) {
            if let Some(note) = compare(("a", &a), ("b", &b)) {
                let mut inside = false;
                for line in note.lines() {
                    if line == OPEN { proptest::prop_assert!(!inside); inside = true; continue; }
                    if line == CLOSE { proptest::prop_assert!(inside); inside = false; continue; }
                    if !inside {
                        proptest::prop_assert!(line.starts_with('(') && line.ends_with(')'), "outside the tags: {line:?}");
                        proptest::prop_assert!(
                            line.starts_with("(Compared by the program")
                                || line.starts_with("(Lines ")
                                || line.starts_with("(Settings that changed")
                                || line.starts_with("(Checked by the program"),
                            "{line:?}"
                        );
                    }
                }
                proptest::prop_assert!(!inside);
            }
        }
    }
}
