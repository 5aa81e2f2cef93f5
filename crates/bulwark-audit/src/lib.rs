//! Audit records and the [`AuditSink`] seam.
//!
//! The door writes one [`AuditRecord`] for every decision it makes. Keeping the
//! record type and the trait here (and the storage elsewhere) lets the durable
//! SQLite sink of the core be replaced by the tamper-evident Merkle log later
//! without the door noticing.
//!
//! The tamper-evident log's cryptographic core lives in the modules below and
//! is pure computation (no storage, no clock), so storage and CLI code can be
//! built on it and it can be tested exhaustively on its own:
//! - [`encoding`]: the canonical, versioned bytes a record's leaf commits to;
//! - [`merkle`] and [`proof`]: RFC 6962 / RFC 9162 tree hashing, inclusion and
//!   consistency proofs;
//! - [`checkpoint`] and [`note`]: signed tree heads in the C2SP
//!   signed-note / tlog-checkpoint text format;
//! - [`note_file`]: a file of signed notes, and the key introduction and
//!   handover statements kept in it beside the checkpoints;
//! - [`cosignature`]: witness cosignatures (c2sp.org/tlog-cosignature,
//!   `cosignature/v1`, Ed25519);
//! - [`mac`]: HMAC-SHA256 with constant-time verification.
#![forbid(unsafe_code)]

pub mod checkpoint;
pub mod cosignature;
pub mod encoding;
pub mod event;
pub mod mac;
pub mod merkle;
pub mod note;
pub mod note_file;
pub mod proof;

pub use checkpoint::{Checkpoint, CheckpointError, parse_and_verify, sign};
pub use cosignature::{Cosignature, CosignerKey, cosign, note_text};
pub use ed25519_dalek::{SigningKey, VerifyingKey};
pub use encoding::{CANONICAL_VERSION, DecodeError, EncodeError, RecordRef};
pub use event::{Action, Event, Identity, Reason};
pub use mac::{constant_time_eq, hmac_sha256, hmac_sha256_verify};
pub use merkle::{CompactRange, Hash, MerkleError, empty_root, leaf_hash, node_hash, root};
pub use note::{VerifierKey, generate_signing_key, key_id};
pub use proof::{
    ProofError, consistency_proof, inclusion_proof, verify_consistency, verify_inclusion,
};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// What the door (or another guarded path) decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Policy allowed the action and it ran.
    Allowed,
    /// Refused before anything ran (capability, path, loop guard, approval).
    Denied,
    /// A human approved the action.
    Approved,
    /// Allowed, but the action itself failed.
    Failed,
    /// Informational: a warning verdict (loop guard warn, permissive sandbox).
    Warned,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Denied => "denied",
            Decision::Approved => "approved",
            Decision::Failed => "failed",
            Decision::Warned => "warned",
        }
    }
}

/// One structured audit entry. Never holds argument values or secrets: the
/// arguments are represented by their SHA-256 digest so a record can be
/// matched against a transcript without copying what the agent sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Milliseconds since the Unix epoch.
    pub time_ms: i64,
    pub session: String,
    pub agent: String,
    pub user: String,
    /// What kind of event: `tool_call`, `approval`, `loop_guard`, `session_start`, ...
    pub action: Action,
    pub tool: String,
    pub operation: String,
    /// Hex SHA-256 of the canonical JSON arguments (empty when there were none).
    pub args_digest: String,
    pub decision: Decision,
    /// Short machine-friendly reason class, e.g. `capability`, `path`, `loop_guard`.
    pub reason: Reason,
    /// Human-readable detail. Must never contain secret values.
    pub detail: String,
    pub duration_us: u64,
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl AuditRecord {
    /// The record of `event` happening to `identity`, now. The one way
    /// records are made, so every writer stamps time the same way and names
    /// its action and reason from the shared vocabulary.
    pub fn new(identity: Identity, event: Event) -> Self {
        Self::at(now_ms(), identity, event)
    }

    /// The record of `event` at `time_ms`: for writers whose time was taken
    /// elsewhere (a ledger transaction's clock, a worker's record stamped by
    /// the broker).
    pub fn at(time_ms: i64, identity: Identity, event: Event) -> Self {
        let Identity {
            session,
            agent,
            user,
        } = identity;
        let Event {
            action,
            tool,
            operation,
            args_digest,
            decision,
            reason,
            detail,
            duration_us,
        } = event;
        Self {
            time_ms,
            session,
            agent,
            user,
            action,
            tool,
            operation,
            args_digest,
            decision,
            reason,
            detail,
            duration_us,
        }
    }

    /// Who this record is about.
    pub fn identity(&self) -> Identity {
        Identity::new(&self.session, &self.agent, &self.user)
    }

    /// The SHA-256 of the arguments' canonical JSON: object keys sorted at
    /// every depth, no whitespace. Sorting explicitly (rather than trusting
    /// `serde_json::Map` to be ordered) keeps digests stable even if some
    /// dependency turns on serde_json's `preserve_order` feature.
    pub fn digest_args(args: &serde_json::Value) -> String {
        hex::encode(Sha256::digest(Self::canonical_args(args)))
    }

    /// The canonical JSON [`digest_args`](Self::digest_args) hashes: what
    /// an `arguments` record stores when an operator asks for arguments to
    /// be kept, so the stored copy can be checked against the digest.
    pub fn canonical_args(args: &serde_json::Value) -> Vec<u8> {
        let mut canonical = Vec::new();
        write_canonical(args, &mut canonical);
        canonical
    }
}

