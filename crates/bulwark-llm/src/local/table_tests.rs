use super::*;
use crate::local::test_wrap::{CLOSE, OPEN, wrap};

const STAFF: &str =
    "name,team,desk\nIvo Petrov,backend,12\nMei Tanaka,frontend,14\nYara Haddad,ops,30\n";
const PRICES: &str = "item,colour,price\nwidget,blue,4.50\nsprocket,red,1.20\ngizmo,blue,2.25\n";

fn note(path: &str, question: &str, body: &str) -> Option<String> {
    matching_rows_note(path, question, &wrap(body))
}

const ROTA: &str = "# Bar rota\n\nTwo bars.\n\n## Upstairs (cocktails)\n\n| Date | Shift | Served by |\n|---|---|---|\n| 2024-03-02 | late | Ana |\n| 2024-03-09 | late | Ben |\n\n## Downstairs (beer)\n\n| Date | Shift | Served by |\n|---|---|---|\n| 2024-03-02 | early | Cleo |\n| 2024-03-09 | early | Dov |\n";

#[test]
fn a_markdown_tables_row_is_picked_by_the_day_asked_and_keeps_its_heading() {
    let picked = note("rota.md", "Who served downstairs on 9 March?", ROTA).unwrap_or_default();
    assert!(picked.contains("the row of the table"), "{picked}");
    assert!(
        picked.contains("Downstairs (beer): Date = 2024-03-09, Shift = early, Served by = Dov"),
        "{picked}"
    );
    let both = note("rota.md", "who served on March 2nd?", ROTA).unwrap_or_default();
    assert!(
        both.contains("the 2 rows") && both.contains("Ana") && both.contains("Cleo"),
        "{both}"
    );
    assert!(!both.contains("Ben"), "{both}");
    // Not a Markdown file, or no day that picks: no note.
    assert_eq!(note("rota.txt", "Who served on 9 March?", ROTA), None);
    assert_eq!(note("rota.md", "Who served on 20 March?", ROTA), None);
}

#[test]
fn the_kind_a_which_question_asks_for_does_not_hide_the_row() {
    let log = "| Date | Observer | Instrument |\n|---|---|---|\n| 2024-03-08 | Maya Obi | T-30 |\n| 2024-03-08 | Anne Hale | T-21 |\n| 2024-04-01 | Anne Hale | T-12 |\n";
    let picked = note(
        "log.md",
        "Which telescope did Anne Hale use on the 8th of March?",
        log,
    )
    .unwrap_or_default();
    assert!(
        picked.contains("the row of the table") && picked.contains("T-21"),
        "{picked}"
    );
    // A missing word that is no kind asked still says the row is not
    // the answer: "rating" is in no column.
    assert_eq!(
        note(
            "log.md",
            "Was Anne Hale's rating good on the 8th of March?",
            log
        ),
        None
    );
}

#[test]
fn a_difference_asked_for_is_worked_out_from_the_picked_rows() {
    let rates = "| Room | Weekday daytime | Weekday evening | Weekend |\n|---|---|---|---|\n| Main Hall | £18.00 | £22.00 | £28.00 |\n| Small Room | £11.00 | £13.50 | £15.00 |\n| Kitchen | £8.00 | £8.00 | £10.00 |\n";
    let more = note(
        "rates.md",
        "How much more an hour is the small room at weekends than on weekday evenings?",
        rates,
    )
    .unwrap_or_default();
    assert!(
        more.contains("(Worked out by the program:)")
            && more.contains("Weekend - Weekday evening = £15.00 - £13.50 = 1.50"),
        "{more}"
    );
    let rooms = note(
        "rates.md",
        "How much cheaper is the small room than the main hall at the weekend?",
        rates,
    )
    .unwrap_or_default();
    assert!(
        rooms.contains("Weekend (Main Hall) - Weekend (Small Room) = £28.00 - £15.00 = 13.00"),
        "{rooms}"
    );
    // No difference asked: the row alone.
    let plain = note(
        "rates.md",
        "What does the small room cost at weekends?",
        rates,
    )
    .unwrap_or_default();
    assert!(!plain.contains("Worked out"), "{plain}");
}

