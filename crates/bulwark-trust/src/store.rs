//! The operator's trust store: `$BULWARK_HOME/trust/<keyname>.vkey`, one
//! verifier key per file.
//!
//! Agents verify against these keys and nothing else. In particular a key
//! carried by the signature itself is never consulted — that would let
//! anyone sign. One file per key keeps adding and removing a key a single
//! file operation and makes the store easy to audit with `ls`.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use bulwark_audit::note::VerifierKey;

use crate::error::TrustError;
use crate::fsutil::write_atomic;
use crate::keys::{check_key_name, parse_vkey_line, read_small};

/// The result of [`TrustStore::trust`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trusted {
    /// The key was added.
    Added(VerifierKey),
    /// Exactly this key was already trusted; nothing changed.
    AlreadyTrusted(VerifierKey),
}

/// The keys agents may be signed by, loaded from a directory.
#[derive(Debug, Clone)]
pub struct TrustStore {
    dir: PathBuf,
    /// Sorted by name; names are unique.
    keys: Vec<VerifierKey>,
}

impl TrustStore {
    /// Reads every `*.vkey` in `dir` (a missing directory is an empty
    /// store). Fails closed: a file that is not a valid vkey for its file
    /// name, or a world-writable store, is an error rather than skipped.
    pub fn load(dir: impl Into<PathBuf>) -> Result<Self, TrustError> {
        let dir = dir.into();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Ok(Self {
                    dir,
                    keys: Vec::new(),
                });
            }
            Err(e) => return Err(TrustError::io("read directory", &dir, e)),
        };
        check_not_world_writable(&dir)?;
        let mut keys = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| TrustError::io("read directory", &dir, e))?;
            let path = entry.path();
            let file_name = entry.file_name();
            let Some(file_name) = file_name.to_str() else {
                continue;
            };
            let Some(stem) = file_name.strip_suffix(".vkey") else {
                continue;
            };
            let corrupt = |reason: String| TrustError::CorruptTrustStore {
                path: path.clone(),
                reason,
            };
            check_key_name(stem).map_err(|e| corrupt(e.to_string()))?;
            check_not_world_writable(&path)?;
            let text = read_small(&path)?;
            let key = parse_vkey_line(&text).map_err(corrupt)?;
            if key.name() != stem {
                return Err(corrupt(format!(
                    "it holds key `{}`, but the file name says `{stem}`",
                    key.name()
                )));
            }
            keys.push(key);
        }
        keys.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(Self { dir, keys })
    }

    /// `<home>/trust`.
    pub fn load_from_home(home: &Path) -> Result<Self, TrustError> {
        Self::load(home.join(crate::TRUST_DIR))
    }

    /// Re-reads the directory.
    pub fn reload(&mut self) -> Result<(), TrustError> {
        *self = Self::load(self.dir.clone())?;
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The trusted keys, sorted by name.
    pub fn list(&self) -> &[VerifierKey] {
        &self.keys
    }

    /// The trusted key named `name`.
    pub fn get(&self, name: &str) -> Option<&VerifierKey> {
        self.keys.iter().find(|k| k.name() == name)
    }

    /// `trust/<name>.vkey`.
    pub fn path_for(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.vkey"))
    }

    /// Trusts a key given as vkey text or as the path of a file holding
    /// one (such as `keys/<name>.pub`).
    pub fn trust(&mut self, vkey_or_path: &str) -> Result<Trusted, TrustError> {
        let key = match parse_vkey_line(vkey_or_path) {
            Ok(key) => key,
            Err(reason) => {
                let path = Path::new(vkey_or_path);
                if path.is_file() {
                    let text = read_small(path)?;
                    parse_vkey_line(&text).map_err(|reason| TrustError::InvalidVerifierKey {
                        input: path.display().to_string(),
                        reason,
                    })?
                } else {
                    let mut input: String = vkey_or_path.trim().chars().take(80).collect();
                    if input.len() < vkey_or_path.trim().len() {
                        input.push('…');
                    }
                    let reason = if vkey_or_path.contains('+') {
                        reason
                    } else {
                        format!("{reason}; nor is it a file")
                    };
                    return Err(TrustError::InvalidVerifierKey { input, reason });
                }
            }
        };
        self.trust_key(key)
    }

    /// Trusts `key`, refusing a different key under a trusted name.
    pub fn trust_key(&mut self, key: VerifierKey) -> Result<Trusted, TrustError> {
        check_key_name(key.name())?;
        let path = self.path_for(key.name());
        if let Some(existing) = self.get(key.name()) {
            if *existing == key {
                return Ok(Trusted::AlreadyTrusted(key));
            }
            return Err(TrustError::DuplicateKeyName {
                name: key.name().to_owned(),
                existing_id: existing.key_id(),
                new_id: key.key_id(),
                path,
            });
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| TrustError::io("create", &self.dir, e))?;
        let line = format!("{}\n", key.to_vkey());
        write_atomic(&path, line.as_bytes(), true)?;
        self.keys.push(key.clone());
        self.keys.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(Trusted::Added(key))
    }

    /// Removes the key named `name` and returns it.
    pub fn untrust(&mut self, name: &str) -> Result<VerifierKey, TrustError> {
        check_key_name(name)?;
        let path = self.path_for(name);
        let Some(index) = self.keys.iter().position(|k| k.name() == name) else {
            return Err(TrustError::NotTrusted {
                name: name.to_owned(),
                path,
            });
        };
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(TrustError::NotTrusted {
                    name: name.to_owned(),
                    path,
                });
            }
            Err(e) => return Err(TrustError::io("remove", &path, e)),
        }
        Ok(self.keys.remove(index))
    }
}

/// A trust store anyone may write to trusts whoever wrote last.
fn check_not_world_writable(path: &Path) -> Result<(), TrustError> {
    let meta = std::fs::metadata(path).map_err(|e| TrustError::io("read", path, e))?;
    if meta.permissions().mode() & 0o002 != 0 {
        return Err(TrustError::CorruptTrustStore {
            path: path.to_owned(),
            reason: "any user may write to it; run `chmod o-w` on it".into(),
        });
    }
    Ok(())
}
