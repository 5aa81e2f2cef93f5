use super::*;

fn wrap(body: &str) -> String {
    format!("<untrusted_0123456789abcdef>\n{body}\n</untrusted_0123456789abcdef>")
}

#[test]
fn an_absent_word_is_named() {
    let csv = wrap("item,colour,price_eur\nwidget,blue,4.50\n");
    assert_eq!(
        mentions_note(
            "What is the price of the purple widget in prices.csv?",
            &["prices.csv"],
            &csv,
            &[],
            true
        )
        .as_deref(),
        Some(
            "(Searched by the program: the question's word \"purple\" is not in this file; there is no row with it.)"
        )
    );
}

#[test]
fn a_weekday_shortened_and_an_ordinals_number_are_mentions() {
    let rota = "| thu 13 mar | 19:30-22:00 | act 1 |\n| sat 15 mar | 10:00 | tech |";
    assert!(mentioned(rota, "thursday"));
    assert!(mentioned(rota, "saturdays"));
    assert!(mentioned(rota, "13th"));
    // Not inside other words or numbers.
    assert!(!mentioned(rota, "friday"));
    assert!(!mentioned("thumb drive, 2013", "thursday"));
    assert!(!mentioned("thumb drive, 2013", "13th"));
    assert!(!mentioned(rota, "14th"));
}

#[test]
fn a_word_of_the_same_meaning_is_a_mention() {
    assert!(mentioned("10:15 delayed 25 min", "late"));
    assert!(mentioned("adult fare: 6.40", "cost"));
    assert!(mentioned("cert_expiry", "expires"));
    assert!(mentioned("standard excess: 100", "deductible"));
    assert!(!mentioned("adult: 6.40", "cost"));
    assert!(!mentioned("on time", "late"));
}

#[test]
fn a_verb_whose_particle_ends_the_question_is_no_subject_word() {
    let words = |q: &str| subject_words(q, &[], Numbers::Skip);
    assert_eq!(
        words("When does Ada Lin's licence run out?"),
        ["ada", "lin", "licence"]
    );
    assert!(words("Is the back door locked?").contains(&"door".to_owned()));
}

#[test]
fn the_kind_of_answer_and_the_opponent_word_are_no_subject_words() {
    // As a search's note weighs them, where common words still count.
    let words = |q: &str| subject_words(q, &[], Numbers::Count);
    assert_eq!(
        words("What time does the U14 game against Otley Town kick off?"),
        ["u14", "game", "otley", "town"]
    );
    assert_eq!(
        words("What date is the Spring concert?"),
        ["spring", "concert"]
    );
    assert_eq!(
        words("Read the only file in the reports folder: how much was invoiced?"),
        ["reports"]
    );
    // Not after "what": the time is the subject.
    assert!(words("Where is the time sheet kept?").contains(&"time".to_owned()));
    // "At the moment" is now; "the moment of truth" is a thing.
    assert!(words("How many storage units are empty at the moment?").is_empty());
    assert!(words("What is the moment of inertia of the beam?").contains(&"moment".to_owned()));
}

#[test]
fn a_word_that_takes_an_object_is_no_subject_word() {
    let words = |q: &str| subject_words(q, &[], Numbers::Skip);
    assert_eq!(
        words("Where do we buy the Celadon Blue from?"),
        ["celadon", "blue"]
    );
    assert!(words("Who sold our tandem?").contains(&"tandem".to_owned()));
    assert!(!words("Who sold our tandem?").contains(&"sold".to_owned()));
    // A sentence's first article follows no verb of the last one.
    assert!(words("When is the museum trip? The date is there.").contains(&"trip".to_owned()));
    // After an article a word is the object itself ("the trip the...").
    assert!(words("What is the cost of the trip the school booked?").contains(&"trip".to_owned()));
}

