//! The witness's own identity: a name and an Ed25519 key, kept together in
//! `<data dir>/witness.key` (owner-only), created on first use.
//!
//! The name is part of the key ID every cosignature carries, so it is fixed
//! when the key is made and stored with it; changing it later would make
//! every configured copy of the witness's vkey stale.

use crate::WitnessError;
use bulwark_audit::{CosignerKey, SigningKey, generate_signing_key};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file name of the identity in a witness's data directory.
pub const KEY_FILE: &str = "witness.key";

/// The name a new witness gets when none is given.
pub const DEFAULT_NAME: &str = "bulwark-witness";

/// A witness's name and signing key.
pub struct Identity {
    name: String,
    key: SigningKey,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// An identity from its parts (tests, embedding).
    pub fn new(name: &str, key: SigningKey) -> Result<Self, WitnessError> {
        CosignerKey::from_signing_key(name, &key)?;
        Ok(Self {
            name: name.to_owned(),
            key,
        })
    }

    /// The key name on cosignature lines.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn signing_key(&self) -> &SigningKey {
        &self.key
    }

    /// The verifier key clients configure (`<name>+<id>+<base64>`).
    pub fn cosigner_key(&self) -> Result<CosignerKey, WitnessError> {
        Ok(CosignerKey::from_signing_key(&self.name, &self.key)?)
    }

    /// Reads the identity in `dir`, or creates it (under `name`, or
    /// [`DEFAULT_NAME`]) when there is none. A `name` that differs from the
    /// stored one is an error, not a silent rename.
    pub fn load_or_create(dir: &Path, name: Option<&str>) -> Result<Self, WitnessError> {
        let path = dir.join(KEY_FILE);
        if path.exists() {
            let identity = Self::load(dir)?;
            if let Some(name) = name
                && name != identity.name
            {
                return Err(WitnessError::Config(format!(
                    "{} holds the witness named {:?}, not {name:?}; drop --name, or use another data directory for another witness",
                    path.display(),
                    identity.name
                )));
            }
            return Ok(identity);
        }
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let identity = Self::new(name.unwrap_or(DEFAULT_NAME), generate_signing_key())?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io(format!("creating {}", path.display())))?;
        let text = zeroize::Zeroizing::new(format!(
            "{}\n{}\n",
            identity.name,
            hex::encode(identity.key.to_bytes())
        ));
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io(format!("writing {}", path.display())))?;
        Ok(identity)
    }

    /// Reads the identity in `dir`; refuses a key file others can read.
    pub fn load(dir: &Path) -> Result<Self, WitnessError> {
        let path = dir.join(KEY_FILE);
        let mode = std::fs::metadata(&path)
            .map_err(io(format!("reading {}", path.display())))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(WitnessError::Config(format!(
                "{} is readable by other users (mode {:o}); the witness key must be owner-only: chmod 600 {}",
                path.display(),
                mode & 0o777,
                path.display()
            )));
        }
        let text = zeroize::Zeroizing::new(
            std::fs::read_to_string(&path).map_err(io(format!("reading {}", path.display())))?,
        );
        let malformed = || {
            WitnessError::Config(format!(
                "{} is not a witness key (a name line, then 64 hex digits)",
                path.display()
            ))
        };
        let mut lines = text.lines();
        let (Some(name), Some(seed_hex), None) = (lines.next(), lines.next(), lines.next()) else {
            return Err(malformed());
        };
        let mut seed = zeroize::Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(seed_hex.trim(), seed.as_mut()).map_err(|_| malformed())?;
        Self::new(name, SigningKey::from_bytes(&seed))
    }
}

/// Creates `path` with mode 0600 if missing, and tightens an existing one.
pub(crate) fn create_private_file(path: &Path) -> Result<(), WitnessError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(io(format!("creating {}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io(format!("restricting {}", path.display())))
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> WitnessError {
    move |source| WitnessError::Io { context, source }
}

/// Where the state database lives in a data directory.
pub fn state_path(dir: &Path) -> PathBuf {
    dir.join("witness.db")
}
