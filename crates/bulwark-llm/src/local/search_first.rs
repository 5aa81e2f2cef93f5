//! Which file a question is about when it names none and no file's name
//! fits it: the program searches the workspace for the question's most
//! telling words (identifiers and names, then the longest words) and
//! reads the file whose found words are rarest across the workspace.
//!
//! Why: asked "which doctor is seeing Rufus?" or "what's Sofia's
//! rating?", the 1.5B model read the files whose names it liked
//! (`logs/phone.log`, `README.md`, `club.ini`...) and never the one with
//! the row (`appointments.csv`, `members.csv`); on two blind task sets,
//! 11 of 21 failures were such wrong reads. A file's name rarely says
//! what is in it; a search does.
//!
//! Both calls go through the door like any other: the search tool is the
//! session's own (a session without it is steered as before), and the
//! read is one of the session's readable paths. The searches are the
//! driver's, not the model's: they do not count against the call budget
//! (`Spent`), the model's grammar and prompt do not offer the search
//! tool ([`offered_tools`]), and the model sees which files have each
//! word, never their lines ([`SearchSummaries`]).

use super::output::Call;
use super::question_words::question_tokens;
use super::question_words::{is_file_type_word, is_function_word};
use super::steering::{
    is_path_word, named_by_type, names_file, question_and_whether_called, read_call, reader,
};
use crate::{ChatRequest, PathChoices, PathKind};

/// At most this many words are searched for one question, all in one
/// turn: one word alone often was the wrong one ("repair" in a bike
/// shop's every file, or a name its archive holds more often than the
/// members' table does).
pub(crate) const MAX_SEARCHES: usize = 4;

/// Words a question uses for the workspace itself, never worth a search.
const WORKSPACE_WORDS: &[&str] = &[
    "file",
    "files",
    "folder",
    "folders",
    "workspace",
    "directory",
    "project",
    "document",
    "documents",
    "list",
    "listing",
    "contents",
    "repo",
    "repository",
    "here",
    "everything",
];

/// The session's search tool: one whose arguments are a `query` and a
/// read-only directory to search under. Its name.
pub(crate) fn searcher(request: &ChatRequest) -> Option<&str> {
    request.tools.iter().find_map(|tool| {
        let props = tool
            .input_schema
            .get("properties")
            .and_then(serde_json::Value::as_object)?;
        let under_directory = request
            .paths
            .arguments
            .iter()
            .any(|c| c.tool == tool.name && c.kind == PathKind::Directory && c.reads_only);
        (props.contains_key("query") && under_directory).then_some(tool.name.as_str())
    })
}

/// The tools the model is offered: the request's, without the search
/// tool, which is the driver's alone. The prompt lists these and the
/// grammar allows only these, so the two cannot disagree.
pub(crate) fn offered_tools(request: &ChatRequest) -> Vec<&crate::ToolDef> {
    let searcher = searcher(request);
    request
        .tools
        .iter()
        .filter(|t| Some(t.name.as_str()) != searcher)
        .collect()
}

