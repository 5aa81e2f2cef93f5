//! What the program writes after the result of a file read, for the
//! local model, and what those reads do to the call budget:
//!
//! - `shape.rs`: a list's or a table's count, or its checked boxes;
//! - `counted.rs`: the lines or rows a "how many" question narrows to;
//! - `extremes.rs`, `table.rs`: a CSV column's highest or lowest row, and
//!   the rows holding the question's words;
//! - `lines.rs`: in a text file, the lines holding the question's words;
//! - `mentions.rs`: the question's words a named file lacks;
//! - `compare.rs`: two named files side by side;
//! - `search.rs`: for a question that names no file, whether the words
//!   are in this one (a miss earns another call, a find ends the answer);
//! - `enough.rs`: the question's named files are all read, or the listing
//!   it asked for was made, so the next turn is the answer.
//!
//! Each is computed from the conversation's history only, so every turn
//! renders an earlier result with the same notes and the KV cache stays
//! valid.
//!
//! Why the absent-words note only after reads of files the question
//! *names*: after a read the question did not ask for, the 1.5B model
//! took "the question's words are not in this file" as an answer about
//! the file it was asked about, and said no engineer lives in Lagos while
//! the named file lists one. A question that names no file gets the
//! search note instead, which says which file it is about by being the
//! only kind of question it is written for.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::compare::{Read, comparison_note};
use super::enough::answered_after;
use super::extremes::extreme_note;
use super::lines::matching_lines_note;
use super::mentions::mentions_note;
use super::search::{Looked, MAX_EARNED_READS, Searching, search_note};
use super::shape::shape_note;
use super::steering::{names_file, names_some_file, reader};
use super::table::matching_rows_note;
use crate::{Block, ChatRequest, Message, Role};

/// The reads of a request and the comparisons between them.
pub(crate) struct ReadNotes<'a> {
    /// Path read, by the id of the call that read it.
    reads: HashMap<&'a str, &'a str>,
    /// Every path read, whose words are not the question's subject.
    paths: Vec<&'a str>,
    /// The comparison after the second of two named files, by call id.
    compared: HashMap<&'a str, String>,
    /// Two tables' rows joined by a code (`linked_rows.rs`), by call id.
    linked: HashMap<&'a str, String>,
    /// What a read made to look for something found, by call id.
    searched: HashMap<&'a str, Looked>,
    /// The calls after whose result their question has all it needs.
    answered: HashSet<&'a str>,
    /// Every successful read's path and result as wrapped, by call id.
    results: HashMap<&'a str, (&'a str, &'a str)>,
    /// The ids of the calls that listed a directory.
    lists: HashSet<&'a str>,
}

impl<'a> ReadNotes<'a> {
    pub(crate) fn new(request: &'a ChatRequest) -> Self {
        let reads = file_reads(request);
        let (compared, compared_first) = comparisons(request, &reads);
        let listed = reader(request, &request.paths).map(|(_, _, listed)| listed);
        let mut searched = searches(request, &reads, listed);
        // Two files compared are what the question asked about: their
        // search notes ("the question's word "squads" is not in this
        // file; 3 files are not read yet") sent the 1.5B model reading
        // on past the comparison, then answering that no file had them.
        let linked = links(request, &reads);
        for id in compared.keys().chain(&compared_first).chain(linked.keys()) {
            searched.remove(id);
        }
        let answered = answered_after(request, &reads, listed.unwrap_or_default());
        let mut paths: Vec<&str> = reads.values().copied().collect();
        paths.sort_unstable();
        paths.dedup();
        let results = request
            .messages
            .iter()
            .flat_map(|m| read_results(m, &reads))
            .map(|(id, path, content)| (id, (path, content)))
            .collect();
        Self {
            reads,
            paths,
            compared,
            linked,
            searched,
            answered,
            results,
            lists: directory_lists(request),
        }
    }

    /// What the results `message` carries do to the budget: a call earned
    /// per read that looked for the question's words and has more to look
    /// through ([`super::search`]), and whether the question now has all
    /// it needs (a search found it, or [`super::enough`]). Nothing for a
    /// message that asks something: its results, if any, belong to the
    /// question before.
    pub(crate) fn searched_in(&self, message: &Message) -> (usize, bool) {
        if super::asks(message) {
            return (0, false);
        }
        let ids = message.blocks.iter().filter_map(|b| match b {
            Block::ToolResult {
                tool_use_id,
                is_error: false,
                ..
            } => Some(tool_use_id.as_str()),
            _ => None,
        });
        ids.fold((0, false), |(earned, found), id| {
            let looked = self.searched.get(id);
            (
                earned + usize::from(looked.is_some_and(|l| l.earns_a_read)),
                found
                    || looked.is_some_and(|l| l.found)
                    || self.answered.contains(id)
                    || self.compared.contains_key(id),
            )
        })
    }

