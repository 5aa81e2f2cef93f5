use super::*;
use crate::local::test_wrap::{CLOSE, OPEN, wrap};

const GUIDE: &str = "# Team guide\n\n## Hours\nThe office is open from 08:00 to 18:00.\n\n## Contacts\n- Facilities: room 214\n- IT help desk: extension 4410\n";

#[test]
fn lines_alike_are_shown_under_the_headings_that_tell_them_apart() {
    let flour = "# Flour suppliers\n\n## Millstone Mill\n- Rye flour: €1.35 per kg\n- Wheat flour (T65): €0.95 per kg\n- Delivery: Wednesdays\n\n## Valley Organics\n- Spelt flour: €2.10 per kg\n- Wheat flour (T65, organic): €1.40 per kg\n- Delivery: Fridays\n";
    let note = matching_lines_note(
        "suppliers/flour.md",
        "Which supplier sells wheat flour cheaper?",
        &wrap(flour),
    );
    assert_eq!(
        note.as_deref(),
        Some(
            format!("(Found by the program: the lines of the file with the question's words, under their headings:)\n{OPEN}\n## Millstone Mill\n- Wheat flour (T65): €0.95 per kg\n## Valley Organics\n- Wheat flour (T65, organic): €1.40 per kg\n{CLOSE}")
                .as_str()
        )
    );
}

#[test]
fn the_line_with_the_questions_words_is_shown_inside_the_tags() {
    let note = matching_lines_note(
        "guide.md",
        "What is the extension of the IT help desk in guide.md?",
        &wrap(GUIDE),
    );
    assert_eq!(
        note.as_deref(),
        Some(
            format!("(Found by the program: the line of the file with the question's words:)\n{OPEN}\n- IT help desk: extension 4410\n{CLOSE}")
                .as_str()
        )
    );
}

#[test]
fn a_code_and_the_day_asked_pick_their_line() {
    let log = "Feed log\n2024-11-02  T1 T2 T4   pellets (winter mix)\n2024-11-03  T3        pellets\n2024-11-09  T1 T2     flakes\n2024-12-01  all       flakes\n";
    let t3 = matching_lines_note("feed.txt", "When did T3 get its pellets?", &wrap(log))
        .unwrap_or_default();
    assert!(t3.contains("2024-11-03  T3") && !t3.contains("T1"), "{t3}");
    let ninth = matching_lines_note(
        "feed.txt",
        "What does the log say for 9 November?",
        &wrap(log),
    )
    .unwrap_or_default();
    assert!(
        ninth.contains("2024-11-09") && !ninth.contains("11-02"),
        "{ninth}"
    );
}

#[test]
fn a_heading_brings_its_section() {
    let body = "# Incidents\n\n## March\n- Disk full on gamma\n- Certificate expired\n\n## April\n- beta lost power for an hour\n";
    let note = matching_lines_note(
        "incidents.md",
        "What happened in April? See incidents.md.",
        &wrap(body),
    );
    assert_eq!(
        note.as_deref(),
        Some(
            format!("(Found by the program: the 2 lines of the file with the question's words:)\n{OPEN}\n## April\n- beta lost power for an hour\n{CLOSE}")
                .as_str()
        )
    );
}

