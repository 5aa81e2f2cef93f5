//! `bulwark keys gen | trust | untrust | list`, `bulwark sign` and
//! `bulwark verify`: signed agents.
//!
//! A signer keeps a private key in `keys/<name>.key` (owner-only) and hands
//! out `keys/<name>.pub`; an operator adds that verifier key to
//! `trust/<name>.vkey`. `agents/<agent>/agent.sig` then proves that every
//! file of the agent is what a trusted person signed. Verification uses the
//! trust store only: the signature names its key, it never supplies it.

use crate::admin_audit::{self, Event, Snapshot};
use crate::{Failure, usage_error};
use anyhow::anyhow;
use bulwark_kernel::Home;
use bulwark_trust::{
    Keyring, TrustError, TrustStore, Trusted, VerifierKey, VersionFloors, sign_agent_version,
};
use sha2::Digest as _;

pub use bulwark_kernel::SignatureStatus;

/// Checks `agent` against the trust store (the kernel's check, the one
/// every session's loading runs), as an exit status.
///
/// With `require_signed` (config.toml `[trust] require_signed = true`),
/// anything but a valid signature is an error (exit 1) that says why and
/// how to fix it. Without it the status is returned so the caller can warn.
/// An agent that does not exist or has an invalid name is a usage error
/// either way. A signed version older than one this home has run is
/// invalid (a rollback).
pub fn check_agent_signature(
    home: &Home,
    agent: &str,
    require_signed: bool,
) -> Result<SignatureStatus, Failure> {
    bulwark_kernel::check_signature(home, agent)
        .and_then(|checked| {
            bulwark_kernel::require_signature(checked.status(), agent, require_signed)
        })
        .map_err(crate::cmd_run::open_failure)
}

/// Errors about keys and names are the user's to fix (exit 2); anything
/// else (I/O) is exit 1.
fn key_failure(err: TrustError) -> Failure {
    match err {
        TrustError::Io { .. } => err.into(),
        _ => usage_error(err),
    }
}

/// `bulwark keys gen NAME`
pub fn keys_gen(home: &Home, name: &str) -> Result<(), Failure> {
    let keyring = Keyring::in_home(home.root());
    let verifier = keyring.generate(name).map_err(key_failure)?;
    println!(
        "created {} (private, mode 0600: keep it secret and back it up)",
        keyring.private_path(name).display()
    );
    println!(
        "created {} (public verifier key)",
        keyring.public_path(name).display()
    );
    println!();
    println!("{}", verifier.to_vkey());
    println!();
    println!("Next, on each machine that will run agents you sign, trust this key:");
    println!("  bulwark keys trust {}", verifier.to_vkey());
    println!("Then sign agents here:");
    println!("  bulwark sign AGENT --key {name}");
    Ok(())
}

/// `bulwark keys trust VKEY-OR-FILE`
pub fn keys_trust(home: &Home, vkey_or_path: &str) -> Result<(), Failure> {
    let audit = admin_audit::open(home)?;
    let mut store = TrustStore::load_from_home(home.root()).map_err(key_failure)?;
    // The file a new key lands in is known only once the key is parsed;
    // any name it can have is a file of the trust directory that does not
    // exist yet (an existing one is refused or left as it is).
    match store.trust(vkey_or_path).map_err(key_failure)? {
        Trusted::Added(key) => {
            let path = store.path_for(key.name());
            audit.commit(&key_event("trust", &key), &[Snapshot::absent(&path)])?;
            println!(
                "trusted `{}` (key ID {:08x}): agents it signs verify on this machine ({})",
                key.name(),
                key.key_id(),
                path.display()
            )
        }
        Trusted::AlreadyTrusted(key) => println!(
            "`{}` (key ID {:08x}) is already trusted; nothing changed",
            key.name(),
            key.key_id()
        ),
    }
    Ok(())
}

/// The `key_trust` record of trusting or untrusting `key`: its name and ID
/// (a public key's identity, nothing secret).
fn key_event(operation: &'static str, key: &VerifierKey) -> Event {
    let key_id = format!("{:08x}", key.key_id());
    Event {
        action: bulwark_audit::Action::KeyTrust,
        operation,
        agent: String::new(),
        what: serde_json::json!({"key": key.name(), "key_id": key_id}),
        detail: format!("{operation}ed key {:?} (key ID {key_id})", key.name()),
    }
}

/// `bulwark keys untrust NAME`
pub fn keys_untrust(home: &Home, name: &str) -> Result<(), Failure> {
    let audit = admin_audit::open(home)?;
    let mut store = TrustStore::load_from_home(home.root()).map_err(key_failure)?;
    let before = Snapshot::take(&store.path_for(name))?;
    let key = store.untrust(name).map_err(key_failure)?;
    audit.commit(&key_event("untrust", &key), &[before])?;
    println!(
        "untrusted `{}` (key ID {:08x}): agents signed only by it no longer verify",
        key.name(),
        key.key_id()
    );
    Ok(())
}