#[test]
fn common_verbs_are_subject_words_of_a_search_only() {
    let named = |q: &str| subject_words(q, &[], Numbers::Skip);
    let searched = |q: &str| subject_words(q, &[], Numbers::Count);
    assert_eq!(named("What did the tower entry cost?"), ["tower", "entry"]);
    assert_eq!(named("Which amp does the guitar use?"), ["amp", "guitar"]);
    assert_eq!(
        searched("Which file says what the guitar uses?"),
        ["guitar", "uses"]
    );
    assert_eq!(named("Which file says what the guitar uses?"), ["guitar"]);
    // Ranking words are computed, never looked for.
    // Nor is the verb after the noun a which-question asks about.
    assert_eq!(
        named("Which customer placed the largest order?"),
        ["customer", "order"]
    );
    assert_eq!(
        named("Which block yielded the most fruit by weight?"),
        ["block"]
    );
    // "What's planned": a past verb after "what's"; "day 2" names
    // one day.
    assert_eq!(named("What's planned for day 2?"), ["day", "2"]);
}

#[test]
fn a_number_after_its_noun_is_a_subject_word_a_quantity_is_not() {
    let named = |q: &str| subject_words(q, &[], Numbers::Skip);
    assert_eq!(named("Who is on call in week 18?"), ["week", "18"]);
    assert_eq!(
        named("Who is the guest of episode 48?"),
        ["guest", "episode", "48"]
    );
    assert_eq!(named("Which are the 3 largest orders?"), ["orders"]);
    assert_eq!(
        subject_words(
            "How many batches are on sale right now?",
            &[],
            Numbers::Count
        ),
        ["sale"]
    );
    assert_eq!(
        subject_words(
            "Who has the main hall on the 23rd of March, and is it definitely going ahead?",
            &[],
            Numbers::Skip
        ),
        ["main", "hall", "march"]
    );
    // Spelled out, in a count too; a time frame is no subject either.
    for numbers in [Numbers::Skip, Numbers::Count] {
        assert_eq!(
            subject_words(
                "What aperture is the larger of our two Dobsonians, and could I borrow it this weekend?",
                &[],
                numbers
            ),
            ["aperture", "dobsonians"]
        );
    }
    assert_eq!(
        named("How many episodes run longer than 50 minutes?"),
        Vec::<String>::new()
    );
    // The rota stops at week 17: week 18 is named as missing.
    let note = mentions_note(
        "Who is on call in week 18?",
        &["oncall.yaml"],
        &crate::local::test_wrap::wrap("week_16:\n  primary: Owen\nweek_17:\n  primary: Sam"),
        &[],
        false,
    );
    assert!(note.is_some_and(|n| n.contains("\"18\"")));
}

#[test]
fn scenes_contractions_and_demonstratives_name_no_subject() {
    let named = |q: &str| subject_words(q, &[], Numbers::Skip);
    assert_eq!(
        named("Which dog has been at the shelter the longest?"),
        ["dog"]
    );
    assert_eq!(named("Who's coming from Globex?"), ["globex"]);
    assert_eq!(
        named("Who covers the desk on Saturdays?"),
        ["desk", "saturdays"]
    );
    assert!(named("How many tests failed in that run?").is_empty());
    // "In" leads what is asked about as often as a scene ("what
    // grade did Mia get in *physics*?").
    assert_eq!(
        named("What grade did Mia get in physics?"),
        ["grade", "mia", "physics"]
    );
    assert!(named("Is there a time we're not supposed to ship releases?").is_empty());
    assert_eq!(named("What time does the shop open?"), ["shop", "open"]);
    assert_eq!(
        named("How many grams of food does each cat get?"),
        ["food", "cat"]
    );
    assert_eq!(
        named("Which company shows up in both files? Is the vet comes in?"),
        ["company", "vet"]
    );
    // A hyphen's "on" is no preposition.
    assert_eq!(named("Who is the on-call engineer?"), ["call", "engineer"]);
    // The possessive `s` still leads its phrase.
    assert_eq!(
        named("What is Chen Wei's phone number?"),
        ["chen", "wei", "phone", "number"]
    );
}

