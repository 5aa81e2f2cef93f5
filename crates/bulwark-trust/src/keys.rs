//! Signing keys in `$BULWARK_HOME/keys/`: `<name>.key` holds the private
//! Ed25519 seed as 64 hex digits (the format of the audit log's
//! `audit.key`), owner-only; `<name>.pub` holds the matching verifier key
//! line to hand to whoever runs the agents.
//!
//! The private file is created with mode 0600 in the same call that creates
//! it (never created and then narrowed, which would leave a window), a
//! private file other users can read is refused rather than used, and
//! seeds live only in zeroizing buffers.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use bulwark_audit::SigningKey;
use bulwark_audit::note::{VerifierKey, generate_signing_key, is_valid_key_name};
use zeroize::Zeroizing;

use crate::error::TrustError;

/// Key names that may not be used: `audit` is the file name of the audit
/// log's key (`keys/audit.key`) and `bulwark-audit` the name on its
/// checkpoints; an agent key under either would be confused with it.
pub const RESERVED_KEY_NAMES: &[&str] = &["audit", "bulwark-audit"];

/// Largest private or public key file read, in bytes.
const MAX_KEY_FILE: u64 = 4096;

/// Checks that `name` can be both a file name under `keys/` or `trust/`
/// and a C2SP note key name, and is not reserved.
pub fn check_key_name(name: &str) -> Result<(), TrustError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && is_valid_key_name(name);
    if !ok {
        return Err(TrustError::InvalidKeyName {
            name: name.to_owned(),
        });
    }
    if RESERVED_KEY_NAMES.contains(&name) {
        return Err(TrustError::ReservedKeyName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// A private signing key and the name its signatures carry. The Ed25519
/// key wipes itself when dropped; `Debug` never shows it.
pub struct AgentSigningKey {
    name: String,
    key: SigningKey,
}

impl std::fmt::Debug for AgentSigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSigningKey")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AgentSigningKey {
    /// A key held in memory only (tests, or keys kept elsewhere).
    pub fn new(name: &str, key: SigningKey) -> Result<Self, TrustError> {
        check_key_name(name)?;
        Ok(Self {
            name: name.to_owned(),
            key,
        })
    }

    /// A fresh key from the operating system's random number generator.
    pub fn generate(name: &str) -> Result<Self, TrustError> {
        Self::new(name, generate_signing_key())
    }

    /// The name on signature lines.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The public half, as the trust store holds it.
    pub fn verifier(&self) -> Result<VerifierKey, TrustError> {
        Ok(VerifierKey::from_signing_key(&self.name, &self.key)?)
    }

    pub(crate) fn signing_key(&self) -> &SigningKey {
        &self.key
    }
}

/// The directory of local signing keys (`$BULWARK_HOME/keys`).
#[derive(Debug, Clone)]
pub struct Keyring {
    dir: PathBuf,
}

impl Keyring {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// `<home>/keys`.
    pub fn in_home(home: &Path) -> Self {
        Self::new(home.join(crate::KEYS_DIR))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `keys/<name>.key`.
    pub fn private_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.key"))
    }

    /// `keys/<name>.pub`.
    pub fn public_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.pub"))
    }

    /// Creates `<name>.key` (mode 0600) and `<name>.pub` and returns the
    /// verifier key. Refuses to overwrite either file.
    pub fn generate(&self, name: &str) -> Result<VerifierKey, TrustError> {
        check_key_name(name)?;
        let (private, public) = (self.private_path(name), self.public_path(name));
        for path in [&private, &public] {
            if path.symlink_metadata().is_ok() {
                return Err(TrustError::KeyExists { path: path.clone() });
            }
        }
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| TrustError::io("create", &self.dir, e))?;
        let key = AgentSigningKey::generate(name)?;
        let verifier = key.verifier()?;
        let seed = Zeroizing::new(key.signing_key().to_bytes());
        let seed_hex = Zeroizing::new(hex::encode(seed.as_ref()));
        write_new(&private, seed_hex.as_bytes(), 0o600)?;
        let line = format!("{}\n", verifier.to_vkey());
        if let Err(e) = write_new(&public, line.as_bytes(), 0o644) {
            // No private key without its public half.
            let _ = std::fs::remove_file(&private);
            return Err(e);
        }
        Ok(verifier)
    }

    /// Reads `<name>.key`, refusing a file group or others may access.
    pub fn load(&self, name: &str) -> Result<AgentSigningKey, TrustError> {
        check_key_name(name)?;
        let path = self.private_path(name);
        let file = File::open(&path).map_err(|e| match e.kind() {
            ErrorKind::NotFound => TrustError::KeyNotFound {
                name: name.to_owned(),
                path: path.clone(),
            },
            _ => TrustError::io("read", &path, e),
        })?;
        // Checked on the open file, so the file read is the one checked.
        let meta = file
            .metadata()
            .map_err(|e| TrustError::io("read", &path, e))?;
        if !meta.is_file() {
            return Err(TrustError::NotRegularFile { path });
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(TrustError::KeyPermissions { path, mode });
        }
        // Capacity for the whole file up front: a growing String would
        // leave copies of the seed in freed memory.
        let mut text = Zeroizing::new(String::with_capacity(MAX_KEY_FILE as usize + 1));
        file.take(MAX_KEY_FILE + 1)
            .read_to_string(&mut text)
            .map_err(|_| TrustError::MalformedKey { path: path.clone() })?;
        let mut seed = Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(text.trim(), seed.as_mut())
            .map_err(|_| TrustError::MalformedKey { path: path.clone() })?;
        AgentSigningKey::new(name, SigningKey::from_bytes(&seed))
    }

    /// Reads `<name>.pub`.
    pub fn public(&self, name: &str) -> Result<VerifierKey, TrustError> {
        check_key_name(name)?;
        let path = self.public_path(name);
        let text = read_small(&path)?;
        let key = parse_vkey_line(&text).map_err(|reason| TrustError::InvalidVerifierKey {
            input: path.display().to_string(),
            reason,
        })?;
        if key.name() != name {
            return Err(TrustError::InvalidVerifierKey {
                input: path.display().to_string(),
                reason: format!("it names key `{}`, not `{name}`", key.name()),
            });
        }
        Ok(key)
    }

    /// Names of the private keys in the directory (`*.key`), sorted,
    /// without the reserved audit key.
    pub fn names(&self) -> Result<Vec<String>, TrustError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(TrustError::io("read directory", &self.dir, e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| TrustError::io("read directory", &self.dir, e))?;
            let file_name = entry.file_name();
            let Some(name) = file_name.to_str().and_then(|n| n.strip_suffix(".key")) else {
                continue;
            };
            if check_key_name(name).is_ok() {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }
}