/// `bulwark keys list`
pub fn keys_list(home: &Home) -> Result<(), Failure> {
    let store = TrustStore::load_from_home(home.root())?;
    println!("trusted keys ({}):", store.dir().display());
    if store.list().is_empty() {
        println!("  none (add one with `bulwark keys trust VKEY-OR-FILE`)");
    }
    for key in store.list() {
        println!("  {:<24} key ID {:08x}", key.name(), key.key_id());
    }
    let keyring = Keyring::in_home(home.root());
    println!(
        "signing keys on this machine ({}):",
        keyring.dir().display()
    );
    let names = keyring.names()?;
    if names.is_empty() {
        println!("  none (create one with `bulwark keys gen NAME`)");
    }
    for name in names {
        match keyring.public(&name) {
            Ok(key) => {
                let trusted = if store.list().contains(&key) {
                    "trusted here"
                } else {
                    "not trusted here"
                };
                println!("  {name:<24} key ID {:08x}  {trusted}", key.key_id());
            }
            Err(err) => println!("  {name:<24} (public key unreadable: {err})"),
        }
    }
    Ok(())
}

/// The key `sign` uses: `--key`, else the only one in keys/.
fn choose_key(keyring: &Keyring, key: Option<&str>) -> Result<String, Failure> {
    if let Some(key) = key {
        return Ok(key.to_owned());
    }
    let names = keyring.names()?;
    match names.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(usage_error(anyhow!(
            "no signing key in {}: create one with `bulwark keys gen NAME`",
            keyring.dir().display()
        ))),
        several => Err(usage_error(anyhow!(
            "several signing keys ({}): choose one with --key NAME",
            several.join(", ")
        ))),
    }
}

/// `bulwark sign AGENT [--key NAME]`
pub fn sign(home: &Home, agent: &str, key: Option<&str>) -> Result<(), Failure> {
    // A manifest that does not load is not worth approving.
    let loaded = home.load_agent(agent).map_err(usage_error)?;
    let keyring = Keyring::in_home(home.root());
    let name = choose_key(&keyring, key)?;
    let signing_key = keyring.load(&name).map_err(key_failure)?;
    let verifier: VerifierKey = signing_key.verifier()?;
    // The next version: above the one the current agent.sig names and
    // above any this home has run with this key, so the new signature is
    // never refused as a rollback here.
    let floors = VersionFloors::load(&home.root().join(bulwark_trust::TRUST_DIR))?;
    let version = bulwark_trust::previous_version(&loaded.dir)
        .max(floors.highest(agent, &verifier))
        .saturating_add(1);
    let audit = admin_audit::open(home)?;
    let before = Snapshot::take(&loaded.dir.join(bulwark_trust::SIGNATURE_FILE))?;
    let signed =
        sign_agent_version(&loaded.dir, agent, &signing_key, version).map_err(key_failure)?;
    drop(signing_key);
    let key_id = format!("{:08x}", verifier.key_id());
    let listing_digest = hex::encode(sha2::Sha256::digest(signed.listing.text().as_bytes()));
    audit.commit(
        &Event {
            action: bulwark_audit::Action::AgentSign,
            operation: "sign",
            agent: agent.to_owned(),
            what: serde_json::json!({
                "agent": agent,
                "version": version,
                "key": name,
                "key_id": key_id,
                "listing_sha256": listing_digest,
            }),
            detail: format!(
                "signed agent {agent:?} version {version} with key {name:?} (key ID {key_id}); listing sha256 {listing_digest}, {} file(s)",
                signed.listing.files.len()
            ),
        },
        &[before],
    )?;
    println!(
        "signed agent `{agent}` version {version} as {}: {} file(s) covered, signature in {}",
        signed.signer,
        signed.listing.files.len(),
        signed.path.display()
    );
    for file in &signed.listing.files {
        println!(
            "  {}  {:>9}  {}",
            &hex::encode(file.sha256)[..16],
            file.size,
            file.path
        );
    }
    let trusted_here = TrustStore::load_from_home(home.root())
        .map(|store| store.list().contains(&verifier))
        .unwrap_or(false);
    if !trusted_here {
        eprintln!(
            "note: `{name}` is not in this machine's trust store, so `bulwark verify {agent}` fails here; to run it here: bulwark keys trust {}",
            keyring.public_path(&name).display()
        );
    }
    Ok(())
}

/// `bulwark verify AGENT`: exit 0 and the signer when valid, 1 and the
/// precise reason when not.
pub fn verify(home: &Home, agent: &str) -> Result<(), Failure> {
    match check_agent_signature(home, agent, false)? {
        SignatureStatus::Valid {
            signer,
            key_id,
            version,
            agent: verified,
        } => {
            println!(
                "ok: agent `{agent}` is signed by `{signer}` (key ID {key_id:08x}), a trusted key; version {version}; {} file(s) match",
                verified.bundle.listing().files.len()
            );
            Ok(())
        }
        SignatureStatus::Unsigned => Err(Failure {
            code: 1,
            error: anyhow!(
                "agent `{agent}` is not signed: {} does not exist. Review it, then sign it with `bulwark sign {agent}`",
                home.agents_dir()
                    .join(agent)
                    .join(bulwark_trust::SIGNATURE_FILE)
                    .display()
            ),
        }),
        SignatureStatus::Invalid { reason } => Err(Failure {
            code: 1,
            error: anyhow!("{reason}"),
        }),
    }
}
