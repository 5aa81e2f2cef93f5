//! Recognizing secret values in text, in every rendering the guard knows.
//!
//! Each secret's renderings are computed once, when the matcher is built:
//! the value, reversed, ROT13 and as UTF-16 (LE and BE), each of those raw
//! and as hex, base64 (standard and URL-safe, at each of the three byte
//! alignments: the characters that depend on the value's bytes alone, so a
//! secret inside a longer encoded blob is found) and base32 (RFC 4648, at
//! each of the five alignments); the raw value's encodings reversed; and the
//! value as JSON `\uXXXX` escapes. A search is then substring search with
//! one Aho-Corasick automaton per mode over each *view* of the text:
//!
//! - **exact**: byte for byte. Secrets with fewer than
//!   [`MIN_FUZZY_SECRET_ALNUM`] ASCII letters and digits are matched only so.
//! - **folded**: ASCII letters and digits only, lower-cased, everything else
//!   dropped, on both sides. A secret written `S-K-_-a n t…`, split by
//!   newlines, upper-cased, or as UTF-16 (whose zero bytes fold away) is
//!   the same folded string as the secret. An offset map takes a folded
//!   match back to the original text, so redaction replaces it in place.
//!
//! The views: the text itself; percent-decoded once and twice; read as a
//! form (`+` as space); with `\uXXXX` and `\xXX` escapes decoded; and in
//! each of these, every base64, hex and base32 run decoded at every
//! alignment. A rendering (one encoding layer) found in a decoded view
//! (a second layer) is a secret nested two deep: base64 of hex, percent of
//! base64, hex of base64, double percent-encoding, and so on.

use std::ops::Range;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;
use zeroize::Zeroizing;

use crate::secrets::MIN_GUARDED_SECRET_LEN;

/// Secrets with at least this many ASCII letters and digits are matched in
/// the folded forms (case-insensitive, separators ignored) too, and each
/// folded rendering must itself be this long. Shorter ones (8 to 11
/// alphanumerics) are matched byte for byte only, in the same renderings:
/// folded, they would be short enough to turn up in ordinary text.
pub const MIN_FUZZY_SECRET_ALNUM: usize = 12;

/// Encoded renderings shorter than this are not searched for.
const MIN_RENDERING: usize = MIN_GUARDED_SECRET_LEN;

type Secret = Zeroizing<Vec<u8>>;

/// The renderings of all secrets in one matching mode, and which secret
/// each belongs to.
struct Patterns {
    /// `None` only if the automaton could not be built (it cannot, short of
    /// memory); then `fallback` holds the patterns for a plain search.
    ac: Option<AhoCorasick>,
    owners: Vec<usize>,
    fallback: Vec<Secret>,
}

impl Patterns {
    fn build(mut needles: Vec<(Secret, usize)>) -> Patterns {
        needles.retain(|(n, _)| !n.is_empty());
        needles.sort_by(|a, b| a.0.as_slice().cmp(b.0.as_slice()));
        needles.dedup_by(|a, b| a.0.as_slice() == b.0.as_slice());
        let owners = needles.iter().map(|(_, o)| *o).collect();
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(needles.iter().map(|(n, _)| n.as_slice()))
            .ok();
        let fallback = match ac {
            Some(_) => Vec::new(),
            None => needles.into_iter().map(|(n, _)| n).collect(),
        };
        Patterns {
            ac,
            owners,
            fallback,
        }
    }

    fn owner(&self, pattern: usize) -> Option<usize> {
        self.owners.get(pattern).copied()
    }

    fn first(&self, hay: &[u8]) -> Option<usize> {
        if self.owners.is_empty() {
            return None;
        }
        match &self.ac {
            Some(ac) => ac
                .find(hay)
                .and_then(|m| self.owner(m.pattern().as_usize())),
            None => self
                .fallback
                .iter()
                .position(|n| memchr::memmem::find(hay, n).is_some())
                .and_then(|i| self.owner(i)),
        }
    }

