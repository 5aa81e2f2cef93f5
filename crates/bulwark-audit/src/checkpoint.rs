//! Signed checkpoints (c2sp.org/tlog-checkpoint): the log's size and root,
//! signed as a C2SP note.
//!
//! A checkpoint is what leaves the machine: whoever holds one can later ask
//! for inclusion and consistency proofs against it, and a log that rewrote
//! history could not produce them. The text form is the interoperable one:
//!
//! ```text
//! <origin>
//! <tree size in decimal>
//! <base64 root hash>
//! [extension lines]
//!
//! — <key name> <base64(key ID ‖ Ed25519 signature)>
//! ```

use crate::merkle::{HASH_LEN, Hash};
use crate::note::{VerifierKey, open_note, sign_note};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::SigningKey;

/// A tree head: which log, how many leaves, and their Merkle root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's identity, e.g. `bulwark.example/audit`. Non-empty, one line.
    pub origin: String,
    /// Number of leaves in the tree.
    pub size: u64,
    /// RFC 6962 root of the first `size` leaves.
    pub root: Hash,
    /// Optional extra lines, signed with the rest. Each must be non-empty.
    /// Not auditable by monitors, so the spec advises against them; kept so
    /// a parsed checkpoint reproduces exactly the text that was signed.
    pub extensions: Vec<String>,
}