#[test]
fn an_item_is_picked_by_its_own_words_and_its_sections() {
    let staff = "# Staff\n\n## Doctors\n- Dr Berg (general practice)\n- Dr Lind (paediatrics)\n\n## Reception\n- Sara Holm, mornings\n- Ken Aoki, afternoons\n";
    let shown = |question: &str, body: &str, path: &str| {
        matching_lines_note(path, question, &wrap(body)).map(|n| {
            n.lines()
                .skip(2)
                .take_while(|l| *l != CLOSE)
                .collect::<Vec<_>>()
                .join("|")
        })
    };
    assert_eq!(
        shown(
            "Who is the paediatrics doctor, according to staff.md?",
            staff,
            "staff.md"
        )
        .as_deref(),
        Some("- Dr Lind (paediatrics)")
    );
    assert_eq!(
        shown(
            "Who works reception in the afternoons? staff.md lists it.",
            staff,
            "staff.md"
        )
        .as_deref(),
        Some("- Ken Aoki, afternoons")
    );
    // A YAML key picked by its parent's word too.
    let gear = "drums:\n  kit: Ludwig Classic\nguitar:\n  amp: Vox AC30\n  pedals: 6\nbass:\n  amp: Ampeg SVT\n";
    assert_eq!(
        shown(
            "Which amp does the guitar use in gear.yaml?",
            gear,
            "gear.yaml"
        )
        .as_deref(),
        Some("amp: Vox AC30")
    );
    // A JSON key in another form of the question's word.
    let config = "{\n  \"clinic_name\": \"Riverside\",\n  \"opening_hour\": 8,\n  \"closing_hour\": 18,\n  \"sms\": true\n}\n";
    assert_eq!(
        shown(
            "At what hour does the clinic close, per config.json?",
            config,
            "config.json"
        )
        .as_deref(),
        Some("\"closing_hour\": 18,")
    );
    // A number after its noun picks its item.
    let booking = "# Guest booking\n\n## Confirmed\n- Episode 47: Marta Silva, 30 March\n- Episode 48: Hugo Lefevre, 13 April\n\n## Asked\n- Priya Nair\n";
    assert_eq!(
        shown(
            "In guests/booking.md, who's confirmed for episode 48?",
            booking,
            "guests/booking.md"
        )
        .as_deref(),
        Some("- Episode 48: Hugo Lefevre, 13 April")
    );
    // An INI section names the setting's group.
    let ini = "[server]\nport = 80\nhost = a\n[backup]\nport = 9000\nhost = b\n";
    assert_eq!(
        shown("Which port does the backup use?", ini, "app.ini").as_deref(),
        Some("port = 9000")
    );
}

#[test]
fn rare_words_pick_the_line_and_one_word_of_phrasing_may_be_missing() {
    let policies = "# Salon policies\n\n## Collection\nDogs not collected on time are charged a late fee of £5.\n\n## Cancellations\nMissed appointments are charged 50% of the price.\n\n## Matting\nHeavily matted coats may need a shave-down. This adds £15 to the groom.\n\n## Vaccinations\nAll dogs must be vaccinated.\n";
    let note = matching_lines_note(
        "policies.md",
        "How much extra does the salon charge if a dog's coat is badly matted?",
        &wrap(policies),
    )
    .expect("a note");
    assert!(note.contains("adds £15"), "{note}");
    assert!(!note.contains("£5."), "{note}");
}

#[test]
fn the_part_of_a_line_for_the_case_asked_is_shown_too() {
    let schedule = "Rehearsals - autumn term\nEvery Wednesday, 7:30pm.\nNo rehearsal on 29 October.\nTerm subs: £45, or £25 for students and concessions.";
    let note = matching_lines_note(
        "schedule.txt",
        "How much are the term subs for students?",
        &wrap(schedule),
    )
    .expect("a note");
    assert!(
        note.contains("pick:)\n<untrusted_0123456789abcdef tool=\"file_read\" source=\"workspace\">\nor £25 for students and concessions.\n"),
        "{note}"
    );
    // The first part's case: the line alone.
    let plain = matching_lines_note(
        "schedule.txt",
        "How much are the term subs?",
        &wrap(schedule),
    )
    .expect("a note");
    assert!(!plain.contains("pick:)"), "{plain}");
    assert_eq!(
        qualified_part("Adults £12; children £6", &["children".to_owned()]),
        Some("children £6")
    );
    assert_eq!(
        qualified_part("Open Mon, Tue and Wed", &["wed".to_owned()]),
        None
    );
}

#[test]
fn a_count_one_line_gives_is_that_line() {
    let stock = "Van stock check - van 2\n15mm copper pipe: 6 lengths\n15mm compression elbows: 18\n22mm compression elbows: 7\nBall valves: 5";
    let note = matching_lines_note(
        "van.txt",
        "How many 22mm compression elbows are left on van 2?",
        &wrap(stock),
    )
    .expect("a note");
    assert!(note.contains("22mm compression elbows: 7"), "{note}");
    assert!(!note.contains(": 18"), "{note}");
}