    fn all(&self, hay: &[u8], out: &mut Vec<(Range<usize>, usize)>) {
        if self.owners.is_empty() {
            return;
        }
        match &self.ac {
            Some(ac) => {
                for m in ac.find_iter(hay) {
                    if let Some(o) = self.owner(m.pattern().as_usize()) {
                        out.push((m.range(), o));
                    }
                }
            }
            None => {
                for (i, n) in self.fallback.iter().enumerate() {
                    if let Some(o) = self.owner(i) {
                        for at in memchr::memmem::find_iter(hay, n.as_slice()) {
                            out.push((at..at + n.len(), o));
                        }
                    }
                }
            }
        }
    }
}

/// All secrets' renderings, ready to search.
pub(crate) struct Matcher {
    exact: Patterns,
    folded: Patterns,
    /// Length of the longest rendering, in bytes.
    longest: usize,
}

impl Matcher {
    /// Secrets are `(owner, value)`; values shorter than
    /// [`MIN_GUARDED_SECRET_LEN`] are skipped.
    pub(crate) fn new<'a>(secrets: impl IntoIterator<Item = (usize, &'a str)>) -> Matcher {
        let mut exact = Vec::new();
        let mut folded = Vec::new();
        let mut longest = 0;
        for (owner, value) in secrets {
            if value.len() < MIN_GUARDED_SECRET_LEN {
                continue;
            }
            let fuzzy =
                value.bytes().filter(u8::is_ascii_alphanumeric).count() >= MIN_FUZZY_SECRET_ALNUM;
            for r in renderings(value) {
                longest = longest.max(r.len());
                if fuzzy {
                    let mut f = Zeroizing::new(Vec::new());
                    fold(&r, &mut f, None);
                    if f.len() >= MIN_FUZZY_SECRET_ALNUM {
                        folded.push((f, owner));
                        continue;
                    }
                }
                if r.len() >= MIN_RENDERING {
                    exact.push((r, owner));
                }
            }
        }
        Matcher {
            exact: Patterns::build(exact),
            folded: Patterns::build(folded),
            longest,
        }
    }

    /// The longest rendering of any secret, in bytes.
    pub(crate) fn longest(&self) -> usize {
        self.longest
    }

    /// The owner of a secret found in `hay` in any rendering and any view.
    pub(crate) fn find(&self, hay: &[u8]) -> Option<usize> {
        self.scan(hay, None)
    }

    /// Every located occurrence in `hay` itself (a rendering, or a run
    /// that decodes to one), pushed to `spans`; returns the owner of a
    /// secret seen only in a decoded view of the whole text (percent,
    /// form, escapes), which cannot be placed.
    pub(crate) fn locate(
        &self,
        hay: &[u8],
        spans: &mut Vec<(Range<usize>, usize)>,
    ) -> Option<usize> {
        self.scan(hay, Some(spans))
    }

    fn scan(&self, hay: &[u8], spans: Option<&mut Vec<(Range<usize>, usize)>>) -> Option<usize> {
        if hay.is_empty() {
            return None;
        }
        let mut folded = Zeroizing::new(Vec::with_capacity(hay.len()));
        // Level 0: the text itself, where every match can be placed.
        match spans {
            Some(out) => {
                self.exact.all(hay, out);
                let mut map = Vec::with_capacity(hay.len());
                fold(hay, &mut folded, Some(&mut map));
                let mut found = Vec::new();
                self.folded.all(&folded, &mut found);
                for (r, o) in found {
                    if let (Some(&s), Some(&e)) = (map.get(r.start), map.get(r.end - 1)) {
                        out.push((s..e + 1, o));
                    }
                }
                let mut scratch = Zeroizing::new(Vec::new());
                decoded_runs(hay, |run, decoded| {
                    if let Some(o) = self.in_buffer(decoded, &mut scratch) {
                        out.push((run, o));
                    }
                    false
                });
            }
            None => {
                if let Some(o) = self.in_buffer(hay, &mut folded) {
                    return Some(o);
                }
                let mut hit = None;
                decoded_runs(hay, |_, decoded| {
                    hit = self.in_buffer(decoded, &mut folded);
                    hit.is_some()
                });
                if hit.is_some() {
                    return hit;
                }
            }
        }
        // Whole-text decodings: a find here cannot be placed in `hay`.
        for view in views(hay) {
            if let Some(o) = self.in_buffer(&view, &mut folded) {
                return Some(o);
            }
            let mut hit = None;
            decoded_runs(&view, |_, decoded| {
                hit = self.in_buffer(decoded, &mut folded);
                hit.is_some()
            });
            if hit.is_some() {
                return hit;
            }
        }
        None
    }

    /// Exact or folded rendering in `buf` (a view or a decoded run), and in
    /// its percent-decoding (base64 of a percent-encoded secret).
    fn in_buffer(&self, buf: &[u8], scratch: &mut Vec<u8>) -> Option<usize> {
        let hit = self.exact.first(buf).or_else(|| {
            fold(buf, scratch, None);
            self.folded.first(scratch)
        });
        if hit.is_some() || !buf.contains(&b'%') {
            return hit;
        }
        let decoded: Secret = Zeroizing::new(percent_encoding::percent_decode(buf).collect());
        self.exact.first(&decoded).or_else(|| {
            fold(&decoded, scratch, None);
            self.folded.first(scratch)
        })
    }
}

