use super::*;

use crate::local::test_wrap::{CLOSE, OPEN, wrap};

/// The note after reading `a`, then `b` (each a path and a body).
fn compare(a: (&str, &str), b: (&str, &str)) -> Option<String> {
    asked("", a, b)
}

/// [`compare`] for `question`.
fn asked(question: &str, a: (&str, &str), b: (&str, &str)) -> Option<String> {
    let (wa, wb) = (wrap(a.1), wrap(b.1));
    comparison_note(
        question,
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
fn the_totals_of_two_documents_weighed_are_worked_out() {
    let a = (
        "quotes/a.md",
        "# Quote Q-0412\n| Labour | £780.00 |\n| **Total** | **£1,240.00** |\nValid 30 days.",
    );
    let b = (
        "quotes/b.md",
        "# Quote Q-0415\n| Labour | £465.00 |\n| **Total** | **£965.00** |\nValid 30 days.",
    );
    let note = asked("Which one is cheaper, and by how much?", a, b).expect("a note");
    assert!(
        note.ends_with("(The higher total is in \"quotes/a.md\", the lower in \"quotes/b.md\"; the difference is 275.00.)"),
        "{note}"
    );
    // Not weighed, or no single total line: no totals.
    let plain = asked("What do the two quotes say?", a, b).unwrap_or_default();
    assert!(!plain.contains("Worked out"), "{plain}");
    let two = ("b.md", "Subtotal: 5\nTotal: 7\nTotal due: 9");
    let none = asked("Which is cheaper?", a, two).unwrap_or_default();
    assert!(!none.contains("Worked out"), "{none}");
}

#[test]
fn two_tables_alike_are_compared_by_the_asked_column() {
    let jan = (
        "jan.csv",
        "date,donor,kg\n2025-01-06,Tesco,10\n2025-01-15,Rotary Club,35\n2025-01-20,Co-op,8",
    );
    let feb = (
        "feb.csv",
        "date,donor,kg\n2025-02-03,Tesco,20\n2025-02-12,St Mark's Church,40\n2025-02-17,co-op,12",
    );
    let note = asked("Which donor gave in February but not in January?", jan, feb).expect("a note");
    let only_feb = note
        .split("(Only in \"feb.csv\":)")
        .nth(1)
        .unwrap_or_default();
    assert!(only_feb.contains("St Mark's Church"), "{note}");
    assert!(
        !only_feb.contains("Tesco") && !only_feb.contains("co-op"),
        "{note}"
    );
    assert!(
        note.contains("(Only in \"jan.csv\":)\n<untrusted_"),
        "{note}"
    );
    // No asked column: the first, the players' names.
    let u12 = ("u12.csv", "name,shirt\nKai Mensah,6\nLeo Hussain,2");
    let u14 = ("u14.csv", "name,shirt\nKai Mensah,12\nRyan Holt,1");
    let note = asked("Which player is in both squads?", u12, u14).expect("a note");
    let both = note
        .split("(In both files:)")
        .nth(1)
        .and_then(|rest| rest.split("(Only in").next())
        .unwrap_or_default();
    assert!(
        both.contains("Kai Mensah") && !both.contains("Leo"),
        "{note}"
    );
    // Other columns: compared line by line as before.
    let other = ("t.csv", "name,team\nKai Mensah,U14");
    let note = asked("Which player is in both?", u12, other).unwrap_or_default();
    assert!(!note.contains("row by row"), "{note}");
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

#[test]
fn rows_in_both_tables_are_told_apart_by_whether_they_changed() {
    let old = (
        "fees-2024.csv",
        "membership,annual_fee_gbp\nfull,320\noff-peak,210\njunior,90\n",
    );
    let new = (
        "fees-2025.csv",
        "membership,annual_fee_gbp\nfull,345\noff-peak,225\njunior,90\n",
    );
    let note = asked(
        "Which membership fee stayed the same between fees-2024.csv and fees-2025.csv?",
        old,
        new,
    )
    .expect("a note");
    assert!(
        note.contains(&format!(
            "(The same in both:)\n{OPEN}\njunior: annual_fee_gbp = 90\n{CLOSE}\n(Changed:)\n{OPEN}\nfull: annual_fee_gbp: 320 -> 345\noff-peak: annual_fee_gbp: 210 -> 225\n{CLOSE}"
        )),
        "{note}"
    );
    // Not asked what changed: the keys alone.
    let plain = asked("Which memberships are in both files?", old, new).expect("a note");
    assert!(
        plain.contains("In both files") && !plain.contains("Changed"),
        "{plain}"
    );
    // A key on two rows of a table: no row to compare it by.
    let twice = (
        "fees-2025.csv",
        "membership,annual_fee_gbp\nfull,345\nfull,350\noff-peak,225\njunior,90\n",
    );
    let note = asked("Which fee stayed the same?", old, twice).expect("a note");
    assert!(!note.contains("The same in both"), "{note}");
}