    /// The question's words that a read in `message` found to be in no
    /// file of the workspace, when they are what it asks about
    /// ([`super::search::Looked::asks_what_is_nowhere`]).
    pub(crate) fn nowhere_in(&self, message: &Message) -> Option<&[String]> {
        message.ok_results().find_map(|(id, _)| {
            self.searched
                .get(id)
                .filter(|looked| looked.asks_what_is_nowhere())
                .map(|looked| looked.nowhere.as_slice())
        })
    }

    /// The asked word that the line a read in `message` picked by a name
    /// lacks, though other lines have it (`lines::picked_lines`): the
    /// answer is that the files do not give it.
    pub(crate) fn lacking_in(&self, message: &Message, question: &str) -> Option<String> {
        message.ok_results().find_map(|(id, content)| {
            let path = self.reads.get(id)?;
            if self.searched.get(id).is_some_and(|l| !l.had_words)
                || matching_rows_note(path, question, content).is_some()
            {
                return None;
            }
            super::lines::picked_lines(path, question, content)?.lacking
        })
    }

    /// Whether a read in `message` weighed two totals under two headings
    /// for `question` (`section_totals.rs`).
    pub(crate) fn weighs_totals(&self, message: &Message, question: &str) -> bool {
        message.ok_results().any(|(id, content)| {
            self.reads.get(id).is_some_and(|path| {
                super::section_totals::section_totals_note(path, question, content).is_some()
            })
        })
    }

    /// Whether `question` asks for a time of day, the last of `since` (the
    /// messages since the question) brings back a file, and no file read
    /// since the question gives a time (`time_asked.rs`). Why all of
    /// them: the schedule read first had "10:00-12:00"; the jingle read
    /// after it had none, and the note told the model no file gave one.
    pub(crate) fn give_no_time<'b>(&self, since: &'b [Message], question: &str) -> bool {
        let reads = |message: &'b Message| {
            message
                .ok_results()
                .filter(|(id, _)| self.reads.contains_key(id))
                .collect::<Vec<_>>()
        };
        let Some(latest) = since.last() else {
            return false;
        };
        !reads(latest).is_empty()
            && super::time_asked::asks_for_a_time(question)
            && since
                .iter()
                .flat_map(reads)
                .all(|(_, content)| !super::time_asked::has_a_time(content))
    }

    /// How the result of call `id` is shown when it lists a directory
    /// ([`super::listing`]); None for any other call, and for a listing of
    /// a format the rewrite does not know.
    pub(crate) fn listing(&self, id: &str, content: &str) -> Option<String> {
        self.lists
            .contains(id)
            .then(|| super::listing::readable_listing(content))
            .flatten()
    }

    /// The notes after a successful result of call `id` (empty when the
    /// call was no file read), each on its own line, for `question` (the
    /// user's text the call answers).
    pub(crate) fn after(&self, id: &str, question: &str, content: &str) -> String {
        if self.lists.contains(id) {
            return super::listing::kind_note(question, content).unwrap_or_default();
        }
        let Some(&path) = self.reads.get(id) else {
            return String::new();
        };
        let named = names_file(question, path, &[]).is_some();
        // A file a search found the question's words missing from is not
        // the one asked about: its counts and rows would be read as the
        // answer (a loan list's "2 not checked off" for a late fee).
        let searched = self.searched.get(id);
        let asked_about = searched.is_none_or(|l| l.had_words);
        let rows = asked_about
            .then(|| matching_rows_note(path, question, content))
            .flatten();
        // A Markdown table's rows picked, its lines are not picked again.
        let lines = (asked_about && rows.is_none())
            .then(|| matching_lines_note(path, question, content))
            .flatten();
        let notes = [
            asked_about
                .then(|| shape_note(path, question, content))
                .flatten(),
            asked_about
                .then(|| extreme_note(path, question, content))
                .flatten(),
            rows,
            self.linked.get(id).cloned(),
            lines,
            asked_about
                .then(|| super::section_totals::section_totals_note(path, question, content))
                .flatten(),
            named
                .then(|| {
                    let table = super::table::Table::of(path, content).is_some();
                    // A word another file the question names has is not
                    // missing: "is Chloe on the rota the day the vet
                    // comes?" finds Chloe in one file, the vet in the
                    // other.
                    let others: Vec<&str> = self
                        .results
                        .values()
                        .filter(|(other, _)| {
                            *other != path && names_file(question, other, &[]).is_some()
                        })
                        .map(|(_, content)| *content)
                        .collect();
                    mentions_note(question, &self.paths, content, &others, table)
                })
                .flatten(),
            self.compared.get(id).cloned(),
            super::time_asked::no_time_note(question, content).map(str::to_owned),
            searched.map(|l| l.note.clone()),
        ];
        notes
            .into_iter()
            .flatten()
            .map(|n| format!("\n{n}"))
            .collect()
    }
}

