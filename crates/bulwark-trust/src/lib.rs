//! Signed agents: operators can be sure the agent that runs is the one a
//! person they trust approved.
//!
//! - [`AgentListing`]: the canonical digest of an agent directory — every
//!   regular file (except `agent.sig`) with its SHA-256 and size, bound to
//!   the agent's name. Links, devices and unprintable names are refused.
//! - [`sign_agent`] writes `agents/<name>/agent.sig`, a C2SP signed note
//!   over the listing made with the audit log's note code, so signatures are
//!   self-describing and several can be added later.
//! - [`verify_agent`] checks it against the operator's [`TrustStore`]
//!   (`trust/<keyname>.vkey`) and nothing else. A design that checks the
//!   signature against a public key carried in the signature envelope lets
//!   anyone sign; here the envelope only *names* a key, and a name or key ID
//!   that is not in the store is reported, never believed.
//! - [`Keyring`]: private keys in `keys/<name>.key` (hex seed, mode 0600)
//!   and their verifier keys in `keys/<name>.pub`.
#![forbid(unsafe_code)]

mod error;
mod fsutil;
mod keys;
mod listing;
mod store;
mod verify;

pub use bulwark_audit::note::VerifierKey;
pub use error::{Difference, SignerId, TrustError};
pub use keys::{AgentSigningKey, Keyring, RESERVED_KEY_NAMES, check_key_name};
pub use listing::{
    AgentListing, FORMAT_LINE, FileEntry, MANIFEST_FILE, MAX_DIRS, MAX_FILE_SIZE, MAX_FILES,
    SIGNATURE_FILE,
};
pub use store::{TrustStore, Trusted};
pub use verify::{MAX_SIGNATURE_FILE, Signed, Verified, sign_agent, verify_agent};

/// Directory of local signing keys under `$BULWARK_HOME`.
pub const KEYS_DIR: &str = "keys";
/// Directory of trusted verifier keys under `$BULWARK_HOME`.
pub const TRUST_DIR: &str = "trust";
