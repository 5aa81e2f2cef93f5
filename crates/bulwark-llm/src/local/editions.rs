//! Two editions of one file, told apart by a number in the name
//! (`prices-2024.csv`, `prices-2025.csv`): a question that names neither
//! is about the latest.
//!
//! Why: asked "how much is a small rye loaf?", the driver's search found
//! the loaf in both price lists on the same lines, and the tie went to
//! the first name, last year's list; the 1.5B model answered with last
//! year's price.

/// Whether `candidate` is a later edition of `other` than the question
/// asks about: the two names are the same but for their numbers, the
/// first number that differs is larger in `candidate`, and `question`
/// does not name `other`'s number ("what did it cost *in 2024*?").
pub(crate) fn later_edition(candidate: &str, other: &str, question: &str) -> bool {
    let (mine, theirs) = (numbers(candidate), numbers(other));
    if shape(candidate) != shape(other) || mine.len() != theirs.len() {
        return false;
    }
    let Some((newer, older)) = mine.iter().zip(&theirs).find(|(a, b)| a != b) else {
        return false;
    };
    let asked = super::mentions::lowercase_words(question);
    let names_older = asked.iter().any(|w| w == older);
    number_value(newer) > number_value(older) && !names_older
}

/// The runs of digits in `name`, in order.
fn numbers(name: &str) -> Vec<String> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter(|run| !run.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `name` with each run of digits as one `#`: the same for every
/// edition of a file.
pub(crate) fn shape(name: &str) -> String {
    let mut shaped = String::new();
    for c in name.to_lowercase().chars() {
        if !c.is_ascii_digit() {
            shaped.push(c);
        } else if !shaped.ends_with('#') {
            shaped.push('#');
        }
    }
    shaped
}

/// A run of digits as a number; too long to be one, as long as it is.
fn number_value(run: &str) -> u128 {
    run.parse().unwrap_or(u128::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_later_year_of_one_name_is_the_later_edition() {
        let asked = "how much is a small rye loaf?";
        assert!(later_edition("prices-2025.csv", "prices-2024.csv", asked));
        assert!(!later_edition("prices-2024.csv", "prices-2025.csv", asked));
        assert!(later_edition(
            "minutes/2025-03.md",
            "minutes/2025-02.md",
            asked
        ));
        assert!(later_edition("v10/notes.txt", "v9/notes.txt", asked));
    }

    #[test]
    fn a_question_naming_the_older_number_or_other_names_are_no_editions() {
        let in_2024 = "what did a small rye loaf cost in 2024?";
        assert!(!later_edition(
            "prices-2025.csv",
            "prices-2024.csv",
            in_2024
        ));
        let asked = "how much is it?";
        assert!(!later_edition("stock-2025.csv", "prices-2024.csv", asked));
        assert!(!later_edition("prices.csv", "prices-2024.csv", asked));
        assert!(!later_edition("prices-2025.csv", "prices-2025.csv", asked));
        assert!(!later_edition("notes.txt", "todo.txt", asked));
    }

    proptest! {
        /// Of two editions, exactly one is the later, whatever the year.
        #[test]
        fn of_two_editions_one_is_later(a in 0u32..100_000, b in 0u32..100_000) {
            let (x, y) = (format!("list-{a}.csv"), format!("list-{b}.csv"));
            let asked = "what is on the list?";
            let later = (later_edition(&x, &y, asked), later_edition(&y, &x, asked));
            prop_assert_eq!(later, (a > b, b > a));
        }
    }
}
