//! `keys/server.secret`: the key API tokens are hashed under.
//!
//! access.toml holds `HMAC-SHA256(secret, token)` per token, so a copy of
//! access.toml alone cannot be used to guess tokens offline. The secret is
//! 32 random bytes (hex), created owner-only by the same `open` call that
//! creates the file, and refused when group or others can read it — the
//! same rules as the signing keys in `keys/`.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// File name under `$BULWARK_HOME/keys/`.
pub const SECRET_FILE: &str = "server.secret";

/// A hex secret plus newline is 65 bytes; anything much larger is not one.
const MAX_SECRET_FILE: u64 = 256;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{} is readable by other users (mode {mode:03o}); run `chmod 600 {}` and rotate every token (`bulwark access rotate USER`), since the secret may be exposed",
        path.display(), path.display()
    )]
    Permissions { path: PathBuf, mode: u32 },
    #[error(
        "{} is not a server secret (64 hex digits); move it away and run `bulwark access rotate USER` for each user to create a new one",
        path.display()
    )]
    Malformed { path: PathBuf },
    #[error("{} is not a regular file", path.display())]
    NotRegularFile { path: PathBuf },
    #[error("the operating system's random number generator failed: {0}")]
    Random(String),
}

impl SecretError {
    fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        SecretError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    }
}

/// The server's token-hashing key. Never printed (its `Debug` is redacted)
/// and wiped from memory when dropped.
#[derive(Clone)]
pub struct ServerSecret(Zeroizing<[u8; 32]>);

impl std::fmt::Debug for ServerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerSecret(..)")
    }
}

/// `<home>/keys/server.secret`.
pub fn secret_path(home: &Path) -> PathBuf {
    home.join("keys").join(SECRET_FILE)
}

/// Fills `buf` from the operating system's generator.
pub(crate) fn random_bytes(buf: &mut [u8]) -> Result<(), SecretError> {
    getrandom::fill(buf).map_err(|e| SecretError::Random(e.to_string()))
}

impl ServerSecret {
    /// A secret from raw bytes (tests, and callers that keep it elsewhere).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// `HMAC-SHA256(secret, token)`.
    pub fn mac(&self, token: &[u8]) -> [u8; 32] {
        bulwark_audit::hmac_sha256(self.0.as_ref(), token)
    }

    /// Reads the secret; `Ok(None)` when the file does not exist.
    pub fn load(path: &Path) -> Result<Option<Self>, SecretError> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(SecretError::io("read", path, e)),
        };
        // Checked on the open file, so the file read is the file checked.
        let meta = file
            .metadata()
            .map_err(|e| SecretError::io("read", path, e))?;
        if !meta.is_file() {
            return Err(SecretError::NotRegularFile {
                path: path.to_owned(),
            });
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(SecretError::Permissions {
                path: path.to_owned(),
                mode,
            });
        }
        let mut text = Zeroizing::new(String::with_capacity(MAX_SECRET_FILE as usize + 1));
        file.take(MAX_SECRET_FILE + 1)
            .read_to_string(&mut text)
            .map_err(|_| SecretError::Malformed {
                path: path.to_owned(),
            })?;
        let mut bytes = Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(text.trim(), bytes.as_mut()).map_err(|_| SecretError::Malformed {
            path: path.to_owned(),
        })?;
        Ok(Some(Self(bytes)))
    }

    /// Reads the secret, creating it (mode 0600, in a 0700 `keys/`) when
    /// it does not exist yet. Two processes racing here both end up with
    /// the one file that won.
    pub fn load_or_create(path: &Path) -> Result<Self, SecretError> {
        if let Some(secret) = Self::load(path)? {
            return Ok(secret);
        }
        if let Some(dir) = path.parent() {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| SecretError::io("create", dir, e))?;
        }
        let mut bytes = Zeroizing::new([0u8; 32]);
        random_bytes(bytes.as_mut())?;
        let text = Zeroizing::new(format!("{}\n", hex::encode(bytes.as_ref())));
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path);
        let mut file = match created {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Self::load(path)?.ok_or_else(|| SecretError::Malformed {
                    path: path.to_owned(),
                });
            }
            Err(e) => return Err(SecretError::io("create", path, e)),
        };
        if let Err(e) = file
            .write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
        {
            let _ = std::fs::remove_file(path);
            return Err(SecretError::io("write", path, e));
        }
        Ok(Self(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_owner_only_and_reloaded_identically() {
        let dir = tempfile::tempdir().unwrap();
        let path = secret_path(dir.path());
        assert!(ServerSecret::load(&path).unwrap().is_none());
        let a = ServerSecret::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let b = ServerSecret::load_or_create(&path).unwrap();
        assert_eq!(a.mac(b"t"), b.mac(b"t"));
        assert_eq!(format!("{a:?}"), "ServerSecret(..)");
    }

    #[test]
    fn readable_by_others_or_malformed_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = secret_path(dir.path());
        ServerSecret::load_or_create(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = ServerSecret::load(&path).unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, "not hex").unwrap();
        assert!(matches!(
            ServerSecret::load(&path),
            Err(SecretError::Malformed { .. })
        ));
    }
}
