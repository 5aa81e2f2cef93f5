//! The witness state machine: which checkpoints it cosigns.
//!
//! For a log it follows (origin and log key configured), it cosigns a
//! checkpoint only if the log's signature verifies, the submitted old size
//! is the size it last cosigned, and the consistency proof from its stored
//! (size, root) to the new checkpoint verifies. So it never cosigns a
//! smaller tree after a larger one (rollback) nor two different trees that
//! do not extend each other (fork), across restarts as long as its state
//! file survives.

use crate::WitnessError;
use crate::identity::{Identity, state_path};
use crate::request::{AddCheckpoint, RequestError};
use crate::state::{self, LogState};
use bulwark_audit::{Checkpoint, CheckpointError, Cosignature, CosignerKey, VerifierKey};
use rusqlite::Connection;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// Why a submission was not cosigned; each maps to the status the spec
/// prescribes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// 400: not a well-formed request, or old size beyond the checkpoint.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// 403: no signature by the log's configured key verifies.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// 404: the witness does not follow this origin.
    #[error("unknown log origin {0:?}")]
    UnknownOrigin(String),
    /// 409: the old size is not the witness's size, or a checkpoint of the
    /// witness's size has another root. Carries the witness's size.
    #[error("conflict: {reason} (the witness is at size {size})")]
    Conflict { size: u64, reason: String },
    /// 422: the consistency proof does not verify.
    #[error("the consistency proof does not verify: {0}")]
    BadProof(String),
    /// 500: the witness could not read or store its state.
    #[error("the witness failed: {0}")]
    Internal(String),
}

impl Refusal {
    /// The HTTP status of this refusal.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::BadRequest(_) => 400,
            Refusal::Forbidden(_) => 403,
            Refusal::UnknownOrigin(_) => 404,
            Refusal::Conflict { .. } => 409,
            Refusal::BadProof(_) => 422,
            Refusal::Internal(_) => 500,
        }
    }
}

impl From<RequestError> for Refusal {
    fn from(e: RequestError) -> Self {
        Refusal::BadRequest(e.to_string())
    }
}

