//! The store, brokered: what a worker asks the server to read or write.
//!
//! A worker never opens the database: it holds every user's conversations
//! and the audit log, and a compromised worker must reach neither. It asks
//! instead, with an [`Event::Store`](crate::protocol::Event::Store) request,
//! and the server answers with a
//! [`Command::StoreReply`](crate::protocol::Command::StoreReply). No request
//! names a session, a user or an agent: the server performs each one for
//! the conversation it started this worker for (see
//! [`StoreBroker`](crate::StoreBroker)), and stamps that identity on every
//! audit record. So the worst a compromised worker can do to the store is
//! write nonsense into its own session and its own audit trail, which the
//! audit log's hashes then preserve as evidence.

use crate::protocol::{MAX_ID_CHARS, MAX_SHORT_CHARS, TooLong};
use bulwark_audit::Decision;
use serde::{Deserialize, Serialize};

/// Longest stored message or session state, in bytes. A page of replayed
/// history holds at most this much (or one item), so with JSON's escaping
/// (at most doubling stored JSON) a reply stays under the frame limit.
pub const MAX_STORED_JSON: usize = 3 * 1024 * 1024;
/// Longest audit `detail` (recorded arguments are at most 64 KiB).
pub const MAX_AUDIT_DETAIL_CHARS: usize = 256 * 1024;

/// Who wrote a stored message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredRole {
    User,
    Assistant,
}

impl StoredRole {
    pub fn as_str(self) -> &'static str {
        match self {
            StoredRole::User => "user",
            StoredRole::Assistant => "assistant",
        }
    }
}

/// An audit record as a worker sends it: without the session, user and
/// agent, which the server fills in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditEntry {
    pub time_ms: i64,
    pub action: String,
    pub tool: String,
    pub operation: String,
    pub args_digest: String,
    pub decision: Decision,
    pub reason: String,
    pub detail: String,
    pub duration_us: u64,
}

/// Worker → server: one store operation on the worker's own conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum StoreRequest {
    /// Continue stored session `session`: it must be this user's with this
    /// agent. Answered with [`StoreReply::Resumed`].
    Resume { session: String },
    /// Create the new session `session` (a fresh random id) for this user
    /// and agent. At most one `Resume` or `Create` per worker.
    Create { session: String },
    /// Append a message (stored JSON) to the session.
    AppendMessage {
        role: StoredRole,
        content_json: String,
    },
    /// Stored messages from index `from` on (oldest first), a page at a
    /// time: [`StoreReply::Messages`].
    Messages { from: u64 },
    /// Replace the session's state (JSON).
    SaveState { state_json: String },
    /// One model call used this many tokens.
    RecordTokens { tokens: u64 },
    /// Tokens this user's sessions used since `since_ms`:
    /// [`StoreReply::Tokens`].
    TokensSince { since_ms: i64 },
    /// An audit record of this session.
    Audit { entry: AuditEntry },
    /// The durability barrier: every record sent before is stored.
    AuditFlush,
}

/// Server → worker: the answer to one [`StoreRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case", deny_unknown_fields)]
pub enum StoreReply {
    Done,
    Resumed {
        state_json: Option<String>,
    },
    Messages {
        items: Vec<String>,
        /// More messages follow: ask again from `from + items.len()`.
        more: bool,
    },
    Tokens {
        tokens: u64,
    },
    /// Refused or failed; `message` is for the worker's log and its user.
    Failed {
        kind: StoreFailure,
        message: String,
    },
}

/// Why a store request did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreFailure {
    /// Not this worker's to do (another user's session, a second `Create`,
    /// a write before the session exists).
    Forbidden,
    NotFound,
    /// The database failed.
    Internal,
}

fn bound(field: &'static str, value: &str, max: usize) -> Result<(), TooLong> {
    if value.len() <= max {
        return Ok(());
    }
    let len = value.chars().count();
    if len > max {
        return Err(TooLong { field, len, max });
    }
    Ok(())
}

fn bound_bytes(field: &'static str, value: &str, max: usize) -> Result<(), TooLong> {
    if value.len() > max {
        return Err(TooLong {
            field,
            len: value.len(),
            max,
        });
    }
    Ok(())
}

impl StoreRequest {
    /// Checks every bound; call on receipt.
    pub fn validate(&self) -> Result<(), TooLong> {
        match self {
            StoreRequest::Resume { session } | StoreRequest::Create { session } => {
                bound("session", session, MAX_ID_CHARS)
            }
            StoreRequest::AppendMessage { content_json, .. } => {
                bound_bytes("content_json", content_json, MAX_STORED_JSON)
            }
            StoreRequest::SaveState { state_json } => {
                bound_bytes("state_json", state_json, MAX_STORED_JSON)
            }
            StoreRequest::Audit { entry } => {
                bound("action", &entry.action, MAX_ID_CHARS)?;
                bound("tool", &entry.tool, MAX_ID_CHARS)?;
                bound("operation", &entry.operation, MAX_ID_CHARS)?;
                bound("args_digest", &entry.args_digest, MAX_ID_CHARS)?;
                bound("reason", &entry.reason, MAX_SHORT_CHARS)?;
                bound("detail", &entry.detail, MAX_AUDIT_DETAIL_CHARS)
            }
            StoreRequest::Messages { .. }
            | StoreRequest::RecordTokens { .. }
            | StoreRequest::TokensSince { .. }
            | StoreRequest::AuditFlush => Ok(()),
        }
    }
}

impl StoreReply {
    /// Checks every bound; call on receipt.
    pub fn validate(&self) -> Result<(), TooLong> {
        match self {
            StoreReply::Resumed {
                state_json: Some(json),
            } => bound_bytes("state_json", json, MAX_STORED_JSON),
            StoreReply::Messages { items, .. } => {
                let total: usize = items.iter().map(String::len).sum();
                if items.len() > 1 && total > MAX_STORED_JSON {
                    return Err(TooLong {
                        field: "items",
                        len: total,
                        max: MAX_STORED_JSON,
                    });
                }
                items
                    .iter()
                    .try_for_each(|item| bound_bytes("item", item, MAX_STORED_JSON))
            }
            StoreReply::Failed { message, .. } => bound("message", message, MAX_SHORT_CHARS),
            StoreReply::Done | StoreReply::Resumed { .. } | StoreReply::Tokens { .. } => Ok(()),
        }
    }
}
