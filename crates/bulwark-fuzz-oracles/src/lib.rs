//! Fuzz oracles for the parsers of signed, untrusted text: checkpoint notes
//! and the other C2SP signed notes of an audit log ([`audit`]), verifier
//! keys, and agent signature files with their listings ([`trust`]); and
//! the injection scanner that reads hostile text ([`injection`]); and the
//! vetting of an MCP server's tool descriptions ([`mcp_vet`]).
//!
//! Each oracle takes arbitrary bytes and panics when a property fails; it
//! never panics otherwise. The same functions run under cargo-fuzz (the
//! targets in `fuzz/fuzz_targets/` are one call each) and, in `cargo test`,
//! over a fixed corpus: valid samples, every truncation, byte flips and a
//! few thousand mutations from a fixed seed ([`seeded`]'s tests). So CI
//! keeps checking what the fuzzer checks, without a nightly toolchain.
//!
//! Keys are fixed (derived from constant seeds), so a crash reproduces.
//! One key, [`Keys::never`], signs nothing: no input may verify under it,
//! whatever the fuzzer finds.

pub mod audit;
pub mod injection;
pub mod mcp_vet;
pub mod trust;

#[cfg(test)]
mod seeded;

use bulwark_audit::{CosignerKey, SigningKey, VerifierKey};

/// The key name of the log keys (and of [`Keys::never`]).
pub const LOG_NAME: &str = "log.example/a";
/// The key name of the witness key.
pub const WITNESS_NAME: &str = "witness.example/w";
/// The key name of agent signing keys.
pub const SIGNER_NAME: &str = "alice";

/// The fixed keys the oracles sign and verify with.
pub struct Keys {
    /// Signs notes as [`LOG_NAME`] and agents as [`SIGNER_NAME`].
    pub log: SigningKey,
    /// A second key under the same names (a handover's new key).
    pub other: SigningKey,
    /// Cosigns as [`WITNESS_NAME`].
    pub witness: SigningKey,
    /// Never signs anything.
    pub never: SigningKey,
}

impl Keys {
    pub fn new() -> Self {
        Self {
            log: SigningKey::from_bytes(&[1; 32]),
            other: SigningKey::from_bytes(&[2; 32]),
            witness: SigningKey::from_bytes(&[3; 32]),
            never: SigningKey::from_bytes(&[4; 32]),
        }
    }

    /// The verifier key of `key` under `name`. The names are valid and the
    /// keys are not small-order points, so this cannot fail; a failure
    /// would be a bug the oracle should report.
    pub fn verifier(name: &str, key: &SigningKey) -> VerifierKey {
        match VerifierKey::from_signing_key(name, key) {
            Ok(v) => v,
            Err(e) => panic!("fixed key {name} rejected: {e}"),
        }
    }

    /// The cosigner key of `key` under `name` (see [`verifier`](Self::verifier)).
    pub fn cosigner(name: &str, key: &SigningKey) -> CosignerKey {
        match CosignerKey::from_signing_key(name, key) {
            Ok(v) => v,
            Err(e) => panic!("fixed key {name} rejected: {e}"),
        }
    }
}

impl Default for Keys {
    fn default() -> Self {
        Self::new()
    }
}

/// Splits an input into byte edits and a payload: `data[0] % 8` edits of
/// three bytes each (big-endian position, XOR mask), then the payload.
/// Lets one byte string describe "this text, signed, then damaged here".
pub(crate) fn edits_and_payload(data: &[u8]) -> (Vec<(usize, u8)>, &[u8]) {
    let Some((&count, rest)) = data.split_first() else {
        return (Vec::new(), data);
    };
    let wanted = usize::from(count % 8);
    let mut edits = Vec::with_capacity(wanted);
    let mut rest = rest;
    while edits.len() < wanted {
        let Some((&[hi, lo, mask], tail)) = rest.split_first_chunk::<3>() else {
            break;
        };
        edits.push((usize::from(u16::from_be_bytes([hi, lo])), mask));
        rest = tail;
    }
    (edits, rest)
}

/// `bytes` with every edit applied (positions wrap around the length).
pub(crate) fn apply_edits(bytes: &[u8], edits: &[(usize, u8)]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.is_empty() {
        return out;
    }
    for &(position, mask) in edits {
        let at = position % out.len();
        out[at] ^= mask;
    }
    out
}

/// A payload made into note text `sign_note` accepts: UTF-8 (lossy),
/// control characters other than newline replaced, a final newline.
pub(crate) fn note_text_from(payload: &[u8]) -> String {
    let mut text: String = String::from_utf8_lossy(payload)
        .chars()
        .map(|c| if c < ' ' && c != '\n' { ' ' } else { c })
        .collect();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}
