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

/// Whether `path` is an older edition of another listed file that a
/// question about the present means instead: the two names are the same
/// but for `path`'s date or staleness words, and either its numbers are
/// lower ([`later_edition`]) or the other name has none of them at all
/// (`key-holders.txt` over `key-holders-2024.txt`, `board.md` over
/// `board-last-week.md`). A question naming `path`'s number or calling
/// for the older one ("last week", "the old list") keeps it.
///
/// Why: of `opening-hours.txt` and `opening-hours-2024.txt`, the search
/// for "saturday close" found both on equal lines, and the 1.5B model,
/// shown last year's list, gave last year's closing time; asked what is
/// ready "this week", the file words chose `board-last-week.md`.
pub(crate) fn superseded(path: &str, listed: &[String], question: &str) -> bool {
    let Some(mine) = Edition::of(path) else {
        return false;
    };
    if mine.dated.is_empty() {
        return false;
    }
    let asked = super::mentions::lowercase_words(question);
    let calls_for_it = mine.dated.iter().any(|w| {
        asked.contains(w)
            && (w.chars().all(|c| c.is_ascii_digit()) || OLDER_WORDS.contains(&w.as_str()))
    });
    if calls_for_it {
        return false;
    }
    listed.iter().any(|other| {
        other != path
            && Edition::of(other).is_some_and(|theirs| {
                theirs.same_name_as(&mine)
                    && (theirs.dated.is_empty() || later_edition(other, path, question))
            })
    })
}

/// Words of a file name that say which edition it is rather than what it
/// holds; the first group also calls for the older edition when a
/// question uses them.
pub(crate) const OLDER_WORDS: &[&str] = &[
    "old", "older", "last", "previous", "prev", "archive", "archived", "backup", "bak", "former",
];
const PERIOD_WORDS: &[&str] = &["week", "month", "year", "term", "season"];

/// A file name split into the words that say what it holds and the ones
/// that say which edition it is.
struct Edition {
    folder: String,
    extension: String,
    named: Vec<String>,
    dated: Vec<String>,
}

impl Edition {
    fn of(path: &str) -> Option<Self> {
        let lower = path.to_lowercase();
        let (folder, base) = lower.rsplit_once('/').unwrap_or(("", &lower));
        let (stem, extension) = base.rsplit_once('.')?;
        let (mut named, mut dated) = (Vec::new(), Vec::new());
        for word in stem
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let edition_word = word.chars().all(|c| c.is_ascii_digit())
                || OLDER_WORDS.contains(&word)
                || PERIOD_WORDS.contains(&word);
            if edition_word {
                dated.push(word.to_owned());
            } else {
                named.push(word.to_owned());
            }
        }
        (!named.is_empty()).then(|| Self {
            folder: folder.to_owned(),
            extension: extension.to_owned(),
            named,
            dated,
        })
    }

    fn same_name_as(&self, other: &Self) -> bool {
        self.folder == other.folder
            && self.extension == other.extension
            && self.named == other.named
    }
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

    #[test]
    fn an_undated_or_later_name_supersedes_a_dated_one() {
        let listed: Vec<String> = [
            "opening-hours.txt",
            "opening-hours-2024.txt",
            "board.md",
            "board-last-week.md",
            "prices-2024.csv",
            "prices-2025.csv",
            "notes/2025-03.md",
            "site-info.md",
            "gate-notice-2024.txt",
            "old/board.md",
        ]
        .map(String::from)
        .to_vec();
        let now = "what time do we close on a saturday these days?";
        let gone = |p: &str, q: &str| superseded(p, &listed, q);
        assert!(gone("opening-hours-2024.txt", now));
        assert!(gone("board-last-week.md", "what is ready this week?"));
        assert!(gone("prices-2024.csv", now));
        // The current editions, files with no other edition, a file of
        // another folder, and files of other names stay.
        for kept in [
            "opening-hours.txt",
            "board.md",
            "prices-2025.csv",
            "notes/2025-03.md",
            "site-info.md",
            "gate-notice-2024.txt",
            "old/board.md",
        ] {
            assert!(!gone(kept, now), "{kept}");
        }
        // A question that calls for the older edition keeps it.
        assert!(!gone(
            "opening-hours-2024.txt",
            "what were the hours in 2024?"
        ));
        assert!(!gone("board-last-week.md", "what was ready last week?"));
        assert!(!gone("prices-2024.csv", "and in 2024?"));
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