/// The words worth a search, best first: the question's identifiers
/// ("HD-303", "10K") and names ("Rufus") in order, then its other words
/// of four letters or more that carry a subject, from the longest, each
/// without a plural's ending (the search matches substrings, ignoring
/// case). Not the phrase-bound words of the notes (`subject_words`): a
/// search weighs every word by how few files have it, so a verb costs
/// little, while a missed noun ("e-bike", "appt") costs the file.
pub(crate) fn search_words(question: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let push = |words: &mut Vec<String>, word: String| {
        if !words.contains(&word) {
            words.push(word);
        }
    };
    let raw: Vec<&str> = question
        .split_whitespace()
        .filter(|w| !is_path_word(w))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .map(|w| {
            w.strip_suffix("'s")
                .or_else(|| w.strip_suffix("\u{2019}s"))
                .unwrap_or(w)
        })
        .filter(|w| !w.is_empty())
        .collect();
    let raw = without_when_words(raw);
    // A date in words ("the 18th of March") is searched as the files
    // keep it (`2024-03-18`); its day ("18th") is in none of them.
    let dates = super::dates::asked_dates(question);
    let day_first =
        |date: &super::dates::MonthDay| date.day.map(|day| format!("{day:02}/{:02}", date.month));
    for date in &dates {
        if let Some(fragment) = super::dates::iso_fragment(date) {
            push(&mut words, fragment);
        }
        // One date: also as a day-first sheet keeps it ("10/03/2025" for
        // March 10th); searched as ISO alone, the order's row was not
        // found. Two or more: after the other words (below), or their
        // forms would crowd the names out of the searches made.
        if let (Some(form), [_]) = (day_first(date), dates.as_slice()) {
            push(&mut words, form);
        }
    }
    let day_words = super::dates::day_words(question);
    for word in &raw {
        let digits = word.chars().any(|c| c.is_ascii_digit());
        if day_words.contains(&word.to_lowercase()) {
            continue;
        }
        if digits && word.chars().any(char::is_alphabetic) {
            push(&mut words, word.to_lowercase());
        }
        // A time ("the 10:15", "7:15") names a sailing, a slot, a shift;
        // searched without the hour's zero it finds "07:15" too.
        if let Some(time) = super::dates::clock_time(word) {
            push(&mut words, time);
        }
    }
    for token in question_tokens(question).iter().filter(|t| t.is_name()) {
        if let Some(text) = token.text.filter(|t| t.chars().count() >= 2) {
            let lower = text.to_lowercase();
            // A part of an identifier already searched ("HD" of "HD-303").
            if !words.iter().any(|w| w.contains(lower.as_str())) {
                push(&mut words, lower);
            }
        }
    }
    let mut others: Vec<String> = Vec::new();
    for word in &raw {
        let lower = word.to_lowercase();
        let parts: Vec<String> = if lower.contains('-') {
            vec![lower.clone()]
        } else {
            super::mentions::lowercase_words(&lower)
        };
        for part in parts {
            let worth = part.chars().count() >= 4
                && !part.chars().any(|c| c.is_ascii_digit())
                && !is_function_word(&part)
                && !is_file_type_word(&part)
                && !WORKSPACE_WORDS.contains(&part.as_str());
            if worth && !others.contains(&part) {
                others.push(part);
            }
        }
    }
    // The longest first; `sort_by_key` is stable, so ties keep their order.
    others.sort_by_key(|w| std::cmp::Reverse(w.chars().count()));
    for word in others {
        push(&mut words, search_stem(&word).to_owned());
    }
    for form in dates.iter().filter_map(day_first) {
        push(&mut words, form);
    }
    // Then the short words, if there is room: a terse question's column
    // ("ash warden *hp*?") or half of a name ("*ash* warden").
    for word in &raw {
        let lower = word.to_lowercase();
        let short = (2..=3).contains(&lower.chars().count())
            && lower.chars().all(char::is_alphabetic)
            && !is_function_word(&lower)
            && !super::question_words::COMMON_VERBS.contains(&lower.as_str())
            && !SHORT_COMMON_WORDS.contains(&lower.as_str());
        if short {
            push(&mut words, lower);
        }
    }
    words
}

/// `words` without those that say when, not what: "*these days*",
/// "*right* now", "at the *moment*", "*this season*", "*last year*";
/// nor a word the question rules out ("no *trailer*", "without a
/// *dog*").
/// Why: searched, "day" (of "these days") began a word of one file
/// alone, the schedule's header `| Day |`, and outweighed "fm", found in
/// two: the station's frequency was read off the schedule. "Season"
/// found the README that says which file is this season's, not the
/// harvest rows. Which edition is now is `editions.rs`'s to say.
fn without_when_words(words: Vec<&str>) -> Vec<&str> {
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let at = |i: usize| lower.get(i).map(String::as_str);
    words
        .iter()
        .enumerate()
        .filter(|&(i, _)| {
            let before = i.checked_sub(1).and_then(&at);
            // "It'll just be me, *no trailer*": the one thing not asked
            // about. Searched first, it chose the trailer's fare.
            // "Which rooms *have no projector*?" asks about it: kept.
            let negator = |n: usize| {
                let owned = matches!(
                    n.checked_sub(1).and_then(&at),
                    Some("have" | "has" | "had" | "with" | "got" | "are" | "is" | "there")
                );
                matches!(
                    at(n),
                    Some("no" | "not" | "without" | "except" | "excluding")
                ) && !owned
            };
            let negated = i >= 1 && negator(i - 1)
                || i >= 2 && matches!(before, Some("a" | "an" | "the")) && negator(i - 2);
            if negated {
                return false;
            }
            let when = match lower[i].as_str() {
                "days" => matches!(before, Some("these" | "those")),
                "right" => at(i + 1) == Some("now"),
                "moment" => matches!(before, Some("the")),
                "nowadays" | "currently" | "presently" => true,
                // "When does *next term* start?" asks about the term.
                period => {
                    let subject = matches!(
                        i.checked_sub(2).and_then(&at),
                        Some("does" | "do" | "did" | "is" | "will" | "when")
                    ) || matches!(
                        at(i + 1),
                        Some("start" | "starts" | "begin" | "begins" | "end" | "ends" | "finish")
                    );
                    PERIODS.contains(&period)
                        && matches!(before, Some("this" | "last" | "next" | "these" | "that"))
                        && !subject
                }
            };
            !when
        })
        .map(|(_, w)| *w)
        .collect()
}

