//! The store, brokered: what a worker asks the server to read or write.
//!
//! A worker never opens the database: it holds every user's conversations
//! and the audit log, and a compromised worker must reach neither. It asks
//! instead, with an [`Event::Store`](crate::protocol::Event::Store) request,
//! and the server answers with a
//! [`Command::StoreReply`](crate::protocol::Command::StoreReply). No request
//! names a session, a user or an agent: the server performs each one for
//! the conversation it started this worker for (see
//! `StoreBroker` in `bulwark-server`), and stamps that identity on every
//! audit record. So the worst a compromised worker can do to the store is
//! write nonsense into its own session and its own audit trail, which the
//! audit log's hashes then preserve as evidence.
//!
//! Credits work the same way: a worker asks for a balance, a transfer, a
//! hold and its settlement, but the server picks the account (the agent's),
//! the audit identity, the user's budget, and scopes every idempotency key
//! to the session, so a worker can spend only what its own session may and
//! can never replay or read another session's receipts. It may settle or
//! release only holds the server made for it; naming any other is a
//! protocol violation, which ends the worker.

use crate::protocol::{MAX_ID_CHARS, MAX_SHORT_CHARS, TooLong};
use bulwark_audit::Decision;
use serde::{Deserialize, Serialize};

/// Longest stored message or session state, in bytes. A page of replayed
/// history holds at most this much (or one item), so with JSON's escaping
/// (at most doubling stored JSON) a reply stays under the frame limit.
pub const MAX_STORED_JSON: usize = 3 * 1024 * 1024;
/// Longest audit `detail` (recorded arguments are at most 64 KiB).
pub const MAX_AUDIT_DETAIL_CHARS: usize = 256 * 1024;
/// Most audit entries in one [`StoreRequest::AuditBatch`].
pub const MAX_AUDIT_BATCH_ENTRIES: usize = 64;
/// Most characters of text (all string fields of all entries together) in
/// one [`StoreRequest::AuditBatch`]. Any one valid entry fits (at most
/// 266,752 characters), and the worst batch still fits in one frame.
pub const MAX_AUDIT_BATCH_CHARS: usize = 1_000_000;

// The worst valid batch (every character escaped to 6 bytes, plus the
// field names and numbers of every entry) must fit in one frame, or a
// valid batch could not be sent.
const _: () = assert!(
    6 * MAX_AUDIT_BATCH_CHARS + 512 * MAX_AUDIT_BATCH_ENTRIES + 4096
        < crate::frame::MAX_FRAME_BYTES
);
const _: () =
    assert!(4 * MAX_ID_CHARS + MAX_SHORT_CHARS + MAX_AUDIT_DETAIL_CHARS <= MAX_AUDIT_BATCH_CHARS);

/// Longest ledger idempotency key a worker may send, in bytes (the server
/// prefixes it with the session before it reaches the ledger).
pub const MAX_LEDGER_KEY_BYTES: usize = 200;
/// Longest ledger account id, in bytes (the ledger's own limit).
pub const MAX_LEDGER_ACCOUNT_BYTES: usize = 200;
/// Longest transfer memo, in bytes.
pub const MAX_LEDGER_MEMO_BYTES: usize = 1024;

/// Longest path in a provenance request, in bytes (the store's limit).
pub const MAX_PROVENANCE_PATH_BYTES: usize = 4096;
/// Most label names in a provenance request or reply (the store's limit).
pub const MAX_PROVENANCE_LABELS: usize = 16;
/// Longest label name, in bytes (the store's limit).
pub const MAX_LABEL_NAME_BYTES: usize = 32;
/// Longest provenance source (a tool call id), in bytes (the store's limit).
pub const MAX_PROVENANCE_SOURCE_BYTES: usize = 256;

/// One of the worker's own storage roots, named by kind, never by path or
/// owner: the server keys it to the agent and user it started the worker
/// for, so a worker can neither read nor write another's labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelRootWire {
    /// The agent's workspace (per user and agent).
    Workspace,
    /// The agent's memory (per user and agent).
    AgentMemory,
    /// The user's memory, shared by every agent of the user.
    UserMemory,
}

/// A content digest (SHA-256) on the wire: exactly 64 lowercase hex
/// digits, refused at decoding otherwise, so a frame with anything else in
/// its place is malformed rather than a request to look at.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DigestHex(pub [u8; 32]);

impl std::fmt::Debug for DigestHex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DigestHex({self})")
    }
}