/// The first join of two tables' rows by a code for each question
/// (`linked_rows.rs`), after the read that makes it, by call id.
fn links<'a>(
    request: &'a ChatRequest,
    reads: &HashMap<&'a str, &'a str>,
) -> HashMap<&'a str, String> {
    let mut notes = HashMap::new();
    let mut question = String::new();
    let mut earlier: Vec<(&str, &str)> = Vec::new();
    let mut linked = false;
    for message in request.messages.iter().filter(|m| m.role == Role::User) {
        for (id, path, content) in read_results(message, reads) {
            if !linked
                && let Some(note) =
                    super::linked_rows::linked_rows_note(&question, (path, content), &earlier)
            {
                notes.insert(id, note);
                linked = true;
            }
            earlier.push((path, content));
        }
        let text = message.text();
        if !text.is_empty() {
            question = text;
            earlier.clear();
            linked = false;
        }
    }
    notes
}

/// The ids of the calls that read one file (a read-only tool's file
/// argument, as the request's path choices describe it). Their results
/// get the program's notes.
fn file_reads(request: &ChatRequest) -> HashMap<&str, &str> {
    let mut reads = HashMap::new();
    for message in &request.messages {
        for (id, name, input) in message.tool_uses() {
            let reads_a_file = request
                .paths
                .for_tool(name)
                .filter(|a| a.reads_only && a.kind == crate::PathKind::File)
                .find_map(|a| input.get(&a.argument).and_then(Value::as_str));
            if let Some(path) = reads_a_file {
                reads.insert(id, path);
            }
        }
    }
    reads
}

/// The ids of the calls that list a directory (a read-only tool's
/// directory argument, as the request's path choices describe it).
fn directory_lists(request: &ChatRequest) -> HashSet<&str> {
    let mut lists = HashSet::new();
    for message in &request.messages {
        for (id, name, _) in message.tool_uses() {
            let lists_a_directory = request
                .paths
                .for_tool(name)
                .any(|a| a.reads_only && a.kind == crate::PathKind::Directory);
            if lists_a_directory {
                lists.insert(id);
            }
        }
    }
    lists
}

/// The successful results of file reads that `message` carries: the
/// call's id, the path read, and the result as the kernel wrapped it.
fn read_results<'a>(
    message: &'a Message,
    reads: &HashMap<&'a str, &'a str>,
) -> impl Iterator<Item = (&'a str, &'a str, &'a str)> {
    message.blocks.iter().filter_map(|block| match block {
        Block::ToolResult {
            tool_use_id,
            content,
            is_error: false,
            ..
        } => reads
            .get(tool_use_id.as_str())
            .map(|&path| (tool_use_id.as_str(), path, content.as_str())),
        _ => None,
    })
}

/// The program's comparison ([`comparison_note`]) for the second of two
/// different files read for one question that names both, by the id of
/// the call that read the second. Only from the history, so every turn
/// renders it the same way.
fn comparisons<'a>(
    request: &'a ChatRequest,
    reads: &HashMap<&'a str, &'a str>,
) -> (HashMap<&'a str, String>, Vec<&'a str>) {
    let mut notes = HashMap::new();
    let mut firsts = Vec::new();
    let mut question = String::new();
    let mut read: Vec<(&'a str, Read<'a>)> = Vec::new();
    let folders = super::folder_files::folders(&request.paths);
    let listed = reader(request, &request.paths).map_or(&[][..], |(_, _, listed)| listed);
    for message in request.messages.iter().filter(|m| m.role == Role::User) {
        for (id, path, content) in read_results(message, reads) {
            let this = Read {
                path,
                wrapped: content,
            };
            if let [(first_id, first)] = read.as_slice() {
                let named = |p: &str| super::steering::names_file(&question, p, &[]).is_some();
                // Two files of the folder a comparing question names
                // ("which of the quotes is cheaper?").
                let in_folder = |p: &str| {
                    super::folder_files::compares(&question)
                        && super::folder_files::in_named_folder(&question, p, &folders)
                };
                // The two a question weighs by words of their names, or
                // as two editions (`choice_files.rs`).
                let weighed = || {
                    super::choice_files::weighed_files(&question, listed).is_some_and(|(a, b)| {
                        [a, b] == [first.path, path] || [b, a] == [first.path, path]
                    })
                };
                if first.path != path
                    && (named(first.path) && named(path)
                        || weighed()
                        || asks_across_files(&question)
                        || in_folder(first.path) && in_folder(path))
                    && let Some(note) = comparison_note(&question, *first, this)
                {
                    notes.insert(id, note);
                    firsts.push(*first_id);
                }
            }
            read.push((id, this));
        }
        let text = message.text();
        if !text.is_empty() {
            question = text;
            read.clear();
        }
    }
    (notes, firsts)
}

