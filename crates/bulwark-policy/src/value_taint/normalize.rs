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

/// Appends the normal form of `text` to `out`.
pub(crate) fn normalize_into(text: &str, out: &mut Vec<u8>) {
    let start = out.len();
    out.reserve(text.len());
    // Starting "after a space" drops leading whitespace.
    let mut after_space = true;
    for &byte in text.as_bytes() {
        let folded = FOLD[usize::from(byte)];
        let space = folded == b' ';
        if space && after_space {
            continue;
        }
        out.push(folded);
        after_space = space;
    }
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

    #[test]
    fn never_produces_the_separator() {
        let all: String = (0u32..0x800).filter_map(char::from_u32).collect();
        assert!(!normalize(&all).contains(&SEPARATOR));
    }
}
