//! What the server needs from whatever runs conversations.
//!
//! The server speaks only [`bulwark_protocol::protocol`] with a conversation:
//! it sends [`Command`]s and receives [`Event`]s. How a conversation runs
//! (a `bulwark worker` process per conversation, under the supervisor) is
//! the backend's business; tests use an in-process fake.

use async_trait::async_trait;
use bulwark_protocol::protocol::{Command, Event};
use std::collections::BTreeMap;
use tokio::sync::mpsc;

/// Open (or resume) one conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenRequest {
    /// An authenticated user from access.toml.
    pub user: String,
    /// An agent this user may use (checked by the server, and again by
    /// the worker's policy).
    pub agent: String,
    /// A stored session of this user and agent to continue; `None` starts
    /// a new one. The server has checked ownership; the worker checks again.
    pub resume: Option<String>,
}

/// Stops a conversation's worker. Called at most once per conversation,
/// after a `Shutdown` command was given a moment to finish cleanly.
pub trait ConversationControl: Send + Sync + 'static {
    /// Ends the conversation now (kill the worker). Must not block.
    fn kill(&self);
}

/// A running conversation. Dropping it must end the conversation too: the
/// backend sees `commands` closed.
pub struct Conversation {
    /// The session id (from the worker's `Ready`).
    pub session_id: String,
    /// How many stored messages a resumed session already has.
    pub history_messages: u64,
    pub commands: mpsc::Sender<Command>,
    /// Everything after `Ready`, validated against the protocol's bounds.
    /// Closed when the conversation ends.
    pub events: mpsc::Receiver<Event>,
    pub control: Box<dyn ConversationControl>,
}

impl std::fmt::Debug for Conversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversation")
            .field("session_id", &self.session_id)
            .field("history_messages", &self.history_messages)
            .finish_non_exhaustive()
    }
}

/// Why a conversation could not be opened. Messages are shown to the
/// client: say what to do, name nothing internal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// Too many conversations running (globally or for this user).
    #[error("{message}")]
    AtCapacity {
        message: String,
        retry_after_secs: u64,
    },
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// The agent, model, policy or signature could not be set up.
    #[error("{0}")]
    Setup(String),
    #[error("{0}")]
    Internal(String),
}

/// Worker counts for `/health/detail` and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct BackendStats {
    /// Conversations (workers) running now.
    pub workers: u64,
    /// Running conversations per user.
    pub workers_by_user: BTreeMap<String, u64>,
    /// Workers that died or broke the protocol since the server started.
    pub crashes: u64,
    /// The configured ceiling, if any.
    pub max_workers: Option<u64>,
}

/// Runs conversations for the server.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Starts a conversation and returns once it is ready (its `Ready`
    /// event consumed), or why it cannot run.
    async fn open(&self, request: OpenRequest) -> Result<Conversation, BackendError>;

    /// Starts a *tools-only* conversation for an MCP client (`/mcp`): a
    /// session with no model that answers `ListTools` and `CallTool`
    /// (`resume` is ignored). A backend that cannot run one refuses.
    async fn open_tools(&self, request: OpenRequest) -> Result<Conversation, BackendError> {
        let _ = request;
        Err(BackendError::Internal(
            "this server cannot serve tools over MCP".into(),
        ))
    }

    fn stats(&self) -> BackendStats;
}
