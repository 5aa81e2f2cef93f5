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
//! - [`verify_bundle`] reads every file once into an [`AgentBundle`] and
//!   verifies those bytes; callers use the bundle's bytes afterwards, never
//!   the disk, so a file swapped after the check is not what runs.
//! - Listings carry a version ([`FORMAT_LINE_V2`]); [`versions`] refuses a
//!   version lower than the highest this home has run (rollback).
//! - [`Pins`]: files outside the agent directory are used only when the
//!   agent's `pins.sha256` pins their SHA-256 ([`locate`], [`read_pinned`],
//!   [`open_pinned`]).
//! - [`Keyring`]: private keys in `keys/<name>.key` (hex seed, mode 0600)
//!   and their verifier keys in `keys/<name>.pub`.
#![forbid(unsafe_code)]

mod bundle;
mod error;
mod fsutil;
mod keys;
mod listing;
mod pins;
mod store;
mod verify;
pub mod versions;

pub use bulwark_audit::note::VerifierKey;
pub use bundle::{AgentBundle, MAX_BUNDLE_SIZE};
pub use error::{Difference, SignerId, TrustError};
pub use keys::{AgentSigningKey, Keyring, RESERVED_KEY_NAMES, check_key_name};
pub use listing::{
    AgentListing, FORMAT_LINE, FORMAT_LINE_V2, FileEntry, MANIFEST_FILE, MAX_DIRS, MAX_FILE_SIZE,
    MAX_FILES, SIGNATURE_FILE,
};
pub use pins::{
    AgentPath, PINS_FILE, PinnedFile, Pins, locate, memory_file, normalize, open_pinned,
    read_pinned,
};
pub use store::{TrustStore, Trusted};
pub use verify::{
    MAX_SIGNATURE_FILE, Signed, SignedListing, Verified, VerifiedAgent, open_signed_listing,
    previous_version, sign_agent, sign_agent_version, verify_agent, verify_bundle,
};
pub use versions::{VERSIONS_FILE, VersionFloors, check_version, record_version};

/// Directory of local signing keys under `$BULWARK_HOME`.
pub const KEYS_DIR: &str = "keys";
/// Directory of trusted verifier keys under `$BULWARK_HOME`.
pub const TRUST_DIR: &str = "trust";

/// The SHA-256 of `bytes`, as listings and pins use it.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}