/// Why a checkpoint or key could not be produced or was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The note contains an ASCII control character other than newline.
    #[error("the note contains a control character other than newline")]
    ControlCharacter,
    /// No blank line followed by at least one newline-terminated signature
    /// line.
    #[error("the note has no signature block")]
    MissingSignatures,
    /// A signature line is not `— <name> <base64 of at least 5 bytes>`.
    #[error("signature line {line} is malformed")]
    MalformedSignatureLine { line: usize },
    /// More than [`MAX_SIGNATURES`](crate::note::MAX_SIGNATURES) signature
    /// lines.
    #[error("the note has too many signatures")]
    TooManySignatures,
    /// A signature by a trusted key does not verify.
    #[error("the signature by {name} (key ID {key_id:08x}) does not verify")]
    BadSignature { name: String, key_id: u32 },
    /// No signature is by a trusted key.
    #[error("the note is not signed by any trusted key")]
    NoTrustedSignature,
    /// Text handed to [`sign_note`] that would not open again.
    #[error("invalid note text: {0}")]
    InvalidNoteText(&'static str),
    /// The signed text is not a checkpoint body.
    #[error("malformed checkpoint body: {0}")]
    MalformedBody(&'static str),
    /// A key name is empty or contains a space, `+` or control character.
    #[error("invalid key name")]
    InvalidKeyName,
    /// A vkey string could not be parsed.
    #[error("invalid verifier key: {0}")]
    InvalidVerifierKey(&'static str),
    /// A vkey's key ID is not the one its name and key imply.
    #[error("verifier key ID does not match its name and key")]
    KeyIdMismatch,
}

impl Checkpoint {
    /// A checkpoint without extension lines.
    pub fn new(origin: impl Into<String>, size: u64, root: Hash) -> Self {
        Self {
            origin: origin.into(),
            size,
            root,
            extensions: Vec::new(),
        }
    }

    /// The note text: origin, size, base64 root and extension lines, each
    /// ending in a newline. Refuses values that would not parse back.
    pub fn body(&self) -> Result<String, CheckpointError> {
        check_line(&self.origin, "origin is empty or not a single line")?;
        for extension in &self.extensions {
            check_line(extension, "extension line is empty or not a single line")?;
        }
        let mut body = format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            BASE64.encode(self.root)
        );
        for extension in &self.extensions {
            body.push_str(extension);
            body.push('\n');
        }
        Ok(body)
    }

    /// Parses a checkpoint body (the note text, ending in its newline).
    ///
    /// Checks no signature: callers that need the log's word use
    /// [`parse_and_verify`]. A witness client uses this on a checkpoint it
    /// signed itself, to know what the cosignatures must cover.
    /// Refuses what [`body`](Self::body) could not have written, control
    /// characters included (a note's signature check refuses them too, but
    /// this is also called on text no signature covered).
    pub fn parse_body(text: &str) -> Result<Self, CheckpointError> {
        if text.chars().any(|c| c < ' ' && c != '\n') {
            return Err(CheckpointError::ControlCharacter);
        }
        let text = text
            .strip_suffix('\n')
            .ok_or(CheckpointError::MalformedBody("missing final newline"))?;
        let mut lines = text.split('\n');
        let origin = lines.next().unwrap_or_default();
        if origin.is_empty() {
            return Err(CheckpointError::MalformedBody("origin is empty"));
        }
        let size = parse_size(lines.next().unwrap_or_default())?;
        let root = parse_root(
            lines
                .next()
                .ok_or(CheckpointError::MalformedBody("missing root hash"))?,
        )?;
        let extensions = lines
            .map(|line| {
                if line.is_empty() {
                    Err(CheckpointError::MalformedBody("empty extension line"))
                } else {
                    Ok(line.to_owned())
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            origin: origin.to_owned(),
            size,
            root,
            extensions,
        })
    }
}

/// Signs `checkpoint` with `key` under `key_name`, returning the complete
/// signed note. The key name should be the origin, as the spec recommends.
pub fn sign(
    checkpoint: &Checkpoint,
    key: &SigningKey,
    key_name: &str,
) -> Result<String, CheckpointError> {
    sign_note(&checkpoint.body()?, key, key_name)
}

/// Verifies a signed checkpoint against the trusted keys and parses it.
///
/// At least one signature must be by a trusted key and verify; signatures by
/// other keys are ignored (witness cosignatures, rotated keys), but a trusted
/// key's failing signature rejects the note. The body must be exactly a
/// checkpoint: origin, canonical decimal size, standard base64 32-byte root,
/// non-empty extension lines, nothing else.
pub fn parse_and_verify(text: &str, known: &[VerifierKey]) -> Result<Checkpoint, CheckpointError> {
    let body = open_note(text, known)?;
    Checkpoint::parse_body(body)
}

fn check_line(line: &str, problem: &'static str) -> Result<(), CheckpointError> {
    if line.is_empty() || line.chars().any(|c| c < ' ') {
        return Err(CheckpointError::MalformedBody(problem));
    }
    Ok(())
}

/// ASCII decimal without sign or leading zeros, so each size has one form.
fn parse_size(line: &str) -> Result<u64, CheckpointError> {
    let canonical = !line.is_empty()
        && line.bytes().all(|b| b.is_ascii_digit())
        && (line == "0" || !line.starts_with('0'));
    if !canonical {
        return Err(CheckpointError::MalformedBody(
            "tree size is not canonical decimal",
        ));
    }
    line.parse()
        .map_err(|_| CheckpointError::MalformedBody("tree size does not fit in 64 bits"))
}

/// Standard, padded base64 of exactly 32 bytes; the decoder also refuses
/// non-zero trailing bits, so each root has one form.
fn parse_root(line: &str) -> Result<Hash, CheckpointError> {
    let bytes = BASE64
        .decode(line)
        .map_err(|_| CheckpointError::MalformedBody("root hash is not standard base64"))?;
    <[u8; HASH_LEN]>::try_from(bytes.as_slice())
        .map_err(|_| CheckpointError::MalformedBody("root hash is not 32 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `checkpoint_note` fuzz oracle: a body whose origin held
    /// a control character parsed, but `body()` refused to write it back.
    #[test]
    fn a_body_with_a_control_character_is_refused() {
        let good = Checkpoint::new("o", 1, [0; 32]).body().unwrap();
        assert!(Checkpoint::parse_body(&good).is_ok());
        for bad in [
            good.replacen('o', "o\u{e}", 1),
            good.replacen('o', "o\r", 1),
            format!("{good}ext\u{7f}\x01\n"),
        ] {
            if let Ok(parsed) = Checkpoint::parse_body(&bad) {
                panic!("{bad:?} parsed as {parsed:?}");
            }
        }
    }
}
