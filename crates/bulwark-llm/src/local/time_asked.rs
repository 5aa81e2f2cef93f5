//! A question asking for a time of day, of a file that gives none.
//!
//! Why: asked "what time does the Coast Road ride set off?" of a ride
//! calendar with a date, a place and a distance for each ride but no
//! time, the 1.5B model answered "on 2025-06-08 at Market Cross": the
//! row had every word of the question, and nothing said the one thing
//! asked was not there.

/// The note after a read of `content` when `question` asks for a time of
/// day ([`asks_for_a_time`]) and `content` has none ([`has_a_time`]).
pub(crate) fn no_time_note(question: &str, content: &str) -> Option<&'static str> {
    (asks_for_a_time(question) && !has_a_time(content))
        .then_some("(Searched by the program: this file gives no time of day.)")
}

/// "*What time* does it start", "*at what time*", "*how early* can I
/// come", "*what hour*".
pub(crate) fn asks_for_a_time(question: &str) -> bool {
    let words = super::mentions::lowercase_words(question);
    words.windows(2).any(|pair| {
        matches!(
            (pair[0].as_str(), pair[1].as_str()),
            ("what" | "which", "time" | "times" | "hour") | ("how", "early" | "late")
        )
    })
}

/// Whether `text` gives a time of day: "9:30", "9am", "7.30pm", "10 a.m.",
/// "noon", "midnight", "o'clock".
pub(crate) fn has_a_time(text: &str) -> bool {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '|' | '–' | '-'))
        .filter(|w| !w.is_empty())
        .collect();
    words.iter().enumerate().any(|(at, word)| {
        let bare = word.trim_matches(|c: char| !c.is_alphanumeric() && c != ':');
        let spoken = bare.ends_with("am") || bare.ends_with("pm");
        let digits = bare.trim_end_matches(['a', 'm', 'p']);
        let hour_with_suffix = spoken
            && !digits.is_empty()
            && digits
                .chars()
                .all(|c| c.is_ascii_digit() || c == ':' || c == '.');
        let hour_then_suffix = !bare.is_empty()
            && bare.chars().all(|c| c.is_ascii_digit())
            && words.get(at + 1).is_some_and(|next| {
                matches!(
                    next.trim_end_matches(|c: char| !c.is_alphanumeric()),
                    "am" | "pm" | "a.m" | "p.m"
                )
            });
        super::dates::clock_time(bare).is_some()
            || hour_with_suffix
            || hour_then_suffix
            || matches!(bare, "noon" | "midday" | "midnight")
            || bare.starts_with("o'clock")
            || bare.starts_with("o’clock")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_question_for_a_time_is_told_when_the_file_has_none() {
        let rides = "date,ride,distance_km,start\n2025-06-08,Coast Road,95,Market Cross\n";
        let asked = "What time does the Coast Road ride set off?";
        assert!(no_time_note(asked, rides).is_some());
        let timed = "date,ride,start_time\n2025-06-08,Coast Road,08:30\n";
        assert!(no_time_note(asked, timed).is_none());
        // Not a question for a time.
        assert!(no_time_note("How far is the Coast Road ride?", rides).is_none());
        assert!(no_time_note("When is the Coast Road ride?", rides).is_none());
    }

    #[test]
    fn times_are_recognised_in_their_usual_spellings() {
        for timed in [
            "Saturday: 8am – 2pm.",
            "opens 7.30pm",
            "doors at 10 a.m.",
            "meet 09:15 at the gate",
            "closes at noon",
            "from six o'clock",
            "Monday to Friday: 7:30am-5:30pm.",
        ] {
            assert!(has_a_time(timed), "{timed}");
        }
        for untimed in [
            "price 3.40, 2 loaves",
            "2025-06-08,Coast Road,95",
            "Team Pam and Sam",
            "",
        ] {
            assert!(!has_a_time(untimed), "{untimed}");
        }
    }

    #[test]
    fn the_answer_turn_is_told_to_say_the_time_is_not_given() {
        use crate::local::test_requests::{call, request};
        use crate::{Block, Message, Role};
        let result = |content: &str| Message {
            role: Role::User,
            blocks: vec![Block::ToolResult {
                tool_use_id: "c-file_read".into(),
                content: format!(
                    "<untrusted_0123456789abcdef tool=\"file_read\" source=\"workspace\">\n{content}\n</untrusted_0123456789abcdef>"
                ),
                is_error: false,
                taint: Vec::new(),
            }],
        };
        let asked = |question: &str, content: &str| {
            crate::local::rendered_prompt(
                &request(vec![
                    Message::user_text(question),
                    call("file_read", serde_json::json!({"path": "a.csv"})),
                    result(content),
                ]),
                2,
            )
        };
        let rides = "date,ride,start\n2025-06-08,Coast Road,Market Cross\n";
        let prompt = asked("What time does the Coast Road ride set off?", rides);
        assert!(
            prompt.contains("say that the files do not give the time"),
            "{prompt}"
        );
        let timed = asked(
            "What time does the Coast Road ride set off?",
            "date,ride,start\n2025-06-08,Coast Road,08:30\n",
        );
        assert!(!timed.contains("do not give the time"), "{timed}");
        let other = asked("Where does the Coast Road ride start?", rides);
        assert!(!other.contains("do not give the time"), "{other}");
    }

    proptest! {
        /// Any "H:MM" of a day is a time, whatever surrounds it.
        #[test]
        fn any_clock_time_is_a_time(h in 0u32..24, m in 0u32..60, before in "[a-z ]{0,12}") {
            let text = format!("{before} {h}:{m:02} after");
            prop_assert!(has_a_time(&text));
        }

        /// Text without digits or time words is never a time.
        #[test]
        fn letters_alone_are_no_time(text in "[b-lo-z ,]{0,40}") {
            prop_assert!(!has_a_time(&text));
        }
    }
}
