//! An advisory prompt-injection scanner for untrusted content.
//!
//! The door runs [`scan`] on every untrusted tool output (fetched pages,
//! child replies, labelled memory and files on read) and audits what it
//! finds; a finding can raise a sink rule from `allow` to `approve`. It is
//! *advisory*: a phrase list never proves text harmless, so the taint rules,
//! not this scanner, are what keep an agent inside its grant. What the
//! scanner adds is a reason, shown to a person, to look twice.
//!
//! Each detector is a small module that says why its patterns mean what they
//! mean: [`instruction`] (text that tries to replace the agent's
//! instructions), [`roleplay`] (persona switches that drop the rules),
//! [`toolcall`] (text dressed as a function call), [`exfil`] (asking to send
//! data somewhere or to reveal secrets), [`hidden`] (text a person reading
//! the page would not see, or instructions encoded or disguised so that
//! neither a reader nor a phrase list sees them: [`encoded`]). The patterns are general phrasings, never copies
//! of a benchmark's strings; their rates on public corpora are measured by
//! the `injection::corpus` test module and reported there.
//!
//! # Cost on hostile input
//!
//! Everything here is linear in the scanned bytes: the patterns are compiled
//! by the `regex` crate (finite automata, no backtracking) with bounded
//! sizes, and each is searched once per region. Text is cut into regions of
//! [`REGION`] bytes on a fixed grid from the start (so appending text never
//! moves an earlier region), each searched with [`OVERLAP`] bytes of the next
//! one so a phrase across a boundary is still seen. Text longer than
//! [`HEAD`] + [`TAIL`] is scanned only in the regions that touch its first
//! [`HEAD`] and last [`TAIL`] bytes: an attacker can hide a phrase in the
//! middle of a huge document, but a model rarely reads that far either, and
//! the door must not spend unbounded time on a hostile page. At most one
//! finding per kind per region is returned (the first), so the result is at
//! most five findings per region, whatever the input.
//!
//! Measured (release build, one core): about 20-60 ms per MiB scanned,
//! whatever the content (prose, markup, hostile repetitions, CJK); a 64 KiB
//! page costs a few milliseconds. The patterns compile once per process
//! (see [`prepare`]).

mod encoded;
mod exfil;
mod hidden;
mod instruction;
mod roleplay;
mod toolcall;

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

/// How to read the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    /// Plain text (a child's reply, a memory note, a file).
    Text,
    /// HTML (a fetched page): hidden text is looked for too.
    Html,
}

/// What a finding looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    InstructionOverride,
    RolePlay,
    ToolCallLookalike,
    Exfiltration,
    HiddenText,
}

impl FindingKind {
    /// Every kind, in the order findings of one region are reported.
    pub const ALL: [FindingKind; 5] = [
        FindingKind::InstructionOverride,
        FindingKind::RolePlay,
        FindingKind::ToolCallLookalike,
        FindingKind::Exfiltration,
        FindingKind::HiddenText,
    ];

    /// The name used in audit records and reports.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::InstructionOverride => "instruction_override",
            FindingKind::RolePlay => "role_play",
            FindingKind::ToolCallLookalike => "tool_call_lookalike",
            FindingKind::Exfiltration => "exfiltration",
            FindingKind::HiddenText => "hidden_text",
        }
    }
}

/// One finding: its kind and the byte offset where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub offset: usize,
}

/// Bytes per region: at most one finding per kind is reported per region.
pub const REGION: usize = 64 * 1024;
/// Bytes of the next region searched with each region, longer than any
/// pattern's reach (phrases span at most a few hundred bytes, hidden HTML
/// elements are read for [`hidden::ELEMENT_TEXT`] bytes).
pub const OVERLAP: usize = 4 * 1024;
/// Bytes scanned from the start of a long text.
pub const HEAD: usize = 512 * 1024;
/// Bytes scanned from the end of a long text.
pub const TAIL: usize = 512 * 1024;
/// The most findings one call returns: five kinds in each region scanned.
pub const MAX_FINDINGS: usize = FindingKind::ALL.len() * (HEAD + TAIL).div_ceil(REGION) + 10;

/// Scans `text`; no findings is the common case.
///
/// Findings come in region order, and within a region in the order of
/// [`FindingKind::ALL`]; each offset is a char boundary of `text`.
pub fn scan(text: &str, kind: ContentKind) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (start, end) in regions(text.len()) {
        // Region bounds move up to a char boundary, so a finding's region is
        // always `offset / REGION`.
        let window_end = ceil_boundary(text, end.saturating_add(OVERLAP));
        let start = ceil_boundary(text, start);
        let end = ceil_boundary(text, end);
        let Some(window) = text.get(start..window_end) else {
            continue;
        };
        // A match that starts in the overlap belongs to the next region.
        let limit = end - start;
        let mut found = |finding_kind, at: Option<usize>| {
            if let Some(at) = at.filter(|&at| at < limit) {
                findings.push(Finding {
                    kind: finding_kind,
                    offset: start + at,
                });
            }
        };
        found(FindingKind::InstructionOverride, instruction::find(window));
        found(FindingKind::RolePlay, roleplay::find(window));
        found(FindingKind::ToolCallLookalike, toolcall::find(window));
        found(FindingKind::Exfiltration, exfil::find(window));
        found(FindingKind::HiddenText, hidden::find(window, kind, limit));
    }
    findings
}

