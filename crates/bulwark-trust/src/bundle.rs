//! An agent directory read once into memory.
//!
//! Verifying a directory and then loading its files by path leaves a
//! window: a file swapped after it was hashed is what runs. An
//! [`AgentBundle`] closes it by construction: every file is read exactly
//! once, the listing is computed from those bytes, and the caller gets the
//! bytes from the bundle afterwards, never from the disk again.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::TrustError;
use crate::listing::{AgentListing, MANIFEST_FILE, read_walked_file, valid_agent_name, walk};

/// Most bytes an agent directory may hold in all (the bundle is kept in
/// memory for the whole run).
pub const MAX_BUNDLE_SIZE: u64 = 256 * 1024 * 1024;

/// Every file of an agent directory (except `agent.sig`), as read once,
/// with the listing of exactly those bytes.
#[derive(Clone)]
pub struct AgentBundle {
    dir: PathBuf,
    listing: AgentListing,
    files: BTreeMap<String, Vec<u8>>,
}

impl std::fmt::Debug for AgentBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBundle")
            .field("dir", &self.dir)
            .field("files", &self.files.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl AgentBundle {
    /// Walks `dir` and reads every regular file except the top-level
    /// `agent.sig`: links, devices, non-UTF-8 or control-character names,
    /// more than [`crate::MAX_FILES`] files, a file over
    /// [`crate::MAX_FILE_SIZE`] or more than [`MAX_BUNDLE_SIZE`] in all
    /// are refused. The listing has version 0 (the directory does not say
    /// which version it is; the signature does).
    pub fn read(dir: &Path, agent: &str) -> Result<Self, TrustError> {
        if !valid_agent_name(agent) {
            return Err(TrustError::InvalidAgentName {
                name: agent.to_owned(),
            });
        }
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(TrustError::NotADirectory {
                    path: dir.to_owned(),
                });
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(TrustError::NotADirectory {
                    path: dir.to_owned(),
                });
            }
            Err(e) => return Err(TrustError::io("read", dir, e)),
        }
        let mut files = BTreeMap::new();
        let mut total = 0u64;
        for (path, relative, meta) in walk(dir)? {
            let bytes = read_walked_file(&path, &meta)?;
            total += bytes.len() as u64;
            if total > MAX_BUNDLE_SIZE {
                return Err(TrustError::BundleTooLarge {
                    dir: dir.to_owned(),
                    limit: MAX_BUNDLE_SIZE,
                });
            }
            files.insert(relative, bytes);
        }
        if !files.contains_key(MANIFEST_FILE) {
            return Err(TrustError::MissingManifest {
                path: dir.join(MANIFEST_FILE),
            });
        }
        let listing = AgentListing::from_files(agent, files.iter());
        Ok(Self {
            dir: dir.to_owned(),
            listing,
            files,
        })
    }

    /// The agent directory the bundle was read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The agent's name, as the listing binds it.
    pub fn agent(&self) -> &str {
        &self.listing.agent
    }

    /// The listing of the bytes read (version as verified, else 0).
    pub fn listing(&self) -> &AgentListing {
        &self.listing
    }

    /// The bytes read for `relative` (`/`-separated, relative to the agent
    /// directory), if it is a file of the agent.
    pub fn get(&self, relative: &str) -> Option<&[u8]> {
        self.files.get(relative).map(Vec::as_slice)
    }

    /// The relative paths of every file, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    pub(crate) fn set_version(&mut self, version: u64) {
        self.listing.version = version;
    }

    pub(crate) fn into_listing(self) -> AgentListing {
        self.listing
    }
}