impl std::fmt::Display for DigestHex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl std::str::FromStr for DigestHex {
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "a digest is 64 lowercase hex digits";
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            _ => Err(WHAT),
        };
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return Err(WHAT);
        }
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            *byte = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Ok(Self(out))
    }
}

impl Serialize for DigestHex {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DigestHex {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Borrowed when the frame has no escapes; a digest never needs one.
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

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
    /// Audit records of this session, in order (at most
    /// [`MAX_AUDIT_BATCH_ENTRIES`] and [`MAX_AUDIT_BATCH_CHARS`]). With
    /// `flush`, also the durability barrier of [`StoreRequest::AuditFlush`]:
    /// answered once these and every record sent before are stored. A
    /// worker queues its records and sends them this way, so a record costs
    /// no round trip of its own.
    AuditBatch {
        entries: Vec<AuditEntry>,
        flush: bool,
    },
    /// The durability barrier: every record sent before is stored.
    /// (Braces, like `LedgerBalance {}`: serde ignores unknown fields next
    /// to the tag of a unit variant, and refuses them for an empty struct.)
    AuditFlush {},
    /// The balance of this session's account (`agent:<agent>`):
    /// [`StoreReply::LedgerBalance`]. No request names an account, a user
    /// or a budget: the server decides them all.
    LedgerBalance {},
    /// Move `amount` from this session's account to `to` (the ledger's
    /// policy of the paying account decides): [`StoreReply::LedgerTransfer`].
    /// `key` makes it idempotent within this session.
    LedgerTransfer {
        key: String,
        to: String,
        amount: u64,
        memo: String,
    },
    /// Reserve `amount` of this session's account, under the user's
    /// budget: [`StoreReply::LedgerHold`].
    LedgerHold { key: String, amount: u64 },
    /// Charge `actual` of a hold this worker made and give back the rest:
    /// [`StoreReply::LedgerClosed`]. Naming any other hold is a protocol
    /// violation.
    LedgerSettle { key: String, hold: i64, actual: u64 },
    /// Give back a hold this worker made, whole: [`StoreReply::LedgerClosed`].
    LedgerRelease { key: String, hold: i64 },
    /// Add `labels` (taint label names) to the label-table entry of these
    /// bytes (`digest`) at `path` in one of this worker's roots; an empty
    /// set records "written by Bulwark, clean". `source` is the tool call
    /// that wrote them. Answered with [`StoreReply::Done`] once stored
    /// durably: the write it labels waits for it.
    RecordProvenance {
        root: LabelRootWire,
        path: String,
        digest: DigestHex,
        labels: Vec<String>,
        source: String,
    },
    /// The labels of these bytes at `path` in one of this worker's roots:
    /// [`StoreReply::Provenance`].
    Provenance {
        root: LabelRootWire,
        path: String,
        digest: DigestHex,
    },
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
    /// The session account's spendable and held credits.
    LedgerBalance {
        balance: u64,
        held: u64,
    },
    /// A transfer made (or the original one, for a repeated key). Boxed:
    /// it is the largest reply, and every command would be its size.
    LedgerTransfer(Box<LedgerReceipt>),
    /// A reservation made.
    LedgerHold {
        hold: i64,
    },
    /// A hold settled or released.
    LedgerClosed {
        id: i64,
        hold: i64,
        charged: u64,
        released: u64,
    },
    /// The ledger refused (or could not do) a well-formed request: the
    /// worker rebuilds `LedgerError::Remote` from it. `denial` is
    /// `LedgerError::is_denial` of the server's error (a policy or budget
    /// refusal, rather than a request that cannot be done at all).
    LedgerRefused {
        message: String,
        denial: bool,
    },
    /// The labels of the content asked about; `None` when Bulwark never
    /// wrote those bytes there (no provenance), an empty list when it wrote
    /// them clean.
    Provenance {
        labels: Option<Vec<String>>,
    },
}

/// A transfer's receipt, as the server sends it to a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerReceipt {
    pub id: i64,
    pub time_ms: i64,
    /// The worker's own key, without the server's session prefix.
    pub key: String,
    pub from: String,
    pub to: String,
    pub amount: u64,
    /// The paying account's spendable balance right before the debit.
    pub balance_before: u64,
    pub memo: String,
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
    /// Another process runs the session (it holds the session's lease),
    /// or took it over from this worker: nothing was done.
    Leased,
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

fn bound_labels(labels: &[String]) -> Result<(), TooLong> {
    if labels.len() > MAX_PROVENANCE_LABELS {
        return Err(TooLong {
            field: "labels",
            len: labels.len(),
            max: MAX_PROVENANCE_LABELS,
        });
    }
    labels
        .iter()
        .try_for_each(|l| bound_bytes("label", l, MAX_LABEL_NAME_BYTES))
}

impl AuditEntry {
    /// Checks every bound of one entry.
    pub fn validate(&self) -> Result<(), TooLong> {
        bound("action", &self.action, MAX_ID_CHARS)?;
        bound("tool", &self.tool, MAX_ID_CHARS)?;
        bound("operation", &self.operation, MAX_ID_CHARS)?;
        bound("args_digest", &self.args_digest, MAX_ID_CHARS)?;
        bound("reason", &self.reason, MAX_SHORT_CHARS)?;
        bound("detail", &self.detail, MAX_AUDIT_DETAIL_CHARS)
    }