/// Spans of time a question places itself in ("this *season*").
const PERIODS: &[&str] = &[
    "season", "year", "week", "weekend", "month", "term", "quarter", "semester", "time",
];

/// Short words that say nothing about which file: the grammar of a
/// question (pronouns, prepositions, auxiliaries), its tense, a size, a
/// time of day.
const SHORT_COMMON_WORDS: &[&str] = &[
    "a", "ago", "all", "am", "an", "and", "any", "are", "as", "ask", "at", "be", "big", "bit",
    "but", "by", "can", "day", "did", "do", "due", "etc", "far", "few", "for", "get", "go", "got",
    "had", "has", "he", "her", "him", "his", "how", "i", "if", "in", "is", "it", "its", "let",
    "lot", "may", "me", "my", "new", "no", "nor", "not", "now", "of", "off", "ok", "old", "on",
    "one", "or", "our", "out", "own", "per", "pm", "put", "say", "see", "set", "she", "so", "the",
    "to", "too", "top", "try", "two", "up", "us", "use", "via", "was", "way", "we", "who", "why",
    "yes", "yet", "you",
];

/// `word` without a plural's or a past's ending, so that the search
/// finds every form ("batteries" → "batter", "refreshes" → "refresh",
/// "cached" → "cach", "days" → "day"); a word in `ss`, `us` or `is` is no
/// plural ("chess", "status").
fn search_stem(word: &str) -> &str {
    let long_enough = |s: &&str| s.chars().count() >= 3;
    let past = |s: &&str| s.chars().count() >= 4;
    if let Some(root) = word.strip_suffix("ies").filter(long_enough) {
        return root;
    }
    // Not "-ing": as often a noun ("building") as a verb.
    if let Some(root) = word.strip_suffix("ed").filter(past) {
        return root;
    }
    if let Some(root) = word.strip_suffix("es").filter(|root| {
        long_enough(root)
            && ["s", "x", "z", "ch", "sh"]
                .iter()
                .any(|end| root.ends_with(end))
    }) {
        return root;
    }
    if ["ss", "us", "is"].iter().any(|end| word.ends_with(end)) {
        return word;
    }
    word.strip_suffix('s').filter(long_enough).unwrap_or(word)
}

/// The searches made since the question (query, result text; `None` while
/// unanswered), or `None` when any other call was made since it.
pub(crate) fn searches_since<'a>(
    request: &'a ChatRequest,
    searcher: &str,
) -> Option<Vec<(&'a str, Option<&'a str>)>> {
    let asked = super::latest_question(&request.messages)?;
    // One call may look for several words; each is a search of its own
    // here, sharing the call's result (the lines of each are told apart
    // by their text: `hits_with_text`).
    let mut searches: Vec<(&str, &str, Option<&str>)> = Vec::new();
    for message in &request.messages[asked + 1..] {
        for (id, name, input) in message.tool_uses() {
            if name != searcher {
                return None;
            }
            let queries = queries_of(input);
            if queries.is_empty() {
                return None;
            }
            searches.extend(queries.into_iter().map(|query| (id, query, None)));
        }
        for (id, content) in message.ok_results() {
            for search in searches.iter_mut().filter(|s| s.0 == id) {
                search.2 = Some(content);
            }
        }
    }
    Some(searches.into_iter().map(|(_, q, r)| (q, r)).collect())
}

