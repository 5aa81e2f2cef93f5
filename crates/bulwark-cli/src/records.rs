//! Where a session's records (conversation, audit) go: the database this
//! process opens (`run`, `chat`), or the server (a `serve` worker, which
//! never opens the database; see `worker_store`).

use crate::checkpoints::Checkpointer;
use crate::cmd_run::Origin;
use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use bulwark_audit::AuditSink;
use bulwark_kernel::{ConversationStore, Home};
use bulwark_policy::GlobalConfig;
use bulwark_store::{NewSession, Store, StoreError};
use std::sync::Arc;

pub(crate) struct Records {
    pub(crate) conversations: Arc<dyn ConversationStore>,
    pub(crate) audit: Arc<dyn AuditSink>,
    /// Signs checkpoints while the run lasts (`run`/`chat` only: the server
    /// signs for its workers).
    pub(crate) checkpoints: Option<Checkpointer>,
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
                checkpoints: None,
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
                let checkpoints = Checkpointer::start(home, audit_sink.clone(), &global.audit);
                Ok(Self {
                    conversations: Arc::new(store.clone()),
                    audit: Arc::new(audit_sink),
                    checkpoints: Some(checkpoints),
                    place: Place::Database(store),
                })
            }
        }
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
