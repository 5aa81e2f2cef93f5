//! The short forms files keep for what a question spells out: an age
//! group asked as "the under-12 squad" is `U12` in a fixtures table and
//! `squads/u12.csv` on disk.
//!
//! Why here, once, on the user's words: every rule of the driver matches
//! the question's words against file names, search hits, rows and lines,
//! each splitting words at hyphens. "under-12" became "under" and "12",
//! which no file had, so the search said "under-12 is not mentioned"
//! beside a table full of `U12` rows (four tasks of a blind set). The
//! files' own spelling of the question fixes all of those at one point,
//! and the model reads the same spelling in the question and the data.
//!
//! Only forms that cannot mean anything else are rewritten: "under-12",
//! "under-12s", "under 12s" and "u-12" (not "under 12 minutes"). A file
//! that spells the group out is still found (`mentions::occurrences`
//! counts "under-12" for `u12`). The stored conversation keeps the
//! user's words; only the local model's view of them changes, the same
//! way on every turn, so the prompt cache stays valid.

use crate::{Block, Message, Role};

/// `messages` with every user text in the files' short forms.
pub(crate) fn in_files_terms(messages: Vec<Message>) -> Vec<Message> {
    messages
        .into_iter()
        .map(|mut message| {
            if message.role == Role::User {
                for block in &mut message.blocks {
                    if let Block::Text { text } = block {
                        *text = short_forms(text);
                    }
                }
            }
            message
        })
        .collect()
}

/// `text` with its age groups written as files write them ("U12").
pub(crate) fn short_forms(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, after) = rest.split_at(word_end);
        let next_start = after.len() - after.trim_start().len();
        let next = after.trim_start();
        let next_end = next.find(char::is_whitespace).unwrap_or(next.len());
        // "under 12s": the group is the two words.
        if word.eq_ignore_ascii_case("under")
            && let Some((age, tail)) = age_of(&next[..next_end], true)
        {
            out.push('U');
            out.push_str(age);
            out.push_str(tail);
            rest = &next[next_end..];
            continue;
        }
        let lower = word.to_ascii_lowercase();
        let spelled = lower
            .strip_prefix("under-")
            .or_else(|| lower.strip_prefix("u-"));
        match spelled.and_then(|tail| age_of(&word[word.len() - tail.len()..], false)) {
            Some((age, tail)) => {
                out.push('U');
                out.push_str(age);
                out.push_str(tail);
            }
            None => out.push_str(word),
        }
        out.push_str(&after[..next_start]);
        rest = next;
    }
    out
}

/// The age of a group's tail ("12", "12s", "12s?", "12's"): its digits
/// (one or two) and the punctuation after it. With `plural_only` the
/// "s" must be there: "under 12 minutes" is no group.
fn age_of(tail: &str, plural_only: bool) -> Option<(&str, &str)> {
    let digits = tail
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(tail.len());
    if !(1..=2).contains(&digits) {
        return None;
    }
    let (age, after) = tail.split_at(digits);
    let unplural = after
        .strip_prefix("'s")
        .or_else(|| after.strip_prefix('s'))
        .or_else(|| after.strip_prefix("\u{2019}s"));
    let punctuation = unplural.unwrap_or(after);
    let ends_the_word = punctuation
        .chars()
        .all(|c| c.is_ascii_punctuation() && c != '-');
    (ends_the_word && (unplural.is_some() || !plural_only)).then_some((age, punctuation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_groups_take_the_files_short_form() {
        assert_eq!(
            short_forms("How many players are in the under-12 squad?"),
            "How many players are in the U12 squad?"
        );
        assert_eq!(
            short_forms("Which player is in both the Under-12s and the under 14s?"),
            "Which player is in both the U12 and the U14?"
        );
        assert_eq!(short_forms("the u-9s' kit"), "the U9' kit");
        assert_eq!(
            short_forms("who coaches the under-16's?"),
            "who coaches the U16?"
        );
    }

    #[test]
    fn other_words_and_spacing_are_kept() {
        for kept in [
            "Is it under 12 minutes by bike?",
            "under-age drinking, under-100 and under-",
            "We went under the bridge at 12s intervals",
            "under  \n two lines\t",
            "ünder-12 naïve",
            "",
        ] {
            assert_eq!(short_forms(kept), kept);
        }
    }

    proptest::proptest! {
        /// Text without the word "under" or a "u-" comes back unchanged.
        #[test]
        fn text_without_a_group_is_unchanged(text in "[a-tv-zA-TV-Z0-9 ,.?'\n-]{0,80}") {
            proptest::prop_assert_eq!(short_forms(&text), text);
        }
    }
}
