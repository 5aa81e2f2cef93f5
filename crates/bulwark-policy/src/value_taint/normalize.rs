//! The cheap normal form both sides are compared in: ASCII letters folded to
//! lower case, every run of ASCII whitespace collapsed to one space, leading
//! and trailing whitespace dropped.
//!
//! Only ASCII bytes change (to other ASCII bytes), so valid UTF-8 stays
//! valid UTF-8 and can never contain [`SEPARATOR`]: the index puts that byte
//! between chunks, and no match can run across it.

/// Ends every chunk in the index: a byte that never occurs in UTF-8.
pub(crate) const SEPARATOR: u8 = 0xFF;

/// Byte map: `A-Z` to `a-z`, ASCII whitespace (space, tab, LF, VT, FF, CR)
/// to a space, everything else unchanged.
static FOLD: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        table[b] = match byte {
            b'A'..=b'Z' => byte + 32,
            b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' => b' ',
            _ => byte,
        };
        b += 1;
    }
    table
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;
const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;

/// The high bit of each byte of `v` that is below `n` (1..=0x80), exactly
/// (no carry crosses a byte, unlike the usual zero-byte trick).
fn bytes_below(v: u64, n: u8) -> u64 {
    !(((v & LOW7) + ONES * (0x80 - u64::from(n))) | v) & HIGH
}

/// Appends the normal form of `text` to `out`.
///
/// Eight bytes at a time where nothing but case changes (no control byte,
/// no two spaces in a row): prose and URLs mostly are. Other blocks go
/// byte by byte through [`FOLD`].
pub(crate) fn normalize_into(text: &str, out: &mut Vec<u8>) {
    let start = out.len();
    out.reserve(text.len());
    // Starting "after a space" drops leading whitespace.
    let mut after_space = true;
    let slow = |bytes: &[u8], out: &mut Vec<u8>, after_space: &mut bool| {
        for &byte in bytes {
            let folded = FOLD[usize::from(byte)];
            let space = folded == b' ';
            if space && *after_space {
                continue;
            }
            out.push(folded);
            *after_space = space;
        }
    };
    let mut blocks = text.as_bytes().chunks_exact(8);
    for block in &mut blocks {
        let mut w = [0u8; 8];
        w.copy_from_slice(block);
        let v = u64::from_le_bytes(w);
        let spaces = bytes_below(v ^ (ONES * u64::from(b' ')), 1);
        let simple = bytes_below(v, 0x20) == 0
            && spaces & (spaces << 8) == 0
            && !(after_space && spaces & 0x80 != 0);
        if simple {
            let upper = bytes_below(v, b'Z' + 1) & !bytes_below(v, b'A');
            out.extend_from_slice(&(v | (upper >> 2)).to_le_bytes());
            after_space = spaces >> 63 != 0;
        } else {
            slow(block, out, &mut after_space);
        }
    }
    slow(blocks.remainder(), out, &mut after_space);
    if after_space && out.len() > start {
        out.pop();
    }
}

/// The normal form of `text`, as a new buffer.
pub(crate) fn normalize(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    normalize_into(text, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_case_and_collapses_whitespace() {
        assert_eq!(normalize("  Curl\t\n -X  POST\r\n"), b"curl -x post");
        assert_eq!(normalize(""), b"");
        assert_eq!(normalize(" \n\t "), b"");
        assert_eq!(normalize("ÄÖ Straße"), "ÄÖ straße".as_bytes());
    }

    /// The eight-byte path and the byte path agree on every input.
    #[test]
    fn blocks_and_bytes_agree() {
        fn plain(text: &str) -> Vec<u8> {
            let mut out = Vec::new();
            let mut after_space = true;
            for &byte in text.as_bytes() {
                let folded = FOLD[usize::from(byte)];
                if folded == b' ' && after_space {
                    continue;
                }
                out.push(folded);
                after_space = folded == b' ';
            }
            if after_space {
                out.pop();
            }
            out
        }
        let alphabet = [
            "a", "Z", "@", "[", "`", "{", " ", "  ", "\n", "\t", "\x01", "\x7f", "é", "λ", "AbC",
        ];
        let mut seed = 0x9e37_79b9_u64;
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..(seed % 40) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push_str(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            assert_eq!(normalize(&text), plain(&text), "{text:?}");
        }
        for b in 0u8..=0x7f {
            let text = String::from_utf8(vec![b; 9]).unwrap_or_default();
            assert_eq!(normalize(&text), plain(&text), "{b:#x}");
        }
    }

    #[test]
    fn never_produces_the_separator() {
        let all: String = (0u32..0x800).filter_map(char::from_u32).collect();
        assert!(!normalize(&all).contains(&SEPARATOR));
    }
}
