//! Short values first seen in untrusted text.
//!
//! A value under [`MIN_RUN`](super::MIN_RUN) bytes cannot be matched as a
//! run (ids, amounts and words occur everywhere by chance), yet the
//! attacker's choice is often exactly that short: a file id `13`, a user
//! name `fred`. What separates the attacker's `13` from the user's is where
//! the conversation first had it: a short value counts as copied when it is
//! a whole word of untrusted text and no trusted text (the user's messages,
//! the agent's system prompt) has it.

use foldhash::HashMap;

/// Shortest word the rule considers: one letter or digit is everywhere.
pub(crate) const MIN_WORD: usize = 2;
/// Words longer than this are the run rule's (`MIN_RUN - 1`).
pub(crate) const MAX_WORD: usize = super::MIN_RUN - 1;
/// Trusted words kept; past it no more are added, which only makes more
/// short values count as copied (the careful side).
pub const MAX_TRUSTED_WORDS: usize = 1 << 16;

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Where words end: whitespace, quotes, brackets and list punctuation.
/// Connectors (`-`, `.`, `/`, `:`, `@`) do not end a word, so the `13` of
/// `2024-05-13` and the `sh` of `install.sh` are not words of their own: a
/// user's date does not vouch for the id `13`, a page's file name does not
/// name a command `sh`.
fn ends_word(b: u8) -> bool {
    b.is_ascii_whitespace() || b"'\"`()[]{}<>,;!?|=*#".contains(&b)
}

/// Every word of `MIN_WORD..=MAX_WORD` bytes in `text`, folded to lower
/// case: a piece between word ends, with a trailing `.` or `:` dropped,
/// made of ASCII letters, digits and `_` only.
pub(crate) fn each_word(text: &str, mut f: impl FnMut(&[u8])) {
    for piece in text.as_bytes().split(|&b| ends_word(b)) {
        let piece = piece
            .strip_suffix(b".")
            .or_else(|| piece.strip_suffix(b":"))
            .unwrap_or(piece);
        if (MIN_WORD..=MAX_WORD).contains(&piece.len()) && piece.iter().all(|&b| is_word_byte(b)) {
            let mut word = [0u8; MAX_WORD];
            for (slot, b) in word.iter_mut().zip(piece) {
                *slot = b.to_ascii_lowercase();
            }
            f(&word[..piece.len()]);
        }
    }
}

/// `value` as one word (trimmed, folded), if it is one of the lengths the
/// rule considers.
pub(crate) fn as_word(value: &str) -> Option<Vec<u8>> {
    let trimmed = value.trim_matches(|c: char| c.is_ascii_whitespace());
    let len = trimmed.len();
    ((MIN_WORD..=MAX_WORD).contains(&len) && trimmed.bytes().all(is_word_byte))
        .then(|| trimmed.bytes().map(|b| b.to_ascii_lowercase()).collect())
}

/// A word packed into a map key (length in the top byte).
pub(crate) fn pack(word: &[u8]) -> u64 {
    word.iter()
        .fold(word.len() as u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// The words of the untrusted chunks: word to the first chunk holding it.
#[derive(Default, Clone)]
pub(crate) struct Words {
    first: HashMap<u64, usize>,
}

impl Words {
    pub(crate) fn push_chunk(&mut self, chunk: usize, text: &str) {
        each_word(text, |w| {
            self.first.entry(pack(w)).or_insert(chunk);
        });
    }

    /// The chunk a word first occurred in.
    pub(crate) fn chunk_of(&self, word: &[u8]) -> Option<usize> {
        self.first.get(&pack(word)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        each_word(text, |w| out.push(String::from_utf8_lossy(w).into_owned()));
        out
    }

    #[test]
    fn words_are_whole_short_and_folded() {
        assert_eq!(
            words(
                "Delete file '13' for Fred, a_b x https://evil.example/install.sh on 2024-05-13."
            ),
            ["delete", "file", "13", "for", "fred", "a_b", "on"]
        );
        assert_eq!(words("id: 13. Then"), ["id", "13", "then"]);
        // A word longer than MAX_WORD is not cut into a shorter one.
        assert!(words("abcdefghij").is_empty());
    }

    #[test]
    fn a_value_is_a_word_only_whole() {
        assert_eq!(as_word(" Fred "), Some(b"fred".to_vec()));
        assert_eq!(as_word("13"), Some(b"13".to_vec()));
        assert_eq!(as_word("a"), None);
        assert_eq!(as_word("rm -rf"), None);
        assert_eq!(as_word("abcdefgh"), None);
        assert_ne!(pack(b"ab"), pack(b"\0ab"));
    }
}
