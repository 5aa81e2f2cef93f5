//! `bulwark audit verify | checkpoint | prove | show | key | rotate-key`:
//! the evidence side of the audit log. The log's signing key lives in
//! `$BULWARK_HOME/keys/audit.key` (owner-only), created on a fresh home's
//! first use and never again while a log exists; every checkpoint it signs
//! is also appended to `audit/checkpoints` (see `evidence`).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use bulwark_audit::{SigningKey, VerifierKey, generate_signing_key, parse_and_verify};
use bulwark_kernel::Home;
use bulwark_store::{AuditQuery, ExternalCheckpoint, SqliteAuditSink, Store};

/// The `[audit]` section of config.toml: the log's origin (which its
/// checkpoints, checkpoint file and key statements name) and witnesses.
pub(crate) fn audit_section(home: &Home) -> Result<bulwark_policy::AuditSection, Failure> {
    Ok(home.load_global()?.audit)
}
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

/// `keys/audit.key`.
pub(crate) fn key_path(home: &Home) -> PathBuf {
    home.root().join("keys").join("audit.key")
}

/// What evidence of a log this home holds (records, stored checkpoints,
/// the checkpoint file), described; `None` for a fresh home.
fn existing_evidence(home: &Home, sink: &SqliteAuditSink) -> Result<Option<String>, Failure> {
    let records = sink.record_count()?;
    let stored = sink.checkpoint_count()?;
    let file = crate::evidence::file_path(home);
    let file_len = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    if records == 0 && stored == 0 && file_len == 0 {
        return Ok(None);
    }
    Ok(Some(format!(
        "{records} record(s), {stored} stored checkpoint(s), {}",
        if file_len > 0 {
            format!("{} present", file.display())
        } else {
            format!("no {}", file.display())
        }
    )))
}

/// The audit signing key, checked before anything is signed: owner-only,
/// readable and well-formed, or an error saying how to fix it.
///
/// Created (32 random bytes, hex, mode 0600) only on a fresh home: when
/// the log has records or a checkpoint exists (stored or in the file), a
/// missing key is an error, never a silent new key that would re-sign a
/// rewritten log. The seed is held in a zeroizing buffer while read.
pub fn audit_key(home: &Home, sink: &SqliteAuditSink) -> Result<SigningKey, Failure> {
    let path = key_path(home);
    match std::fs::symlink_metadata(&path) {
        Ok(_) => return read_key(&path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(usage_error(anyhow!(
                "cannot read {}: {e}; the audit key must be a readable, owner-only file",
                path.display()
            )));
        }
    }
    if let Some(evidence) = existing_evidence(home, sink)? {
        return Err(Failure {
            code: 1,
            error: anyhow!(
                "{} is missing, but this home already has an audit log ({evidence}). A new key would sign over a log it never saw, so none is made. Restore the key from your backup (owner-only: chmod 600). If it is lost, start a new log deliberately: stop agents, move {}*, {} and {} aside (keep them as evidence), then run again. A deliberate change of key is `bulwark audit rotate-key`, which needs the current key",
                path.display(),
                home.db_path().display(),
                crate::evidence::file_path(home).display(),
                home.root().join("audit.ack").display()
            ),
        });
    }
    let dir = home.root().join("keys");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let key = generate_signing_key();
    write_key(&path, &key, false)?;
    Ok(key)
}

/// `bulwark init`'s part: a new home gets its audit key at once, so every
/// record later written into it (by an agent, an operator's command or a
/// server's worker) is under that key from the first one. A home that
/// already has a key or a log is left to `run`'s rule. Returns whether a
/// key was made.
pub(crate) fn key_for_new_home(home: &Home) -> Result<bool, Failure> {
    if std::fs::symlink_metadata(key_path(home)).is_ok() {
        return Ok(false);
    }
    if home.db_path().exists() || crate::evidence::file_path(home).exists() {
        let sink = open_sink(home)?;
        if existing_evidence(home, &sink)?.is_some() {
            return Ok(false);
        }
    }
    let dir = home.root().join("keys");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_key(&key_path(home), &generate_signing_key(), false)?;
    Ok(true)
}

