//! `bulwark audit verify | checkpoint | prove | show | key`: the evidence
//! side of the audit log. The log's signing key lives in
//! `$BULWARK_HOME/keys/audit.key` (owner-only), created on first use.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use bulwark_audit::{SigningKey, VerifierKey, generate_signing_key, parse_and_verify};
use bulwark_kernel::Home;
use bulwark_store::{AuditQuery, SqliteAuditSink, Store};

/// The origin line of this log's checkpoints.
pub(crate) const ORIGIN: &str = "bulwark.local/audit";
/// The signer name on checkpoints.
pub(crate) const KEY_NAME: &str = "bulwark-audit";

fn open_sink(home: &Home) -> Result<SqliteAuditSink, Failure> {
    let path = home.db_path();
    if !path.exists() {
        return Err(usage_error(anyhow!(
            "no database at {} yet: run an agent first",
            path.display()
        )));
    }
    let store = Store::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(store.audit_sink())
}

/// The audit signing key, created (32 random bytes, hex, mode 0600) when
/// missing. The seed is held in a zeroizing buffer while read.
pub fn audit_key(home: &Home) -> Result<SigningKey, Failure> {
    let dir = home.root().join("keys");
    let path = dir.join("audit.key");
    if !path.exists() {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let key = generate_signing_key();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let seed = zeroize::Zeroizing::new(hex::encode(key.to_bytes()));
        file.write_all(seed.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        return Ok(key);
    }
    read_key(&path)
}

fn read_key(path: &Path) -> Result<SigningKey, Failure> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(usage_error(anyhow!(
            "{} is readable by other users (mode {:o}); the audit key must be owner-only: chmod 600 {}",
            path.display(),
            mode & 0o777,
            path.display()
        )));
    }
    let text = zeroize::Zeroizing::new(
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?,
    );
    let mut seed = zeroize::Zeroizing::new([0u8; 32]);
    hex::decode_to_slice(text.trim(), seed.as_mut()).map_err(|_| {
        usage_error(anyhow!(
            "{} is not a 64-hex-digit Ed25519 seed; restore it from a backup (a new key cannot verify old checkpoints)",
            path.display()
        ))
    })?;
    Ok(SigningKey::from_bytes(&seed))
}

fn verifier(key: &SigningKey) -> Result<VerifierKey, Failure> {
    VerifierKey::from_signing_key(KEY_NAME, key).map_err(|e| anyhow!("{e}").into())
}

/// Exit 0 when the log verifies (and matches `checkpoint`), 1 when it does
/// not, naming the first bad index.
pub fn verify(home: &Home, checkpoint: Option<&Path>, vkey: Option<&str>) -> Result<(), Failure> {
    let sink = open_sink(home)?;
    let report = match checkpoint {
        Some(file) => {
            let note = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let (trusted, whose) = match vkey {
                Some(text) => (
                    VerifierKey::parse(text.trim()).map_err(|e| {
                        usage_error(anyhow!(
                            "--key is not a verifier key ({e}); pass the line `bulwark audit key` printed, e.g. bulwark-audit+1a2b3c4d+AXG..."
                        ))
                    })?,
                    "the key given with --key",
                ),
                None => (verifier(&audit_key(home)?)?, "this log's key"),
            };
            let cp = parse_and_verify(&note, &[trusted]).map_err(|e| {
                usage_error(anyhow!(
                    "{} is not a checkpoint signed by {whose} ({e})",
                    file.display()
                ))
            })?;
            println!("checkpoint {} : size {}", file.display(), cp.size);
            sink.verify_against(&cp)?
        }
        None => sink.verify()?,
    };
    match &report.problem {
        None => {
            println!(
                "ok: {} records, {} stored checkpoint(s) match, root {}",
                report.records,
                report.checkpoints_checked,
                hex::encode(report.root)
            );
            Ok(())
        }
        Some(problem) => {
            println!("TAMPERED: {problem}");
            Err(Failure {
                code: 1,
                error: anyhow!(
                    "the audit log does not verify (first bad index {})",
                    problem.index
                ),
            })
        }
    }
}

