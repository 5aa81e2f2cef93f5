//! A name or code the question asks about that no file has: the answer
//! is that the files do not say, given at once.
//!
//! Why: asked "when was hive H8 last inspected?" in an apiary of hives
//! H1 to H6, the driver's search found "h8" nowhere, read the inspection
//! notes for the question's other words, and the 1.5B model answered with
//! the last inspection of another hive. Shown "no file has "h8"" beside a
//! file, it answered from the file.
//!
//! Only names (a capitalised word inside a sentence: "Redis", "Oliver",
//! "DOI") and codes (a letter then digits: "H8", "INV-0999") count: they
//! name one thing, and across 370 tasks of fifteen sets every one that no
//! file had was asked about something absent. Plain words do not: a file
//! says "delayed" where the question says "late" (a rule on any word was
//! tried and dropped: right on 2 of the 6 questions it fired on). Months,
//! weekdays and holidays are no names ("in February" is found in `2025-02-17`),
//! and a request to write is no lookup.

use super::mentions::lowercase_words;
use super::question_words::question_tokens;
use super::search_first::{hit_files, searcher, searches_since};
use super::steering::reader;
use crate::ChatRequest;

pub(crate) const WEEKDAYS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// The first of the latest question's names and codes that the driver's
/// searches since it found in no file, and that no listed file's name
/// has; None while no such search has come back.
pub(crate) fn absent_name(request: &ChatRequest) -> Option<String> {
    let searcher = searcher(request)?;
    let (_, _, listed) = reader(request, &request.paths)?;
    let at = super::latest_question(&request.messages)?;
    let question = request.messages[at].text();
    if super::named_paths::asks_to_write(&question) {
        return None;
    }
    let names = names_and_codes(&question);
    let searches = searches_since(request, searcher)?;
    // Each query the searches ran, and whether it found a file.
    let found: Vec<(String, bool)> = searches
        .iter()
        .filter_map(|(query, result)| {
            Some((
                query.to_lowercase(),
                !hit_files((*result)?, query, listed).is_empty(),
            ))
        })
        .collect();
    // A name is found when another search found its root: "dobsonians"
    // is nowhere, "dobsonian" in `equipment.csv`.
    let root_found = |name: &str| {
        found
            .iter()
            .any(|(q, hit)| *hit && q.chars().count() >= 4 && name.starts_with(q.as_str()))
    };
    found.iter().find_map(|(query, hit)| {
        let named_by_a_file = listed.iter().any(|p| {
            let path = p.to_lowercase();
            path.contains(query.as_str()) || path.contains(query.trim_end_matches('s'))
        });
        let nowhere = !hit && !named_by_a_file && !root_found(query);
        (nowhere && names.contains(query)).then(|| query.clone())
    })
}

/// The question's names and codes, lowercase.
fn names_and_codes(question: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for token in question_tokens(question).iter().filter(|t| t.is_name()) {
        let Some(text) = token.text else { continue };
        let lower = text.to_lowercase();
        // A day, a month or a holiday is when, not a thing: "after
        // *Christmas*" is in term dates as "Spring term: 12 January".
        let calendar = super::dates::says_when(&lower);
        if lower.chars().count() >= 2 && !calendar && !found.contains(&lower) {
            found.push(lower);
        }
    }
    for raw in question.split_whitespace() {
        let word = raw
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        let starts_with_a_letter = word.chars().next().is_some_and(char::is_alphabetic);
        let has_digits = word.chars().any(|c| c.is_ascii_digit());
        if starts_with_a_letter && has_digits && !found.contains(&word) {
            found.push(word);
        }
    }
    // Parts of a name the search split ("wi-fi" → "wi", "fi") are not
    // searched alone; the whole word is.
    found.retain(|w| !lowercase_words(w).is_empty());
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_are_capitalised_words_and_letter_digit_codes() {
        assert_eq!(names_and_codes("When was hive H8 last inspected?"), ["h8"]);
        assert_eq!(
            names_and_codes("Is Redis used on Mondays in February?"),
            ["redis"]
        );
        assert_eq!(
            names_and_codes("what's in invoice INV-0999?"),
            ["inv", "inv-0999"]
        );
        assert!(names_and_codes("When did the 2nd delivery come?").is_empty());
        assert!(names_and_codes("How many tickets are open?").is_empty());
        assert!(names_and_codes("When do classes start after Christmas?").is_empty());
        assert!(names_and_codes("Is it open on Easter Monday?").is_empty());
    }

    use crate::local::test_requests::*;
    use crate::{Block, Message, PathArgumentChoices, PathKind, Role};
    use serde_json::json;

    /// A session with a search tool over `a.csv` and `notes.txt`, asked
    /// `question`, whose driver searched `query` and got `result`.
    fn searched(question: &str, query: &str, result: &str) -> ChatRequest {
        let mut req = request(vec![
            Message::user_text(question),
            Message {
                role: Role::Assistant,
                blocks: vec![Block::ToolUse {
                    id: "s-0".into(),
                    name: "file_search".into(),
                    input: json!({ "query": query }),
                }],
            },
            Message {
                role: Role::User,
                blocks: vec![Block::ToolResult {
                    tool_use_id: "s-0".into(),
                    content: result.into(),
                    is_error: false,
                    taint: Vec::new(),
                }],
            },
        ]);
        req.tools.push(tool(
            "file_search",
            json!({"type": "object", "properties": {
                "query": {"type": "string"}, "path": {"type": "string"}}}),
        ));
        req.paths.arguments.push(PathArgumentChoices {
            ..listed("file_search", PathKind::Directory, &[""])
        });
        req
    }

    #[test]
    fn a_name_no_file_has_is_answered_at_once() {
        use crate::ToolChoice;
        use crate::local::{TurnKind, turn_kind};
        let missed = searched("When was hive H8 last inspected?", "h8", "(no matches)");
        assert_eq!(absent_name(&missed).as_deref(), Some("h8"));
        assert_eq!(turn_kind(&missed, 2, ToolChoice::Auto), TurnKind::Text);
        let prompt = crate::local::rendered_prompt(&missed, 2);
        assert!(
            prompt.ends_with("(Searched by the program: no file has \"h8\", so the files say nothing about it.) Now answer in plain text, without calling a tool: say that \"h8\" is not mentioned in the files.<|im_end|>\n<|im_start|>assistant\n"),
            "{prompt}"
        );
        // Found, or a plain word, or a request to write: searching goes on.
        let found = searched(
            "When was hive H8 last inspected?",
            "h8",
            "a.csv:3: H8,2025-06-01",
        );
        assert_eq!(absent_name(&found), None);
        let word = searched("How late was the ferry?", "late", "(no matches)");
        assert_eq!(absent_name(&word), None);
        let write = searched("Write H8's dates to out/h8.txt", "h8", "(no matches)");
        assert_eq!(absent_name(&write), None);
        // Its root found: "dobsonians" is nowhere, "dobsonian" is.
        let mut plural = searched("How big are the Dobsonians?", "dobsonians", "(no matches)");
        plural.messages[1].blocks.push(Block::ToolUse {
            id: "s-1".into(),
            name: "file_search".into(),
            input: json!({ "query": "dobsonian" }),
        });
        plural.messages[2].blocks.push(Block::ToolResult {
            tool_use_id: "s-1".into(),
            content: "a.csv:2: T-21,Dobsonian,200".into(),
            is_error: false,
            taint: Vec::new(),
        });
        assert_eq!(absent_name(&plural), None);
        // A file named for it has it.
        let named = searched("What does the Notes file say?", "notes", "(no matches)");
        assert_eq!(absent_name(&named), None);
    }
}
