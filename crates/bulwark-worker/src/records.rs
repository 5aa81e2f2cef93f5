//! Where a worker's session records go: the server, through the
//! [`BrokerClient`]. The worker never opens the database, takes no lease
//! (the server holds it for the conversation it serves) and signs no
//! checkpoints (the server does, for all its workers).

use crate::broker::BrokerClient;
use bulwark_audit::AuditSink;
use bulwark_kernel::{ConversationStore, Ledger, OpenError, SessionRecords};
use bulwark_store::{Store, StoreError};
use std::sync::Arc;

/// The [`SessionRecords`] of a worker's one session.
pub struct WorkerRecords {
    client: Arc<BrokerClient>,
}

impl WorkerRecords {
    pub fn new(client: Arc<BrokerClient>) -> Self {
        Self { client }
    }
}

impl SessionRecords for WorkerRecords {
    fn audit(&self) -> Arc<dyn AuditSink> {
        self.client.clone()
    }

    /// The server decides the account and the budget.
    fn ledger(&self) -> Arc<dyn Ledger> {
        self.client.clone()
    }

    fn database(&self) -> Option<&Store> {
        None
    }

    /// The server checks that `id` is this worker's user's with its agent.
    fn resume(&self, id: &str, agent: &str, user: &str) -> Result<Option<String>, OpenError> {
        self.client.resume(id).map_err(|err| match err {
            StoreError::NotFound(_) => OpenError::Usage(format!(
                "no session `{id}` of user `{user}` with agent `{agent}`"
            )),
            other => OpenError::Failed(other.to_string()),
        })
    }

    fn create(&self, id: &str, _agent: &str, _user: &str) -> Result<(), OpenError> {
        self.client
            .create(id)
            .map_err(|err| OpenError::Failed(err.to_string()))
    }

    /// No lease here: the server holds it for this worker's conversation.
    fn claim(&self, _: &str, _: &str, _: &str) -> Result<Arc<dyn ConversationStore>, OpenError> {
        Ok(self.client.clone())
    }

    /// The server's label table: it keys every root to the agent and user
    /// it started this worker for, whatever is passed here.
    fn provenance(&self, _: &str, _: &str) -> Arc<dyn bulwark_kernel::ProvenanceStore> {
        self.client.clone()
    }
}
