//! Every way signing, verifying or managing keys can fail.
//!
//! Verification failures are distinct variants rather than one "invalid"
//! because each asks the operator for a different action: sign the agent,
//! trust a key, investigate tampering, or restore a damaged file.

use std::fmt;
use std::path::PathBuf;

use bulwark_audit::CheckpointError;

/// A signature line's key name and key ID: who claims to have signed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SignerId {
    /// The key name on the signature line.
    pub name: String,
    /// The C2SP key ID on the signature line.
    pub key_id: u32,
}

impl fmt::Display for SignerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` (key ID {:08x})", self.name, self.key_id)
    }
}

/// One way an agent directory differs from what was signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// The file exists in both, with different contents.
    Changed(String),
    /// The file exists now but was not signed.
    Added(String),
    /// The file was signed but no longer exists.
    Removed(String),
    /// The signature was made for another agent (e.g. copied from it).
    AgentName { signed: String, actual: String },
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Changed(path) => write!(f, "file changed: {path}"),
            Difference::Added(path) => write!(f, "file added: {path}"),
            Difference::Removed(path) => write!(f, "file removed: {path}"),
            Difference::AgentName { signed, actual } => write!(
                f,
                "agent name differs: the signature is for agent `{signed}`, not `{actual}`"
            ),
        }
    }
}

/// A list of differences, printed `; `-separated.
struct Differences<'a>(&'a [Difference]);

impl fmt::Display for Differences<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// Signers, printed `, `-separated.
struct Signers<'a>(&'a [SignerId]);

impl fmt::Display for Signers<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

fn same_name_note(trusted: &[SignerId]) -> String {
    if trusted.is_empty() {
        String::new()
    } else {
        format!(
            ". WARNING: the trust store has a key with the same name but a different key ID ({}): \
             this signature was made by a DIFFERENT key that reuses a trusted name",
            Signers(trusted)
        )
    }
}

/// Why an agent could not be signed or verified, or a key not managed.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// A file system operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    // --- The agent directory cannot be digested.
    /// A symbolic link inside the agent directory: what it points to could
    /// change without changing the directory, so it cannot be signed.
    #[error(
        "{} is a symbolic link; agent directories may not contain links (replace it with a copy of the file)",
        path.display()
    )]
    Symlink { path: PathBuf },
    /// A device, socket or FIFO inside the agent directory.
    #[error(
        "{} is not a regular file or directory; remove it from the agent directory",
        path.display()
    )]
    NotRegularFile { path: PathBuf },
    /// A name that is not UTF-8 cannot be written into the signed listing.
    #[error("{} has a name that is not UTF-8; rename it", path.display())]
    NonUtf8Name { path: PathBuf },
    /// A name with a newline or another control character could forge
    /// lines of the signed listing.
    #[error("{path:?} has a control character (e.g. a newline) in its name; rename it")]
    ControlCharacterInName { path: PathBuf },
    /// Too many files to digest (a bound on work and memory).
    #[error("{} holds more than {limit} files; agent directories must be smaller", dir.display())]
    TooManyFiles { dir: PathBuf, limit: usize },
    /// A file over the size limit.
    #[error("{} is larger than {limit} bytes; agent files must be smaller", path.display())]
    FileTooLarge { path: PathBuf, limit: u64 },
    /// The files of an agent directory are too large in all to hold in
    /// memory.
    #[error("{} holds more than {limit} bytes in all; agent directories must be smaller (a large model file belongs outside, pinned in pins.sha256)", dir.display())]
    BundleTooLarge { dir: PathBuf, limit: u64 },
    /// A file changed while it was being read.
    #[error("{} changed while it was read; try again", path.display())]
    ChangedDuringRead { path: PathBuf },
    /// The directory has no manifest, so it is not an agent.
    #[error("{} does not exist; an agent directory must hold its manifest", path.display())]
    MissingManifest { path: PathBuf },
    /// The agent directory does not exist or is not a directory.
    #[error("{} is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    /// An agent name that could not appear on the listing's `agent` line.
    #[error(
        "agent name {name:?} is invalid: it must be non-empty, without spaces or control characters"
    )]
    InvalidAgentName { name: String },

    // --- Verification.
    /// No `agent.sig`.
    #[error("agent `{agent}` is not signed: {} does not exist", path.display())]
    Unsigned { agent: String, path: PathBuf },
    /// `agent.sig` is not a signed agent listing.
    #[error("{} is malformed: {reason}; sign the agent again", path.display())]
    MalformedSignature { path: PathBuf, reason: String },
    /// Every signature is by a key the trust store does not hold.
    #[error(
        "agent `{agent}` is signed by {}, which is not in the trust store{}",
        Signers(signers),
        same_name_note(trusted_with_same_name)
    )]
    UntrustedSigner {
        agent: String,
        /// Who the signature lines claim to be.
        signers: Vec<SignerId>,
        /// Trusted keys that share a name with a signer but not its key ID.
        trusted_with_same_name: Vec<SignerId>,
    },
    /// A signature by a trusted key does not verify: the signed listing or
    /// the signature bytes were altered.
    #[error(
        "the signature in {} by {signer} does not verify: the signature file was altered",
        path.display()
    )]
    BadSignature { path: PathBuf, signer: SignerId },
    /// The signature is valid but the directory is not what was signed.
    #[error(
        "agent `{agent}` does not match what {signer} signed: {}",
        Differences(differences)
    )]
    ContentMismatch {
        agent: String,
        signer: SignerId,
        differences: Vec<Difference>,
    },

    /// An older signed version than this home has already run.
    #[error(
        "agent `{agent}` is version {version}{} signed by {signer}, but this home has already run version {highest} of it signed by that key: an older version is refused (putting back an old agent.sig with its files is a rollback). To run this version deliberately, review it and sign it again with `bulwark sign {agent}`, which gives it a version above {highest} (the highest versions run are kept in {})",
        if *version == 0 { " (its signature has no version: made before versions existed)" } else { "" },
        path.display()
    )]
    Rollback {
        agent: String,
        signer: SignerId,
        version: u64,
        highest: u64,
        path: PathBuf,
    },
    /// `trust/agent-versions` cannot be read as written.
    #[error("{} is invalid: {reason}; restore it from a backup (deleting it forgets which versions ran, and so allows rollbacks)", path.display())]
    CorruptVersions { path: PathBuf, reason: String },
    /// A version that cannot be signed.
    #[error("version {version} cannot be signed: versions start at 1")]
    InvalidVersion { version: u64 },

    // --- Files outside the agent directory.
    /// A path the agent names leaves its directory, unpinned.
    #[error(
        "{field} is `{value}`, which names {}, outside the agent directory {}: the signature does not cover it. Move the file into the agent directory and sign again, or pin its content: add the line `<sha256>  {}` (as `sha256sum` prints it) to {} and sign again",
        path.display(),
        dir.display(),
        path.display(),
        dir.join(crate::PINS_FILE).display()
    )]
    OutsideAgentDir {
        /// Where the path was written, e.g. `agent.toml [agent] model`.
        field: String,
        /// What was written there.
        value: String,
        /// The normalized path it names.
        path: PathBuf,
        dir: PathBuf,
    },
    /// A path inside the agent directory that is not one of its files.
    #[error("{field} is `{value}`, which names {}: not a file of the agent directory (signed files: see `bulwark verify`)", path.display())]
    NotAnAgentFile {
        field: String,
        value: String,
        path: PathBuf,
    },
    /// A pinned file whose content is not the pinned one.
    #[error(
        "{} does not match its pin: pinned sha256 {pinned}, found {actual}. Restore the pinned file, or review the new one and update the pin (then sign again)",
        path.display()
    )]
    PinMismatch {
        path: PathBuf,
        pinned: String,
        actual: String,
    },
    /// `pins.sha256` cannot be read.
    #[error("{} line {line}: {reason}", path.display())]
    MalformedPins {
        path: PathBuf,
        line: usize,
        reason: String,
    },

    // --- Keys and the trust store.
    /// A key name that cannot be a file name and a note key name.
    #[error(
        "key name {name:?} is invalid: use 1-64 ASCII letters, digits, `-`, `_` or `.`, starting with a letter or digit"
    )]
    InvalidKeyName { name: String },
    /// `audit` names the audit log's key.
    #[error("key name `{name}` is reserved for the audit log's key; choose another name")]
    ReservedKeyName { name: String },
    /// Key generation never overwrites.
    #[error(
        "{} already exists; keys are never overwritten (remove it yourself if you really mean to)",
        path.display()
    )]
    KeyExists { path: PathBuf },
    /// No such private key.
    #[error("no signing key `{name}`: {} does not exist", path.display())]
    KeyNotFound { name: String, path: PathBuf },
    /// A private key readable by group or others.
    #[error(
        "{} is readable by other users (mode {mode:03o}); run `chmod 600 {}` (and consider the key exposed)",
        path.display(),
        path.display()
    )]
    KeyPermissions { path: PathBuf, mode: u32 },
    /// A private key file that is not a hex Ed25519 seed.
    #[error("{} is not a 64-hex-digit Ed25519 seed; restore it from a backup", path.display())]
    MalformedKey { path: PathBuf },
    /// A vkey that does not parse.
    #[error("{input:?} is not a verifier key (name+keyid+base64): {reason}")]
    InvalidVerifierKey { input: String, reason: String },
    /// A different key is already trusted under this name.
    #[error(
        "a different key named `{name}` is already trusted (key ID {existing_id:08x}, {}); the new one has key ID {new_id:08x}. Run `untrust {name}` first if you mean to replace it",
        path.display()
    )]
    DuplicateKeyName {
        name: String,
        existing_id: u32,
        new_id: u32,
        path: PathBuf,
    },
    /// `untrust` of a name that is not trusted.
    #[error("no trusted key `{name}`: {} does not exist", path.display())]
    NotTrusted { name: String, path: PathBuf },
    /// A file in the trust store that is not a valid vkey for its name.
    #[error("trust store file {} is invalid: {reason}; fix or remove it", path.display())]
    CorruptTrustStore { path: PathBuf, reason: String },
    /// Signing failed inside the note code.
    #[error("cannot sign: {0}")]
    Note(#[from] CheckpointError),
}

impl TrustError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        TrustError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
