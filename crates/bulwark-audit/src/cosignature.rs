//! Witness cosignatures (c2sp.org/tlog-cosignature, the Ed25519
//! `cosignature/v1` type).
//!
//! A cosignature is a witness's statement that, at the time it names, the
//! checkpoint is the largest tree it has seen of that log and consistent with
//! every earlier one it saw. It is a note signature line whose signature is
//! `timestamp (u64, big-endian) ‖ Ed25519 signature` over
//!
//! ```text
//! cosignature/v1
//! time <timestamp>
//! <the checkpoint body, including its final newline>
//! ```
//!
//! Cosigner keys differ from log keys only in their signature-type byte
//! (0x04 instead of 0x01), which enters the key ID and the vkey; that keeps a
//! witness key from ever verifying as a log key and the other way round.

use crate::checkpoint::CheckpointError;
use crate::note::{
    check_named_key, format_typed_vkey, is_valid_key_name, parse_signature_line, parse_typed_vkey,
    typed_key_id,
};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

/// The signature-type byte of Ed25519 `cosignature/v1` keys.
pub const SIGNATURE_TYPE_COSIGNATURE_V1: u8 = 0x04;

/// The first line of every signed cosignature message (domain separation).
const HEADER: &str = "cosignature/v1\n";

/// Largest timestamp the spec allows (2^63 - 1).
pub const MAX_TIMESTAMP: u64 = i64::MAX as u64;

/// Bytes after the key ID: timestamp and signature.
const TIMESTAMPED_SIGNATURE_LEN: usize = 8 + Signature::BYTE_SIZE;

/// The key ID of a cosigner key:
/// `SHA-256(name ‖ 0x0A ‖ 0x04 ‖ public key)[:4]` as a big-endian u32.
pub fn cosigner_key_id(name: &str, key: &VerifyingKey) -> u32 {
    typed_key_id(name, SIGNATURE_TYPE_COSIGNATURE_V1, key)
}

/// A witness's public key, with the name and key ID its cosignature lines
/// carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosignerKey {
    name: String,
    id: u32,
    key: VerifyingKey,
}

impl CosignerKey {
    /// A cosigner verifier for `key` under `name`.
    pub fn new(name: &str, key: VerifyingKey) -> Result<Self, CheckpointError> {
        check_named_key(name, &key)?;
        Ok(Self {
            name: name.to_owned(),
            id: cosigner_key_id(name, &key),
            key,
        })
    }

    /// The cosigner verifier matching a signing key.
    pub fn from_signing_key(name: &str, key: &SigningKey) -> Result<Self, CheckpointError> {
        Self::new(name, key.verifying_key())
    }

    /// Parses `<name>+<8 lowercase hex key ID>+<base64(0x04 ‖ public key)>`
    /// and checks that the key ID is the one the name and key imply.
    pub fn parse(vkey: &str) -> Result<Self, CheckpointError> {
        let (name, id, key) = parse_typed_vkey(
            vkey,
            SIGNATURE_TYPE_COSIGNATURE_V1,
            "not an Ed25519 cosignature/v1 key (type 0x04)",
        )?;
        let verifier = Self::new(name, key)?;
        if verifier.id != id {
            return Err(CheckpointError::KeyIdMismatch);
        }
        Ok(verifier)
    }

    /// The name cosignature lines carry.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key ID cosignature lines carry.
    pub fn key_id(&self) -> u32 {
        self.id
    }

    /// The Ed25519 public key.
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.key
    }

    /// The vkey text form that [`parse`](Self::parse) reads.
    pub fn to_vkey(&self) -> String {
        format_typed_vkey(
            &self.name,
            self.id,
            SIGNATURE_TYPE_COSIGNATURE_V1,
            &self.key,
        )
    }
}

impl std::fmt::Display for CosignerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_vkey())
    }
}

impl std::str::FromStr for CosignerKey {
    type Err = CheckpointError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// One parsed cosignature line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosignature {
    /// The cosigner's key name.
    pub name: String,
    /// The cosigner's key ID.
    pub key_id: u32,
    /// When the witness cosigned (seconds since the Unix epoch).
    pub timestamp: u64,
    signature: [u8; Signature::BYTE_SIZE],
}

impl Cosignature {
    /// Parses `— <name> <base64(key ID ‖ timestamp ‖ signature)>` (without
    /// the final newline). Checks the shape only: [`verify`](Self::verify)
    /// checks the signature.
    pub fn parse_line(line: &str) -> Result<Self, CheckpointError> {
        let malformed = CheckpointError::MalformedSignatureLine { line: 1 };
        let (name, key_id, rest) = parse_signature_line(line, 0)?;
        if rest.len() != TIMESTAMPED_SIGNATURE_LEN {
            return Err(malformed);
        }
        let (time, signature) = rest.split_at(8);
        let timestamp = u64::from_be_bytes(time.try_into().map_err(|_| malformed.clone())?);
        if timestamp > MAX_TIMESTAMP {
            return Err(malformed);
        }
        Ok(Self {
            name: name.to_owned(),
            key_id,
            timestamp,
            signature: signature.try_into().map_err(|_| malformed)?,
        })
    }

    /// The line form, `— <name> <base64>`, without a final newline.
    pub fn to_line(&self) -> String {
        let mut blob = Vec::with_capacity(4 + TIMESTAMPED_SIGNATURE_LEN);
        blob.extend_from_slice(&self.key_id.to_be_bytes());
        blob.extend_from_slice(&self.timestamp.to_be_bytes());
        blob.extend_from_slice(&self.signature);
        format!("\u{2014} {} {}", self.name, BASE64.encode(blob))
    }

