//! What the driver tells the local model after it reads a file to look
//! for something the question asks about without naming a file ("which
//! file mentions port 8088?", "somewhere in your workspace it says who
//! the new lab manager is"): whether the question's words are in that
//! file, and how many files are left to read. A read that missed earns
//! the model one more call beyond the budget.
//!
//! Why: with two calls (a listing, one read), the 1.5B model read the
//! first file the grammar offered (`contacts.csv` for the launch code
//! name, `staff.csv` for the lab manager) and answered from it, inventing
//! or quoting whatever was there; asked which *files* mention a setting,
//! it named the first one it read. A small model does not notice that a
//! file lacks what it was looking for; told so, and given the call to
//! look further (the grammar only offers files not read yet for this
//! question), it reads on.
//!
//! The words are the user's and the counts the program's: no byte of a
//! file, not even a file's name, is written into the note.

use super::mentions::{
    Numbers, absent_words, lowercase_words, occurrences, subject_words, these_words_are,
};

/// At most this many calls are earned by searching, per question: with the
/// budget, a failed call and the answer, seven turns (the offline agent's
/// `max_turns`). A listing and four files are searched whole, a large
/// tree is not; with two, "which files mention gamma?" stopped before the
/// fourth file, which had it.
pub(crate) const MAX_EARNED_READS: usize = 3;

/// The note after one read made to look, and what it does to the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Looked {
    pub(crate) note: String,
    /// A miss, or a question about every file, with files left to read.
    pub(crate) earns_a_read: bool,
    /// Every word found, for a question about one file: the model answers
    /// now. Without this the 1.5B model, with a call left, went on to
    /// read an unrelated file and answered about both.
    pub(crate) found: bool,
    /// Every word of the question is in the file, or all but one of
    /// three or more.
    pub(crate) had_words: bool,
    /// The question asks which files have them.
    pub(crate) every_file: bool,
    /// The question's words the driver's search found in no file, when
    /// they are what it asks about ([`Looked::asks_what_is_nowhere`]).
    pub(crate) nowhere: Vec<String>,
}

impl Looked {
    /// Whether the thing asked is in no file: the words found nowhere
    /// include one before the question's last subject word ("*teeth*
    /// whitening", "*gluten*-free loaf"), which says which thing, not
    /// only what kind ("the sourdough *bread*" of a list that says
    /// "sourdough").
    pub(crate) fn asks_what_is_nowhere(&self) -> bool {
        !self.nowhere.is_empty()
    }
}

/// Where the search for a question stands when a file is read for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Searching<'a> {
    /// How many listed files are not read yet for this question (`None`:
    /// the session's files are not listed).
    pub(crate) unread: Option<usize>,
    /// Whether the question may still earn a call.
    pub(crate) may_earn: bool,
    /// The words the driver searched every file for and found in none
    /// (`search_first.rs`).
    pub(crate) nowhere: &'a [&'a str],
    /// Whether the driver searched for this question.
    pub(crate) driver_searched: bool,
}

