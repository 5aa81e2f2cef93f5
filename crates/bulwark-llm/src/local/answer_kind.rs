//! The kind of answer a question asks for, when a line shows it plainly:
//! days of the week ("*what days* is the hygienist in?") or a time of
//! day ("*what time* does it open?").
//!
//! Why: asked "what days is the hygienist in?", the driver's search found
//! "hygienist" once in the appointment book ("Hygienist (Ruth)") and once
//! in the staff list ("hygienist, Tuesdays and Thursdays only"); the tie
//! went to the appointment book, and the 1.5B model answered with an
//! appointment's date. The line that gives days is the one that answers.

/// A kind of answer a line can be seen to give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnswerKind {
    /// Days of the week.
    Days,
    /// A time of day.
    Time,
}

/// The kind of answer `question` asks for, if it is one a line shows.
pub(crate) fn asked_kind(question: &str) -> Option<AnswerKind> {
    if super::time_asked::asks_for_a_time(question) {
        return Some(AnswerKind::Time);
    }
    let words = super::mentions::lowercase_words(question);
    let asks_days = words.windows(2).any(|pair| {
        matches!(pair[0].as_str(), "what" | "which") && matches!(pair[1].as_str(), "day" | "days")
    });
    asks_days.then_some(AnswerKind::Days)
}

impl AnswerKind {
    /// Whether `line` gives an answer of this kind.
    pub(crate) fn is_on(self, line: &str) -> bool {
        match self {
            Self::Time => super::time_asked::has_a_time(line),
            Self::Days => super::mentions::lowercase_words(line)
                .iter()
                .any(|w| is_weekday(w)),
        }
    }
}

/// "tuesday", "tuesdays", "tue", "tues", "weekdays", "weekends".
fn is_weekday(word: &str) -> bool {
    const SHORT: &[&str] = &[
        "mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun",
    ];
    let singular = word.strip_suffix('s').unwrap_or(word);
    super::absent_name::WEEKDAYS.contains(&singular)
        || matches!(singular, "weekday" | "weekend")
        || SHORT.contains(&word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_times_are_asked_and_seen_on_lines() {
        assert_eq!(
            asked_kind("What days is the hygienist in?"),
            Some(AnswerKind::Days)
        );
        assert_eq!(
            asked_kind("what time do you shut on a Saturday?"),
            Some(AnswerKind::Time)
        );
        assert_eq!(asked_kind("Who is the hygienist?"), None);
        assert!(AnswerKind::Days.is_on("Ruth Adeyemi - hygienist, Tuesdays and Thursdays only"));
        assert!(AnswerKind::Days.is_on("Dr Shah - Mon/Tue/Wed/Fri"));
        assert!(!AnswerKind::Days.is_on("2025-06-10,11:15,Mrs B. Okafor,Hygienist (Ruth)"));
        assert!(AnswerKind::Time.is_on("2025-06-10,11:15,Mrs B. Okafor"));
        assert!(!AnswerKind::Time.is_on("Ruth - hygienist, Tuesdays"));
    }
}