/// Whether `question` asks what two things share or where they differ
/// ("which player is in *both* squads", "gave in February *but not* in
/// January", "what do they have *in common*"): the first two files read
/// for it are compared, named or not. Without the comparison the 1.5B
/// model, both squads in front of it, said no player was in both.
fn asks_across_files(question: &str) -> bool {
    let words = super::mentions::lowercase_words(question);
    let pair = |a: &str, b: &str| words.windows(2).any(|w| w[0] == a && w[1] == b);
    words.iter().any(|w| {
        matches!(w.as_str(), "both" | "compare" | "common" | "same") || w.starts_with("differ")
    }) || pair("but", "not")
}

/// The program's search note ([`search_note`]) for each read made for a
/// question that names no file, by call id, with at most
/// [`MAX_EARNED_READS`] of them earning a call per question. Only from
/// the history, so every turn renders them the same way.
fn searches<'a>(
    request: &'a ChatRequest,
    reads: &HashMap<&'a str, &'a str>,
    listed: Option<&'a [String]>,
) -> HashMap<&'a str, Looked> {
    let mut notes = HashMap::new();
    let mut question: Option<String> = None;
    let mut read: Vec<&str> = Vec::new();
    let mut hits: Vec<&str> = Vec::new();
    let mut earned = 0;
    // After the driver's searches (`search_first.rs`) no read earns
    // another: they told which files have the question's words, and the
    // file read was the best of those.
    let searcher = super::search_first::searcher(request);
    let summaries = super::search_first::SearchSummaries::new(request);
    let mut driver_searched = false;
    // The words those searches found in no file.
    let mut nowhere: Vec<&str> = Vec::new();
    for message in &request.messages {
        if message.role != Role::User {
            driver_searched |= message
                .tool_uses()
                .any(|(_, name, _)| Some(name) == searcher);
            continue;
        }
        nowhere.extend(
            message
                .ok_results()
                .flat_map(|(id, content)| summaries.found_nowhere(id, content)),
        );
        let results = read_results(message, reads).filter(|_| question.is_some());
        for (id, path, content) in results {
            if !read.contains(&path) {
                read.push(path);
            }
            let unread = listed.map(|l| l.iter().filter(|p| !read.contains(&p.as_str())).count());
            let asked = question.as_deref().unwrap_or_default();
            let may_earn = earned < MAX_EARNED_READS && !driver_searched;
            let searching = Searching {
                unread,
                may_earn,
                nowhere: &nowhere,
                driver_searched,
            };
            let Some(mut looked) = search_note(asked, path, content, &searching) else {
                continue;
            };
            earned += usize::from(looked.earns_a_read);
            if looked.had_words {
                hits.push(path);
            }
            if looked.every_file
                && !looked.earns_a_read
                && let Some(tally) = files_found(&hits, content)
            {
                looked.note.push_str(&tally);
            } else if !looked.earns_a_read && hits.is_empty() && read.len() > 1 {
                // The search ended without a find: said so in as many
                // words. After four misses the 1.5B model answered that
                // the last file read "does not exist".
                looked.note.push_str(NONE_HAS_THEM);
            }
            notes.insert(id, looked);
        }
        let text = message.text();
        if !text.is_empty() {
            let searching = !names_some_file(&text, listed.unwrap_or_default());
            question = searching.then_some(text);
            read.clear();
            hits.clear();
            earned = 0;
            driver_searched = false;
            nowhere.clear();
        }
    }
    notes
}

/// The end of a search that found the question's words in no file read.
const NONE_HAS_THEM: &str = "\n(Searched by the program: none of the files read has them.)";

/// At the end of a search of every file: the files read that have the
/// question's words, by the paths the model called. Why: after four reads
/// and their notes, the 1.5B model answered "which files mention
/// max_connections?" with the three files that did not. The paths came
/// from the workspace, so they go inside the result's boundary tags.
fn files_found(hits: &[&str], wrapped: &str) -> Option<String> {
    if hits.is_empty() {
        return Some(NONE_HAS_THEM.to_owned());
    }
    let (open, close) = super::compare::boundary_tags(wrapped)?;
    Some(format!(
        "\n(Searched by the program: the files read that have them:)\n{open}\n{}\n{close}",
        hits.join("\n")
    ))
}

#[cfg(test)]
#[path = "read_notes_tests.rs"]
mod tests;