/// Creates `path` (never replacing a file) with `mode` set by the same
/// `open` call, writes `contents` and syncs it.
fn write_new(path: &Path, contents: &[u8], mode: u32) -> Result<(), TrustError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| match e.kind() {
            ErrorKind::AlreadyExists => TrustError::KeyExists {
                path: path.to_owned(),
            },
            _ => TrustError::io("create", path, e),
        })?;
    let written = file.write_all(contents).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(path);
        return Err(TrustError::io("write", path, e));
    }
    Ok(())
}

/// A small text file (a key or vkey), refusing anything large.
pub(crate) fn read_small(path: &Path) -> Result<String, TrustError> {
    let file = File::open(path).map_err(|e| TrustError::io("read", path, e))?;
    let mut text = String::new();
    file.take(MAX_KEY_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| TrustError::io("read", path, e))?;
    if text.len() as u64 > MAX_KEY_FILE {
        return Err(TrustError::InvalidVerifierKey {
            input: path.display().to_string(),
            reason: format!("the file is larger than {MAX_KEY_FILE} bytes"),
        });
    }
    Ok(text)
}

/// One verifier key on a single line (surrounding whitespace allowed).
pub(crate) fn parse_vkey_line(text: &str) -> Result<VerifierKey, String> {
    let line = text.trim();
    if line.contains('\n') {
        return Err("expected a single line".into());
    }
    VerifierKey::parse(line).map_err(|e| e.to_string())
}
