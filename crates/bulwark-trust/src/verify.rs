//! Signing an agent directory and verifying it against the trust store.
//!
//! `agent.sig` is a C2SP signed note whose text is the agent's
//! [listing](crate::AgentListing). Verification opens the note with the
//! trust store's keys only, then compares the signed listing with one
//! recomputed from the directory, so the result says precisely which file
//! changed, appeared or vanished.

use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bulwark_audit::CheckpointError;
use bulwark_audit::note::{open_note, sign_note};

use crate::error::{SignerId, TrustError};
use crate::fsutil::write_atomic;
use crate::keys::AgentSigningKey;
use crate::listing::{AgentListing, FileEntry, SIGNATURE_FILE};
use crate::store::TrustStore;

/// Largest `agent.sig` read: a listing of the most files with long paths.
pub const MAX_SIGNATURE_FILE: u64 = 64 * 1024 * 1024;

/// An agent that was just signed.
#[derive(Debug, Clone)]
pub struct Signed {
    /// The `agent.sig` written.
    pub path: PathBuf,
    pub signer: SignerId,
    /// What the signature covers.
    pub listing: AgentListing,
}

/// An agent whose directory is exactly what a trusted key signed.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The name of the trusted key that signed.
    pub signer: String,
    /// Its key ID.
    pub key_id: u32,
    /// Every file covered, sorted by path.
    pub files: Vec<FileEntry>,
}

/// Signs the agent in `dir` under the name `agent` and writes `agent.sig`
/// atomically (replacing an older signature).
pub fn sign_agent(dir: &Path, agent: &str, key: &AgentSigningKey) -> Result<Signed, TrustError> {
    let listing = AgentListing::compute(dir, agent)?;
    let note = sign_note(&listing.text(), key.signing_key(), key.name())?;
    let path = dir.join(SIGNATURE_FILE);
    write_atomic(&path, note.as_bytes(), false)?;
    let verifier = key.verifier()?;
    Ok(Signed {
        path,
        signer: SignerId {
            name: verifier.name().to_owned(),
            key_id: verifier.key_id(),
        },
        listing,
    })
}

/// Verifies the agent in `dir` (named `agent`) against `store`: a missing
/// signature, a signer the store does not hold, a signature that does not
/// verify and any difference between the directory and the signed listing
/// are each their own error.
pub fn verify_agent(dir: &Path, agent: &str, store: &TrustStore) -> Result<Verified, TrustError> {
    let sig_path = dir.join(SIGNATURE_FILE);
    let note = read_signature(dir, agent, &sig_path)?;
    let actual = AgentListing::compute(dir, agent)?;
    let malformed = |reason: String| TrustError::MalformedSignature {
        path: sig_path.clone(),
        reason,
    };
    let signers = signature_lines(&note).map_err(malformed)?;
    let text = match open_note(&note, store.list()) {
        Ok(text) => text,
        Err(CheckpointError::NoTrustedSignature) => {
            let trusted_with_same_name = store
                .list()
                .iter()
                .filter(|k| signers.iter().any(|s| s.name == k.name()))
                .map(|k| SignerId {
                    name: k.name().to_owned(),
                    key_id: k.key_id(),
                })
                .collect();
            return Err(TrustError::UntrustedSigner {
                agent: agent.to_owned(),
                signers,
                trusted_with_same_name,
            });
        }
        Err(CheckpointError::BadSignature { name, key_id }) => {
            return Err(TrustError::BadSignature {
                path: sig_path,
                signer: SignerId { name, key_id },
            });
        }
        Err(other) => return Err(malformed(other.to_string())),
    };
    // `open_note` succeeded, so every signature line whose name and key ID
    // match a trusted key verified; the first one is reported.
    let signer = signers
        .into_iter()
        .find(|s| {
            store
                .list()
                .iter()
                .any(|k| k.name() == s.name && k.key_id() == s.key_id)
        })
        .ok_or_else(|| malformed("no signature line matches the key that verified".into()))?;
    if text == actual.text() {
        return Ok(Verified {
            signer: signer.name,
            key_id: signer.key_id,
            files: actual.files,
        });
    }
    let signed = AgentListing::parse(text)
        .map_err(|reason| malformed(format!("the signed listing is invalid: {reason}")))?;
    let differences = AgentListing::differences(&signed, &actual);
    if differences.is_empty() {
        return Err(malformed(
            "the signed listing is not in canonical form".into(),
        ));
    }
    Err(TrustError::ContentMismatch {
        agent: agent.to_owned(),
        signer,
        differences,
    })
}

/// `agent.sig` as text; [`TrustError::Unsigned`] when it does not exist.
fn read_signature(dir: &Path, agent: &str, path: &Path) -> Result<String, TrustError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        _ => {
            return Err(TrustError::NotADirectory {
                path: dir.to_owned(),
            });
        }
    }
    match path.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(TrustError::Symlink {
                path: path.to_owned(),
            });
        }
        Ok(meta) if !meta.is_file() => {
            return Err(TrustError::NotRegularFile {
                path: path.to_owned(),
            });
        }
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(TrustError::Unsigned {
                agent: agent.to_owned(),
                path: path.to_owned(),
            });
        }
        Err(e) => return Err(TrustError::io("read", path, e)),
    }
    let file = std::fs::File::open(path).map_err(|e| TrustError::io("read", path, e))?;
    let mut bytes = Vec::new();
    file.take(MAX_SIGNATURE_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| TrustError::io("read", path, e))?;
    if bytes.len() as u64 > MAX_SIGNATURE_FILE {
        return Err(TrustError::MalformedSignature {
            path: path.to_owned(),
            reason: format!("it is larger than {MAX_SIGNATURE_FILE} bytes"),
        });
    }
    String::from_utf8(bytes).map_err(|_| TrustError::MalformedSignature {
        path: path.to_owned(),
        reason: "it is not UTF-8 text".into(),
    })
}

/// The key name and key ID of every signature line, read the way
/// `open_note` splits a note, so an untrusted signer can be named.
fn signature_lines(note: &str) -> Result<Vec<SignerId>, String> {
    let split = note
        .rfind("\n\n")
        .ok_or("it has no signature block (no blank line before `— <key> <signature>`)")?;
    let lines = note[split + 2..]
        .strip_suffix('\n')
        .filter(|l| !l.is_empty())
        .ok_or("its signature block is empty or does not end in a newline")?;
    lines
        .split('\n')
        .enumerate()
        .map(|(number, line)| {
            let bad = || format!("signature line {} is malformed", number + 1);
            let (name, encoded) = line
                .strip_prefix("\u{2014} ")
                .and_then(|rest| rest.split_once(' '))
                .ok_or_else(bad)?;
            let blob = BASE64.decode(encoded).map_err(|_| bad())?;
            match blob.split_first_chunk::<4>() {
                Some((id, signature)) if !signature.is_empty() && !name.is_empty() => {
                    Ok(SignerId {
                        name: name.to_owned(),
                        key_id: u32::from_be_bytes(*id),
                    })
                }
                _ => Err(bad()),
            }
        })
        .collect()
}