/// ASCII letters and digits of `src`, lower-cased, into `dst`; with `map`,
/// the index in `src` of each byte kept.
fn fold(src: &[u8], dst: &mut Vec<u8>, mut map: Option<&mut Vec<usize>>) {
    dst.clear();
    if let Some(m) = map.as_deref_mut() {
        m.clear();
    }
    for (i, b) in src.iter().enumerate() {
        if b.is_ascii_alphanumeric() {
            dst.push(b.to_ascii_lowercase());
            if let Some(m) = map.as_deref_mut() {
                m.push(i);
            }
        }
    }
}

/// Every form of `value` the guard searches for (see the module docs).
fn renderings(value: &str) -> Vec<Secret> {
    let raw = value.as_bytes();
    let utf16le: Secret = Zeroizing::new(value.encode_utf16().flat_map(u16::to_le_bytes).collect());
    let utf16be: Secret = Zeroizing::new(value.encode_utf16().flat_map(u16::to_be_bytes).collect());
    let bases: [Secret; 5] = [
        Zeroizing::new(raw.to_vec()),
        reversed(raw),
        Zeroizing::new(raw.iter().map(|b| rot13(*b)).collect()),
        utf16le,
        utf16be,
    ];
    let mut out = Vec::new();
    for (i, base) in bases.iter().enumerate() {
        out.push(base.clone());
        let first = out.len();
        encodings(base, &mut out);
        if i == 0 {
            // `base64 | rev` and the like.
            let encoded: Vec<Secret> = out[first..].iter().map(|e| reversed(e)).collect();
            out.extend(encoded);
        }
    }
    for upper in [false, true] {
        let escaped: String = value
            .encode_utf16()
            .map(|u| {
                if upper {
                    format!("\\u{u:04X}")
                } else {
                    format!("\\u{u:04x}")
                }
            })
            .collect();
        out.push(Zeroizing::new(escaped.into_bytes()));
    }
    out
}

fn reversed(bytes: &[u8]) -> Secret {
    Zeroizing::new(bytes.iter().rev().copied().collect())
}

fn rot13(b: u8) -> u8 {
    match b {
        b'a'..=b'z' => (b - b'a' + 13) % 26 + b'a',
        b'A'..=b'Z' => (b - b'A' + 13) % 26 + b'A',
        other => other,
    }
}