/// Sign a checkpoint of the current log; print it and optionally write it
/// to `out` so it can be kept elsewhere.
pub fn checkpoint(home: &Home, out: Option<&Path>) -> Result<(), Failure> {
    let sink = open_sink(home)?;
    let key = audit_key(home)?;
    let note = sink.checkpoint(&key, ORIGIN, KEY_NAME)?;
    print!("{note}");
    if let Some(out) = out {
        std::fs::write(out, &note).with_context(|| format!("cannot write {}", out.display()))?;
        eprintln!("written to {}", out.display());
    }
    Ok(())
}

pub fn prove(home: &Home, index: u64) -> Result<(), Failure> {
    let sink = open_sink(home)?;
    let p = sink.inclusion_proof(index)?;
    println!("index {} of {}", p.index, p.size);
    println!("leaf  {}", hex::encode(p.leaf));
    println!("root  {}", hex::encode(p.root));
    for h in &p.proof {
        println!("proof {}", hex::encode(h));
    }
    bulwark_audit::verify_inclusion(&p.leaf, p.index, p.size, &p.proof, &p.root)
        .map_err(|e| anyhow!("the proof does not verify: {e}"))?;
    println!("verified");
    Ok(())
}

pub fn show(home: &Home, index: u64) -> Result<(), Failure> {
    let sink = open_sink(home)?;
    let rows = sink.query(&AuditQuery {
        session: None,
        since_seq: Some(index),
        limit: 1,
    })?;
    match rows.first() {
        Some(r) if r.seq == index + 1 => {
            println!("{}", serde_json::to_string_pretty(r)?);
            Ok(())
        }
        _ => Err(usage_error(anyhow!("no record at index {index}"))),
    }
}

/// Print the verifier key (`name+id+key`) for whoever holds checkpoints.
pub fn key(home: &Home) -> Result<(), Failure> {
    println!("{}", verifier(&audit_key(home)?)?.to_vkey());
    Ok(())
}

/// Where an operator's acknowledgment of a damaged log is kept: the exact
/// problem it accepts, so a new or different problem stops agents again.
fn ack_path(home: &Home) -> std::path::PathBuf {
    home.root().join("audit.ack")
}

/// Whether an operator acknowledged exactly this problem.
pub fn acknowledged(home: &Home, problem: &str) -> bool {
    std::fs::read_to_string(ack_path(home)).is_ok_and(|text| text.trim_end() == problem)
}

/// Verify the log before agents run. A problem stops them unless an
/// operator acknowledged exactly that problem (`bulwark audit acknowledge`).
pub fn require_verified(home: &Home, sink: &SqliteAuditSink) -> Result<(), Failure> {
    let report = sink.verify()?;
    let Some(problem) = report.problem else {
        return Ok(());
    };
    let seen = problem.to_string();
    if acknowledged(home, &seen) {
        eprintln!(
            "warning: the audit log does not verify ({seen}); an operator acknowledged this, continuing"
        );
        return Ok(());
    }
    Err(Failure {
        code: 1,
        error: anyhow!(
            "the audit log does not verify: {seen}. Agents will not run until an operator inspects it (`bulwark audit verify`, `bulwark audit show {}`) and acknowledges it with `bulwark audit acknowledge`",
            problem.index
        ),
    })
}

/// Record that an operator has seen the log's current problem and lets
/// agents run again; the damaged records stay as evidence.
pub fn acknowledge(home: &Home) -> Result<(), Failure> {
    let sink = open_sink(home)?;
    let report = sink.verify()?;
    let Some(problem) = report.problem else {
        println!("the audit log verifies: nothing to acknowledge");
        return Ok(());
    };
    let seen = problem.to_string();
    std::fs::write(ack_path(home), format!("{seen}\n"))
        .with_context(|| format!("cannot write {}", ack_path(home).display()))?;
    println!("acknowledged: {seen}");
    println!("agents may run again; a different or earlier problem will stop them");
    Ok(())
}