#[test]
fn a_number_that_qualifies_a_word_must_be_there_too() {
    let parts = wrap("{ \"name\": \"16 inch tube\", \"unit_price\": 7.0 }\nyear 2026");
    let q = "What is the unit price of the 26 inch tube in parts.json?";
    assert_eq!(qualifying_numbers(q), ["26"]);
    assert_eq!(
        mentions_note(q, &["parts.json"], &parts, &[], false).as_deref(),
        Some(
            "(Searched by the program: the question's word \"26\" is not in this file; there is no line with it.)"
        )
    );
    assert_eq!(
        mentions_note(
            "What is the unit price of the 16 inch tube?",
            &[],
            &parts,
            &[],
            false
        ),
        None
    );
    assert!(qualifying_numbers("Which are the 3 largest orders? What is on day 2?").is_empty());
}

#[test]
fn plurals_in_ves_are_found() {
    assert_eq!(occurrences("matches are 2 halves of 25 minutes", "half"), 1);
    assert_eq!(occurrences("the top shelf", "shelves"), 1);
    assert_eq!(occurrences("two knives", "knife"), 1);
    assert_eq!(occurrences("a roof", "half"), 0);
    // An age group asked in the short form is found spelled out.
    assert_eq!(occurrences("the under-12 squad, under 12s", "u12"), 2);
    assert_eq!(occurrences("under-14s", "u12"), 0);
}

#[test]
fn a_month_is_found_in_a_date() {
    let rows = wrap("name,arrived\nBiscuit,2026-02-11\nOtto,2025-12-19\n");
    let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert!(absent_words(&words(&["february", "dec"]), &rows).is_empty());
    assert_eq!(absent_words(&words(&["march"]), &rows), ["march"]);
}

#[test]
fn a_word_another_named_file_has_is_not_missing() {
    let rota = wrap("## Wednesday\n- Chloe: dog walking");
    let vet = wrap("[vet]\nvisit_day = Wednesday");
    let q = "Is Chloe on the rota the same day the vet visits? Check rota.md and kennels.ini.";
    let paths = ["rota.md", "kennels.ini"];
    assert_eq!(mentions_note(q, &paths, &vet, &[&rota], false), None);
    assert!(mentions_note(q, &paths, &vet, &[], false).is_some_and(|n| n.contains("\"chloe\"")));
}

#[test]
fn no_note_when_every_word_is_there() {
    let csv = wrap("name,role,city\nBen Okafor,engineer,Lagos\n");
    let q = "Which engineer in contacts.csv lives in Lagos?";
    assert_eq!(mentions_note(q, &["contacts.csv"], &csv, &[], true), None);
    let q = "What is the phone number of the engineer?";
    assert_eq!(
        mentions_note(q, &["contacts.csv"], &csv, &[], true).as_deref(),
        Some(
            "(Searched by the program: the question's words \"phone\" and \"number\" are not in this file; there is no row with them.)"
        )
    );
}

#[test]
fn only_the_words_of_what_is_asked_about_are_counted() {
    let words = |q: &str| {
        subject_words(
            q,
            &["contacts.csv", "guide.md", "docs/changelog.md"],
            Numbers::Skip,
        )
    };
    assert_eq!(
        words("Which engineer in contacts.csv lives in Lagos?"),
        ["engineer", "lagos"]
    );
    assert_eq!(words("What does guide.md say about parking?"), ["parking"]);
    assert_eq!(
        words("What is Chen Wei's phone number in contacts.csv?"),
        ["chen", "wei", "phone", "number"]
    );
    // What a count counts is left out; what it is counted of is not.
    assert!(words("How many fixes are listed in docs/changelog.md?").is_empty());
    assert_eq!(
        words("How many copies of Hamlet are in books.csv?"),
        ["hamlet"]
    );
    // A name inside a sentence, and the phrase after a question word's
    // auxiliary.
    assert_eq!(
        words("Who wrote Hamlet, according to books.csv?"),
        ["hamlet"]
    );
    assert_eq!(
        words("Where should olive oil be ordered from?"),
        ["olive", "oil"]
    );
    // A capital that begins a sentence, or names a kind of file, is no name.
    assert_eq!(
        words("Look in the CSV. Which city is Ana in?"),
        ["city", "ana"]
    );
    assert_eq!(words("What does the README say about Docker?"), ["docker"]);
    assert_eq!(words("What happened in April?"), ["april"]);
    assert!(words("What files are in your workspace?").is_empty());
    // A modal verb is no subject: "should" was said to be missing.
    assert!(words("What should be harvested weekly according to guide.md?").is_empty());
}