#[test]
fn a_year_asked_picks_the_rows_dated_in_it() {
    let members = "id,name,joined\nM01,Ana Roe,2021-09-04\nM02,Ben Ode,2025-01-15\nM03,Cy Lam,2024-06-30\nM04,Dee Fox,2025-04-03\n";
    let picked = note(
        "members.csv",
        "Make a file listing everyone who joined the studio in 2025.",
        members,
    )
    .unwrap_or_default();
    assert!(
        picked.contains("the 2 rows") && picked.contains("Ben Ode") && picked.contains("Dee Fox"),
        "{picked}"
    );
    assert!(!picked.contains("Cy Lam"), "{picked}");
    // A year compared is no year within.
    assert_eq!(
        note("members.csv", "Who joined before 2025?", members),
        None
    );
}

#[test]
fn the_one_column_the_question_names_is_shown_alone() {
    let prices = "| Beer | ABV | Pint | 4-pint carry-out |\n|---|---|---|---|\n| Pale | 4.5% | £4.50 | £16.00 |\n| Tidewater Session IPA | 3.9% | £4.30 | £15.00 |\n| Tidewater IPA | 6.4% | £5.90 | £21.50 |\n";
    let pint = note(
        "prices.md",
        "How much is a pint of the session IPA in our taproom?",
        prices,
    )
    .unwrap_or_default();
    assert!(
        pint.ends_with(&format!(
            "(The column the question names:)\n{OPEN}\nPint = £4.30\n{CLOSE}"
        )),
        "{pint}"
    );
    // No column named, or the row alone: no such line.
    let row = note("prices.md", "Tell me about the session IPA.", prices).unwrap_or_default();
    assert!(
        row.contains("Session IPA") && !row.contains("The column"),
        "{row}"
    );
}

#[test]
fn a_month_a_listed_code_and_a_short_first_word_pick_rows() {
    let harvest =
        "date,hive,kg\n2024-06-01,B1,9\n2024-06-02,B2,12\n2024-07-20,B1,8\n2024-07-20,B2,14\n";
    let july = note("harvest.csv", "In July, did B1 or B2 give more?", harvest).unwrap_or_default();
    assert!(july.contains("the 2 rows"), "{july}");
    assert!(!july.contains("2024-06"), "{july}");
    let sites = "| Site | Owner | Hives |\n|---|---|---|\n| Mill | Ida Roe | B1, B2 |\n| Fell | Ash Farm | B3, B4 |\n";
    let owner = note("sites.md", "whose land is B3 on?", sites).unwrap_or_default();
    assert!(
        owner.contains("Owner = Ash Farm") && !owner.contains("Ida"),
        "{owner}"
    );
    let fares = "| Vehicle | Single | Return |\n|---|---|---|\n| Van (under 3 t) | 20.00 | 35.00 |\n| Bus or coach | 40.00 | 70.00 |\n";
    let van = note("fares.md", "van return fare?", fares).unwrap_or_default();
    assert!(
        van.contains("Return = 35.00") && !van.contains("Bus"),
        "{van}"
    );
}

#[test]
fn of_two_rows_picked_the_one_with_more_of_the_named_column_is_said() {
    let harvest = "date,hive,honey_kg\n2024-07-20,B1,8\n2024-07-20,B2,14.5\n2024-06-01,B3,20\n";
    let more = note("harvest.csv", "Which gave more honey, B1 or B2?", harvest).unwrap_or_default();
    assert!(
        more.ends_with(&format!("this one has more \"honey\":)\n{OPEN}\ndate = 2024-07-20, hive = B2, honey_kg = 14.5\n{CLOSE}")),
        "{more}"
    );
    let less = note("harvest.csv", "did B1 or B2 make less honey?", harvest).unwrap_or_default();
    assert!(
        less.contains("has less \"honey\"")
            && less.ends_with(&format!("hive = B1, honey_kg = 8\n{CLOSE}")),
        "{less}"
    );
    // No comparative, or no column named: the rows only.
    let plain = note("harvest.csv", "What did B1 and B2 give?", harvest).unwrap_or_default();
    assert!(!plain.contains("Compared"), "{plain}");
    let unnamed = note("harvest.csv", "Which is more, B1 or B2?", harvest).unwrap_or_default();
    assert!(!unnamed.contains("Compared"), "{unnamed}");
}

