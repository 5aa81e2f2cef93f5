//! The dates a question names ("on 19 April", "the July harvest", "April
//! 3rd") and the dates a line or a cell holds, so the driver's notes can
//! pick the row or line of that date.
//!
//! Why: files keep dates as `2025-04-19`, people ask "who loaded the kiln
//! on 19 April?". Matched by words, "april" is in no row and "19" in
//! several, so the note showed the table's header line and the 1.5B model
//! named the loader of another firing; asked about "the July harvest",
//! it compared the June rows.

use super::mentions::{lowercase_words, month_of};

/// A date as a question or a file gives it: a month, and the day when
/// one is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MonthDay {
    pub(crate) month: u32,
    pub(crate) day: Option<u32>,
}

impl MonthDay {
    /// Whether a date `held` in a file is this one (any day of the month
    /// when no day was asked).
    pub(crate) fn is(&self, held: &MonthDay) -> bool {
        self.month == held.month && self.day.is_none_or(|d| held.day == Some(d))
    }
}

/// The dates `question` names. A month alone counts ("in July"), except
/// "may" and "march", verbs as often as months, which count only beside
/// a day ("May 4", "4 March").
pub(crate) fn asked_dates(question: &str) -> Vec<MonthDay> {
    let mut dates: Vec<MonthDay> = Vec::new();
    for date in dates_in_words(&lowercase_words(question)) {
        let ambiguous = date.day.is_none() && matches!(date.month, 3 | 5);
        if !ambiguous && !dates.contains(&date) {
            dates.push(date);
        }
    }
    dates
}

/// The dates `text` holds: ISO dates (`2025-04-19`) and dates in words
/// ("19 April", "April 19th", "19th of April", "Apr 3"), month names
/// alone included.
pub(crate) fn dates_in(text: &str) -> Vec<MonthDay> {
    let mut dates = iso_dates(text);
    dates.extend(dates_in_words(&lowercase_words(text)));
    dates
}

/// `YYYY-MM-DD` anywhere in `text`.
fn iso_dates(text: &str) -> Vec<MonthDay> {
    let bytes = text.as_bytes();
    let digits = |from: usize, n: usize| bytes[from..from + n].iter().all(u8::is_ascii_digit);
    let number = |from: usize| text.get(from..from + 2).and_then(|n| n.parse::<u32>().ok());
    (0..bytes.len().saturating_sub(9))
        .filter(|&at| {
            digits(at, 4)
                && bytes[at + 4] == b'-'
                && digits(at + 5, 2)
                && bytes[at + 7] == b'-'
                && digits(at + 8, 2)
                && (at == 0 || !bytes[at - 1].is_ascii_digit())
        })
        .filter_map(|at| {
            let month = number(at + 5).filter(|m| (1..=12).contains(m))?;
            let day = number(at + 8).filter(|d| (1..=31).contains(d))?;
            Some(MonthDay {
                month,
                day: Some(day),
            })
        })
        .collect()
}

/// Month names among `words` (lowercase), each with the day number right
/// before it ("19 april", "19th of april") or right after ("april 19").
fn dates_in_words(words: &[String]) -> Vec<MonthDay> {
    dated_words(words)
        .into_iter()
        .map(|(date, _)| date)
        .collect()
}

/// [`dates_in_words`], each date with the index of its day's word.
fn dated_words(words: &[String]) -> Vec<(MonthDay, Option<usize>)> {
    let day_of = |at: Option<usize>| {
        let at = at?;
        let word = words.get(at)?;
        let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let suffix = &word[digits.len()..];
        let ordinal = matches!(suffix, "" | "st" | "nd" | "rd" | "th");
        digits
            .parse::<u32>()
            .ok()
            .filter(|d| ordinal && !digits.is_empty() && (1..=31).contains(d))
            .map(|day| (day, at))
    };
    let mut dates = Vec::new();
    for (at, word) in words.iter().enumerate() {
        let Some(month) = month_of(word) else {
            continue;
        };
        let before = at.checked_sub(1).and_then(|b| {
            if words.get(b).is_some_and(|w| w == "of") {
                day_of(b.checked_sub(1))
            } else {
                day_of(Some(b))
            }
        });
        let day = before.or_else(|| day_of(Some(at + 1)));
        dates.push((
            MonthDay {
                month,
                day: day.map(|(d, _)| d),
            },
            day.map(|(_, at)| at),
        ));
    }
    dates
}