/// The note for a read of `content` (as wrapped) for `question`, which
/// names no file. `None` when the question has no words to look for.
pub(crate) fn search_note(
    question: &str,
    path: &str,
    content: &str,
    searching: &Searching<'_>,
) -> Option<Looked> {
    let Searching {
        unread,
        may_earn,
        nowhere,
        driver_searched,
    } = *searching;
    // A terse question ("car return fare?", "ash warden hp?") has no
    // phrase after a question word, so no subject words: the words the
    // driver searched for are what it asks about. Without them the read
    // found nothing to end the search, and the 1.5B model read on into
    // another file and answered from it.
    // Only to end the search: such words are few and often other than
    // the file's ("when did 0.5.0 *ship*?" of a changelog that says
    // "released"), so one missing says nothing.
    let mut words = subject_words(question, &[], Numbers::Count);
    if words.is_empty() && driver_searched {
        words = super::search_first::search_words(question)
            .into_iter()
            .filter(|w| w.chars().count() >= 2)
            .collect();
        let name = path.to_lowercase();
        let missing = absent_words(&words, content);
        if missing.iter().any(|w| occurrences(&name, w) == 0) {
            return None;
        }
    }
    if words.is_empty() {
        return None;
    }
    // A word of the file's name is in the file: "hike" in `hikes.csv`,
    // whose rows say "Ridge Loop", not "hike". Said to be missing, the
    // file was taken for the wrong one and its rows went unread.
    let name = path.to_lowercase();
    // One pass over the content for every word (it is lowercased once).
    let missing = absent_words(&words, content);
    let in_file = |w: &str| !missing.contains(&w) || occurrences(&name, w) > 0;
    // A word of a query found nowhere: "gluten" of "gluten-free".
    let found_nowhere = |w: &str| {
        nowhere.iter().any(|q| {
            w.starts_with(q) || q.contains(['-', ' ']) && q.split(['-', ' ']).any(|part| part == w)
        })
    };
    // A word no file has, right before one this file has, only says
    // which kind of it ("the *club* hike" of `hikes.csv`): it tells no
    // file apart, and is not what is asked.
    let spoken = lowercase_words(question);
    let modifies_a_word_here = |w: &str| {
        spoken
            .windows(2)
            .any(|pair| pair[0] == w && words.contains(&pair[1]) && in_file(&pair[1]))
    };
    let absent: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .filter(|w| !in_file(w))
        .filter(|w| !(found_nowhere(w) && modifies_a_word_here(w)))
        // A day or a part of it ("on the *evening* of *Saturday* 21st
        // June") is in a file as a date and a time: missing as a word,
        // it is no sign the file is not the one. Said to be missing, the
        // booking table's rows were never picked.
        .filter(|w| !super::dates::says_when(w))
        .collect();
    let every_file = asks_about_every_file(question);
    // All but one of three or more words: the file is about the thing
    // asked, and the missing word is the question's own ("the *date* of
    // the museum trip" in a file that says "14 May"). Read on from it and
    // the 1.5B model answered from the next file instead.
    // A number is never the question's own word: "week *18*" of a rota
    // that stops at week 17 is the thing asked for, and told the rota
    // had "call" and "week" the model named week 17's engineer.
    // Counted among the file's words only when it has them: "free" of
    // "gluten-free loaf" is not, though it only says which kind.
    let here = words.iter().filter(|w| in_file(w)).count();
    let mostly = here >= 2 && absent.len() == 1 && !absent[0].chars().all(|c| c.is_ascii_digit());
    // Words the driver's search found in no file nor file name: no read
    // can find them, so the search is over, with that as its finding.
    // Told only that the search stopped, the 1.5B model read on into
    // the price list and gave the cat vaccination's price for neutering.
    let absent_everywhere =
        !mostly && !absent.is_empty() && absent.iter().all(|w| found_nowhere(w));
    let last_word = words.last().map(String::as_str);
    let nowhere_asked: Vec<String> =
        if absent_everywhere && absent.iter().any(|w| Some(*w) != last_word) {
            absent.iter().map(|w| (*w).to_owned()).collect()
        } else {
            Vec::new()
        };
    let present: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .filter(|w| !absent.contains(w))
        .collect();
    let presence = if absent.is_empty() {
        format!("the question's {} in this file", these_words_are(&present))
    } else if mostly {
        format!(
            "the question's {} in this file, but not \"{}\"",
            these_words_are(&present),
            absent.join("")
        )
    } else if absent_everywhere {
        // The driver's search found them in no file: reading on cannot
        // find them, and "not in this file" alone sent the 1.5B model
        // answering from the file it had ("neuter a cat": a vaccination
        // price).
        format!(
            "the question's {} in no file of the workspace",
            these_words_are(&absent)
        )
    } else {
        format!(
            "the question's {} not in this file",
            these_words_are(&absent)
        )
    };
    // "Kielder *or* the Elan Valley one": the two things compared. A file
    // with both is the one to answer from, whatever other words it lacks
    // ("trips", "darker"); told it lacked them, the 1.5B model read on
    // through three other files and answered from the last.
    let choices = named_choices(question);
    let both_choices = absent.iter().any(|w| !choices.iter().any(|c| c == w))
        && choices.len() == 2
        && choices.iter().all(|c| in_file(c));
    let presence = if both_choices {
        let named: Vec<&str> = choices.iter().map(String::as_str).collect();
        format!("the question's {} in this file", these_words_are(&named))
    } else {
        presence
    };
    // "How many *sopranos* are there in the choir?": the file that lists
    // the thing counted is the one to count in, whatever plain word of
    // the question's it lacks ("choir"); told it lacked one, the 1.5B
    // model read on and counted the concert programme. A name missing
    // ("Rita's tickets") still is a miss.
    let counted = super::counted::counted_thing(question);
    let names = question_names(question);
    let counted_here = counted.as_ref().filter(|noun| {
        !absent.is_empty()
            && absent_words(std::slice::from_ref(*noun), content).is_empty()
            && absent.iter().all(|w| !names.iter().any(|n| n == w))
    });
    let presence = match counted_here {
        Some(noun) => format!(
            "the question's {} in this file",
            these_words_are(&[noun.as_str()])
        ),
        None => presence,
    };
    let had_words = absent.is_empty() || mostly || both_choices || counted_here.is_some();
    let looks_on = !had_words && !absent_everywhere || every_file;
    let earns_a_read = looks_on && unread != Some(0) && may_earn;
    let left = match unread.filter(|_| looks_on) {
        None => String::new(),
        Some(0) => "; every file has been read".to_owned(),
        Some(_) if !earns_a_read => "; the search stops here".to_owned(),
        Some(1) => "; 1 file is not read yet".to_owned(),
        Some(n) => format!("; {n} files are not read yet"),
    };
    Some(Looked {
        note: format!("(Searched by the program: {presence}{left}.)"),
        earns_a_read,
        found: !looks_on,
        had_words,
        every_file,
        nowhere: nowhere_asked,
    })
}

