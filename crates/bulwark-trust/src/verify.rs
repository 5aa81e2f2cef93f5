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

use bulwark_audit::note::VerifierKey;

use crate::bundle::AgentBundle;
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
    /// The signed version (0: a listing without one).
    pub version: u64,
    /// Every file covered, sorted by path.
    pub files: Vec<FileEntry>,
}

/// An agent whose files, read once into [`bundle`](Self::bundle), are
/// exactly what a trusted key signed. Use the bundle's bytes from here on:
/// reading the files again would reopen the window this closes.
#[derive(Debug, Clone)]
pub struct VerifiedAgent {
    /// The name of the first trusted key that signed.
    pub signer: String,
    /// Its key ID.
    pub key_id: u32,
    /// Every trusted key whose signature line verified (usually one).
    pub signers: Vec<VerifierKey>,
    /// The signed version (0: a `bulwark-agent/v1` listing, which has none).
    pub version: u64,
    /// The files, as read and verified.
    pub bundle: AgentBundle,
}

/// Signs the agent in `dir` under the name `agent` as the version after
/// the one its current `agent.sig` names (1 when there is none; see
/// [`previous_version`]) and writes `agent.sig` atomically (replacing an
/// older signature).
pub fn sign_agent(dir: &Path, agent: &str, key: &AgentSigningKey) -> Result<Signed, TrustError> {
    let version = previous_version(dir).saturating_add(1);
    sign_agent_version(dir, agent, key, version)
}

/// [`sign_agent`] with an explicit `version` (at least 1).
pub fn sign_agent_version(
    dir: &Path,
    agent: &str,
    key: &AgentSigningKey,
    version: u64,
) -> Result<Signed, TrustError> {
    if version == 0 {
        return Err(TrustError::InvalidVersion { version });
    }
    let mut listing = AgentListing::compute(dir, agent)?;
    listing.version = version;
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
    let verified = verify_bundle(dir, agent, store)?;
    Ok(Verified {
        signer: verified.signer,
        key_id: verified.key_id,
        version: verified.version,
        files: verified.bundle.into_listing().files,
    })
}

/// Reads every file of the agent in `dir` once and verifies those bytes
/// against `agent.sig` and `store`, with the errors of [`verify_agent`].
pub fn verify_bundle(
    dir: &Path,
    agent: &str,
    store: &TrustStore,
) -> Result<VerifiedAgent, TrustError> {
    let sig_path = dir.join(SIGNATURE_FILE);
    let note = read_signature(dir, agent, &sig_path)?;
    let mut bundle = AgentBundle::read(dir, agent)?;
    let SignedListing {
        signer,
        signers: trusted_signers,
        text,
        listing: signed,
    } = open_signed_listing(&note, agent, store.list(), &sig_path)?;
    let text = text.as_str();
    let malformed = |reason: String| TrustError::MalformedSignature {
        path: sig_path.clone(),
        reason,
    };
    // The directory does not say which version it is: the signature does.
    bundle.set_version(signed.version);
    if text == bundle.listing().text() {
        return Ok(VerifiedAgent {
            signer: signer.name,
            key_id: signer.key_id,
            signers: trusted_signers,
            version: signed.version,
            bundle,
        });
    }
    let actual = bundle.listing();
    let differences = AgentListing::differences(&signed, actual);
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

/// What an `agent.sig` says once a trusted key's signature verified: who
/// signed and the listing signed. It says nothing yet about the files: the
/// caller compares [`listing`](Self::listing) with the directory's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedListing {
    /// The first signature line whose key is trusted (and verified).
    pub signer: SignerId,
    /// Every trusted key whose signature line verified.
    pub signers: Vec<VerifierKey>,
    /// The signed text, exactly as in the note.
    pub text: String,
    /// The signed text, parsed.
    pub listing: AgentListing,
}