/// Hex in both cases; base64 (both alphabets) and base32 (both cases) at
/// every alignment, as the characters that depend on `bytes` alone.
fn encodings(bytes: &[u8], out: &mut Vec<Secret>) {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    out.push(Zeroizing::new(hex::encode(bytes).into_bytes()));
    out.push(Zeroizing::new(hex::encode_upper(bytes).into_bytes()));
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        cores(bytes, 6, 3, |input| engine.encode(input), out);
    }
    let mut base32 = Vec::new();
    cores(
        bytes,
        5,
        5,
        |input| data_encoding::BASE32_NOPAD.encode(input),
        &mut base32,
    );
    for core in base32 {
        out.push(Zeroizing::new(core.to_ascii_lowercase()));
        out.push(core);
    }
}

/// For each alignment `lead` in `0..group` (bytes before the value in the
/// encoded input), the encoded characters that hold only the value's bits:
/// character `i` holds bits `[bits*i, bits*(i+1))`, the value bits
/// `[8*lead, 8*(lead+len))`.
fn cores(
    bytes: &[u8],
    bits: usize,
    group: usize,
    encode: impl Fn(&[u8]) -> String,
    out: &mut Vec<Secret>,
) {
    for lead in 0..group {
        let mut input = Zeroizing::new(vec![0u8; lead]);
        input.extend_from_slice(bytes);
        let encoded = Zeroizing::new(encode(input.as_slice()));
        let first = (8 * lead).div_ceil(bits);
        let end = (8 * (lead + bytes.len())) / bits;
        if let Some(core) = encoded.get(first..end)
            && core.len() >= MIN_RENDERING
        {
            out.push(Zeroizing::new(core.as_bytes().to_vec()));
        }
    }
}

/// The whole-text decodings of `hay` worth searching: percent-decoded once
/// and twice, as a form, with escapes decoded (of the text and of its
/// percent-decoding).
fn views(hay: &[u8]) -> Vec<Secret> {
    let mut out: Vec<Secret> = Vec::new();
    if hay.contains(&b'%') {
        let once: Secret = Zeroizing::new(percent_encoding::percent_decode(hay).collect());
        if once.contains(&b'%') {
            out.push(Zeroizing::new(
                percent_encoding::percent_decode(&once).collect(),
            ));
        }
        if has_escape(&once) {
            out.push(unescape(&once));
        }
        out.push(once);
    }
    if hay.contains(&b'+') {
        out.push(form_decode(hay));
    }
    if has_escape(hay) {
        out.push(unescape(hay));
    }
    out
}

fn has_escape(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, b"\\u").is_some() || memchr::memmem::find(bytes, b"\\x").is_some()
}

/// `\uXXXX` (UTF-16 code units, surrogate pairs joined) and `\xXX` decoded,
/// everything else kept: the escapes of JSON, JavaScript and shell
/// `printf`.
fn unescape(bytes: &[u8]) -> Secret {
    let mut out = Zeroizing::new(Vec::with_capacity(bytes.len()));
    let mut units: Vec<u16> = Vec::new();
    let flush = |units: &mut Vec<u16>, out: &mut Vec<u8>| {
        for c in char::decode_utf16(units.drain(..)) {
            let c = c.unwrap_or(char::REPLACEMENT_CHARACTER);
            out.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes());
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if let Some(u) = bytes.get(i + 1..i + 6).and_then(|e| hex_escape(e, b'u')) {
                units.push(u);
                i += 6;
                continue;
            }
            if let Some(x) = bytes.get(i + 1..i + 4).and_then(|e| hex_escape(e, b'x')) {
                flush(&mut units, &mut out);
                out.push(x.to_be_bytes()[1]);
                i += 4;
                continue;
            }
        }
        flush(&mut units, &mut out);
        out.push(bytes[i]);
        i += 1;
    }
    flush(&mut units, &mut out);
    out
}