#[test]
fn a_plural_is_found_by_its_stem() {
    assert_eq!(occurrences("- fixed the login", "fixes"), 1);
    assert_eq!(occurrences("meetings move", "meetings"), 1);
    assert_eq!(occurrences("the bus", "bus"), 1);
}

proptest::proptest! {
    /// Whatever the file holds, the note is the program's fixed words
    /// around words of the question: no byte of the file reaches it.
    #[test]
    fn the_note_carries_only_the_questions_words(
        body in "[a-z ,.<>/\n]{0,200}",
        question in "(what|which|the|of|about|in|[a-z]{3,8})( (what|which|the|of|about|in|[a-z]{3,8})){0,8}",
    ) {
        if let Some(note) = mentions_note(&question, &[], &wrap(&body), &[], false) {
            let mut quoted = note.split('"');
            let fixed = quoted.next().unwrap_or_default();
            proptest::prop_assert!(
                ["(Searched by the program: the question's word ", "(Searched by the program: the question's words "].contains(&fixed),
                "{fixed:?}"
            );
            for (i, part) in quoted.enumerate() {
                if i % 2 == 0 {
                    proptest::prop_assert!(question.split(' ').any(|w| w == part), "{part:?} not a word of {question:?}");
                } else {
                    proptest::prop_assert!(
                        [" is not in this file; there is no line with it.)", " and ", ", ", " are not in this file; there is no line with them.)"].contains(&part),
                        "{part:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_service_a_price_is_asked_for_is_a_subject_word() {
    let words = |q: &str| subject_words(q, &[], Numbers::Count);
    assert_eq!(
        words("How much does it cost to neuter a cat?"),
        ["neuter", "cat"]
    );
    assert_eq!(
        words("How much do you charge to hire the hall?"),
        ["hire", "hall"]
    );
    // Not after a price: a verb before its object, as before.
    assert_eq!(
        words("Where do we buy the Celadon Blue?"),
        ["celadon", "blue"]
    );
}

#[test]
fn an_asked_number_a_stated_range_covers_is_not_absent() {
    let policies = wrap("Full refund: at least 14 days before.\nHalf: 7 to 13 days before.\n");
    assert!(
        absent_qualifying_numbers("If I cancel 10 days before, what do I get?", &policies)
            .is_empty()
    );
    // Another unit, or outside every range stated: absent.
    assert_eq!(
        absent_qualifying_numbers("If I cancel 10 weeks before, what do I get?", &policies),
        ["10"]
    );
    let capped = wrap("Groups: up to 8 people.\nPrivate room: 9 to 12 people.\n");
    assert_eq!(
        absent_qualifying_numbers("Can 20 people come?", &capped),
        ["20"]
    );
}

#[test]
fn pronouns_their_verbs_and_hedges_are_no_subject_words() {
    let words = |q: &str| subject_words(q, &[], Numbers::Skip);
    assert_eq!(
        words("Who do we buy rye flour from? It's in the suppliers notes somewhere."),
        ["rye", "flour", "suppliers", "notes"]
    );
    assert_eq!(words("When do they open on Sundays?"), ["sundays"]);
    // "What days": the kind of answer, as "when" is.
    assert_eq!(words("What days is the hygienist in?"), ["hygienist"]);
    assert_eq!(words("what did you order for the party?"), ["party"]);
    // A name after the pronoun is still the thing asked.
    assert_eq!(words("Where did you see Marek?"), ["marek"]);
    // "Your" opens a noun phrase as "the" does.
    assert_eq!(
        words("How much is your gluten-free loaf?"),
        ["gluten", "free", "loaf"]
    );
}
