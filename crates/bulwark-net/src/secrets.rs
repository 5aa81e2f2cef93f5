//! The secret store, and the search for secret values in outgoing bytes.
//!
//! Values live in [`SecretString`] (zeroized on drop, redacted in `Debug`).
//! The exfiltration guard looks for every stored value in what an agent
//! is about to send, in the forms an agent could hide it in: raw, percent-
//! encoded, base64 (standard or URL-safe, any alignment, padded or not) and
//! hex (either case). It decodes candidate runs and searches for the raw
//! value, rather than pre-computing encodings, so a secret embedded at any
//! offset inside a longer encoded string is still found.

use std::collections::BTreeMap;

use base64::Engine as _;
use secrecy::{ExposeSecret, SecretString};
use zeroize::Zeroizing;

/// Values shorter than this are not searched for (they would match
/// ordinary text); `bulwark credentials check` reports such keys.
pub const MIN_GUARDED_SECRET_LEN: usize = 8;

struct Entry {
    value: SecretString,
    /// Provider API keys are guarded but never injected into tool requests.
    injectable: bool,
    /// What [`SecretStore::redact`] looks for besides the raw value: the
    /// hex and base64 renderings (see [`encoded_forms`]). Zeroized on drop
    /// like the value, since each one reveals it.
    encoded: Vec<Zeroizing<String>>,
}

/// `text` with `value` and its hex and base64 renderings replaced by
/// `marker`: for one secret held outside a [`SecretStore`] (a provider
/// key whose server may echo it back in an error).
pub fn redact_value(text: &str, value: &str, marker: &str) -> String {
    if value.is_empty() {
        return text.to_string();
    }
    let encoded = encoded_forms(value);
    replace_forms(text.to_string(), value, &encoded, marker)
}

fn replace_forms(
    mut text: String,
    value: &str,
    encoded: &[Zeroizing<String>],
    marker: &str,
) -> String {
    for form in std::iter::once(value).chain(encoded.iter().map(|f| f.as_str())) {
        if text.contains(form) {
            text = text.replace(form, marker);
        }
    }
    text
}

/// Base64 runs shorter than this are not redacted: a handful of characters
/// could occur in unrelated encoded data.
const MIN_REDACTED_BASE64: usize = 8;

/// The encodings of `value` that text coming back from outside may carry
/// (a server echoing a request, a command printing `base64` of its env):
/// hex in both cases, and for base64 (standard and URL-safe alphabets) at
/// each of the three byte alignments, the characters that depend on the
/// value's bytes alone. Those characters are what appears whatever was
/// encoded before or after the secret, so an embedded secret is caught.
fn encoded_forms(value: &str) -> Vec<Zeroizing<String>> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let bytes = value.as_bytes();
    let mut forms = vec![
        Zeroizing::new(hex::encode(bytes)),
        Zeroizing::new(hex::encode_upper(bytes)),
    ];
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        for lead in 0..3usize {
            let mut input = Zeroizing::new(vec![0u8; lead]);
            input.extend_from_slice(bytes);
            let encoded = Zeroizing::new(engine.encode(input.as_slice()));
            // Character i holds bits [6i, 6i+6); the value holds bits
            // [8*lead, 8*(lead+len)).
            let first = (8 * lead).div_ceil(6);
            let end = (8 * (lead + bytes.len())) / 6;
            if let Some(core) = encoded.get(first..end)
                && core.len() >= MIN_REDACTED_BASE64
                && !forms.iter().any(|f| f.as_str() == core)
            {
                forms.push(Zeroizing::new(core.to_string()));
            }
        }
    }
    forms
}

/// Named secrets, read once at start-up. `Debug` shows names only.
#[derive(Default)]
pub struct SecretStore {
    entries: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.entries.keys()).finish()
    }
}

