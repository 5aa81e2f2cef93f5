//! Where a terminal session's records (conversation, audit) go: the
//! database this process opens (`run`, `chat`). The kernel's session
//! factory opens them through [`SessionRecords`]; a served worker brings
//! its own (`bulwark_worker::WorkerRecords`, which asks the server).

use crate::checkpoints::Checkpointer;
use crate::cmd_run::open_error;
use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use bulwark_audit::AuditSink;
use bulwark_kernel::{ConversationStore, Home, OpenError, Origin, SessionRecords};
use bulwark_policy::GlobalConfig;
use bulwark_store::{NewSession, SessionLease, Store};
use std::sync::{Arc, Mutex, PoisonError};

pub(crate) struct Records {
    pub(crate) audit: Arc<dyn AuditSink>,
    /// Signs checkpoints while the run lasts (the origin, a terminal,
    /// signs them).
    checkpoints: Mutex<Option<Checkpointer>>,
    /// This process's lease on the session (taken when it is claimed).
    lease: Mutex<Option<Arc<SessionLease>>>,
    store: Store,
}

impl Records {
    /// Opens the database of `home` for a session of `origin`.
    pub(crate) fn open(
        home: &Home,
        origin: &Origin,
        global: &GlobalConfig,
    ) -> Result<Self, Failure> {
        std::fs::create_dir_all(home.root())
            .with_context(|| format!("cannot create {}", home.root().display()))?;
        let store = Store::open(&home.db_path())
            .with_context(|| format!("cannot open {}", home.db_path().display()))?;
        // A log that does not verify stops agents until an operator looks.
        let audit_sink = store.audit_sink();
        crate::cmd_audit::require_verified(home, &audit_sink)?;
        let checkpoints = origin
            .signs_checkpoints()
            .then(|| Checkpointer::start(home, audit_sink.clone(), &global.audit));
        Ok(Self {
            audit: Arc::new(audit_sink),
            checkpoints: Mutex::new(checkpoints),
            lease: Mutex::new(None),
            store,
        })
    }

    /// The checkpointer, for the run to finish (once).
    pub(crate) fn take_checkpoints(&self) -> Option<Checkpointer> {
        self.checkpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// The lease this process took on the session, if any.
    pub(crate) fn lease(&self) -> Option<Arc<SessionLease>> {
        self.lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Checks that stored session `id` is `user`'s with `agent`; its saved
    /// state.
    pub(crate) fn resume(
        &self,
        id: &str,
        agent: &str,
        user: &str,
    ) -> Result<Option<String>, Failure> {
        let row = self.store.session(id)?.ok_or_else(|| {
            usage_error(anyhow!("no session `{id}` (see `bulwark sessions list`)"))
        })?;
        if row.agent != agent || row.user != user {
            return Err(usage_error(anyhow!(
                "session `{id}` belongs to agent `{}` and user `{}`, not `{agent}`/`{user}`",
                row.agent,
                row.user
            )));
        }
        Ok(row.state_json)
    }

    pub(crate) fn create(&self, id: &str, agent: &str, user: &str) -> Result<(), Failure> {
        self.store.create_session(&NewSession {
            id: id.into(),
            agent: agent.into(),
            user: user.into(),
        })?;
        Ok(())
    }
}

impl SessionRecords for Records {
    fn audit(&self) -> Arc<dyn AuditSink> {
        self.audit.clone()
    }

    fn ledger(&self) -> Arc<dyn bulwark_kernel::Ledger> {
        Arc::new(self.store.clone())
    }

    fn database(&self) -> Option<&Store> {
        Some(&self.store)
    }

    fn resume(&self, id: &str, agent: &str, user: &str) -> Result<Option<String>, OpenError> {
        Records::resume(self, id, agent, user).map_err(open_error)
    }

    fn create(&self, id: &str, agent: &str, user: &str) -> Result<(), OpenError> {
        Records::create(self, id, agent, user).map_err(open_error)
    }

    /// One process runs a session at a time: a `run`/`chat` holds its
    /// lease until the run ends. (A worker takes none: the server holds
    /// the lease for the conversation it serves.)
    fn provenance(&self, agent: &str, user: &str) -> Arc<dyn bulwark_kernel::ProvenanceStore> {
        Arc::new(bulwark_kernel::StoreProvenance {
            store: self.store.clone(),
            agent: agent.to_string(),
            user: user.to_string(),
        })
    }

    fn claim(
        &self,
        id: &str,
        agent: &str,
        user: &str,
    ) -> Result<Arc<dyn ConversationStore>, OpenError> {
        let store = &self.store;
        let lease =
            crate::session_lease::take(store, &*self.audit, id, agent, user).map_err(open_error)?;
        *self.lease.lock().unwrap_or_else(PoisonError::into_inner) = Some(lease.clone());
        Ok(Arc::new(crate::session_lease::LeasedConversations::new(
            store.clone(),
            lease,
        )))
    }
}
