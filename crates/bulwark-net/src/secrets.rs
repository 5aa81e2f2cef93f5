//! The secret store, and the search for secret values in outgoing bytes
//! and in text on its way to the model.
//!
//! Values live in [`SecretString`] (zeroized on drop, redacted in `Debug`).
//! The exfiltration guard looks for every stored value in what an agent
//! is about to send, in the renderings an agent could hide it in (see
//! `matcher.rs`): raw, reversed, ROT13, UTF-16, JSON `\u` escapes; hex,
//! base64 and base32 at any offset inside a longer encoded string;
//! percent-encoded; nested two deep (base64 of hex, percent of base64,
//! double percent-encoding); and, for values with at least
//! [`MIN_FUZZY_SECRET_ALNUM`] letters and digits, case-changed or with any
//! separators (spaces, newlines, dashes) between its characters. The
//! renderings are computed once per store; a search is substring search.
//!
//! It is a tripwire, not a proof: what it cannot see is listed in the
//! README (encryption, compression, encodings it does not know, a secret
//! split across destinations or over longer than the window of recent
//! requests, paraphrase).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::OnceLock;

use secrecy::{ExposeSecret, SecretString};

pub use crate::matcher::MIN_FUZZY_SECRET_ALNUM;
use crate::matcher::Matcher;

/// Values shorter than this are not searched for (they would match
/// ordinary text); `bulwark credentials check` reports such keys.
pub const MIN_GUARDED_SECRET_LEN: usize = 8;

struct Entry {
    value: SecretString,
    /// Provider API keys are guarded but never injected into tool requests.
    injectable: bool,
}

/// `text` with `value`, in every rendering the guard knows, replaced by
/// `marker`: for one secret held outside a [`SecretStore`] (a provider
/// key whose server may echo it back in an error).
pub fn redact_value(text: &str, value: &str, marker: &str) -> String {
    if value.is_empty() {
        return text.to_string();
    }
    if value.len() < MIN_GUARDED_SECRET_LEN {
        return text.replace(value, marker);
    }
    let matcher = Matcher::new([(0, value)]);
    redact_with(&matcher, text, |_| marker.to_string())
}

/// Replace what `matcher` finds in `text` by `marker(owner)`: each placed
/// occurrence in place; if a secret is seen only in a decoding of the whole
/// text (percent, form, escapes), each line that carries it; if it still
/// shows (spread over lines), the whole text.
fn redact_with(matcher: &Matcher, text: &str, marker: impl Fn(usize) -> String) -> String {
    let mut spans = Vec::new();
    let unplaced = matcher.locate(text.as_bytes(), &mut spans);
    if spans.is_empty() && unplaced.is_none() {
        return text.to_string();
    }
    let mut out = splice(text, spans, &marker);
    if unplaced.is_some() || matcher.find(out.as_bytes()).is_some() {
        out = out
            .split_inclusive('\n')
            .map(|line| match matcher.find(line.as_bytes()) {
                Some(o) if line.ends_with('\n') => format!("{}\n", marker(o)),
                Some(o) => marker(o),
                None => line.to_string(),
            })
            .collect();
        if let Some(o) = matcher.find(out.as_bytes()) {
            out = marker(o);
        }
    }
    out
}

/// `text` with each span (merged where they overlap, widened to character
/// boundaries) replaced by its marker.
fn splice(
    text: &str,
    mut spans: Vec<(Range<usize>, usize)>,
    marker: &impl Fn(usize) -> String,
) -> String {
    spans.sort_by_key(|(r, _)| (r.start, std::cmp::Reverse(r.end)));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut pending: Option<(Range<usize>, usize)> = None;
    let emit = |out: &mut String, at: &mut usize, (r, o): (Range<usize>, usize)| {
        let mut start = r.start.min(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = r.end.min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let start = start.max(*at);
        if end <= start {
            return;
        }
        out.push_str(&text[*at..start]);
        out.push_str(&marker(o));
        *at = end;
    };
    for (r, o) in spans {
        pending = match pending {
            Some((p, po)) if r.start < p.end => Some((p.start..p.end.max(r.end), po)),
            Some(p) => {
                emit(&mut out, &mut at, p);
                Some((r, o))
            }
            None => Some((r, o)),
        };
    }
    if let Some(p) = pending {
        emit(&mut out, &mut at, p);
    }
    out.push_str(&text[at..]);
    out
}

/// Named secrets, read once at start-up. `Debug` shows names only.
#[derive(Default)]
pub struct SecretStore {
    entries: BTreeMap<String, Entry>,
    /// Every guarded value's renderings, built on first use after the
    /// last insert.
    matcher: OnceLock<Matcher>,
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
        self.entries
            .insert(name.to_string(), Entry { value, injectable });
        self.matcher = OnceLock::new();
    }

    fn matcher(&self) -> &Matcher {
        self.matcher.get_or_init(|| {
            Matcher::new(
                self.entries
                    .values()
                    .enumerate()
                    .map(|(i, e)| (i, e.value.expose_secret())),
            )
        })
    }

    fn name_of(&self, owner: usize) -> Option<&str> {
        self.entries.keys().nth(owner).map(String::as_str)
    }

    /// Bytes of recent traffic to keep per destination so a secret split
    /// across requests is seen whole: twice the longest rendering of any
    /// guarded secret (zero when none is guarded).
    pub fn window_len(&self) -> usize {
        2 * self.matcher().longest()
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
    /// guarded renderings, or `None`.
    pub fn find_in(&self, bytes: &[u8]) -> Option<&str> {
        if self.entries.is_empty() || bytes.is_empty() {
            return None;
        }
        self.matcher().find(bytes).and_then(|o| self.name_of(o))
    }

    /// `text` with every occurrence of a guarded secret, in any of the
    /// renderings [`SecretStore::find_in`] knows, replaced by a marker
    /// naming the key: for anything shown to the model or logged that came
    /// from outside (a page that echoes a request back, a command that
    /// prints its environment). An occurrence that can only be seen in a
    /// decoding of the whole text (percent-encoded, `\u` escapes) takes
    /// its line with it. The result never contains a secret the guard
    /// would find.
    pub fn redact(&self, text: &str) -> String {
        if self.entries.is_empty() || text.is_empty() {
            return text.to_string();
        }
        redact_with(self.matcher(), text, |o| {
            format!("[secret {} redacted]", self.name_of(o).unwrap_or("?"))
        })
    }
}