/// Compiles every pattern now rather than on the first scan (about 0.2 s
/// in a release build, once per process), so a server can pay it at start
/// instead of on a user's first fetched page. Returns whether every pattern
/// compiled (always, unless a pattern in this module is wrong).
pub fn prepare() -> bool {
    [
        &ADDRESSED_TO_AI,
        &instruction::PATTERN,
        &roleplay::PATTERN,
        &toolcall::PATTERN,
        &exfil::PATTERN,
        &hidden::HIDING_STYLE,
        &hidden::COLOUR,
    ]
    .iter()
    .all(|pattern| pattern.is_some())
}

/// Whether `text` reads as instructions to an agent: any phrase detector
/// matches, or it addresses an AI directly. The hidden-text detector uses
/// this to tell a hidden injection from a hidden menu.
fn instruction_like(text: &str) -> bool {
    phrases_match(text) || first_match(&ADDRESSED_TO_AI, text).is_some()
}

/// Whether any phrase detector matches `text` (decoded or hidden content).
fn phrases_match(text: &str) -> bool {
    instruction::find(text).is_some()
        || roleplay::find(text).is_some()
        || toolcall::find(text).is_some()
        || exfil::find(text).is_some()
}

/// Words addressed to the model rather than to the person reading: hidden
/// text that talks to "the assistant" has no reader but a model.
static ADDRESSED_TO_AI: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(
        r"\b(?:ai|llm|assistant|chatbot|language\s+model|agent|bot)s?\b \s*[,:]\s* (?:please\s+)?(?:you\s+)?
            (?:must|should|need|have\s+to|do\s+not|don't|always|never|ignore|send|tell|say|include|reply|respond|answer|recommend)\b
        | \b(?:if|when)\s+you\s+are\s+an?\s+(?:ai|llm|assistant|language\s+model|agent|bot)\b",
    )
});

/// The regions of a text of `len` bytes: `(start, end)` on the [`REGION`]
/// grid, all of them up to `HEAD + TAIL` bytes, else those touching the
/// first [`HEAD`] and the last [`TAIL`] bytes.
fn regions(len: usize) -> impl Iterator<Item = (usize, usize)> {
    let count = len.div_ceil(REGION);
    let head = HEAD.div_ceil(REGION);
    let tail_from = if len <= HEAD + TAIL {
        count
    } else {
        (len - TAIL) / REGION
    };
    (0..count)
        .filter(move |&i| len <= HEAD + TAIL || i < head || i >= tail_from)
        .map(move |i| (i * REGION, ((i + 1) * REGION).min(len)))
}

/// The smallest char boundary of `text` at or after `at` (its length past
/// the end).
fn ceil_boundary(text: &str, at: usize) -> usize {
    let mut at = at;
    while at < text.len() && !text.is_char_boundary(at) {
        at += 1;
    }
    at.min(text.len())
}

/// The largest char boundary of `text` at or before `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Compiles a detector's pattern: case-insensitive, verbose (whitespace and
/// `#` comments in the pattern are ignored), `\b` an ASCII word boundary
/// (Unicode ones would push the fast automaton off non-ASCII text), with the
/// automata's sizes bounded. `None` only
/// if a pattern is wrong, which the unit tests rule out; the detector then
/// finds nothing rather than failing the door.
fn compile(pattern: &str) -> Option<Regex> {
    RegexBuilder::new(&pattern.replace(r"\b", r"(?-u:\b)"))
        .case_insensitive(true)
        .ignore_whitespace(true)
        .size_limit(8 << 20)
        .dfa_size_limit(8 << 20)
        .build()
        .ok()
}

/// Where `regex` first matches in `text`.
fn first_match(regex: &LazyLock<Option<Regex>>, text: &str) -> Option<usize> {
    regex.as_ref()?.find(text).map(|m| m.start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        assert!(prepare());
    }

    #[test]
    fn regions_cover_short_texts_and_both_ends_of_long_ones() {
        assert_eq!(regions(0).count(), 0);
        assert_eq!(regions(10).collect::<Vec<_>>(), vec![(0, 10)]);
        let len = 10 * (HEAD + TAIL);
        let all: Vec<_> = regions(len).collect();
        assert_eq!(all.first(), Some(&(0, REGION)));
        assert_eq!(all.last().map(|r| r.1), Some(len));
        assert!(all.iter().map(|(s, e)| e - s).sum::<usize>() <= HEAD + TAIL + REGION);
        assert!(all.len() * FindingKind::ALL.len() <= MAX_FINDINGS);
    }
}