impl SecretStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a secret. `injectable = false` keeps it out of every tool
    /// request (the guard still looks for it): for the model provider's key.
    pub fn insert(&mut self, name: &str, value: SecretString, injectable: bool) {
        let encoded = encoded_forms(value.expose_secret());
        self.entries.insert(
            name.to_string(),
            Entry {
                value,
                injectable,
                encoded,
            },
        );
    }

    /// Add each named secret that `lookup` knows (the runtime passes its
    /// start-up environment snapshot). Returns the names it did not know.
    pub fn load_with<'a>(
        &mut self,
        names: impl IntoIterator<Item = &'a str>,
        injectable: bool,
        lookup: impl Fn(&str) -> Option<SecretString>,
    ) -> Vec<String> {
        let mut missing = Vec::new();
        for name in names {
            match lookup(name) {
                Some(v) => self.insert(name, v, injectable),
                None => missing.push(name.to_string()),
            }
        }
        missing
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    pub fn is_injectable(&self, name: &str) -> bool {
        self.entries.get(name).is_some_and(|e| e.injectable)
    }

    /// Whether the guard can recognize this secret (long enough).
    pub fn is_guarded(&self, name: &str) -> bool {
        self.entries
            .get(name)
            .is_some_and(|e| e.value.expose_secret().len() >= MIN_GUARDED_SECRET_LEN)
    }

    /// An injectable secret, for the one other place a grant may send it:
    /// the environment of a child process (a grant with `tools = ["shell"]`).
    pub fn injectable(&self, name: &str) -> Option<&SecretString> {
        self.entries
            .get(name)
            .filter(|e| e.injectable)
            .map(|e| &e.value)
    }

    pub(crate) fn value(&self, name: &str) -> Option<&str> {
        self.entries.get(name).map(|e| e.value.expose_secret())
    }

    /// The name of a secret whose value appears in `bytes` in any of the
    /// guarded encodings, or `None`.
    pub fn find_in(&self, bytes: &[u8]) -> Option<&str> {
        if self.entries.is_empty() || bytes.is_empty() {
            return None;
        }
        let found = |hay: &[u8]| self.raw_match(hay);
        if let Some(name) = found(bytes).or_else(|| self.decoded_match(bytes)) {
            return Some(name);
        }
        // As a server would read it: `%XX` decoded, and `+` either kept (a
        // path, or base64 inside a query) or read as a space (a form).
        if bytes.contains(&b'%') {
            let decoded: Zeroizing<Vec<u8>> =
                Zeroizing::new(percent_encoding::percent_decode(bytes).collect());
            if let Some(name) = found(&decoded).or_else(|| self.decoded_match(&decoded)) {
                return Some(name);
            }
        }
        if bytes.contains(&b'+') {
            let decoded = Zeroizing::new(form_decode(bytes));
            return found(&decoded).or_else(|| self.decoded_match(&decoded));
        }
        None
    }

    /// `text` with every occurrence of a guarded secret (raw, hex or
    /// base64, see [`encoded_forms`]) replaced by a marker naming the key:
    /// for anything shown to the model or logged that came from outside (a
    /// page that echoes a request back, a command that prints its env).
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (name, e) in &self.entries {
            let v = e.value.expose_secret();
            if v.len() >= MIN_GUARDED_SECRET_LEN {
                let marker = format!("[secret {name} redacted]");
                out = replace_forms(out, v, &e.encoded, &marker);
            }
        }
        out
    }

    fn raw_match(&self, hay: &[u8]) -> Option<&str> {
        self.entries.iter().find_map(|(name, e)| {
            let v = e.value.expose_secret().as_bytes();
            (v.len() >= MIN_GUARDED_SECRET_LEN && contains(hay, v)).then_some(name.as_str())
        })
    }

    /// Decode every base64-looking and hex-looking run at every alignment
    /// and search the result.
    fn decoded_match(&self, bytes: &[u8]) -> Option<&str> {
        let min_b64 = MIN_GUARDED_SECRET_LEN * 4 / 3;
        for run in runs(bytes, is_base64_char, min_b64) {
            let normalized: Zeroizing<Vec<u8>> = Zeroizing::new(
                run.iter()
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
                    if let Some(name) = self.raw_match(&decoded) {
                        return Some(name);
                    }
                }
            }
        }
        for run in runs(bytes, |b| b.is_ascii_hexdigit(), MIN_GUARDED_SECRET_LEN * 2) {
            for offset in 0..2 {
                let rest = &run[offset..];
                if let Ok(decoded) = hex::decode(&rest[..rest.len() / 2 * 2]) {
                    let decoded = Zeroizing::new(decoded);
                    if let Some(name) = self.raw_match(&decoded) {
                        return Some(name);
                    }
                }
            }
        }
        None
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

fn is_base64_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')
}

/// Maximal runs of bytes satisfying `keep`, at least `min` long.
fn runs(bytes: &[u8], keep: impl Fn(u8) -> bool, min: usize) -> impl Iterator<Item = &[u8]> {
    bytes
        .split(move |b| !keep(*b))
        .filter(move |r| r.len() >= min)
}

/// Decodes unpadded runs cut anywhere: the final partial group's unused
/// bits need not be zero, since the run may be a slice of a longer string.
const LENIENT_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone),
);

/// `%XX` decoded and `+` read as a space, as a server reads a form.
fn form_decode(bytes: &[u8]) -> Vec<u8> {
    let plus_as_space: Zeroizing<Vec<u8>> = Zeroizing::new(
        bytes
            .iter()
            .map(|b| if *b == b'+' { b' ' } else { *b })
            .collect(),
    );
    percent_encoding::percent_decode(&plus_as_space).collect()
}
