//! Where a session's records (conversation, audit) go: the database this
//! process opens (`run`, `chat`), or the server (a `serve` worker, which
//! never opens the database; see `worker_store`). The kernel's session
//! factory opens them through [`SessionRecords`].

use crate::checkpoints::Checkpointer;
use crate::cmd_run::{Origin, open_error};
use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use bulwark_audit::AuditSink;
use bulwark_kernel::{ConversationStore, Home, OpenError, SessionRecords};
use bulwark_policy::GlobalConfig;
use bulwark_store::{NewSession, SessionLease, Store, StoreError};
use std::sync::{Arc, Mutex, PoisonError};

pub(crate) struct Records {
    pub(crate) conversations: Arc<dyn ConversationStore>,
    pub(crate) audit: Arc<dyn AuditSink>,
    /// Signs checkpoints while the run lasts: only for a session whose
    /// origin signs them (`run`/`chat`; the server signs for its workers).
    checkpoints: Mutex<Option<Checkpointer>>,
    /// This process's lease on the session (taken when it is claimed).
    lease: Mutex<Option<Arc<SessionLease>>>,
    place: Place,
}

enum Place {
    Database(Store),
    Server(Arc<crate::worker_store::BrokerClient>),
}

impl Records {
    pub(crate) fn open(
        home: &Home,
        origin: &Origin,
        global: &GlobalConfig,
    ) -> Result<Self, Failure> {
        match origin {
            Origin::Remote(client) => Ok(Self {
                conversations: client.clone(),
                audit: client.clone(),
                checkpoints: Mutex::new(None),
                lease: Mutex::new(None),
                place: Place::Server(client.clone()),
            }),
            Origin::Terminal => {
                std::fs::create_dir_all(home.root())
                    .with_context(|| format!("cannot create {}", home.root().display()))?;
                let store = Store::open(&home.db_path())
                    .with_context(|| format!("cannot open {}", home.db_path().display()))?;
                // A log that does not verify stops agents until an operator looks.
                let audit_sink = store.audit_sink();
                crate::cmd_audit::require_verified(home, &audit_sink)?;
                let checkpoints = origin
                    .kernel()
                    .signs_checkpoints()
                    .then(|| Checkpointer::start(home, audit_sink.clone(), &global.audit));
                Ok(Self {
                    conversations: Arc::new(store.clone()),
                    audit: Arc::new(audit_sink),
                    checkpoints: Mutex::new(checkpoints),
                    lease: Mutex::new(None),
                    place: Place::Database(store),
                })
            }
        }
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
        match &self.place {
            Place::Database(store) => {
                let row = store.session(id)?.ok_or_else(|| {
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
            Place::Server(client) => client.resume(id).map_err(|err| match err {
                StoreError::NotFound(_) => usage_error(anyhow!(
                    "no session `{id}` of user `{user}` with agent `{agent}`"
                )),
                other => Failure::from(other),
            }),
        }
    }

    /// The database, when this process opened it (`run`, `chat`).
    pub(crate) fn database(&self) -> Option<&Store> {
        match &self.place {
            Place::Database(store) => Some(store),
            Place::Server(_) => None,
        }
    }

    /// Where credits move: the database, or the server for a worker.
    pub(crate) fn ledger(&self) -> Arc<dyn bulwark_kernel::Ledger> {
        match &self.place {
            Place::Database(store) => Arc::new(store.clone()),
            Place::Server(client) => client.clone(),
        }
    }

    pub(crate) fn create(&self, id: &str, agent: &str, user: &str) -> Result<(), Failure> {
        match &self.place {
            Place::Database(store) => store.create_session(&NewSession {
                id: id.into(),
                agent: agent.into(),
                user: user.into(),
            })?,
            Place::Server(client) => client.create(id)?,
        }
        Ok(())
    }
}

impl SessionRecords for Records {
    fn audit(&self) -> Arc<dyn AuditSink> {
        self.audit.clone()
    }

    fn ledger(&self) -> Arc<dyn bulwark_kernel::Ledger> {
        Records::ledger(self)
    }

    fn database(&self) -> Option<&Store> {
        Records::database(self)
    }

    fn resume(&self, id: &str, agent: &str, user: &str) -> Result<Option<String>, OpenError> {
        Records::resume(self, id, agent, user).map_err(open_error)
    }

    fn create(&self, id: &str, agent: &str, user: &str) -> Result<(), OpenError> {
        Records::create(self, id, agent, user).map_err(open_error)
    }

    /// One process runs a session at a time: a `run`/`chat` holds its
    /// lease until the run ends. A worker takes none: the server holds
    /// the lease for the conversation it serves.
    fn claim(
        &self,
        id: &str,
        agent: &str,
        user: &str,
    ) -> Result<Arc<dyn ConversationStore>, OpenError> {
        let Some(store) = self.database() else {
            return Ok(self.conversations.clone());
        };
        let lease =
            crate::session_lease::take(store, &*self.audit, id, agent, user).map_err(open_error)?;
        *self.lease.lock().unwrap_or_else(PoisonError::into_inner) = Some(lease.clone());
        Ok(Arc::new(crate::session_lease::LeasedConversations::new(
            store.clone(),
            lease,
        )))
    }
}