#[test]
fn no_note_for_a_missing_subject_a_count_a_table_or_a_short_file() {
    let notes = "The oven runs 10 degrees hot.\nOrder more olive oil.\nThe wifi router is in the hall.\nBins out on Monday.";
    assert_eq!(
        matching_lines_note(
            "notes.txt",
            "What is the wifi password in notes.txt?",
            &wrap(notes)
        ),
        None,
        "\"password\" is not in the file: the router's line is no answer"
    );
    assert_eq!(
        matching_lines_note(
            "guide.md",
            "How many contacts are in guide.md?",
            &wrap(GUIDE)
        ),
        None
    );
    // A count that one line does not give by a number of its own.
    let sections =
        "Rehearsals\nSectionals (tenors): Mondays\nSectionals (sopranos): Tuesdays\nTea at 8.";
    assert_eq!(
        matching_lines_note(
            "plan.txt",
            "How many sectionals are there for tenors?",
            &wrap(sections)
        ),
        None
    );
    let csv = "item,shelf\nrice,bottom\nflour,top\noats,middle\nsugar,top";
    assert_eq!(
        matching_lines_note(
            "pantry.csv",
            "Which shelf is the rice on in pantry.csv?",
            &wrap(csv)
        ),
        None
    );
    assert_eq!(
        matching_lines_note(
            "a.txt",
            "Who has the key?",
            &wrap("The key is with Ana.\nBye.")
        ),
        None
    );
    // Words that pick no line, or too many, pick nothing.
    assert_eq!(
        matching_lines_note("guide.md", "Summarize guide.md.", &wrap(GUIDE)),
        None
    );
    let same = "- room A\n- room B\n- room C\n- room D";
    assert_eq!(
        matching_lines_note("rooms.md", "Which room is free?", &wrap(same)),
        None
    );
}

proptest::proptest! {
    /// Whatever the file holds, outside the tags is only the
    /// program's heading.
    #[test]
    fn file_bytes_only_appear_inside_the_tags(
        body in "[a-z #\n]{0,200}",
        question in "(what|which|the|of|in|[a-z]{3,8})( (what|which|the|of|in|[a-z]{3,8})){0,8}",
    ) {
        if let Some(note) = matching_lines_note("f.md", &question, &wrap(&body)) {
            let mut parts = note.lines();
            let heading = parts.next().unwrap_or_default();
            proptest::prop_assert!(heading.starts_with("(Found by the program: the "), "{heading:?}");
            proptest::prop_assert_eq!(parts.next(), Some(OPEN));
            proptest::prop_assert_eq!(note.lines().last(), Some(CLOSE));
            proptest::prop_assert_eq!(note.matches(CLOSE).count(), 1);
        }
    }
}

#[test]
fn the_line_whose_range_holds_the_asked_quantity_is_the_one() {
    let policies = "Refunds and discounts\n\nFull refund if you cancel at least 14 days before the course starts.\n50% refund if you cancel 7 to 13 days before the course starts.\nNo refund if you cancel less than 7 days before, or after the course has started.\nStudents and over-65s get 10% off the course fee.\n";
    let asked = |days: &str| {
        matching_lines_note(
            "policies.txt",
            &format!("If I cancel {days} days before my course starts, do I get any money back?"),
            &wrap(policies),
        )
        .expect("a note")
    };
    let ten = asked("10");
    assert!(
        ten.contains("the line of the file whose range holds the question's \"10 days\":)")
            && ten.contains("50% refund"),
        "{ten}"
    );
    assert!(
        !ten.contains("Full refund") && !ten.contains("10% off"),
        "{ten}"
    );
    // A number no line holds as such, but a range covers: still a note.
    let twenty = asked("20");
    assert!(
        twenty.contains("Full refund") && !twenty.contains("50%"),
        "{twenty}"
    );
    let two = asked("2");
    assert!(two.contains("No refund") && !two.contains("Full"), "{two}");
}

