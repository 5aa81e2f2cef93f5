use super::*;
use proptest::prelude::*;

fn quantity(question: &str) -> Quantity {
    let mut asked = asked_quantities(question);
    assert_eq!(asked.len(), 1, "{question}: {asked:?}");
    asked.remove(0)
}

#[test]
fn the_question_gives_a_number_and_its_unit() {
    let q = quantity("If I cancel 10 days before my course starts, do I get money back?");
    assert_eq!((q.number.as_str(), q.unit.as_str()), ("10", "days"));
    assert_eq!(quantity("What does a 2.5 kg parcel cost?").unit, "kg");
    // A number before a function word, or alone, gives none.
    assert!(asked_quantities("Is room 12 of the hall free?").is_empty());
    assert!(asked_quantities("What is in the 3 of them?").is_empty());
}

#[test]
fn each_way_of_writing_a_range_holds_or_not() {
    let ten = quantity("cancel 10 days before");
    let holds = |line: &str| range_holds(&line.to_lowercase(), &ten);
    assert_eq!(
        holds("50% refund if you cancel 7 to 13 days before."),
        Some(true)
    );
    assert_eq!(
        holds("Full refund if you cancel at least 14 days before."),
        Some(false)
    );
    assert_eq!(
        holds("No refund if you cancel less than 7 days before."),
        Some(false)
    );
    assert_eq!(holds("7-13 days: half"), Some(true));
    assert_eq!(holds("7\u{2013}13 days: half"), Some(true));
    assert_eq!(holds("between 7 and 13 days"), Some(true));
    assert_eq!(holds("14+ days: full refund"), Some(false));
    assert_eq!(holds("10 days or more: full refund"), Some(true));
    assert_eq!(holds("up to 10 days"), Some(true));
    assert_eq!(holds("under 10 days"), Some(false));
    assert_eq!(holds("more than 10 days"), Some(false));
    assert_eq!(holds("over 9 days"), Some(true));
    // One day or many: the unit's other number.
    let one = quantity("if I cancel 1 day before");
    assert_eq!(range_holds("less than 7 days before", &one), Some(true));
}

#[test]
fn a_line_without_a_range_of_the_unit_states_none() {
    let ten = quantity("cancel 10 days before");
    // Another unit, a plain number of the unit, or no number at all.
    for line in [
        "students get 10% off the course fee",
        "refunds take 10 days",
        "the course is 7 to 13 weeks long",
        "no refund after the course has started",
        "between 7 and days",
    ] {
        assert_eq!(range_holds(line, &ten), None, "{line}");
    }
}

#[test]
fn an_asked_number_a_stated_range_covers_is_in_the_file() {
    let lines: Vec<String> = ["full refund: at least 14 days", "half: 7 to 13 days"]
        .iter()
        .map(|l| (*l).to_owned())
        .collect();
    assert!(in_a_stated_range(
        "if I cancel 10 days before?",
        "10",
        &lines
    ));
    assert!(!in_a_stated_range(
        "if I cancel 5 days before?",
        "5",
        &lines
    ));
    assert!(!in_a_stated_range(
        "if I cancel 10 weeks before?",
        "10",
        &lines
    ));
}

proptest! {
    /// "A to B unit" holds exactly the values from A to B.
    #[test]
    fn a_range_holds_exactly_its_values(a in 0u32..500, b in 0u32..500, v in 0u32..500) {
        let (low, high) = (a.min(b), a.max(b));
        let q = quantity(&format!("what if it is {v} nights"));
        let line = format!("{low} to {high} nights: the middle rate");
        prop_assert_eq!(range_holds(&line, &q), Some(low <= v && v <= high));
        let line = format!("at least {low} nights");
        prop_assert_eq!(range_holds(&line, &q), Some(v >= low));
        let line = format!("less than {low} nights");
        prop_assert_eq!(range_holds(&line, &q), Some(v < low));
    }

    /// Any text: no panic, and no range without the unit.
    #[test]
    fn text_without_the_unit_states_no_range(text in "[a-z0-9 +.\u{2013}-]{0,60}") {
        let q = quantity("for 3 zebras");
        prop_assume!(!text.contains("zebra"));
        prop_assert_eq!(range_holds(&text, &q), None);
    }
}
