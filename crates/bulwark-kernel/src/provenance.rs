//! Provenance of stored content: the taint labels of what a session wrote
//! to a file or a memory note, kept by the store (not the file system) and
//! keyed by root, path and content digest, so reading the same bytes back
//! re-applies the labels in any later session of any agent.
//!
//! A session never names a root by path: it names one of its own three
//! ([`LabelRoot`]) and the store it was given is bound to its agent and
//! user, so a session (or a compromised worker) cannot write labels for
//! another's files.

use bulwark_policy::TaintLabel;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// One of a session's own storage roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LabelRoot {
    /// The agent's workspace (per user and agent).
    Workspace,
    /// The agent's memory (per user and agent).
    AgentMemory,
    /// The user's memory, shared by every agent of the user.
    UserMemory,
}

/// The SHA-256 of stored content.
pub fn content_digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[derive(Debug, thiserror::Error)]
#[error("provenance store: {0}")]
pub struct ProvenanceError(pub String);

/// Where the labels of stored content are kept, bound to one session's
/// agent and user.
pub trait ProvenanceStore: Send + Sync {
    /// Adds `labels` to the entry of (`root`, `path`, `digest`): labels of
    /// an entry only grow (a union), an empty set records "written by
    /// Bulwark, clean". `source` is the tool call id that wrote it.
    fn record(
        &self,
        root: LabelRoot,
        path: &str,
        digest: [u8; 32],
        labels: &BTreeSet<TaintLabel>,
        source: &str,
    ) -> Result<(), ProvenanceError>;
    /// The labels of (`root`, `path`, `digest`); `None` when Bulwark never
    /// wrote these bytes there (no provenance).
    fn lookup(
        &self,
        root: LabelRoot,
        path: &str,
        digest: [u8; 32],
    ) -> Result<Option<BTreeSet<TaintLabel>>, ProvenanceError>;
}

type Key = (LabelRoot, String, [u8; 32]);

/// Provenance kept in this process only: for an embedding program or a
/// test that has no store.
#[derive(Default)]
pub struct MemoryProvenance {
    entries: Mutex<BTreeMap<Key, BTreeSet<TaintLabel>>>,
}

impl ProvenanceStore for MemoryProvenance {
    fn record(
        &self,
        root: LabelRoot,
        path: &str,
        digest: [u8; 32],
        labels: &BTreeSet<TaintLabel>,
        _source: &str,
    ) -> Result<(), ProvenanceError> {
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| ProvenanceError("lock poisoned".into()))?;
        entries
            .entry((root, path.to_string(), digest))
            .or_default()
            .extend(labels.iter().copied());
        Ok(())
    }

    fn lookup(
        &self,
        root: LabelRoot,
        path: &str,
        digest: [u8; 32],
    ) -> Result<Option<BTreeSet<TaintLabel>>, ProvenanceError> {
        let entries = self
            .entries
            .lock()
            .map_err(|_| ProvenanceError("lock poisoned".into()))?;
        Ok(entries.get(&(root, path.to_string(), digest)).cloned())
    }
}

/// The key a root is stored under: names, never a path of this machine,
/// so a moved home keeps its labels.
pub fn root_key(root: LabelRoot, agent: &str, user: &str) -> String {
    match root {
        LabelRoot::Workspace => format!("workspace:{user}/{agent}"),
        LabelRoot::AgentMemory => format!("agent-memory:{user}/{agent}"),
        LabelRoot::UserMemory => format!("user-memory:{user}"),
    }
}

/// Provenance kept in the store's label table, for one agent and user.
pub struct StoreProvenance {
    pub store: bulwark_store::Store,
    pub agent: String,
    pub user: String,
}

impl ProvenanceStore for StoreProvenance {
    fn record(
        &self,
        root: LabelRoot,
        path: &str,
        digest: [u8; 32],
        labels: &BTreeSet<TaintLabel>,
        source: &str,
    ) -> Result<(), ProvenanceError> {
        let names: Vec<&str> = labels.iter().map(|l| l.name()).collect();
        self.store
            .record_provenance(
                &root_key(root, &self.agent, &self.user),
                path,
                &digest,
                &names,
                source,
            )
            .map_err(|e| ProvenanceError(e.to_string()))
    }

    fn lookup(
        &self,
        root: LabelRoot,
        path: &str,
        digest: [u8; 32],
    ) -> Result<Option<BTreeSet<TaintLabel>>, ProvenanceError> {
        let names = self
            .store
            .provenance(&root_key(root, &self.agent, &self.user), path, &digest)
            .map_err(|e| ProvenanceError(e.to_string()))?;
        names
            .map(|names| {
                names
                    .iter()
                    .map(|n| {
                        TaintLabel::parse(n)
                            .ok_or_else(|| ProvenanceError(format!("unknown label `{n}` stored")))
                    })
                    .collect()
            })
            .transpose()
    }
}