#[test]
fn a_negated_question_picks_the_negated_line() {
    let event = "Next Repair Café: Saturday 7 June 2025, 10:00-13:00\nVenue: St Luke's Church Hall\nBring: one item per person.\nWe can't repair: microwaves, gas appliances, or anything with a cracked screen.\nDonations welcome.\n";
    let note = matching_lines_note("next-event.txt", "What can't they repair?", &wrap(event))
        .expect("a note");
    assert!(
        note.contains("the line of the file") && note.contains("microwaves"),
        "{note}"
    );
    assert!(!note.contains("Saturday"), "{note}");
    // Not negated: the negation is no word of the question, and picks
    // nothing.
    let plain = matching_lines_note(
        "next-event.txt",
        "When is the next repair café?",
        &wrap(event),
    )
    .expect("a note");
    assert!(
        plain.contains("Saturday") && !plain.contains("microwaves"),
        "{plain}"
    );
    assert!(is_negated("we don\u{2019}t open", NEGATING_IN_LINES));
    assert!(!is_negated("a note on dont", NEGATING_IN_QUESTIONS));
}

#[test]
fn a_number_asked_picks_the_line_with_that_number_whole() {
    let vans = "Fleet - Swift Removals\n\nVan 1: Luton box van, reg KX19 TRM, MOT due 14 August 2025\nVan 2: Luton box van, reg KX21 BNH, MOT due 3 July 2025\nVan 3: 7.5t lorry, reg PL68 YDV, MOT due 22 November 2025\nVan 4: Transit, reg KX71 ARF, MOT due 3 June 2026\n\nVan 2 has a sticky tail-lift: book it in with the MOT.\n";
    let note =
        matching_lines_note("vans.txt", "when's van 2 due its MOT?", &wrap(vans)).expect("a line");
    assert!(
        note.contains("Van 2: Luton box van, reg KX21 BNH, MOT due 3 July 2025"),
        "{note}"
    );
    assert!(!note.contains("Van 1"), "{note}");
    assert!(!note.contains("sticky"), "{note}");
}

#[test]
fn a_named_line_without_the_asked_word_other_lines_have_is_said_to_lack_it() {
    let staff = "Clinic staff contacts\nMain line: 01632 960 100\n\nDr Ngozi Okafor (director) - ext 214 - n.okafor@vets.example\nDr Chidi Okonkwo (locum) - ext 219 - mobile 07700 900 312\nHelen Marsh (head nurse) - ext 205 - mobile 07700 900 587\nTom Briggs (reception) - ext 200\n";
    let lacking = matching_lines_note(
        "staff.txt",
        "What's Dr Okafor's mobile number?",
        &wrap(staff),
    )
    .unwrap_or_default();
    assert!(lacking.contains("Okafor (director)"), "{lacking}");
    assert!(lacking.contains("that line has no \"mobile\""), "{lacking}");
    // The asked word on the named line: no such note.
    let marsh = matching_lines_note("staff.txt", "What's Helen Marsh's mobile?", &wrap(staff))
        .unwrap_or_default();
    assert!(marsh.contains("07700 900 587"), "{marsh}");
    assert!(!marsh.contains("has no"), "{marsh}");
    // A word no other line has either is no sign: the file may say it
    // otherwise.
    let pager = matching_lines_note("staff.txt", "What's Dr Okafor's pager?", &wrap(staff))
        .unwrap_or_default();
    assert!(!pager.contains("has no"), "{pager}");
}

#[test]
fn a_plain_title_line_set_apart_picks_no_line() {
    let keys = "Village Hall - key holders (from January 2025)\n\nWeekdays (Mon-Fri): Brenda Cole, 12 Church Row\nSaturdays: Geoff Pryce, Hillside Cottage\nSundays and bank holidays: Brenda Colley, The Old Forge\n\nPlease return keys by 10am the next day.\n";
    let note = matching_lines_note(
        "key-holders.txt",
        "My party at the hall is on a Sunday. Who do I pick the key up from?",
        &wrap(keys),
    )
    .unwrap_or_default();
    assert!(
        note.contains("Sundays and bank holidays: Brenda Colley"),
        "{note}"
    );
    assert!(!note.contains("key holders (from"), "{note}");
    // "Sunday" is no name whose line lacks "hall": the title has it.
    assert!(!note.contains("has no"), "{note}");
}