/// Opens the text of an `agent.sig` (`path` is only named in errors) with
/// the `trusted` keys and nothing else, and parses the signed listing;
/// `agent` is named when no signer is trusted. Every byte of `note` is
/// outside input: this is the parser the `agent_signature` fuzz target
/// drives.
pub fn open_signed_listing(
    note: &str,
    agent: &str,
    trusted: &[VerifierKey],
    path: &Path,
) -> Result<SignedListing, TrustError> {
    let malformed = |reason: String| TrustError::MalformedSignature {
        path: path.to_owned(),
        reason,
    };
    let signers = signature_lines(note).map_err(malformed)?;
    let text = match open_note(note, trusted) {
        Ok(text) => text,
        Err(CheckpointError::NoTrustedSignature) => {
            let trusted_with_same_name = trusted
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
                path: path.to_owned(),
                signer: SignerId { name, key_id },
            });
        }
        Err(other) => return Err(malformed(other.to_string())),
    };
    // `open_note` succeeded, so every signature line whose name and key ID
    // match a trusted key verified; the first one is reported.
    let trusted_signers: Vec<VerifierKey> = trusted
        .iter()
        .filter(|k| {
            signers
                .iter()
                .any(|s| s.name == k.name() && s.key_id == k.key_id())
        })
        .cloned()
        .collect();
    let signer = signers
        .into_iter()
        .find(|s| {
            trusted_signers
                .iter()
                .any(|k| k.name() == s.name && k.key_id() == s.key_id)
        })
        .ok_or_else(|| malformed("no signature line matches the key that verified".into()))?;
    let listing = AgentListing::parse(text)
        .map_err(|reason| malformed(format!("the signed listing is invalid: {reason}")))?;
    Ok(SignedListing {
        signer,
        signers: trusted_signers,
        text: text.to_owned(),
        listing,
    })
}

/// The version the current `agent.sig` in `dir` names, read without
/// checking the signature (it only picks the next version to sign); 0 when
/// there is no readable, versioned signature.
pub fn previous_version(dir: &Path) -> u64 {
    let path = dir.join(SIGNATURE_FILE);
    let Ok(note) = read_signature(dir, "-", &path) else {
        return 0;
    };
    note.rfind("\n\n")
        .and_then(|split| AgentListing::parse(&note[..split + 1]).ok())
        .map_or(0, |listing| listing.version)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::versions::{check_version, record_version};

    /// A signature as bulwark wrote it before versions: a
    /// `bulwark-agent/v1` listing. It still verifies, as version 0, and is
    /// refused once a versioned signature of the agent has run.
    #[test]
    fn unversioned_signatures_are_version_zero() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("agents/a");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("agent.toml"), "[agent]\nname = \"a\"\n").unwrap();
        let key = AgentSigningKey::generate("alice").unwrap();
        let mut store = TrustStore::load(home.path().join("trust")).unwrap();
        store.trust_key(key.verifier().unwrap()).unwrap();
        let legacy = AgentListing::compute(&dir, "a").unwrap();
        assert_eq!(legacy.version, 0);
        assert!(
            legacy
                .text()
                .starts_with("bulwark-agent/v1\nagent a\nfile ")
        );
        let note = sign_note(&legacy.text(), key.signing_key(), key.name()).unwrap();
        std::fs::write(dir.join(SIGNATURE_FILE), note).unwrap();
        let verified = verify_bundle(&dir, "a", &store).unwrap();
        assert_eq!(verified.version, 0);
        assert_eq!(previous_version(&dir), 0);
        check_version(store.dir(), "a", &verified.signers, 0).unwrap();
        record_version(store.dir(), "a", &verified.signers, 0).unwrap();
        record_version(store.dir(), "a", &verified.signers, 1).unwrap();
        let err = check_version(store.dir(), "a", &verified.signers, 0).unwrap_err();
        assert!(err.to_string().contains("has no version"), "{err}");
        // Version 0 cannot be signed, and a v2 listing must carry n >= 1.
        assert!(matches!(
            sign_agent_version(&dir, "a", &key, 0),
            Err(TrustError::InvalidVersion { version: 0 })
        ));
        let text = legacy.text().replacen(
            "bulwark-agent/v1\nagent a\n",
            "bulwark-agent/v2\nagent a\nversion 0\n",
            1,
        );
        assert!(AgentListing::parse(&text).is_err());
        let text = text.replacen("version 0", "version 07", 1);
        assert!(AgentListing::parse(&text).is_err());
        let text = text.replacen("version 07", "version 7", 1);
        assert_eq!(AgentListing::parse(&text).unwrap().version, 7);
    }
}