    /// Characters of text this entry adds to a batch (see
    /// [`MAX_AUDIT_BATCH_CHARS`]).
    pub fn chars(&self) -> usize {
        [
            &self.action,
            &self.tool,
            &self.operation,
            &self.args_digest,
            &self.reason,
            &self.detail,
        ]
        .iter()
        .map(|s| s.chars().count())
        .sum()
    }
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
            StoreRequest::Audit { entry } => entry.validate(),
            StoreRequest::AuditBatch { entries, .. } => {
                if entries.len() > MAX_AUDIT_BATCH_ENTRIES {
                    return Err(TooLong {
                        field: "entries",
                        len: entries.len(),
                        max: MAX_AUDIT_BATCH_ENTRIES,
                    });
                }
                entries.iter().try_for_each(AuditEntry::validate)?;
                let chars: usize = entries.iter().map(AuditEntry::chars).sum();
                if chars > MAX_AUDIT_BATCH_CHARS {
                    return Err(TooLong {
                        field: "entries",
                        len: chars,
                        max: MAX_AUDIT_BATCH_CHARS,
                    });
                }
                Ok(())
            }
            StoreRequest::LedgerTransfer { key, to, memo, .. } => {
                bound_bytes("key", key, MAX_LEDGER_KEY_BYTES)?;
                bound_bytes("to", to, MAX_LEDGER_ACCOUNT_BYTES)?;
                bound_bytes("memo", memo, MAX_LEDGER_MEMO_BYTES)
            }
            StoreRequest::LedgerHold { key, .. }
            | StoreRequest::LedgerSettle { key, .. }
            | StoreRequest::LedgerRelease { key, .. } => {
                bound_bytes("key", key, MAX_LEDGER_KEY_BYTES)
            }
            StoreRequest::RecordProvenance {
                path,
                labels,
                source,
                ..
            } => {
                bound_bytes("path", path, MAX_PROVENANCE_PATH_BYTES)?;
                bound_labels(labels)?;
                bound_bytes("source", source, MAX_PROVENANCE_SOURCE_BYTES)
            }
            StoreRequest::Provenance { path, .. } => {
                bound_bytes("path", path, MAX_PROVENANCE_PATH_BYTES)
            }
            StoreRequest::Messages { .. }
            | StoreRequest::RecordTokens { .. }
            | StoreRequest::TokensSince { .. }
            | StoreRequest::AuditFlush {}
            | StoreRequest::LedgerBalance {} => Ok(()),
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
            StoreReply::Failed { message, .. } | StoreReply::LedgerRefused { message, .. } => {
                bound("message", message, MAX_SHORT_CHARS)
            }
            StoreReply::LedgerTransfer(r) => {
                bound_bytes("key", &r.key, MAX_LEDGER_KEY_BYTES)?;
                bound_bytes("from", &r.from, MAX_LEDGER_ACCOUNT_BYTES)?;
                bound_bytes("to", &r.to, MAX_LEDGER_ACCOUNT_BYTES)?;
                bound_bytes("memo", &r.memo, MAX_LEDGER_MEMO_BYTES)
            }
            StoreReply::Provenance {
                labels: Some(labels),
            } => bound_labels(labels),
            StoreReply::Done
            | StoreReply::Provenance { labels: None }
            | StoreReply::Resumed { .. }
            | StoreReply::Tokens { .. }
            | StoreReply::LedgerBalance { .. }
            | StoreReply::LedgerHold { .. }
            | StoreReply::LedgerClosed { .. } => Ok(()),
        }
    }
}
