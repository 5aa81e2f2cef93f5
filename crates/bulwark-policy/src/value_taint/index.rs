//! The search structure behind [`super::UntrustedText`], rebuilt from the
//! chunks (never persisted).
//!
//! Three stages, so a clean argument costs one hash-and-test per
//! [`PROBE_STRIDE`] bytes and the prefilters' mistakes never become hits:
//!
//! 1. **Probes**: a Bloom filter of every [`PROBE`]-byte window of the
//!    normalized text. A run of at least [`RUN`] bytes in an argument holds
//!    a probe window starting at a multiple of
//!    `PROBE_STRIDE = RUN - PROBE + 1` in the argument, so only those
//!    positions are tested. (Probe
//!    windows of 10 bytes let through far fewer common pieces of prose than
//!    8-byte ones, for a few more tests.)
//! 2. **Runs**: a second filter of every `RUN`-byte window. Where stage 1
//!    passed at `j`, the `RUN`-byte windows of the argument that hold the
//!    probe at `j` are tested. Common pieces (`https://www.`, ` of the `)
//!    pass stage 1 and stop here.
//! 3. **Exact**: a hash map from window to the positions where it starts in
//!    the text, kept only every `STRIDE` bytes of each chunk (one entry per
//!    9 bytes of text at `RUN` 16), which is enough because a run of `RUN`
//!    bytes covers `STRIDE` window starts. Each candidate is extended byte by
//!    byte in both directions; only a run of `RUN` bytes or more counts.
//!
//! The chains of stage 3 are grouped by chunk (newest first) and each entry
//! knows the first entry of the next older chunk, so once a chunk has
//! produced a hit for an argument its other occurrences are jumped over.
//! Untrusted text crafted to be repetitive can still make chains long: a
//! per-call work budget bounds the search, and [`Exhausted`] tells the
//! caller to count the argument as copied rather than clean.

use super::normalize::{SEPARATOR, normalize_into};
use super::{MIN_RUN, RUN};
use std::collections::HashMap;

/// Bytes per window: one `u64`, so a window is its own exact hash-map key.
pub(crate) const WINDOW: usize = 8;
/// Distance between indexed window starts in a chunk.
pub(crate) const STRIDE: usize = RUN - WINDOW + 1;
/// Bytes per stage-1 window: longer than `WINDOW`, so fewer common pieces
/// of prose pass, at the price of testing every `PROBE_STRIDE` bytes.
const PROBE: usize = 10;
const PROBE_STRIDE: usize = RUN - PROBE + 1;
/// Chain entries and compared bytes (in units of 8) one `find` may spend
/// before giving up (roughly a millisecond).
pub(crate) const WORK_BUDGET: usize = 1 << 20;
/// Bits of the stage-2 filter per byte of text (stage 1 has half, the
/// filter of 8-byte windows for short strings a quarter).
const BITS_PER_BYTE: usize = 16;
const MIN_LOG_WORDS: u32 = 10;
const NONE: u32 = u32::MAX;

const _: () = assert!(MIN_RUN >= WINDOW && RUN >= MIN_RUN && RUN >= PROBE && PROBE >= WINDOW);

/// The search ran out of its work budget (pathologically repetitive text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exhausted;

#[derive(Debug, Clone)]
struct Entry {
    /// Where the window starts in [`Index::text`].
    pos: u32,
    chunk: u32,
    /// Next older entry with the same window.
    next: u32,
    /// First entry with the same window in an older chunk.
    older: u32,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    /// Every chunk's normal form, each followed by [`SEPARATOR`].
    text: Vec<u8>,
    /// Where each chunk starts in `text`.
    starts: Vec<u32>,
    /// Every `WINDOW`-byte window (for whole short strings).
    grams: Bitset<2>,
    /// Stage 1: every `PROBE`-byte window.
    probes: Bitset<2>,
    /// Stage 2: every `RUN`-byte window.
    runs: Bitset<3>,
    heads: HashMap<u64, u32, foldhash::fast::RandomState>,
    entries: Vec<Entry>,
}