/// A witness: its identity, the logs it follows and its state.
pub struct Witness {
    identity: Identity,
    logs: HashMap<String, VerifierKey>,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Witness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Witness")
            .field("identity", &self.identity)
            .field("logs", &self.logs.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Witness {
    /// A witness keeping its state in `dir` (the state file is created,
    /// 0600, when missing), following `logs` (origin, log verifier key).
    /// Two entries for one origin are refused: which key would count?
    pub fn open(
        dir: &Path,
        identity: Identity,
        logs: Vec<(String, VerifierKey)>,
    ) -> Result<Self, WitnessError> {
        let mut map = HashMap::new();
        for (origin, key) in logs {
            if origin.is_empty() || origin.chars().any(|c| c < ' ') {
                return Err(WitnessError::Config(format!(
                    "log origin {origin:?} is empty or not one line"
                )));
            }
            if map.insert(origin.clone(), key).is_some() {
                return Err(WitnessError::Config(format!(
                    "log origin {origin:?} is configured twice; logs sharing a witness need distinct origins"
                )));
            }
        }
        let conn = state::open(&state_path(dir))?;
        Ok(Self {
            identity,
            logs: map,
            conn: Mutex::new(conn),
        })
    }

    /// The key clients verify this witness's cosignatures with.
    pub fn cosigner_key(&self) -> Result<CosignerKey, WitnessError> {
        self.identity.cosigner_key()
    }

    /// The latest checkpoint cosigned for `origin`.
    pub fn latest(&self, origin: &str) -> Result<Option<LogState>, WitnessError> {
        let conn = self.conn.lock().map_err(|_| WitnessError::Poisoned)?;
        state::read(&conn, origin)
    }

    /// Handles an `add-checkpoint` body: the response body on success
    /// (one cosignature line and its newline).
    pub fn add_checkpoint(&self, body: &[u8]) -> Result<String, Refusal> {
        let request = AddCheckpoint::parse(body)?;
        let cosignature = self.add(&request)?;
        Ok(format!("{}\n", cosignature.to_line()))
    }

    /// Judges a parsed submission and, when it passes, records it and
    /// returns the cosignature. The checks, in the spec's order:
    /// origin known (404), log signature (403), old size not beyond the
    /// checkpoint (400), old size equal to the stored size (409), equal
    /// sizes with equal roots (409), consistency proof (422).
    pub fn add(&self, request: &AddCheckpoint) -> Result<Cosignature, Refusal> {
        let body = bulwark_audit::note_text(&request.checkpoint)
            .ok_or_else(|| Refusal::BadRequest("the checkpoint has no signature block".into()))?;
        let origin = body.split('\n').next().unwrap_or_default();
        let log_key = self
            .logs
            .get(origin)
            .ok_or_else(|| Refusal::UnknownOrigin(origin.to_owned()))?;
        let checkpoint =
            bulwark_audit::parse_and_verify(&request.checkpoint, std::slice::from_ref(log_key))
                .map_err(|e| match e {
                    CheckpointError::NoTrustedSignature | CheckpointError::BadSignature { .. } => {
                        Refusal::Forbidden(format!("not signed by the key of log {origin:?}: {e}"))
                    }
                    other => Refusal::BadRequest(format!("malformed checkpoint: {other}")),
                })?;
        if request.old_size > checkpoint.size {
            return Err(Refusal::BadRequest(format!(
                "old size {} is beyond the checkpoint's size {}",
                request.old_size, checkpoint.size
            )));
        }
        if i64::try_from(checkpoint.size).is_err() {
            return Err(Refusal::BadRequest("the tree size exceeds 2^63 - 1".into()));
        }
        let mut conn = self
            .conn
            .lock()
            .map_err(|_| Refusal::Internal("state lock poisoned".into()))?;
        let outcome = state::update(&mut conn, origin, |current| {
            Ok(match judge(current.as_ref(), request, &checkpoint) {
                Ok(()) => (
                    Some((
                        LogState {
                            size: checkpoint.size,
                            root: checkpoint.root,
                        },
                        request.checkpoint.clone(),
                    )),
                    Ok(()),
                ),
                Err(refusal) => (None, Err(refusal)),
            })
        })
        .map_err(|e| Refusal::Internal(e.to_string()))?;
        drop(conn);
        if let Err(refusal) = &outcome {
            tracing::warn!(origin, %refusal, "witness: checkpoint refused");
        }
        outcome?;
        bulwark_audit::cosign(
            body,
            self.identity.signing_key(),
            self.identity.name(),
            unix_now(),
        )
        .map_err(|e| Refusal::Internal(format!("cosigning: {e}")))
    }
}

/// The consistency rules, against the stored state (`None`: never cosigned,
/// which counts as size 0).
fn judge(
    current: Option<&LogState>,
    request: &AddCheckpoint,
    checkpoint: &Checkpoint,
) -> Result<(), Refusal> {
    let stored_size = current.map_or(0, |s| s.size);
    if request.old_size != stored_size {
        return Err(Refusal::Conflict {
            size: stored_size,
            reason: format!(
                "old size {} is not the size last cosigned",
                request.old_size
            ),
        });
    }
    let Some(current) = current else {
        // First sight of this log: nothing to be consistent with, and the
        // spec says the proof must then be empty.
        return if request.proof.is_empty() {
            Ok(())
        } else {
            Err(Refusal::BadProof(
                "a proof from size 0 must be empty".into(),
            ))
        };
    };
    if checkpoint.size == current.size {
        if checkpoint.root != current.root {
            return Err(Refusal::Conflict {
                size: current.size,
                reason: "a checkpoint of the same size with another root (a fork)".into(),
            });
        }
        return if request.proof.is_empty() {
            Ok(())
        } else {
            Err(Refusal::BadProof(
                "a proof between equal sizes must be empty".into(),
            ))
        };
    }
    if current.size == 0 {
        // Every tree extends the empty one; RFC 9162 has no proof for it.
        return if request.proof.is_empty() {
            Ok(())
        } else {
            Err(Refusal::BadProof(
                "a proof from size 0 must be empty".into(),
            ))
        };
    }
    bulwark_audit::verify_consistency(
        current.size,
        checkpoint.size,
        &current.root,
        &checkpoint.root,
        &request.proof,
    )
    .map_err(|e| Refusal::BadProof(e.to_string()))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