/// The words of `question` (lowercase) that give the day of a date in
/// words: "18th" of "the 18th of March". Such a word is in no file that
/// keeps its dates as `2024-03-18`, so it is neither searched for nor
/// said to be missing; the date is ([`iso_fragment`]).
pub(crate) fn day_words(question: &str) -> Vec<String> {
    let words = lowercase_words(question);
    dated_words(&words)
        .into_iter()
        .filter_map(|(_, at)| words.get(at?).cloned())
        .collect()
}

/// How an ISO date of `date`'s month and day is written inside
/// `YYYY-MM-DD`: `-03-18`, for a search that finds the rows of that day
/// whatever the year. None without a day (a month alone is too common a
/// fragment: `-03-` is in codes and phone numbers).
pub(crate) fn iso_fragment(date: &MonthDay) -> Option<String> {
    date.day.map(|day| format!("-{:02}-{day:02}", date.month))
}

/// `word` as a time of day, `H:MM` without the hour's leading zero
/// ("07:15" → "7:15"); None when it is not one.
pub(crate) fn clock_time(word: &str) -> Option<String> {
    let (hour, minute) = word.split_once(':')?;
    let valid = (1..=2).contains(&hour.len())
        && minute.len() == 2
        && hour
            .chars()
            .chain(minute.chars())
            .all(|c| c.is_ascii_digit());
    let hour: u32 = hour.parse().ok().filter(|h| valid && *h < 24)?;
    let minute: u32 = minute.parse().ok().filter(|m| *m < 60)?;
    Some(format!("{hour}:{minute:02}"))
}

/// Whether `word` (lowercase) names a time rather than a thing: a day,
/// a month, a part of the day or year, a holiday.
pub(crate) fn says_when(word: &str) -> bool {
    let singular = word.trim_end_matches('s');
    super::absent_name::WEEKDAYS.contains(&singular)
        || super::mentions::month_of(word).is_some()
        || WHEN_WORDS.contains(&word)
        || WHEN_WORDS.contains(&singular)
}

/// Parts of the day and the year, and holidays, that a file gives as
/// dates and times.
const WHEN_WORDS: &[&str] = &[
    "morning",
    "afternoon",
    "evening",
    "night",
    "tonight",
    "today",
    "tomorrow",
    "yesterday",
    "weekend",
    "weekday",
    "midday",
    "noon",
    "christmas",
    "xmas",
    "easter",
    "summer",
    "winter",
    "spring",
    "autumn",
    "holiday",
    "bank",
    "half",
    "term",
];

/// The hours (from, to) of a part of the day the question names ("on
/// the *evening* of the 21st"), for picking the row of a booking that
/// starts then.
pub(crate) fn part_of_day(words: &[String]) -> Option<(u32, u32)> {
    words.iter().find_map(|w| match w.as_str() {
        "morning" | "mornings" => Some((5, 12)),
        "afternoon" | "afternoons" => Some((12, 17)),
        "evening" | "evenings" | "tonight" => Some((17, 24)),
        _ => None,
    })
}

/// Whether the clock time `time` (as [`clock_time`] writes it) is within
/// the hours `(from, to)`.
pub(crate) fn in_hours(time: &str, (from, to): (u32, u32)) -> bool {
    time.split_once(':')
        .and_then(|(hour, _)| hour.parse::<u32>().ok())
        .is_some_and(|hour| (from..to).contains(&hour))
}