/// A blocked Bloom filter: `K` bits per item, all in one 64-bit word (one
/// memory access per test). A clear bit means "certainly absent".
#[derive(Debug, Clone, Default)]
struct Bitset<const K: u32> {
    words: Vec<u64>,
    log_words: u32,
}

impl<const K: u32> Bitset<K> {
    /// An empty set sized for `items` entries at `bits_per_item`.
    fn with_capacity(items: usize, bits_per_item: usize) -> Self {
        let log_words = (items * bits_per_item / 64)
            .next_power_of_two()
            .trailing_zeros()
            .max(MIN_LOG_WORDS);
        Bitset {
            words: vec![0; 1usize << log_words],
            log_words,
        }
    }

    /// The word (top bits of `hash`) and the `K` bits in it (6 bits each,
    /// from just below).
    fn slot(&self, hash: u64) -> (usize, u64) {
        let word = (hash >> (64 - self.log_words)) as usize;
        let rest = hash << self.log_words;
        let mut mask = 0u64;
        for k in 0..K {
            mask |= 1 << (rest >> (58 - 6 * k) & 63);
        }
        (word, mask)
    }

    fn insert(&mut self, hash: u64) {
        let (word, mask) = self.slot(hash);
        self.words[word] |= mask;
    }

    fn contains(&self, hash: u64) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let (word, mask) = self.slot(hash);
        self.words[word] & mask == mask
    }
}

const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// Hash of the `WINDOW` bytes at `at`. One multiply: the high half is
/// folded in first so the product's top bits, which the bitsets use,
/// depend on every byte.
fn gram_hash(bytes: &[u8], at: usize) -> u64 {
    let w = window(bytes, at);
    (w ^ (w >> 32)).wrapping_mul(MIX)
}

/// Hash of the `RUN` bytes at `at`, folded from `WINDOW`-byte pieces (the
/// last one may overlap the one before).
fn run_hash(bytes: &[u8], at: usize) -> u64 {
    span_hash::<RUN>(bytes, at)
}

/// Hash of the `N` bytes at `at` (`N` >= `WINDOW`), folded from
/// `WINDOW`-byte pieces (the last one may overlap the one before).
fn span_hash<const N: usize>(bytes: &[u8], at: usize) -> u64 {
    let mut h = 0u64;
    let mut off = 0;
    loop {
        let w = window(bytes, at + off.min(N - WINDOW));
        h = (h.rotate_left(32) ^ w ^ (w >> 32)).wrapping_mul(MIX);
        if off + WINDOW >= N {
            return h;
        }
        off += WINDOW;
    }
}

/// Per-`find` scratch: which chunks already hit the current argument, and
/// the work left.
pub(crate) struct Work {
    done: Vec<bool>,
    touched: Vec<usize>,
    pub(crate) budget: usize,
}

impl Work {
    pub(crate) fn new(chunks: usize) -> Work {
        Work {
            done: vec![false; chunks],
            touched: Vec::new(),
            budget: WORK_BUDGET,
        }
    }

    /// Starts a new argument: no chunk has hit it yet.
    pub(crate) fn reset(&mut self) {
        for c in self.touched.drain(..) {
            self.done[c] = false;
        }
    }

    pub(crate) fn is_done(&self, chunk: usize) -> bool {
        self.done.get(chunk).copied().unwrap_or(true)
    }

    fn mark(&mut self, chunk: usize) {
        if let Some(d) = self.done.get_mut(chunk) {
            *d = true;
            self.touched.push(chunk);
        }
    }

    fn spend(&mut self, units: usize) -> Result<(), Exhausted> {
        self.budget = self.budget.checked_sub(units).ok_or(Exhausted)?;
        Ok(())
    }
}

fn window(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; WINDOW];
    w.copy_from_slice(&bytes[at..at + WINDOW]);
    u64::from_le_bytes(w)
}