/// Whether `question` is one a search should pick the file for: it names
/// no file outright, by its type, or by the words of its name, and asks
/// for no listing.
fn names_no_file(question: &str, listed: &[String]) -> bool {
    let named = listed
        .iter()
        .any(|p| names_file(question, p, listed).is_some());
    !named
        && named_by_type(question, listed).is_none()
        && super::file_words::named_by_words(question, listed).is_none()
        && !super::file_words::asks_for_listing(question)
}

/// The searches for a question that names no file: its [`MAX_SEARCHES`]
/// best words ([`search_words`]), all in the first turn. `None` once any
/// call was made for the question.
pub(crate) fn next_search(request: &ChatRequest, paths: &PathChoices) -> Option<Vec<Call>> {
    let searcher = searcher(request)?;
    let (question, called) = question_and_whether_called(request)?;
    let (_, _, listed) = reader(request, paths)?;
    if called
        || !names_no_file(&question, listed)
        || !super::named_paths::unreachable_paths(request).is_empty()
        || !super::named_paths::pending_write(request).is_empty()
    {
        return None;
    }
    let mut words = search_words(&question).into_iter().take(MAX_SEARCHES);
    let first = words.next()?;
    let mut arguments = serde_json::Map::new();
    arguments.insert("query".to_owned(), serde_json::Value::String(first));
    let more: Vec<serde_json::Value> = words.map(serde_json::Value::String).collect();
    if !more.is_empty() && takes_more_queries(request, searcher) {
        arguments.insert(ANY_OF.to_owned(), serde_json::Value::Array(more));
        return Some(vec![(searcher.to_owned(), arguments)]);
    }
    // A search tool of one text at a time: a call for each word.
    let mut calls = vec![(searcher.to_owned(), arguments)];
    for word in more {
        let mut arguments = serde_json::Map::new();
        arguments.insert("query".to_owned(), word);
        calls.push((searcher.to_owned(), arguments));
    }
    Some(calls)
}

/// The search tool's argument for further texts found in the same call
/// (the kernel's `file_search`): one call for all the question's words,
/// where a call for each made four calls in the audit before the read.
const ANY_OF: &str = "any_of";

/// Whether the search tool takes [`ANY_OF`]: another session's search
/// tool may not, and an argument it does not know would fail the call.
fn takes_more_queries(request: &ChatRequest, searcher: &str) -> bool {
    request.tools.iter().any(|tool| {
        tool.name == searcher
            && tool
                .input_schema
                .get("properties")
                .and_then(|p| p.get(ANY_OF))
                .is_some()
    })
}

/// The texts one search call looked for: its query, then its further
/// ones, in order; each is weighed on its own, as the calls of a search
/// tool without [`ANY_OF`] are.
fn queries_of(input: &serde_json::Value) -> Vec<&str> {
    let mut queries: Vec<&str> = input
        .get("query")
        .and_then(serde_json::Value::as_str)
        .into_iter()
        .collect();
    if let Some(more) = input.get(ANY_OF).and_then(serde_json::Value::as_array) {
        queries.extend(more.iter().filter_map(serde_json::Value::as_str));
    }
    queries
}