/// Makes the audit key of a fresh home (no records, no checkpoint), as the
/// first `run` would, so that a record written before any agent ran (an
/// operator's `access create`, `keys trust`) does not leave a log without
/// a key, which `run` would then rightly refuse to make. A home whose key
/// exists or whose log is not fresh is left alone: that is `run`'s check.
pub(crate) fn ensure_key_of_fresh_log(home: &Home, sink: &SqliteAuditSink) -> Result<(), Failure> {
    if std::fs::symlink_metadata(key_path(home)).is_ok() || existing_evidence(home, sink)?.is_some()
    {
        return Ok(());
    }
    audit_key(home, sink).map(|_| ())
}

/// Writes `key` owner-only to `path`, synced; `replace` truncates a file
/// left there, otherwise an existing file is an error.
fn write_key(path: &Path, key: &SigningKey, replace: bool) -> Result<(), Failure> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(replace)
        .truncate(replace)
        .create_new(!replace)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let seed = zeroize::Zeroizing::new(hex::encode(key.to_bytes()));
    file.write_all(seed.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.sync_all()
        .with_context(|| format!("cannot sync {}", path.display()))?;
    Ok(())
}

pub(crate) fn read_key(path: &Path) -> Result<SigningKey, Failure> {
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

pub(crate) fn verifier(key: &SigningKey) -> Result<VerifierKey, Failure> {
    VerifierKey::from_signing_key(KEY_NAME, key).map_err(|e| anyhow!("{e}").into())
}

/// The verifier of `keys/audit.key` when it is there (and usable), to
/// check the chain against; a key that cannot be used is an error.
fn machine_verifier(home: &Home) -> Result<Option<VerifierKey>, Failure> {
    let path = key_path(home);
    if !path.exists() {
        eprintln!(
            "warning: {} is missing: the log can be verified, but nothing new can be signed until it is restored",
            path.display()
        );
        return Ok(None);
    }
    Ok(Some(verifier(&read_key(&path)?)?))
}

/// Exit 0 when the log verifies against everything this home holds (every
/// stored checkpoint's signature, every checkpoint in the checkpoint file)
/// and `checkpoint` if given; 1 when it does not, naming the first bad
/// index.
pub fn verify(home: &Home, checkpoint: Option<&Path>, vkey: Option<&str>) -> Result<(), Failure> {
    let audit = audit_section(home)?;
    let origin = audit.origin();
    if !home.db_path().exists()
        && let Some(file) = crate::evidence::read(home, origin)?
        && file.largest() > 0
    {
        println!(
            "TAMPERED: the database {} is missing, but {} says the log held {} records",
            home.db_path().display(),
            crate::evidence::file_path(home).display(),
            file.largest()
        );
        return Err(Failure {
            code: 1,
            error: anyhow!("the audit log does not verify: its database was removed"),
        });
    }
    let sink = open_sink(home)?;
    let machine = machine_verifier(home)?;
    let exported = match checkpoint {
        Some(file) => {
            let note = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let cp = match vkey {
                Some(text) => {
                    let trusted = VerifierKey::parse(text.trim()).map_err(|e| {
                        usage_error(anyhow!(
                            "--key is not a verifier key ({e}); pass the line `bulwark audit key` printed, e.g. bulwark-audit+1a2b3c4d+AXG..."
                        ))
                    })?;
                    parse_and_verify(&note, &[trusted]).map_err(|e| {
                        usage_error(anyhow!(
                            "{} is not a checkpoint signed by the key given with --key ({e})",
                            file.display()
                        ))
                    })?
                }
                None => {
                    let keys = match crate::evidence::read(home, origin)? {
                        Some(f) => f.keys,
                        None => machine
                            .iter()
                            .map(|k| crate::evidence::ChainKey {
                                verifier: k.clone(),
                                until: None,
                            })
                            .collect(),
                    };
                    crate::evidence::open_checkpoint(origin, &keys, &note).map_err(|e| {
                        usage_error(anyhow!(
                            "{} is not a checkpoint signed by this log's key ({e})",
                            file.display()
                        ))
                    })?
                }
            };
            println!("checkpoint {} : size {}", file.display(), cp.size);
            Some(ExternalCheckpoint {
                checkpoint: cp,
                source: format!("external checkpoint {}", file.display()),
            })
        }
        None => None,
    };
    let local = crate::evidence::verify_local(home, origin, &sink, machine.as_ref(), exported)?;
    let report = &local.report;
    let file_note = match &local.file {
        Some(f) => format!(
            ", {} checkpoint(s) in the checkpoint file, {} key(s)",
            f.checkpoints.len(),
            f.keys.len()
        ),
        None => String::new(),
    };
    match &report.problem {
        None => {
            println!(
                "ok: {} records, {} stored checkpoint(s) match{file_note}, root {}",
                report.records,
                local.stored_matching(),
                hex::encode(report.root)
            );
            print_cosigners(&audit, &sink)
        }
        Some(problem) => {
            println!("TAMPERED: {problem}");
            if report.bad_signatures > 0 {
                println!(
                    "{} stored checkpoint(s) with a signature that does not verify",
                    report.bad_signatures
                );
            }
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

/// The witnesses' part of `audit verify`: who cosigned the latest
/// checkpoint (nothing when no witness is configured).
fn print_cosigners(
    audit: &bulwark_policy::AuditSection,
    sink: &SqliteAuditSink,
) -> Result<(), Failure> {
    if audit.witnesses.is_empty() {
        return Ok(());
    }
    match crate::witnessing::cosigners_of_latest(audit, sink)? {
        Some(cosigners) => {
            for line in cosigners.describe() {
                println!("{line}");
            }
        }
        None => println!("witnesses: no checkpoint is stored yet"),
    }
    Ok(())
}

/// Sign a checkpoint of the current log; print it and optionally write it
/// to `out` so it can be kept elsewhere. With `rebuild_file`, first
/// re-create a missing checkpoint file from the stored checkpoints.
pub fn checkpoint(home: &Home, out: Option<&Path>, rebuild_file: bool) -> Result<(), Failure> {
    let audit = audit_section(home)?;
    let sink = open_sink(home)?;
    let key = audit_key(home, &sink)?;
    if rebuild_file {
        crate::checkpoints::rebuild_file(home, &sink, &key, audit.origin())?;
    }
    let note = crate::checkpoints::sign_full(home, &sink, &key, &audit)?;
    print!("{note}");
    if !audit.witnesses.is_empty()
        && let Some(cosigners) = crate::witnessing::cosigners_of_latest(&audit, &sink)?
    {
        for line in cosigners.describe() {
            eprintln!("{line}");
        }
    }
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
    let path = key_path(home);
    let key = if path.exists() {
        read_key(&path)?
    } else if home.db_path().exists() {
        let sink = Store::open(&home.db_path())
            .with_context(|| format!("cannot open {}", home.db_path().display()))?
            .audit_sink();
        audit_key(home, &sink)?
    } else {
        // A fresh home without a database: the key is made here, unless
        // a checkpoint file says a log existed.
        let store = Store::open_in_memory()?;
        audit_key(home, &store.audit_sink())?
    };
    println!("{}", verifier(&key)?.to_vkey());
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
///
/// Fails closed first when the audit key cannot be used (readable by
/// others, unreadable, malformed, missing while a log exists, or not the
/// key the checkpoint file's chain ends with): nothing would be signed.
pub fn require_verified(home: &Home, sink: &SqliteAuditSink) -> Result<(), Failure> {
    let audit = audit_section(home)?;
    let key = audit_key(home, sink)?;
    let report =
        crate::evidence::verify_local(home, audit.origin(), sink, Some(&verifier(&key)?), None)?
            .report;
    let Some(problem) = report.problem else {
        return crate::witnessing::require_witnesses(&audit, sink);
    };
    let seen = problem.to_string();
    if acknowledged(home, &seen) {
        eprintln!(
            "warning: the audit log does not verify ({seen}); an operator acknowledged this, continuing"
        );
        return crate::witnessing::require_witnesses(&audit, sink);
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
    let origin = audit_section(home)?.origin().to_owned();
    let sink = open_sink(home)?;
    let machine = machine_verifier(home)?;
    let report =
        crate::evidence::verify_local(home, &origin, &sink, machine.as_ref(), None)?.report;
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

/// `bulwark audit rotate-key`: a new audit key, handed over by the old.
///
/// The log must verify first. Then: a checkpoint of the log as it is is
/// signed with the old key; the new key is written beside it
/// (`keys/audit.key.new`); the handover note naming both keys and the log
/// size, signed by the old key and the new, is appended to the checkpoint
/// file; the new key replaces the old one (a rename: the old key is gone,
/// so it can sign nothing more, and verifiers accept its checkpoints only
/// up to the handover size); the rotation is recorded in the log
/// (`audit_key`/`rotate`) and a checkpoint covering that record is signed
/// with the new key. Run it while no agent runs.
pub fn rotate_key(home: &Home) -> Result<(), Failure> {
    let audit = audit_section(home)?;
    let origin = audit.origin();
    let sink = open_sink(home)?;
    let path = key_path(home);
    if !path.exists() {
        return Err(Failure {
            code: 1,
            error: anyhow!(
                "{} is missing: only the current key can hand over to a new one. Restore it from your backup; if it is lost, start a new log deliberately: stop agents, move {}*, {} and {} aside (keep them as evidence), then run again",
                path.display(),
                home.db_path().display(),
                crate::evidence::file_path(home).display(),
                home.root().join("audit.ack").display()
            ),
        });
    }
    let old = read_key(&path)?;
    let old_vkey = verifier(&old)?;
    let report = crate::evidence::verify_local(home, origin, &sink, Some(&old_vkey), None)?.report;
    if let Some(problem) = report.problem {
        return Err(Failure {
            code: 1,
            error: anyhow!(
                "the audit log does not verify ({problem}); a key rotation would hand over a damaged log. Inspect it with `bulwark audit verify` first"
            ),
        });
    }
    crate::checkpoints::sign_full(home, &sink, &old, &audit)?;
    let size = sink.record_count()?;
    let new = generate_signing_key();
    let new_vkey = verifier(&new)?;
    let pending = path.with_extension("key.new");
    write_key(&pending, &new, true)?;
    let handover = bulwark_audit::note_file::sign_handover(origin, &old, &new, KEY_NAME, size)
        .map_err(|e| anyhow!("{e}"))?;
    crate::evidence::append(home, None, &format!("{handover}\n"))?;
    std::fs::rename(&pending, &path).with_context(|| {
        format!(
            "the handover is written, but {} could not replace {}: finish with `mv {} {}`",
            pending.display(),
            path.display(),
            pending.display(),
            path.display()
        )
    })?;
    if let Some(dir) = path.parent()
        && let Ok(dir) = std::fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
    let (old_text, new_text) = (old_vkey.to_vkey(), new_vkey.to_vkey());
    let args = serde_json::json!({ "old": old_text, "new": new_text, "size": size });
    sink.append(&bulwark_audit::AuditRecord {
        time_ms: now_ms(),
        session: String::new(),
        agent: String::new(),
        user: "local".to_owned(),
        action: bulwark_audit::Action::AuditKey,
        tool: String::new(),
        operation: "rotate".to_owned(),
        args_digest: bulwark_audit::AuditRecord::digest_args(&args),
        decision: bulwark_audit::Decision::Allowed,
        reason: bulwark_audit::Reason::Empty,
        detail: format!(
            "audit key rotated at log size {size}: {old_text} handed over to {new_text}"
        ),
        duration_us: 0,
    })?;
    crate::checkpoints::sign_full(home, &sink, &new, &audit)?;
    println!("rotated at log size {size}");
    println!("old key {old_text}");
    println!("new key {new_text}");
    eprintln!(
        "back up {} now, and give the new verifier key to whoever checks exported checkpoints",
        path.display()
    );
    if !audit.witnesses.is_empty() {
        eprintln!(
            "the witnesses of [audit] witnesses follow the old key and refuse checkpoints signed by the new one (403): have each follow `{origin}={new_text}` (`bulwark witness serve --log`), then run `bulwark audit checkpoint`; with [audit] require_witnesses, agents do not start until they cosign"
        );
    }
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