/// Whether `text` holds a date that is one of `asked`.
pub(crate) fn holds_asked_date(text: &str, asked: &[MonthDay]) -> bool {
    let held = dates_in(text);
    asked.iter().any(|a| held.iter().any(|h| a.is(h)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(month: u32, day: Option<u32>) -> MonthDay {
        MonthDay { month, day }
    }

    #[test]
    fn words_of_when_and_parts_of_the_day() {
        for when in [
            "saturday",
            "evenings",
            "christmas",
            "june",
            "spring",
            "weekend",
        ] {
            assert!(says_when(when), "{when}");
        }
        for what in ["hall", "code", "rent", "gate"] {
            assert!(!says_when(what), "{what}");
        }
        let evening = part_of_day(&["the".into(), "evening".into()]);
        assert_eq!(evening, Some((17, 24)));
        assert!(evening.is_some_and(|h| in_hours("19:00", h)));
        assert!(evening.is_some_and(|h| !in_hours("12:00", h)));
        assert_eq!(part_of_day(&["hall".into()]), None);
    }

    #[test]
    fn a_question_names_a_day_of_a_month_or_a_month() {
        assert_eq!(
            asked_dates("Who loaded the gas kiln for the firing on 19 April?"),
            vec![md(4, Some(19))]
        );
        assert_eq!(
            asked_dates("what happened on April 3rd"),
            vec![md(4, Some(3))]
        );
        assert_eq!(asked_dates("the 2nd of feb?"), vec![md(2, Some(2))]);
        assert_eq!(
            asked_dates("At the July harvest, which hive gave more honey?"),
            vec![md(7, None)]
        );
        // "may" and "march" as verbs are no dates; beside a day they are.
        assert!(asked_dates("May I see the march schedule?").is_empty());
        assert_eq!(asked_dates("who came on 4 May"), vec![md(5, Some(4))]);
        assert!(asked_dates("How many tickets were sold?").is_empty());
        // A number that is no day is not taken for one.
        assert_eq!(asked_dates("40 April"), vec![md(4, None)]);
    }

    #[test]
    fn a_file_holds_iso_dates_and_dates_in_words() {
        assert_eq!(
            dates_in("| 2025-04-19 | glaze | 9 | Gareth |"),
            vec![md(4, Some(19))]
        );
        assert_eq!(dates_in("due 14 May, paid"), vec![md(5, Some(14))]);
        // Not a date: too many digits before, a month 13.
        assert!(dates_in("id 12025-04-19 and 2025-13-01").is_empty());
        let asked = asked_dates("on 19 April");
        assert!(holds_asked_date("2025-04-19  bisque", &asked));
        assert!(!holds_asked_date("2025-04-12  glaze", &asked));
        assert!(holds_asked_date("2025-07-26,H5", &asked_dates("in July")));
    }

    #[test]
    fn a_time_is_read_without_the_hours_zero() {
        assert_eq!(clock_time("07:15").as_deref(), Some("7:15"));
        assert_eq!(clock_time("10:15").as_deref(), Some("10:15"));
        assert_eq!(clock_time("0:05").as_deref(), Some("0:05"));
        for not_a_time in ["24:00", "7:5", "7:60", "a:15", "715", "10:15:00", ""] {
            assert_eq!(clock_time(not_a_time), None, "{not_a_time}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_read_without_a_panic(text in "\\PC{0,80}") {
            let _ = asked_dates(&text);
            let _ = dates_in(&text);
        }

        #[test]
        fn an_iso_date_is_found_as_the_day_it_is(month in 1u32..=12, day in 1u32..=28) {
            let line = format!("row 2024-{month:02}-{day:02} x");
            proptest::prop_assert_eq!(dates_in(&line), vec![md(month, Some(day))]);
            let question = format!("on {day} {}", ["january","february","march","april","may","june","july","august","september","october","november","december"][month as usize - 1]);
            proptest::prop_assert!(holds_asked_date(&line, &asked_dates(&question)));
        }
    }
}