/// After the searches of [`next_search`], the read of the listed file
/// they point to: the one whose words are rarest across the workspace
/// (each word found counts one over the number of files it is in), then
/// the one with more matching lines, then the first found. `None` when no
/// search found anything: the model looks on as before.
pub(crate) fn searched_read(
    request: &ChatRequest,
    paths: &PathChoices,
    max_calls: usize,
) -> Option<Vec<Call>> {
    if max_calls == 0 {
        return None;
    }
    let searcher = searcher(request)?;
    let (tool, argument, all_listed) = reader(request, paths)?;
    let searches = searches_since(request, searcher)?;
    let (question, _) = question_and_whether_called(request)?;
    // An older edition of a listed file is not read for a question about
    // now: its lines count for nothing (`editions::superseded`).
    let current: Vec<String> = all_listed
        .iter()
        .filter(|p| !super::editions::superseded(p, all_listed, &question))
        .cloned()
        .collect();
    let listed = current.as_slice();
    let counted = super::counted::counted_thing(&question);
    let mut scores: Vec<(&str, f64, usize)> = Vec::new();
    for (query, result) in &searches {
        let mut hits = hit_files((*result)?, query, listed);
        // A file whose name has the word has it too ("members" for
        // `members.csv`, whose rows never say "member").
        for path in listed {
            let named = begins_a_word(&path.to_lowercase(), &query.to_lowercase());
            if named && !hits.iter().any(|(p, _)| p == path) {
                hits.push((path.as_str(), 1));
            }
        }
        let weight = 1.0 / hits.len().max(1) as f64;
        // The thing a count counts is counted where it is listed: the
        // file with the most lines of "soprano" is the members' table,
        // not the one other file that says "choir", however rare.
        // A table whose header names it lists it a row at a time: then
        // the tables' columns decide (`named_columns`), not the lines.
        let in_a_header = hit_lines((*result)?, query, listed)
            .iter()
            .any(|(path, line)| *line == "1" && path.to_lowercase().ends_with(".csv"));
        let listing_most = counted
            .as_deref()
            .filter(|noun| noun.starts_with(&query.to_lowercase()) && !in_a_header)
            .and_then(|_| most_lines(&hits));
        for (path, lines) in hits {
            let weight = if listing_most == Some(path) {
                1.0
            } else {
                weight
            };
            match scores.iter_mut().find(|(p, _, _)| *p == path) {
                Some((_, score, n)) => {
                    *score += weight;
                    *n += lines;
                }
                None => scores.push((path, weight, lines)),
            }
        }
    }
    // Equal scores: the file with more searches on one line, then the
    // one with more of them giving the kind of answer asked, then the one
    // with more lines found, then the later edition (`editions.rs`).
    let together = most_searches_on_one_line(&searches, listed);
    let on_one_line = |path: &str| {
        together
            .iter()
            .find(|(p, _)| *p == path)
            .map_or(0, |(_, n)| *n)
    };
    let of_the_kind = lines_of_the_asked_kind(&searches, listed, &question);
    let kind_lines = |path: &str| {
        of_the_kind
            .iter()
            .find(|(p, _)| *p == path)
            .map_or(0, |(_, n)| *n)
    };
    let columns = named_columns(&searches, listed, &question);
    let columns_of = |path: &str| {
        columns
            .iter()
            .find(|(p, _)| *p == path)
            .map_or((0, 0), |(_, n)| *n)
    };
    let mut best: Option<(&str, f64, usize)> = None;
    for candidate in scores {
        let better = best.is_none_or(|(path, score, lines)| {
            let (named, their_named) = (columns_of(candidate.0), columns_of(path));
            if (candidate.1 - score).abs() <= 1e-9 && named != their_named {
                return named > their_named;
            }
            let tied = (candidate.1 - score).abs() <= 1e-9;
            let (mine, theirs) = (on_one_line(candidate.0), on_one_line(path));
            let (kind, their_kind) = (kind_lines(candidate.0), kind_lines(path));
            let same_lines = tied && mine == theirs && kind == their_kind;
            candidate.1 > score + 1e-9
                || tied && mine > theirs
                || tied && mine == theirs && kind > their_kind
                || same_lines && candidate.2 > lines
                || same_lines
                    && candidate.2 == lines
                    && super::editions::later_edition(candidate.0, path, &question)
        });
        if better {
            best = Some(candidate);
        }
    }
    let (path, _, _) = best?;
    Some(vec![read_call(tool, argument, path)])
}

/// For each table whose header line a search brought back, how many of
/// the question's words name its columns, whole or in part ("tool" for
/// `tool_id`), and how many of its columns the question names whole: the table
/// whose columns the question names holds its rows. Why: "which of the
/// tools are broken?" found "tool" once in the inventory's header, once
/// in the loans' header and in three lines of the rules; on a tie the
/// most lines won and the rules were read, where the inventory's
/// `tool` and `condition` columns held the answer. "How many tools are
/// still *out*?" names the loans' `out` and `tool_id`.
fn named_columns<'a>(
    searches: &[(&str, Option<&str>)],
    listed: &'a [String],
    question: &str,
) -> Vec<(&'a str, (usize, usize))> {
    let asked: Vec<String> = super::mentions::lowercase_words(question)
        .into_iter()
        .filter(|w| w.chars().count() >= 2)
        .collect::<std::collections::BTreeSet<String>>()
        .into_iter()
        .collect();
    let is = |word: &str, column: &str| word == column || word.strip_suffix('s') == Some(column);
    let is_asked = |column: &str| asked.iter().any(|w| is(w, column));
    let mut named: Vec<(&str, (usize, usize))> = Vec::new();
    for result in searches.iter().filter_map(|(_, r)| *r) {
        for line in result.lines() {
            let Some((path, header)) = listed.iter().find_map(|p| {
                let header = line.strip_prefix(p.as_str())?.strip_prefix(":1:")?;
                p.to_lowercase()
                    .ends_with(".csv")
                    .then_some((p.as_str(), header))
            }) else {
                continue;
            };
            if named.iter().any(|(p, _)| *p == path) {
                continue;
            }
            let columns: Vec<String> = header
                .split(',')
                .map(|c| c.trim().to_lowercase())
                .filter(|c| !c.is_empty())
                .collect();
            let exact = columns.iter().filter(|c| is_asked(c)).count();
            let words = asked
                .iter()
                .filter(|w| {
                    columns.iter().any(|c| {
                        is(w, c)
                            || c.split(['_', '-', ' '])
                                .any(|part| part.chars().count() >= 2 && is(w, part))
                    })
                })
                .count();
            named.push((path, (words, exact)));
        }
    }
    named
}