/// The question's names ("Rita", "U14"), lowercase.
fn question_names(question: &str) -> Vec<String> {
    super::question_words::question_tokens(question)
        .iter()
        .filter(|t| t.is_name())
        .filter_map(|t| t.text.map(str::to_lowercase))
        .collect()
}

/// The names on either side of "or" ("Kielder or the Elan Valley one"),
/// lowercase; empty unless there are two.
fn named_choices(question: &str) -> Vec<String> {
    use super::question_words::question_tokens;
    let tokens = question_tokens(question);
    let Some(at) = tokens
        .iter()
        .position(|t| t.text.is_some_and(|w| w.eq_ignore_ascii_case("or")))
    else {
        return Vec::new();
    };
    let name = |t: &super::question_words::Token<'_>| {
        t.is_name().then(|| t.text.map(str::to_lowercase)).flatten()
    };
    let before = tokens[at.saturating_sub(3)..at].iter().rev().find_map(name);
    let after = tokens[at + 1..].iter().take(3).find_map(name);
    match (before, after) {
        (Some(a), Some(b)) if a != b => vec![a, b],
        _ => Vec::new(),
    }
}

/// "Which files mention...", "in all files", "how many files": the
/// answer is every file
/// that has it, so a read that found it still leaves the rest to read.
fn asks_about_every_file(question: &str) -> bool {
    lowercase_words(question).windows(2).any(|pair| {
        let (first, second) = (pair[0].as_str(), pair[1].as_str());
        matches!(first, "which" | "what" | "all" | "every" | "each" | "many") && second == "files"
            || matches!(first, "every" | "each") && second == "file"
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::test_wrap::wrap;

    /// [`search_note`] with its [`Searching`] spelled out.
    fn note_with(
        question: &str,
        path: &str,
        content: &str,
        unread: Option<usize>,
        may_earn: bool,
        nowhere: &[&str],
        driver_searched: bool,
    ) -> Option<Looked> {
        let searching = Searching {
            unread,
            may_earn,
            nowhere,
            driver_searched,
        };
        search_note(question, path, content, &searching)
    }

    fn note(question: &str, body: &str, unread: Option<usize>) -> Option<Looked> {
        note_with(question, "notes.txt", &wrap(body), unread, true, &[], false)
    }

    #[test]
    fn a_word_the_search_found_nowhere_ends_the_search_as_its_finding() {
        let appointments =
            wrap("pet,species,reason\nMittens,cat,dental check\nLuna,cat,vaccination\n");
        let question = "How much does it cost to neuter a cat?";
        let ended = note_with(
            question,
            "appointments.csv",
            &appointments,
            Some(2),
            false,
            &["neuter"],
            true,
        )
        .expect("a note");
        assert!(ended.found && !ended.earns_a_read, "{ended:?}");
        assert_eq!(
            ended.note,
            "(Searched by the program: the question's word \"neuter\" is in no file of the workspace.)"
        );
        // Not found by the search nowhere: another file may have it.
        let looking = note_with(
            question,
            "appointments.csv",
            &appointments,
            Some(2),
            true,
            &[],
            true,
        )
        .expect("a note");
        assert!(!looking.found, "{looking:?}");
        assert!(
            looking.note.contains("\"neuter\" is not in this file"),
            "{looking:?}"
        );
    }

    #[test]
    fn a_compound_found_nowhere_is_the_thing_asked_and_a_missing_kind_is_not() {
        let prices = wrap("item,size,price_gbp\nrye loaf,small,3.40\nsourdough,large,4.90\n");
        let found = |question: &str, nowhere: &[&str]| {
            note_with(
                question,
                "prices.csv",
                &prices,
                Some(1),
                false,
                nowhere,
                true,
            )
            .expect("a note")
        };
        // "gluten-free" was searched and found nowhere: "gluten" is too.
        let gluten = found("How much is your gluten-free loaf?", &["gluten-free"]);
        assert!(gluten.found, "{gluten:?}");
        assert!(gluten.asks_what_is_nowhere(), "{gluten:?}");
        assert_eq!(gluten.nowhere, ["gluten"]);
        assert!(
            gluten.note.contains("in no file of the workspace"),
            "{gluten:?}"
        );
        // The last word of the thing asked, missing alone, is only what
        // kind of thing: the file may still have it.
        let bread = found("How much is the sourdough bread?", &["bread"]);
        assert!(!bread.asks_what_is_nowhere(), "{bread:?}");
        // Not searched for: not known to be nowhere.
        let unsearched = found("How much is your gluten-free loaf?", &[]);
        assert!(!unsearched.asks_what_is_nowhere(), "{unsearched:?}");
        // Words that say when are in files as dates and times: found
        // nowhere, they are no sign that the thing asked is missing.
        for (question, nowhere) in [
            (
                "Is the rye loaf in on Saturday evening?",
                &["saturday", "evening"][..],
            ),
            (
                "How much is a rye loaf after Christmas?",
                &["christmas"][..],
            ),
        ] {
            let dated = found(question, nowhere);
            assert!(!dated.asks_what_is_nowhere(), "{question}: {dated:?}");
        }
    }

    #[test]
    fn a_missing_number_is_a_miss_however_many_words_are_there() {
        let rota = "# On-call rota\nweek_16: Owen\nweek_17: Sam";
        let looked = note("Who is on call in week 18?", rota, Some(2)).expect("a note");
        assert!(!looked.found && looked.earns_a_read, "{looked:?}");
        assert!(
            looked.note.contains("\"18\" is not in this file"),
            "{looked:?}"
        );
        let found = note("Who is on call in week 17?", rota, Some(2)).expect("a note");
        assert!(found.found, "{found:?}");
    }

    #[test]
    fn a_file_without_the_words_is_a_miss_that_earns_a_read() {
        let looked = note(
            "Find the launch code name somewhere in your workspace.",
            "name,role\nAna,designer",
            Some(2),
        );
        assert_eq!(
            looked,
            Some(Looked {
                note: "(Searched by the program: the question's words \"launch\" and \"code\" are not in this file; 2 files are not read yet.)".into(),
                earns_a_read: true,
                found: false,
                had_words: false,
                every_file: false,
nowhere: Vec::new(),
                    })
        );
    }

    #[test]
    fn a_file_with_both_things_compared_is_a_find() {
        let sessions = "## Kielder\nSQM: 21.7\n## Elan Valley\nSQM: 21.4";
        let ask = "Which of our dark-sky trips had the darker sky, Kielder or the Elan Valley one?";
        let looked = note(ask, sessions, Some(3)).expect("a note");
        assert!(looked.found && !looked.earns_a_read, "{looked:?}");
        assert!(
            looked
                .note
                .contains("\"kielder\" and \"elan\" are in this file"),
            "{looked:?}"
        );
        // One of the two missing: read on.
        let one = note(ask, "## Kielder\nSQM: 21.7", Some(3)).expect("a note");
        assert!(!one.found && one.earns_a_read, "{one:?}");
        assert_eq!(named_choices("Did Ben or Ana pay more?"), ["ben", "ana"]);
        assert!(named_choices("Is it red or blue?").is_empty());
    }

    #[test]
    fn a_file_listing_the_counted_thing_is_a_find_unless_a_name_is_missing() {
        let members = "name,part\nRuth,soprano\nAnna,soprano\nFiona,alto";
        let looked = note(
            "How many sopranos are there in the choir?",
            members,
            Some(3),
        )
        .expect("a note");
        assert!(looked.found && looked.had_words, "{looked:?}");
        assert!(
            looked.note.contains("\"sopranos\" is in this file"),
            "{looked:?}"
        );
        // A measure of the thing counted is not the thing.
        let stock = "item,category,quantity\nBaked beans,tins,64\nPeas,tins,46";
        let sweetcorn = note(
            "How many tins of sweetcorn do we have in stock?",
            stock,
            Some(3),
        )
        .expect("a note");
        assert!(!sweetcorn.found && sweetcorn.earns_a_read, "{sweetcorn:?}");
        let tickets = "id,owner\n1,Ben\n2,Ana";
        let rita = note("How many tickets does Rita have open?", tickets, Some(3)).expect("a note");
        assert!(!rita.found && rita.earns_a_read, "{rita:?}");
    }

    #[test]
    fn all_but_one_of_three_words_is_a_find() {
        let looked = note(
            "When is the museum trip? The date is in one of the files.",
            "School trip to the science museum on 14 May.",
            Some(2),
        )
        .expect("a note");
        assert_eq!(
            looked.note,
            "(Searched by the program: the question's words \"museum\" and \"trip\" are in this file, but not \"date\".)"
        );
        assert!(looked.found && looked.had_words && !looked.earns_a_read);
        // Two words of two, one missing: a miss.
        let looked =
            note("Find the launch code.", "code review on Monday", Some(2)).expect("a note");
        assert!(!looked.found && looked.earns_a_read);
    }

    #[test]
    fn a_file_with_the_words_ends_the_search() {
        let looked = note(
            "Somewhere in your workspace it says who the new lab manager is. Who?",
            "Lab memo\nThe new lab manager is Priya Nair.",
            Some(3),
        );
        assert_eq!(
            looked,
            Some(Looked {
                note: "(Searched by the program: the question's words \"new\", \"lab\" and \"manager\" are in this file.)".into(),
                earns_a_read: false,
                found: true,
                had_words: true,
                every_file: false,
nowhere: Vec::new(),
                    })
        );
    }

    #[test]
    fn every_file_is_searched_when_the_question_asks_which_files() {
        let q = "Which files in your workspace mention max_connections?";
        let looked = note(q, "host = a\nmax_connections = 100", Some(3));
        assert_eq!(
            looked,
            Some(Looked {
                note: "(Searched by the program: the question's word \"max_connections\" is in this file; 3 files are not read yet.)".into(),
                earns_a_read: true,
                found: false,
                had_words: true,
                every_file: true,
nowhere: Vec::new(),
                    })
        );
        let last = note(q, "host = b", Some(0)).map(|l| (l.note, l.earns_a_read));
        assert_eq!(
            last,
            Some((
                "(Searched by the program: the question's word \"max_connections\" is not in this file; every file has been read.)".into(),
                false
            ))
        );
    }

    #[test]
    fn a_word_of_the_files_name_is_in_the_file() {
        let hikes =
            "date,trail,elevation_gain_m\n2025-04-06,Ridge Loop,820\n2025-06-01,Falcon Crag,1240";
        let q = "Which club hike has the most elevation gain?";
        let looked =
            note_with(q, "hikes.csv", &wrap(hikes), Some(3), true, &[], false).expect("a note");
        assert!(
            looked.note.contains("\"club\" is not in this file"),
            "{looked:?}"
        );
        let other =
            note_with(q, "notes.txt", &wrap(hikes), Some(3), true, &[], false).expect("a note");
        assert!(!other.found, "{other:?}");
        // "club", in no file, only says which hikes: the file is the one.
        let club = note_with(
            q,
            "hikes.csv",
            &wrap(hikes),
            Some(3),
            true,
            &["club"],
            false,
        )
        .expect("a note");
        assert!(club.found, "{club:?}");
        // Without the driver's word that no file has it, a miss.
        let unsearched =
            note_with(q, "hikes.csv", &wrap(hikes), Some(3), true, &[], false).expect("a note");
        assert!(!unsearched.found, "{unsearched:?}");
    }

    #[test]
    fn a_terse_question_is_about_the_words_the_driver_searched() {
        let fares = "| Vehicle | Single | Return |\n|---|---|---|\n| Car | 24.00 | 42.00 |\n";
        let looked = note_with(
            "car return fare?",
            "fares.md",
            &wrap(fares),
            Some(3),
            true,
            &[],
            true,
        )
        .expect("a note");
        assert!(looked.found, "{}", looked.note);
        assert_eq!(
            looked.note,
            "(Searched by the program: the question's words \"return\", \"fare\" and \"car\" are in this file.)"
        );
        // A word missing claims nothing: no note, as before.
        assert!(
            note_with(
                "when did 0.5.0 ship?",
                "CHANGELOG.md",
                &wrap("## 0.5.0 - released 2024-04-19"),
                Some(3),
                true,
                &[],
                true
            )
            .is_none()
        );
        // Not searched by the driver: no words, no note.
        assert!(
            note_with(
                "car return fare?",
                "fares.md",
                &wrap(fares),
                Some(3),
                true,
                &[],
                false
            )
            .is_none()
        );
    }

    #[test]
    fn a_search_out_of_calls_says_it_stops() {
        let looked = note_with(
            "Where is the harbor password?",
            "notes.txt",
            &wrap("nothing"),
            Some(3),
            false,
            &[],
            false,
        );
        assert_eq!(
            looked.map(|l| (l.note, l.earns_a_read)),
            Some((
                "(Searched by the program: the question's words \"harbor\" and \"password\" are not in this file; the search stops here.)".into(),
                false
            ))
        );
    }

    #[test]
    fn a_number_is_looked_for() {
        let looked = note(
            "Which file in your workspace mentions port 8088?",
            "port 8080",
            None,
        );
        assert_eq!(
            looked.map(|l| l.note),
            Some(
                "(Searched by the program: the question's word \"8088\" is not in this file.)"
                    .into()
            )
        );
    }

    #[test]
    fn questions_without_words_get_no_note_and_a_count_of_files_reads_them_all() {
        let looked = note("How many files mention Lisbon?", "Lisbon", Some(2));
        assert!(looked.is_some_and(|l| l.every_file && l.earns_a_read && !l.found));
        assert_eq!(
            note("What files are in your workspace?", "x", Some(2)),
            None
        );
    }

    proptest::proptest! {
        /// Whatever the file holds, the note is the program's fixed words
        /// around words of the question and a count.
        #[test]
        fn the_note_carries_only_the_questions_words(
            body in "[a-z0-9 ,.<>/_\n]{0,200}",
            question in "(which|the|of|mentions|files|[a-z_0-9]{3,8})( (which|the|of|mentions|files|[a-z_0-9]{3,8})){0,8}",
            unread in proptest::option::of(0usize..6),
        ) {
            if let Some(looked) = note_with(&question, "notes.txt", &wrap(&body), unread, true, &[], false) {
                let mut quoted = looked.note.split('"');
                let fixed = quoted.next().unwrap_or_default();
                proptest::prop_assert!(
                    ["(Searched by the program: the question's word ", "(Searched by the program: the question's words "].contains(&fixed),
                    "{fixed:?}"
                );
                for (i, part) in quoted.enumerate() {
                    if i % 2 == 0 {
                        proptest::prop_assert!(question.split(' ').any(|w| w == part), "{part:?} not a word of {question:?}");
                    } else {
                        let tail = part
                            .trim_start_matches(" is")
                            .trim_start_matches(" are")
                            .trim_start_matches(" not");
                        let counted = tail.trim_start_matches(" in this file")
                            .trim_start_matches("; ")
                            .trim_start_matches(|c: char| c.is_ascii_digit());
                        proptest::prop_assert!(
                            [" and ", ", ", " in this file, but not "].contains(&part)
                                || [".)", " files are not read yet.)", " file is not read yet.)", "every file has been read.)"].contains(&counted),
                            "{part:?}"
                        );
                    }
                }
            }
        }
    }
}
