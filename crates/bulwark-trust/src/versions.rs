//! Rollback protection: the highest version of each signed agent this home
//! has run, per signer.
//!
//! An old `agent.sig` stays a valid signature forever, so without a memory
//! of what already ran, anyone who can write the agent directory could put
//! back an older signed version (one with a known flaw) and it would run.
//! Each signed listing carries a version; `trust/agent-versions` records
//! the highest version run for every (agent name, signer key), and a lower
//! one is refused.
//!
//! The file lives in the trust store's directory because it qualifies the
//! trust store: whoever can rewrite it could equally add a key there, and
//! a served worker, which may read `trust/` but not the database, can
//! still enforce it. Format (sorted, one line per agent and key):
//!
//! ```text
//! bulwark-agent-versions/v1
//! <agent> <highest version> <signer vkey>
//! ```
//!
//! Updates hold an exclusive `flock` on the trust directory and replace
//! the file atomically, so concurrent runs never lose a higher version.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use bulwark_audit::note::VerifierKey;

use crate::error::{SignerId, TrustError};
use crate::fsutil::write_atomic;
use crate::listing::{read_bounded, valid_agent_name};

/// The file, in the trust directory.
pub const VERSIONS_FILE: &str = "agent-versions";
const HEADER: &str = "bulwark-agent-versions/v1";
/// Largest versions file read.
const MAX_VERSIONS_FILE: u64 = 16 * 1024 * 1024;

/// The highest version run of each (agent, signer vkey).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionFloors {
    path: PathBuf,
    highest: BTreeMap<(String, String), u64>,
}

impl VersionFloors {
    /// Reads `<trust_dir>/agent-versions` (missing: nothing has run yet).
    /// Fails closed: a malformed or world-writable file is an error.
    pub fn load(trust_dir: &Path) -> Result<Self, TrustError> {
        let path = trust_dir.join(VERSIONS_FILE);
        let corrupt = |reason: String| TrustError::CorruptVersions {
            path: path.clone(),
            reason,
        };
        let text = match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Ok(Self {
                    path,
                    highest: BTreeMap::new(),
                });
            }
            Err(e) => return Err(TrustError::io("read", &path, e)),
            Ok(meta) if !meta.is_file() => {
                return Err(corrupt("it is not a regular file".into()));
            }
            Ok(meta) if meta.permissions().mode() & 0o002 != 0 => {
                return Err(corrupt(
                    "any user may write to it; run `chmod o-w` on it".into(),
                ));
            }
            Ok(_) => {
                let file = File::open(&path).map_err(|e| TrustError::io("read", &path, e))?;
                String::from_utf8(read_bounded(file, &path, MAX_VERSIONS_FILE)?)
                    .map_err(|_| corrupt("it is not UTF-8 text".into()))?
            }
        };
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(corrupt(format!("it does not start with `{HEADER}`")));
        }
        let mut highest = BTreeMap::new();
        for (index, line) in lines.enumerate() {
            let bad = || {
                corrupt(format!(
                    "line {} is not `<agent> <version> <vkey>`",
                    index + 2
                ))
            };
            let mut parts = line.split(' ');
            let (Some(agent), Some(version), Some(vkey), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad());
            };
            let version: u64 = version.parse().map_err(|_| bad())?;
            if !valid_agent_name(agent) || VerifierKey::parse(vkey).is_err() {
                return Err(bad());
            }
            highest.insert((agent.to_owned(), vkey.to_owned()), version);
        }
        Ok(Self { path, highest })
    }

    /// The file these were read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The highest version of `agent` signed by `key` run here (0: none,
    /// or only unversioned ones).
    pub fn highest(&self, agent: &str, key: &VerifierKey) -> u64 {
        self.highest
            .get(&(agent.to_owned(), key.to_vkey()))
            .copied()
            .unwrap_or(0)
    }

    /// Refuses `version` of `agent` when any of `signers` has had a higher
    /// one run here.
    pub fn check(
        &self,
        agent: &str,
        signers: &[VerifierKey],
        version: u64,
    ) -> Result<(), TrustError> {
        for key in signers {
            let highest = self.highest(agent, key);
            if version < highest {
                return Err(TrustError::Rollback {
                    agent: agent.to_owned(),
                    signer: SignerId {
                        name: key.name().to_owned(),
                        key_id: key.key_id(),
                    },
                    version,
                    highest,
                    path: self.path.clone(),
                });
            }
        }
        Ok(())
    }

    fn text(&self) -> String {
        let mut out = format!("{HEADER}\n");
        for ((agent, vkey), version) in &self.highest {
            out.push_str(&format!("{agent} {version} {vkey}\n"));
        }
        out
    }
}

/// Checks `version` of `agent` signed by `signers` against what this home
/// has run ([`VersionFloors::check`]) without changing anything.
pub fn check_version(
    trust_dir: &Path,
    agent: &str,
    signers: &[VerifierKey],
    version: u64,
) -> Result<(), TrustError> {
    VersionFloors::load(trust_dir)?.check(agent, signers, version)
}

/// Checks as [`check_version`] does and, when accepted, records `version`
/// as the highest run for each signer (under a lock on the trust
/// directory, so a concurrent run cannot undo a higher version). Returns
/// whether the file changed.
pub fn record_version(
    trust_dir: &Path,
    agent: &str,
    signers: &[VerifierKey],
    version: u64,
) -> Result<bool, TrustError> {
    let dir = File::open(trust_dir).map_err(|e| TrustError::io("open", trust_dir, e))?;
    rustix::fs::flock(&dir, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| TrustError::io("lock", trust_dir, e.into()))?;
    let mut floors = VersionFloors::load(trust_dir)?;
    floors.check(agent, signers, version)?;
    let mut changed = false;
    for key in signers {
        let entry = floors
            .highest
            .entry((agent.to_owned(), key.to_vkey()))
            .or_insert(0);
        if version > *entry {
            *entry = version;
            changed = true;
        }
    }
    if changed {
        write_atomic(&floors.path, floors.text().as_bytes(), false)?;
    }
    drop(dir);
    Ok(changed)
}