/// The one file with strictly the most lines found; `None` on a tie.
fn most_lines<'a>(hits: &[(&'a str, usize)]) -> Option<&'a str> {
    let most = hits.iter().map(|(_, n)| *n).max()?;
    let mut at_most = hits.iter().filter(|(_, n)| *n == most);
    let first = at_most.next()?;
    at_most.next().is_none().then_some(first.0)
}

/// The listed files a search result's lines (`path:line: text`) come
/// from, with how many lines each, in the order first seen. A line
/// counts only where `query` begins a word: the search matches inside
/// words too ("port" in "report").
pub(crate) fn hit_files<'a>(
    result: &str,
    query: &str,
    listed: &'a [String],
) -> Vec<(&'a str, usize)> {
    let mut files: Vec<(&str, usize)> = Vec::new();
    for (path, _) in hit_lines(result, query, listed) {
        match files.iter_mut().find(|(p, _)| *p == path) {
            Some((_, n)) => *n += 1,
            None => files.push((path, 1)),
        }
    }
    files
}

/// The lines of a search result that [`hit_files`] counts: each as its
/// listed file and its line number.
fn hit_lines<'a, 'r>(
    result: &'r str,
    query: &str,
    listed: &'a [String],
) -> Vec<(&'a str, &'r str)> {
    hits_with_text(result, query, listed)
        .into_iter()
        .map(|(path, number, _)| (path, number))
        .collect()
}

/// The hits of a search result (`path:line: text`) where `query` begins
/// a word, as (path, line number, text).
fn hits_with_text<'a, 'r>(
    result: &'r str,
    query: &str,
    listed: &'a [String],
) -> Vec<(&'a str, &'r str, &'r str)> {
    let query = query.to_lowercase();
    result
        .lines()
        .filter_map(|line| {
            listed.iter().find_map(|p| {
                let rest = line.strip_prefix(p.as_str())?.strip_prefix(':')?;
                let (number, text) = rest.split_once(':')?;
                (number.chars().all(|c| c.is_ascii_digit())
                    && begins_a_word(&text.to_lowercase(), &query))
                .then_some((p.as_str(), number, text))
            })
        })
        .collect()
}

/// Per file, how many of its hit lines give the kind of answer the
/// question asks for (`answer_kind.rs`): "Ruth - hygienist, Tuesdays and
/// Thursdays" for "what days is the hygienist in?".
fn lines_of_the_asked_kind<'a>(
    searches: &[(&str, Option<&str>)],
    listed: &'a [String],
    question: &str,
) -> Vec<(&'a str, usize)> {
    let Some(kind) = super::answer_kind::asked_kind(question) else {
        return Vec::new();
    };
    let mut files: Vec<(&str, usize)> = Vec::new();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (query, result) in searches {
        let Some(result) = result else { continue };
        for (path, number, text) in hits_with_text(result, query, listed) {
            if seen.contains(&(path, number)) || !kind.is_on(text) {
                continue;
            }
            seen.push((path, number));
            match files.iter_mut().find(|(p, _)| *p == path) {
                Some((_, n)) => *n += 1,
                None => files.push((path, 1)),
            }
        }
    }
    files
}