    /// Verifies this cosignature of the checkpoint `body` (the note text,
    /// ending in its newline) by `key`: name and key ID must be the key's,
    /// and the signature must verify strictly.
    pub fn verify(&self, body: &str, key: &CosignerKey) -> Result<(), CheckpointError> {
        let bad = || CheckpointError::BadSignature {
            name: self.name.clone(),
            key_id: self.key_id,
        };
        if self.name != key.name || self.key_id != key.id {
            return Err(CheckpointError::NoTrustedSignature);
        }
        let message = signed_message(body, self.timestamp)?;
        let signature = Signature::from_bytes(&self.signature);
        key.key
            .verify_strict(message.as_bytes(), &signature)
            .map_err(|_| bad())
    }
}

/// The message a `cosignature/v1` signs.
fn signed_message(body: &str, timestamp: u64) -> Result<String, CheckpointError> {
    if !body.ends_with('\n') {
        return Err(CheckpointError::InvalidNoteText(
            "does not end in a newline",
        ));
    }
    if body.chars().any(|c| c < ' ' && c != '\n') {
        return Err(CheckpointError::ControlCharacter);
    }
    if timestamp > MAX_TIMESTAMP {
        return Err(CheckpointError::InvalidNoteText(
            "cosignature timestamp exceeds 2^63 - 1",
        ));
    }
    Ok(format!("{HEADER}time {timestamp}\n{body}"))
}

/// Cosigns the checkpoint `body` (already verified and judged consistent by
/// the caller) with the witness key `key` under `name` at `timestamp`.
pub fn cosign(
    body: &str,
    key: &SigningKey,
    name: &str,
    timestamp: u64,
) -> Result<Cosignature, CheckpointError> {
    if !is_valid_key_name(name) {
        return Err(CheckpointError::InvalidKeyName);
    }
    let message = signed_message(body, timestamp)?;
    let signature = key.sign(message.as_bytes());
    Ok(Cosignature {
        name: name.to_owned(),
        key_id: cosigner_key_id(name, &key.verifying_key()),
        timestamp,
        signature: signature.to_bytes(),
    })
}

/// The text of a signed note (everything before the last blank line,
/// ending in its newline), or `None` when `note` has no signature block.
/// Checks no signature.
pub fn note_text(note: &str) -> Option<&str> {
    let split = note.rfind("\n\n")?;
    Some(&note[..=split])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Checkpoint, VerifierKey, generate_signing_key, note::open_note};

    fn body() -> String {
        Checkpoint::new("example.com/log", 7, [3; 32])
            .body()
            .unwrap()
    }

    #[test]
    fn cosignature_round_trips_and_verifies() {
        let key = generate_signing_key();
        let verifier = CosignerKey::from_signing_key("w.example/1", &key).unwrap();
        let parsed = CosignerKey::parse(&verifier.to_vkey()).unwrap();
        assert_eq!(parsed, verifier);
        let cosig = cosign(&body(), &key, "w.example/1", 1_700_000_000).unwrap();
        let line = cosig.to_line();
        let again = Cosignature::parse_line(&line).unwrap();
        assert_eq!(again, cosig);
        again.verify(&body(), &verifier).unwrap();
    }

    #[test]
    fn cosignature_is_refused_for_another_body_time_or_key() {
        let key = generate_signing_key();
        let verifier = CosignerKey::from_signing_key("w", &key).unwrap();
        let cosig = cosign(&body(), &key, "w", 5).unwrap();
        let other = Checkpoint::new("example.com/log", 8, [3; 32])
            .body()
            .unwrap();
        assert!(cosig.verify(&other, &verifier).is_err());
        let mut shifted = cosig.clone();
        shifted.timestamp = 6;
        assert!(shifted.verify(&body(), &verifier).is_err());
        let stranger = CosignerKey::from_signing_key("w", &generate_signing_key()).unwrap();
        assert!(cosig.verify(&body(), &stranger).is_err());
    }

    #[test]
    fn cosigner_keys_and_log_keys_do_not_mix() {
        let key = generate_signing_key();
        let log = VerifierKey::from_signing_key("n", &key).unwrap();
        let witness = CosignerKey::from_signing_key("n", &key).unwrap();
        assert_ne!(log.key_id(), witness.key_id());
        assert!(CosignerKey::parse(&log.to_vkey()).is_err());
        assert!(VerifierKey::parse(&witness.to_vkey()).is_err());
        // A cosignature appended to a note does not count as the log's
        // signature, even by the same key material.
        let cosig = cosign(&body(), &key, "n", 1).unwrap();
        let note = format!("{}\n{}\n", body(), cosig.to_line());
        assert!(open_note(&note, &[log]).is_err());
    }

    #[test]
    fn malformed_lines_are_refused() {
        for line in [
            "",
            "— w",
            "— w AAAA",
            "- w AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        ] {
            assert!(Cosignature::parse_line(line).is_err(), "{line:?}");
        }
        let key = generate_signing_key();
        let mut cosig = cosign(&body(), &key, "w", 1).unwrap();
        cosig.timestamp = MAX_TIMESTAMP + 1;
        assert!(Cosignature::parse_line(&cosig.to_line()).is_err());
    }

    #[test]
    fn note_text_is_the_text_before_the_last_blank_line() {
        assert_eq!(note_text("a\nb\n\n— x y\n"), Some("a\nb\n"));
        assert_eq!(note_text("a\nb\n"), None);
    }
}