impl Index {
    /// Appends one chunk's text (chunks are numbered in the order added).
    pub(crate) fn push_chunk(&mut self, raw: &str) {
        let chunk = self.starts.len() as u32;
        let start = self.text.len();
        self.starts.push(start as u32);
        normalize_into(raw, &mut self.text);
        let end = self.text.len();
        self.text.push(SEPARATOR);
        if self.text.len() * BITS_PER_BYTE > self.runs.words.len() * 64 {
            self.resize_bits();
        } else {
            self.set_bits(start, end);
        }
        let mut pos = start;
        while pos + WINDOW <= end {
            let key = window(&self.text, pos);
            let head = self.heads.get(&key).copied().unwrap_or(NONE);
            let older = match self.entries.get(head as usize) {
                Some(e) if e.chunk == chunk => e.older,
                _ => head,
            };
            let id = self.entries.len() as u32;
            self.entries.push(Entry {
                pos: pos as u32,
                chunk,
                next: head,
                older,
            });
            self.heads.insert(key, id);
            pos += STRIDE;
        }
    }

    /// An empty index with room for `bytes` of text, so a rebuild sets
    /// each filter bit once instead of again at every doubling.
    pub(crate) fn with_capacity(bytes: usize) -> Index {
        let mut index = Index::default();
        index.text.reserve(bytes);
        index.entries.reserve(bytes / STRIDE);
        index.heads.reserve(bytes / STRIDE);
        index.size_filters(bytes);
        index
    }

    fn size_filters(&mut self, bytes: usize) {
        self.grams = Bitset::with_capacity(bytes, BITS_PER_BYTE / 4);
        self.probes = Bitset::with_capacity(bytes, BITS_PER_BYTE / 2);
        self.runs = Bitset::with_capacity(bytes, BITS_PER_BYTE);
    }

    /// Grows the filters to fit the text and sets every window again.
    fn resize_bits(&mut self) {
        // Twice what is needed now, so growth is amortized.
        self.size_filters(self.text.len() * 2);
        for chunk in 0..self.starts.len() {
            let start = self.starts[chunk] as usize;
            // The chunk's text ends before its separator.
            let end = self.chunk_end(chunk) - 1;
            self.set_bits(start, end);
        }
    }

    /// Sets the bits of every window inside `text[start..end]`.
    fn set_bits(&mut self, start: usize, end: usize) {
        let mut pos = start;
        while pos + WINDOW <= end {
            self.grams.insert(gram_hash(&self.text, pos));
            if pos + PROBE <= end {
                self.probes.insert(span_hash::<PROBE>(&self.text, pos));
            }
            if pos + RUN <= end {
                self.runs.insert(run_hash(&self.text, pos));
            }
            pos += 1;
        }
    }

    fn has_gram(&self, bytes: &[u8], at: usize) -> bool {
        self.grams.contains(gram_hash(bytes, at))
    }

    fn chunk_of(&self, pos: usize) -> usize {
        self.starts
            .partition_point(|&s| s as usize <= pos)
            .saturating_sub(1)
    }

    fn chunk_end(&self, chunk: usize) -> usize {
        self.starts
            .get(chunk + 1)
            .map_or(self.text.len(), |&s| s as usize)
    }

    /// Whether every window of `needle` (normalized, at least `WINDOW`
    /// long) may occur in the text.
    fn all_windows_present(&self, needle: &[u8]) -> bool {
        (0..=needle.len() - WINDOW).all(|i| self.has_gram(needle, i))
    }

    /// Whether the normalized `needle` occurs anywhere in the text.
    pub(crate) fn contains(&self, needle: &[u8]) -> bool {
        if needle.len() >= WINDOW && !self.all_windows_present(needle) {
            return false;
        }
        memchr::memmem::find(&self.text, needle).is_some()
    }

