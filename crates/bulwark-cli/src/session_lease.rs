//! The lease a `run` or `chat` holds on its session while it runs it (see
//! `bulwark_store::lease`): a second process on the same session is refused
//! before anything runs, and this process's writes to the session stop the
//! moment another process has taken it over.

use crate::Failure;
use anyhow::anyhow;
use bulwark_audit::AuditSink;
use bulwark_kernel::ConversationStore;
use bulwark_store::{SessionLease, Store, StoreError};
use std::sync::Arc;

/// Takes the lease on `session` for this process. When another process
/// holds it, the refusal is audited (`session_lease`/`refused`) and the
/// run fails with a message naming that process.
pub(crate) fn take(
    store: &Store,
    audit: &dyn AuditSink,
    session: &str,
    agent: &str,
    user: &str,
) -> Result<Arc<SessionLease>, Failure> {
    match SessionLease::acquire(store, session) {
        Ok(lease) => Ok(Arc::new(lease)),
        Err(StoreError::LeaseHeld(conflict)) => {
            let reason = conflict.to_string();
            let audited = audit
                .record(&conflict.audit_record(agent, user))
                .and_then(|()| audit.flush());
            let reason = match audited {
                Ok(()) => reason,
                Err(err) => format!("{reason} (and the refusal could not be audited: {err})"),
            };
            Err(Failure {
                code: 1,
                error: anyhow!("{reason}"),
            })
        }
        Err(other) => Err(Failure::from(
            anyhow::Error::new(other)
                .context(format!("cannot take the lease on session `{session}`")),
        )),
    }
}

/// The conversation store of a leased session: messages and state are
/// written only while the lease is this process's.
pub(crate) struct LeasedConversations {
    store: Store,
    lease: Arc<SessionLease>,
}

impl LeasedConversations {
    pub(crate) fn new(store: Store, lease: Arc<SessionLease>) -> Self {
        Self { store, lease }
    }
}

impl ConversationStore for LeasedConversations {
    fn append_message(
        &self,
        session: &str,
        role: &str,
        content_json: &str,
    ) -> Result<(), StoreError> {
        self.store
            .append_message_leased(session, self.lease.holder(), role, content_json)
            .map(|_| ())
    }

    fn messages(&self, session: &str) -> Result<Vec<String>, StoreError> {
        ConversationStore::messages(&self.store, session)
    }

    fn save_state(&self, session: &str, state_json: &str) -> Result<(), StoreError> {
        self.store
            .save_state_leased(session, self.lease.holder(), state_json)
    }

    fn record_tokens(&self, session: &str, user: &str, tokens: u64) -> Result<(), StoreError> {
        self.store.record_tokens(session, user, tokens)
    }
}