#[test]
fn the_rows_with_the_questions_words_are_shown() {
    assert_eq!(
        note("staff.csv", "Who on the ops team is in staff.csv?", STAFF),
        Some(format!(
            "(Found by the program: the row of the table with the question's words:)\n{OPEN}\nname = Yara Haddad, team = ops, desk = 30\n{CLOSE}"
        ))
    );
    let blue = note(
        "prices.csv",
        "Save the names of the blue items in prices.csv to out/blue.txt.",
        PRICES,
    )
    .unwrap_or_default();
    assert!(blue.contains("the 2 rows"), "{blue}");
    assert!(
        blue.contains("item = widget") && blue.contains("item = gizmo"),
        "{blue}"
    );
    let one = note(
        "prices.csv",
        "What is the price of the blue widget?",
        PRICES,
    )
    .unwrap_or_default();
    assert!(
        one.contains("the row of") && one.contains("item = widget"),
        "{one}"
    );
    let name = note("staff.csv", "Which desk is Mei Tanaka at?", STAFF).unwrap_or_default();
    assert!(name.contains("name = Mei Tanaka"), "{name}");
}

#[test]
fn a_code_or_a_word_of_a_title_picks_its_row() {
    let tickets =
        "ticket,requester,assignee\nHD-301,Nadia,Owen\nHD-303,Lucia,Owen\nHD-304,Tariq,Rita\n";
    let row = note("tickets.csv", "Who's working on ticket HD-303?", tickets).unwrap_or_default();
    assert!(
        row.contains("the row of") && row.contains("ticket = HD-303"),
        "{row}"
    );
    // The file's name is what the rows are: "episode" is no missing word.
    let episodes = "number,title,guest\n43,Fixing Old Radios,Colm\n44,Urban Beekeeping,Sofia\n";
    let row = note(
        "episodes.csv",
        "Who did we have on for the beekeeping episode?",
        episodes,
    )
    .unwrap_or_default();
    assert!(row.contains("guest = Sofia"), "{row}");
    // A code the table does not have picks nothing.
    assert_eq!(note("tickets.csv", "Who has HD-399?", tickets), None);
}

#[test]
fn a_noun_after_a_name_that_picks_says_what_the_row_is() {
    let fixtures = "date,team,opponent,kickoff\n2025-09-06,U12,Otley Town,10:00\n2025-09-13,U14,Otley Town,12:00\n2025-09-20,U14,Ilkley,10:00";
    let row = note(
        "fixtures.csv",
        "What time does the U14 game against Otley Town kick off?",
        fixtures,
    )
    .unwrap_or_default();
    assert!(
        row.contains("team = U14, opponent = Otley Town, kickoff = 12:00"),
        "{row}"
    );
    assert!(!row.contains("10:00"), "{row}");
}

#[test]
fn no_rows_when_a_word_is_missing_or_nothing_is_picked_out() {
    // "purple" is not in the file: the blue widget's row would mislead.
    assert_eq!(
        note(
            "prices.csv",
            "What is the price of the purple widget?",
            PRICES
        ),
        None
    );
    assert_eq!(
        note("prices.csv", "How many items are there?", PRICES),
        None
    );
    // "cost" is a verb no file spells out: the blue widget's row.
    assert!(
        note("prices.csv", "What does the blue widget cost?", PRICES)
            .is_some_and(|n| n.contains("item = widget, colour = blue"))
    );
    assert_eq!(
        note(
            "staff.csv",
            "What is Mei Tanaka's phone number in staff.csv?",
            STAFF
        ),
        None
    );
    assert_eq!(
        note("prices.txt", "What does the blue widget cost?", PRICES),
        None
    );
    assert_eq!(
        matching_rows_note("prices.csv", "What does the blue widget cost?", PRICES),
        None,
        "no boundary tags"
    );
}