    /// Pushes `(chunk, run_len)` for every chunk that holds a copy of the
    /// normalized argument `arg`: the whole of it when it is shorter than
    /// [`RUN`], else a run of at least `RUN` bytes.
    pub(crate) fn search(
        &self,
        arg: &[u8],
        work: &mut Work,
        out: &mut Vec<(usize, usize)>,
    ) -> Result<(), Exhausted> {
        if arg.len() < MIN_RUN || self.text.is_empty() {
            return Ok(());
        }
        if arg.len() < RUN {
            self.search_whole(arg, work, out)
        } else {
            self.search_runs(arg, work, out)
        }
    }

    fn search_whole(
        &self,
        arg: &[u8],
        work: &mut Work,
        out: &mut Vec<(usize, usize)>,
    ) -> Result<(), Exhausted> {
        if !self.all_windows_present(arg) {
            return Ok(());
        }
        let finder = memchr::memmem::Finder::new(arg);
        let mut from = 0;
        while from < self.text.len() {
            let Some(offset) = finder.find(&self.text[from..]) else {
                // Absence is proven: the budget may run dry, not the answer.
                work.budget = work.budget.saturating_sub((self.text.len() - from) / 64);
                break;
            };
            work.spend(offset / 64 + 1)?;
            let chunk = self.chunk_of(from + offset);
            if !work.is_done(chunk) {
                work.mark(chunk);
                out.push((chunk, arg.len()));
            }
            from = self.chunk_end(chunk);
        }
        Ok(())
    }

    fn search_runs(
        &self,
        arg: &[u8],
        work: &mut Work,
        out: &mut Vec<(usize, usize)>,
    ) -> Result<(), Exhausted> {
        let last_run = arg.len() - RUN;
        let mut looked_up = 0;
        let mut j = 0;
        while j + PROBE <= arg.len() {
            if self.probes.contains(span_hash::<PROBE>(arg, j)) {
                // The `RUN`-byte windows that hold the window at `j`.
                for a in j.saturating_sub(RUN - PROBE)..=j.min(last_run) {
                    if !self.runs.contains(run_hash(arg, a)) {
                        continue;
                    }
                    // One of these window starts meets an indexed position
                    // of any chunk holding `arg[a..a + RUN]`.
                    for i in looked_up.max(a)..=a + RUN - WINDOW {
                        self.runs_at(arg, i, work, out)?;
                    }
                    looked_up = looked_up.max(a + RUN - WINDOW + 1);
                    if work.touched.len() >= self.starts.len() {
                        return Ok(());
                    }
                }
            }
            j += PROBE_STRIDE;
        }
        Ok(())
    }

    /// Extends every indexed occurrence of the window at `arg[i..]`, in
    /// chunks that have not hit yet, to a maximal common run.
    fn runs_at(
        &self,
        arg: &[u8],
        i: usize,
        work: &mut Work,
        out: &mut Vec<(usize, usize)>,
    ) -> Result<(), Exhausted> {
        let Some(&head) = self.heads.get(&window(arg, i)) else {
            return Ok(());
        };
        let mut id = head;
        while let Some(entry) = self.entries.get(id as usize) {
            work.spend(1)?;
            let chunk = entry.chunk as usize;
            if work.is_done(chunk) {
                id = entry.older;
                continue;
            }
            let q = entry.pos as usize;
            let mut left = 0;
            while left < i && left < q && arg[i - left - 1] == self.text[q - left - 1] {
                left += 1;
            }
            let mut right = WINDOW;
            while i + right < arg.len()
                && q + right < self.text.len()
                && arg[i + right] == self.text[q + right]
            {
                right += 1;
            }
            work.spend((left + right) / 8)?;
            if left + right >= RUN {
                work.mark(chunk);
                out.push((chunk, left + right));
                id = entry.older;
            } else {
                id = entry.next;
            }
        }
        Ok(())
    }
}

/// Appends the normal form of an argument string (reusing `buf`).
pub(crate) fn normalize_arg(text: &str, buf: &mut Vec<u8>) {
    buf.clear();
    normalize_into(text, buf);
}