fn write_canonical(value: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(&Value::String(key.clone()), out);
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(value: &serde_json::Value, out: &mut Vec<u8>) {
    // Serializing a scalar into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// A record as stored, with the sequence number the sink assigned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRecord {
    pub seq: u64,
    #[serde(flatten)]
    pub record: AuditRecord,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("audit store failed: {0}")]
    Store(String),
}

/// Where door decisions go.
///
/// `record` accepts a record; it may only queue it, so that the door never
/// waits for storage on its hot path. `flush` is the durability barrier: once
/// it returns `Ok`, every record accepted before the call is durable to the
/// sink's standard. The agent loop flushes before any tool result reaches the
/// model, so nothing the model sees can outrun its audit record. A sink that
/// fails to store a record must fail every later `record` and `flush` too, so
/// a lost record can never go unnoticed.
pub trait AuditSink: Send + Sync {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError>;
    fn flush(&self) -> Result<(), AuditError> {
        Ok(())
    }
    /// The newest `limit` records, oldest first (after flushing).
    fn tail(&self, limit: usize) -> Result<Vec<StoredRecord>, AuditError>;
}

/// An in-memory sink for tests and for benchmarks that isolate the door.
#[derive(Default)]
pub struct MemorySink {
    records: Mutex<Vec<AuditRecord>>,
}

impl MemorySink {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn records(&self) -> Vec<AuditRecord> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl AuditSink for MemorySink {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        let mut guard = self
            .records
            .lock()
            .map_err(|_| AuditError::Store("memory sink poisoned".into()))?;
        guard.push(record.clone());
        Ok(())
    }
    fn tail(&self, limit: usize) -> Result<Vec<StoredRecord>, AuditError> {
        let guard = self
            .records
            .lock()
            .map_err(|_| AuditError::Store("memory sink poisoned".into()))?;
        let start = guard.len().saturating_sub(limit);
        Ok(guard[start..]
            .iter()
            .enumerate()
            .map(|(i, r)| StoredRecord {
                seq: (start + i + 1) as u64,
                record: r.clone(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_ignores_key_order_at_every_depth() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b":1,"a":{"y":[1,{"q":1,"p":2}],"x":"s"}}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str(r#"{"a":{"x":"s","y":[1,{"p":2,"q":1}]},"b":1}"#).unwrap();
        assert_eq!(AuditRecord::digest_args(&a), AuditRecord::digest_args(&b));
    }

    #[test]
    fn digest_distinguishes_values_and_structure() {
        let base = AuditRecord::digest_args(&json!({"path": "a"}));
        for other in [
            json!({"path": "b"}),
            json!({"path": ["a"]}),
            json!({"Path": "a"}),
            json!({"path": "a", "x": null}),
            json!("path:a"),
        ] {
            assert_ne!(base, AuditRecord::digest_args(&other), "{other}");
        }
        assert_eq!(base.len(), 64);
    }

    #[test]
    fn memory_sink_keeps_order_and_tails_newest() {
        let sink = MemorySink::new();
        for n in 0..5 {
            let record = AuditRecord {
                time_ms: n,
                session: "s".into(),
                agent: "a".into(),
                user: "u".into(),
                action: Action::ToolCall,
                tool: "t".into(),
                operation: "d:o".into(),
                args_digest: String::new(),
                decision: Decision::Allowed,
                reason: Reason::Ok,
                detail: String::new(),
                duration_us: 0,
            };
            sink.record(&record).unwrap();
        }
        let tail = sink.tail(2).unwrap();
        assert_eq!(
            tail.iter()
                .map(|r| (r.seq, r.record.time_ms))
                .collect::<Vec<_>>(),
            [(4, 3), (5, 4)]
        );
        assert!(sink.flush().is_ok());
    }
}
