//! Witnessing for Bulwark's audit log: the C2SP `tlog-witness` protocol
//! (c2sp.org/tlog-witness) both ways.
//!
//! A signed checkpoint proves what the log looked like to whoever holds it,
//! but the machine that signs it could show a different history to someone
//! else, or roll its log back and sign again. A witness on another machine
//! closes that: it keeps the latest checkpoint it cosigned for each log and
//! cosigns a new one only if it provably extends that one (an RFC 6962
//! consistency proof). A checkpoint with the cosignatures of independent
//! witnesses is one no single machine could have forked or rolled back.
//!
//! - [`request`]: the `add-checkpoint` body codec (strict, bounded);
//! - [`witness`]: the state machine and its refusals (400/403/404/409/422);
//! - [`server`]: `POST /add-checkpoint` over HTTP (axum);
//! - [`client`]: submitting a checkpoint and verifying the cosignature;
//! - [`identity`]: the witness's name and Ed25519 key on disk.
#![forbid(unsafe_code)]

pub mod client;
pub mod identity;
pub mod request;
pub mod server;
mod state;
pub mod witness;

pub use client::{ClientError, Cosigned, WitnessClient};
pub use identity::Identity;
pub use request::{AddCheckpoint, RequestError};
pub use state::LogState;
pub use witness::{Refusal, Witness};

/// What can go wrong setting up or running a witness (not a refusal of a
/// submission: see [`Refusal`]).
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    #[error("witness state: sqlite error while {context}: {source}")]
    Store {
        context: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error("i/o error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("witness state is corrupt: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Config(String),
    #[error("witness key: {0}")]
    Key(#[from] bulwark_audit::CheckpointError),
    #[error("witness state lock poisoned by a panicking thread")]
    Poisoned,
}
