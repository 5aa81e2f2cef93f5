//! Provenance of stored content: the taint labels of what a session wrote
//! to a file or a memory note, kept by the store (not the file system) and
//! keyed by root, path and content digest, so reading the same bytes back
//! re-applies the labels in any later session of any agent.
//!
//! A session never names a root by path: it names one of its own three
//! ([`LabelRoot`]) and the store it was given is bound to its agent and
//! user, so a session (or a compromised worker) cannot write labels for
//! another's files.

use crate::tool::{CallTaint, ToolError};
use bulwark_policy::{TaintLabel, WorkspaceTrust};
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

impl CallTaint {
    /// What a write by this call stores with its bytes: the session's
    /// untrusted labels only. The empty set still says "Bulwark wrote
    /// these bytes, clean", which is not the same as no entry.
    pub(crate) fn written_labels(&self) -> BTreeSet<TaintLabel> {
        self.labels
            .iter()
            .copied()
            .filter(|l| l.is_untrusted())
            .collect()
    }

    /// Records `labels` for `bytes` at (`root`, `path`), `path` being where
    /// the write really lands.
    pub(crate) fn record(
        &self,
        root: LabelRoot,
        path: &str,
        bytes: &[u8],
        labels: &BTreeSet<TaintLabel>,
    ) -> Result<(), ProvenanceError> {
        self.provenance
            .record(root, path, content_digest(bytes), labels, &self.source)
    }

    /// The labels `bytes` read from (`root`, `path`) carry: the root's own
    /// label plus what was stored with exactly these bytes. Bytes Bulwark
    /// never wrote there count as the workspace's default trust (memory
    /// notes are only ever written through Bulwark: trusted). A lookup
    /// that fails is an error, never "trusted".
    pub(crate) fn read_labels(
        &self,
        root: LabelRoot,
        path: &str,
        bytes: &[u8],
    ) -> Result<BTreeSet<TaintLabel>, ToolError> {
        let stored = self
            .provenance
            .lookup(root, path, content_digest(bytes))
            .map_err(|e| {
                ToolError::Failed(format!(
                    "the labels of `{path}` could not be looked up ({e}); its content was not returned"
                ))
            })?;
        let mut labels = BTreeSet::from([match root {
            LabelRoot::Workspace => TaintLabel::Workspace,
            LabelRoot::AgentMemory | LabelRoot::UserMemory => TaintLabel::Memory,
        }]);
        match stored {
            Some(stored) => labels.extend(stored),
            None if root == LabelRoot::Workspace && self.workspace == WorkspaceTrust::Untrusted => {
                labels.insert(TaintLabel::Unknown);
            }
            None => {}
        }
        Ok(labels)
    }
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
            .map(|names| labels_from_names(&names, "the label table"))
            .transpose()
    }
}

/// Stored label names as labels. A name this build does not know cannot
/// be weighed, so it is an error (the read fails closed rather than
/// reading as clean); `from` says where the names came from.
pub fn labels_from_names(
    names: &[String],
    from: &str,
) -> Result<BTreeSet<TaintLabel>, ProvenanceError> {
    names
        .iter()
        .map(|n| {
            TaintLabel::parse(n)
                .ok_or_else(|| ProvenanceError(format!("{from} holds an unknown label `{n}`")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn taint(labels: &[TaintLabel], workspace: WorkspaceTrust) -> CallTaint {
        CallTaint {
            labels: labels.iter().copied().collect(),
            source: "c1".into(),
            provenance: Arc::new(MemoryProvenance::default()),
            workspace,
        }
    }

    #[test]
    fn a_write_stores_only_untrusted_labels_and_a_read_adds_the_roots_own() {
        let t = taint(
            &[
                TaintLabel::External,
                TaintLabel::Workspace,
                TaintLabel::Process,
            ],
            WorkspaceTrust::Trusted,
        );
        let written = t.written_labels();
        assert_eq!(written, BTreeSet::from([TaintLabel::External]));
        for (root, own) in [
            (LabelRoot::Workspace, TaintLabel::Workspace),
            (LabelRoot::AgentMemory, TaintLabel::Memory),
            (LabelRoot::UserMemory, TaintLabel::Memory),
        ] {
            t.record(root, "a.txt", b"x", &written).unwrap();
            assert_eq!(
                t.read_labels(root, "a.txt", b"x").unwrap(),
                BTreeSet::from([TaintLabel::External, own])
            );
            // Other bytes at the same path were not written by Bulwark.
            assert_eq!(
                t.read_labels(root, "a.txt", b"y").unwrap(),
                BTreeSet::from([own])
            );
        }
    }

    #[test]
    fn without_an_entry_only_an_untrusted_workspace_adds_unknown() {
        let t = taint(&[], WorkspaceTrust::Untrusted);
        assert_eq!(
            t.read_labels(LabelRoot::Workspace, "f", b"x").unwrap(),
            BTreeSet::from([TaintLabel::Workspace, TaintLabel::Unknown])
        );
        assert_eq!(
            t.read_labels(LabelRoot::UserMemory, "f", b"x").unwrap(),
            BTreeSet::from([TaintLabel::Memory])
        );
        // A clean write by Bulwark is an entry: no `unknown`.
        t.record(LabelRoot::Workspace, "f", b"x", &t.written_labels())
            .unwrap();
        assert_eq!(
            t.read_labels(LabelRoot::Workspace, "f", b"x").unwrap(),
            BTreeSet::from([TaintLabel::Workspace])
        );
    }
}
