//! Value-level provenance (`bulwark_policy::value_taint`): what the index
//! finds, checked against a naive oracle, what it keeps across a restart,
//! and the blind spots its documentation admits.

mod cases;
mod props;

use bulwark_policy::TaintLabel;
use bulwark_policy::value_taint::{MIN_RUN, RUN};
use std::collections::BTreeSet;

/// The module's normal form, re-implemented plainly for the oracle.
pub(crate) fn normal(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for b in text.bytes() {
        let b = b.to_ascii_lowercase();
        if matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            if out.last().is_some_and(|&l| l != b' ') {
                out.push(b' ');
            }
        } else {
            out.push(b);
        }
    }
    if out.last() == Some(&b' ') {
        out.pop();
    }
    out
}

/// Longest common substring of two byte strings (dynamic programming).
pub(crate) fn longest_common(a: &[u8], b: &[u8]) -> usize {
    let mut prev = vec![0usize; b.len() + 1];
    let mut best = 0;
    for &x in a {
        let mut cur = vec![0usize; b.len() + 1];
        for (j, &y) in b.iter().enumerate() {
            if x == y {
                cur[j + 1] = prev[j] + 1;
                best = best.max(cur[j + 1]);
            }
        }
        prev = cur;
    }
    best
}

/// Whether the documented rule calls `arg` a copy of `chunk`.
pub(crate) fn oracle(chunk: &str, arg: &str) -> bool {
    let (c, a) = (normal(chunk), normal(arg));
    if a.len() < MIN_RUN {
        false
    } else if a.len() < RUN {
        c.windows(a.len()).any(|w| w == a.as_slice())
    } else {
        longest_common(&a, &c) >= RUN
    }
}

pub(crate) fn labels(list: &[TaintLabel]) -> BTreeSet<TaintLabel> {
    list.iter().copied().collect()
}

/// The short-word rule, plainly: the first chunk that has `arg` (trimmed,
/// folded) as a word, when `arg` is under `MIN_RUN` bytes and one word.
pub(crate) fn word_oracle(chunks: &[String], arg: &str) -> Option<usize> {
    fn is_word(piece: &[u8]) -> bool {
        (2..MIN_RUN).contains(&piece.len())
            && piece
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
    }
    if arg.len() >= MIN_RUN {
        return None;
    }
    let word = arg
        .trim_matches(|c: char| c.is_ascii_whitespace())
        .to_ascii_lowercase();
    if !is_word(word.as_bytes()) {
        return None;
    }
    chunks.iter().position(|chunk| {
        chunk
            .to_ascii_lowercase()
            .as_bytes()
            .split(|b| b.is_ascii_whitespace() || b"'\"`()[]{}<>,;!?|=*#".contains(b))
            .map(|p| {
                p.strip_suffix(b".")
                    .or_else(|| p.strip_suffix(b":"))
                    .unwrap_or(p)
            })
            .any(|p| p == word.as_bytes())
    })
}