proptest::proptest! {
    /// Whatever the table holds, its bytes in the note stand between
    /// the kernel's tags.
    #[test]
    fn table_bytes_stay_inside_the_tags(
        cells in proptest::collection::vec(("[a-z<>/]{1,8}", "[a-z<>/]{1,8}"), 1..8),
        question in "[a-z<>/ ]{0,40}",
    ) {
        let body: String = std::iter::once("a,b".to_owned())
            .chain(cells.iter().map(|(x, y)| format!("{x},{y}")))
            .collect::<Vec<_>>()
            .join("\n");
        if let Some(note) = matching_rows_note("t.csv", &question, &wrap(&body)) {
            let (outside, inside) = note.split_once(&format!("\n{OPEN}\n")).unwrap_or_default();
            proptest::prop_assert!(outside.starts_with("(Found by the program: the "), "{outside:?}");
            proptest::prop_assert!(outside.ends_with(" of the table with the question's words:)"), "{outside:?}");
            proptest::prop_assert!(inside.ends_with(&format!("\n{CLOSE}")), "{inside:?}");
            proptest::prop_assert_eq!(inside.matches("untrusted_").count(), 1);
        }
    }
}

#[test]
fn the_part_of_the_day_asked_picks_the_booking_that_starts_then() {
    let bookings = "date,room,start,end,hirer,paid\n2025-06-14,main hall,14:00,18:00,Harris family,yes\n2025-06-21,committee room,10:00,12:00,Parish Council,n/a\n2025-06-21,main hall,12:00,17:00,Plant sale,yes\n2025-06-21,main hall,19:00,23:00,Morris ceilidh,no\n";
    let question =
        "Who's got the main hall on the evening of Saturday 21st June, and have they paid?";
    let picked = note("bookings.csv", question, bookings).unwrap_or_default();
    assert!(picked.contains("the row of the table"), "{picked}");
    assert!(picked.contains("Morris ceilidh"), "{picked}");
    assert!(!picked.contains("Plant sale"), "{picked}");
    // The afternoon's booking for the afternoon; no part of the day
    // asked: both of the day's main hall rows.
    let afternoon = note(
        "bookings.csv",
        "who has the main hall on the afternoon of 21 June?",
        bookings,
    )
    .unwrap_or_default();
    assert!(
        afternoon.contains("Plant sale") && !afternoon.contains("Morris"),
        "{afternoon}"
    );
    let day = note(
        "bookings.csv",
        "who has the main hall on 21 June?",
        bookings,
    )
    .unwrap_or_default();
    assert!(
        day.contains("Plant sale") && day.contains("Morris"),
        "{day}"
    );
}

#[test]
fn a_weekday_and_an_ordinal_pick_the_row_of_a_schedule_that_shortens_them() {
    let schedule = "## Week 2\n\n| Date | Time | Scenes |\n|---|---|---|\n| Mon 10 Mar | 19:00-21:30 | Act 3 |\n| Thu 13 Mar | 19:30-22:00 | Act 1 line run (Corn Exchange studio) |\n| Sat 15 Mar | 10:00-16:00 | Tech rehearsal (Corn Exchange main stage) |\n";
    let question = "Where's rehearsal on Thursday the 13th, and what time should I be there?";
    let picked = note("schedule.md", question, schedule).unwrap_or_default();
    assert!(picked.contains("the row of the table"), "{picked}");
    assert!(picked.contains("Thu 13 Mar"), "{picked}");
    assert!(!picked.contains("Sat 15 Mar"), "{picked}");
    // A weekday alone picks its rows; another day's number does not.
    let saturday = note("schedule.md", "what's on Saturday?", schedule).unwrap_or_default();
    assert!(
        saturday.contains("Sat 15 Mar") && !saturday.contains("Thu 13"),
        "{saturday}"
    );
    let fourteenth = note("schedule.md", "what is on Friday the 14th?", schedule);
    assert!(
        fourteenth.as_ref().is_none_or(|n| !n.contains("Thu 13")),
        "{fourteenth:?}"
    );
}