/// For each file, the most searches that found one of its lines: a line
/// with the asked date *and* the asked name answers; two lines each
/// with one of them seldom do.
fn most_searches_on_one_line<'a>(
    searches: &[(&str, Option<&str>)],
    listed: &'a [String],
) -> Vec<(&'a str, usize)> {
    let mut lines: Vec<((&str, &str), usize)> = Vec::new();
    for (query, result) in searches {
        let Some(result) = result else { continue };
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for hit in hit_lines(result, query, listed) {
            if seen.contains(&hit) {
                continue;
            }
            seen.push(hit);
            match lines.iter_mut().find(|(l, _)| *l == hit) {
                Some((_, n)) => *n += 1,
                None => lines.push((hit, 1)),
            }
        }
    }
    let mut files: Vec<(&str, usize)> = Vec::new();
    for ((path, _), n) in lines {
        match files.iter_mut().find(|(p, _)| *p == path) {
            Some((_, most)) => *most = (*most).max(n),
            None => files.push((path, n)),
        }
    }
    files
}

/// Whether `needle` occurs in `text` where no letter or digit comes
/// right before it; anywhere, for a needle that starts with no letter or
/// digit (a date's `-03-18` inside `2024-03-18`).
fn begins_a_word(text: &str, needle: &str) -> bool {
    if needle.starts_with(|c: char| !c.is_alphanumeric()) {
        return text.contains(needle);
    }
    text.match_indices(needle).any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric)
    })
}

/// How the driver's searches are shown to the model: which files have
/// the word, not the lines. Why: the lines of three searches cost the
/// prompt hundreds of tokens, and a line torn from its table (a CSV row
/// without its header) is no answer; the file is read next. Only the
/// question's word, listed paths and the program's words are written, so
/// nothing a file says reaches the prompt this way.
pub(crate) struct SearchSummaries<'a> {
    /// The texts each search call looked for, by call id.
    queries: Vec<(&'a str, Vec<&'a str>)>,
    listed: &'a [String],
}

impl<'a> SearchSummaries<'a> {
    pub(crate) fn new(request: &'a ChatRequest) -> Self {
        let listed = reader(request, &request.paths).map_or(&[][..], |(_, _, l)| l);
        let queries = searcher(request).map_or_else(Vec::new, |searcher| {
            request
                .messages
                .iter()
                .flat_map(|m| m.tool_uses())
                .filter(|(_, name, _)| *name == searcher)
                .map(|(id, _, input)| (id, queries_of(input)))
                .filter(|(_, queries)| !queries.is_empty())
                .collect()
        });
        Self { queries, listed }
    }

    /// The texts of search `id` that its result (`content`) found in no
    /// listed file, nor in any listed file's name: words the workspace
    /// does not have.
    pub(crate) fn found_nowhere(&self, id: &str, content: &str) -> Vec<&'a str> {
        let Some((_, queries)) = self.queries.iter().find(|(i, _)| *i == id) else {
            return Vec::new();
        };
        queries
            .iter()
            .filter(|query| {
                let lower = query.to_lowercase();
                let named = self
                    .listed
                    .iter()
                    .any(|p| begins_a_word(&p.to_lowercase(), &lower));
                hit_files(content, query, self.listed).is_empty() && !named
            })
            .copied()
            .collect()
    }

    /// The summary of the result of call `id`, `None` when it was no
    /// search of the driver's: a sentence for each text it looked for.
    pub(crate) fn summary(&self, id: &str, content: &str) -> Option<String> {
        let (_, queries) = self.queries.iter().find(|(i, _)| *i == id)?;
        let sentences: Vec<String> = queries
            .iter()
            .map(|query| {
                let files = hit_files(content, query, self.listed);
                let quoted = serde_json::Value::String((*query).to_owned());
                if files.is_empty() {
                    return format!("(Searched by the program: no file has {quoted}.)");
                }
                let found: Vec<String> = files
                    .iter()
                    .map(|(path, lines)| {
                        format!(
                            "{path} ({lines} line{})",
                            if *lines == 1 { "" } else { "s" }
                        )
                    })
                    .collect();
                format!(
                    "(Searched by the program: {quoted} is in {}.)",
                    found.join(", ")
                )
            })
            .collect();
        Some(sentences.join("\n"))
    }
}

#[cfg(test)]
#[path = "search_first_tests.rs"]
mod tests;
