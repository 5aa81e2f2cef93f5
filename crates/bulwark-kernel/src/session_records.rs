//! Where a session's conversation, audit records and credits go: the one
//! seam [`crate::SessionFactory::open`] leaves to each front end (the
//! terminal's database, a worker's server, a child's parent store).

use crate::conversation::ConversationStore;
use crate::credits::Ledger;
use crate::factory::OpenError;
use bulwark_audit::AuditSink;
use bulwark_store::{NewSession, Store};
use std::sync::Arc;

/// Where a session's conversation and audit records go. The terminal's is
/// the database it opens; a worker's, the server; a child's, its parent's
/// store ([`StoreRecords`]).
pub trait SessionRecords: Send + Sync {
    fn audit(&self) -> Arc<dyn AuditSink>;
    /// Where credits move.
    fn ledger(&self) -> Arc<dyn Ledger>;
    /// The database, when this process holds it: accounts are made there
    /// and child agents spawned through it.
    fn database(&self) -> Option<&Store>;
    /// Checks that stored session `id` is `user`'s with `agent`; its saved
    /// state (JSON).
    fn resume(&self, id: &str, agent: &str, user: &str) -> Result<Option<String>, OpenError>;
    /// Stores a new session.
    fn create(&self, id: &str, agent: &str, user: &str) -> Result<(), OpenError>;
    /// Takes session `id` for this process (a lease, say); the store its
    /// conversation is written to from now on.
    fn claim(
        &self,
        id: &str,
        agent: &str,
        user: &str,
    ) -> Result<Arc<dyn ConversationStore>, OpenError>;
    /// Where the labels of what `agent`'s sessions for `user` store are
    /// kept, bound to those names.
    fn provenance(&self, agent: &str, user: &str) -> Arc<dyn crate::provenance::ProvenanceStore>;
}

/// Records kept in a [`Store`] this process holds, without a lease: a
/// child's (its parent holds the lease), or an embedding program's.
pub struct StoreRecords {
    pub store: Store,
    pub audit: Arc<dyn AuditSink>,
}

impl SessionRecords for StoreRecords {
    fn audit(&self) -> Arc<dyn AuditSink> {
        self.audit.clone()
    }
    fn ledger(&self) -> Arc<dyn Ledger> {
        Arc::new(self.store.clone())
    }
    fn database(&self) -> Option<&Store> {
        Some(&self.store)
    }
    fn resume(&self, id: &str, agent: &str, user: &str) -> Result<Option<String>, OpenError> {
        match self.store.session(id)? {
            Some(row) if row.agent == agent && row.user == user => Ok(row.state_json),
            Some(row) => Err(OpenError::Usage(format!(
                "session `{id}` belongs to agent `{}` and user `{}`, not `{agent}`/`{user}`",
                row.agent, row.user
            ))),
            None => Err(OpenError::Usage(format!("no session `{id}`"))),
        }
    }
    fn create(&self, id: &str, agent: &str, user: &str) -> Result<(), OpenError> {
        self.store.create_session(&NewSession {
            id: id.into(),
            agent: agent.into(),
            user: user.into(),
        })?;
        Ok(())
    }
    fn claim(&self, _: &str, _: &str, _: &str) -> Result<Arc<dyn ConversationStore>, OpenError> {
        Ok(Arc::new(self.store.clone()))
    }
    fn provenance(&self, agent: &str, user: &str) -> Arc<dyn crate::provenance::ProvenanceStore> {
        Arc::new(crate::provenance::StoreProvenance {
            store: self.store.clone(),
            agent: agent.to_string(),
            user: user.to_string(),
        })
    }
}