/// `u` + 4 hex digits, or `x` + 2: the value.
fn hex_escape(e: &[u8], kind: u8) -> Option<u16> {
    let (&first, digits) = e.split_first()?;
    if first != kind || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u16::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// `%XX` decoded and `+` read as a space, as a server reads a form.
fn form_decode(bytes: &[u8]) -> Secret {
    let plus_as_space: Secret = Zeroizing::new(
        bytes
            .iter()
            .map(|b| if *b == b'+' { b' ' } else { *b })
            .collect(),
    );
    Zeroizing::new(percent_encoding::percent_decode(&plus_as_space).collect())
}

/// Calls `visit(run, decoded)` for each base64, hex and base32 run of
/// `bytes` decoded at each alignment, until `visit` returns true.
fn decoded_runs(bytes: &[u8], mut visit: impl FnMut(Range<usize>, &[u8]) -> bool) {
    // Base64: line breaks inside a run are skipped (MIME wraps at 76).
    for run in runs(
        bytes,
        |b| is_base64_char(b) || b == b'\r' || b == b'\n',
        MIN_GUARDED_SECRET_LEN * 4 / 3,
    ) {
        let normalized: Secret = Zeroizing::new(
            bytes[run.clone()]
                .iter()
                .filter(|b| !matches!(b, b'\r' | b'\n'))
                .map(|b| match b {
                    b'-' => b'+',
                    b'_' => b'/',
                    other => *other,
                })
                .collect(),
        );
        for offset in 0..4 {
            let Some(rest) = normalized.get(offset..) else {
                continue;
            };
            // A trailing single character cannot encode a byte.
            let usable = match rest.len() % 4 {
                1 => &rest[..rest.len() - 1],
                _ => rest,
            };
            if let Ok(decoded) = LENIENT_BASE64.decode(usable) {
                let decoded = Zeroizing::new(decoded);
                if visit(run.clone(), &decoded) {
                    return;
                }
            }
        }
    }
    for run in runs(bytes, |b| b.is_ascii_hexdigit(), MIN_GUARDED_SECRET_LEN * 2) {
        let hexits = &bytes[run.clone()];
        for offset in 0..2 {
            let rest = &hexits[offset..];
            if let Ok(decoded) = hex::decode(&rest[..rest.len() / 2 * 2]) {
                let decoded = Zeroizing::new(decoded);
                if visit(run.clone(), &decoded) {
                    return;
                }
            }
        }
    }
    let Some(base32) = LENIENT_BASE32.as_ref() else {
        return;
    };
    for run in runs(bytes, is_base32_char, MIN_GUARDED_SECRET_LEN * 8 / 5) {
        let chars = &bytes[run.clone()];
        for offset in 0..8 {
            let Some(rest) = chars.get(offset..) else {
                continue;
            };
            let mut len = rest.len();
            while len > 0 && base32.decode_len(len).is_err() {
                len -= 1;
            }
            if let Ok(decoded) = base32.decode(&rest[..len]) {
                let decoded = Zeroizing::new(decoded);
                if visit(run.clone(), &decoded) {
                    return;
                }
            }
        }
    }
}

fn is_base64_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')
}

fn is_base32_char(b: u8) -> bool {
    b.is_ascii_alphabetic() || (b'2'..=b'7').contains(&b)
}

/// Maximal runs of bytes satisfying `keep`, at least `min` long.
fn runs(bytes: &[u8], keep: impl Fn(u8) -> bool, min: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, b) in bytes.iter().enumerate() {
        if keep(*b) {
            start.get_or_insert(i);
        } else if let Some(s) = start.take()
            && i - s >= min
        {
            out.push(s..i);
        }
    }
    if let Some(s) = start
        && bytes.len() - s >= min
    {
        out.push(s..bytes.len());
    }
    out
}

/// Decodes unpadded runs cut anywhere: the final partial group's unused
/// bits need not be zero, since the run may be a slice of a longer string.
const LENIENT_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone),
);

/// RFC 4648 base32, unpadded, either case, trailing bits not checked (a
/// run may be cut anywhere).
static LENIENT_BASE32: LazyLock<Option<data_encoding::Encoding>> = LazyLock::new(|| {
    let mut spec = data_encoding::BASE32_NOPAD.specification();
    spec.check_trailing_bits = false;
    spec.translate.from = "abcdefghijklmnopqrstuvwxyz".into();
    spec.translate.to = "ABCDEFGHIJKLMNOPQRSTUVWXYZ".into();
    spec.encoding().ok()
});
