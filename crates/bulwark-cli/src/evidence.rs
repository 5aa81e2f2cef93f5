//! The audit log's local evidence outside the database:
//! `$BULWARK_HOME/audit/checkpoints`, an append-only file holding every
//! checkpoint this home signed, one C2SP signed note after another, after
//! the introduction of the log's first key and with each key handover
//! (`bulwark audit rotate-key`) in its place.
//!
//! Someone who can write `bulwark.db` but not also rewrite this file
//! consistently can no longer delete the stored checkpoints and then
//! rewrite or truncate records unnoticed, nor wipe the database: the log
//! must reproduce every checkpoint in the file. Someone who can rewrite
//! both (and holds the key) still can; only checkpoints kept elsewhere
//! (exported, witnessed) detect that.

use std::path::{Path, PathBuf};

use crate::Failure;
use anyhow::{Context, anyhow};
use bulwark_audit::note_file::{self, handover_line, introduction_line};
use bulwark_audit::{Checkpoint, CheckpointError, VerifierKey, parse_and_verify};
use bulwark_kernel::Home;
use bulwark_store::{ExternalCheckpoint, ProblemKind, SqliteAuditSink, VerifyReport};

/// Where the checkpoint file lives.
pub(crate) fn file_path(home: &Home) -> PathBuf {
    home.root().join("audit").join("checkpoints")
}

/// One key of the log, in the order they were handed over.
#[derive(Debug, Clone)]
pub(crate) struct ChainKey {
    pub(crate) verifier: VerifierKey,
    /// The log size at which it handed over to the next key: checkpoints
    /// it signs beyond that size are not accepted.
    pub(crate) until: Option<u64>,
}

/// The parsed, verified checkpoint file.
#[derive(Debug, Clone)]
pub(crate) struct CheckpointFile {
    /// The first key (from the introduction), then each handed over to.
    pub(crate) keys: Vec<ChainKey>,
    /// Every checkpoint entry, in file order.
    pub(crate) checkpoints: Vec<Checkpoint>,
}

impl CheckpointFile {
    /// The key the chain ends with: the one that signs now.
    pub(crate) fn current(&self) -> Option<&VerifierKey> {
        self.keys.last().map(|k| &k.verifier)
    }

    /// The largest size a checkpoint in the file covers.
    pub(crate) fn largest(&self) -> u64 {
        self.checkpoints.iter().map(|c| c.size).max().unwrap_or(0)
    }
}

/// Opens a checkpoint note signed by one of `keys` (within the size range
/// it signed for) and of this log's origin.
pub(crate) fn open_checkpoint(
    origin: &str,
    keys: &[ChainKey],
    note: &str,
) -> Result<Checkpoint, String> {
    for key in keys {
        match parse_and_verify(note, std::slice::from_ref(&key.verifier)) {
            Ok(cp) => {
                if cp.origin != origin {
                    return Err(format!("its origin is {:?}, not {origin:?}", cp.origin));
                }
                if let Some(until) = key.until
                    && cp.size > until
                {
                    return Err(format!(
                        "it is signed by key {:08x} at size {}, after that key handed over at size {until}",
                        key.verifier.key_id(),
                        cp.size
                    ));
                }
                return Ok(cp);
            }
            Err(CheckpointError::NoTrustedSignature) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("it is not signed by any key of this log".to_owned())
}

/// Parses and verifies the whole file: the introduction first, then
/// checkpoints (each signed by a key of the chain so far) and handovers
/// (each signed by the current key and the next).
pub(crate) fn parse(origin: &str, text: &str) -> Result<CheckpointFile, String> {
    let notes = note_file::split_notes(text).map_err(|e| e.to_string())?;
    let mut keys: Vec<ChainKey> = Vec::new();
    let mut checkpoints = Vec::new();
    for (i, note) in notes.iter().enumerate() {
        let n = i + 1;
        let first = note_file::first_line(note);
        let Some(current) = keys.last().map(|k| k.verifier.clone()) else {
            if first != introduction_line(origin) {
                if let Some(other) = first.strip_suffix(" key") {
                    return Err(format!(
                        "this log's origin is {other:?} (entry 1), but [audit] origin in config.toml says {origin:?}: a log keeps its origin for life; set it back, or start a new log deliberately"
                    ));
                }
                return Err("entry 1 is not the introduction of the log's first key".to_owned());
            }
            let key = note_file::open_introduction(origin, note)
                .map_err(|e| format!("entry 1 (the key introduction): {e}"))?;
            keys.push(ChainKey {
                verifier: key,
                until: None,
            });
            continue;
        };
        if first == origin {
            let cp = open_checkpoint(origin, &keys, note)
                .map_err(|e| format!("entry {n} (a checkpoint): {e}"))?;
            checkpoints.push(cp);
        } else if first == handover_line(origin) {
            let handover = note_file::open_handover(origin, note, &current)
                .map_err(|e| format!("entry {n} (a key handover): {e}"))?;
            if keys.iter().any(|k| k.verifier == handover.new) {
                return Err(format!(
                    "entry {n} (a key handover) hands over to a key the log already used"
                ));
            }
            if let Some(last) = keys.last_mut() {
                last.until = Some(handover.size);
            }
            keys.push(ChainKey {
                verifier: handover.new,
                until: None,
            });
        } else if first == introduction_line(origin) {
            return Err(format!(
                "entry {n} introduces a second first key: a key can only be changed by a handover the old key signs (`bulwark audit rotate-key`)"
            ));
        } else {
            return Err(format!(
                "entry {n} is neither a checkpoint of {origin} nor a key statement"
            ));
        }
    }
    Ok(CheckpointFile { keys, checkpoints })
}

/// The file, parsed and verified; `None` when it does not exist or is
/// empty. A file that does not parse or verify is an error naming the
/// entry, with what to do.
pub(crate) fn read(home: &Home, origin: &str) -> Result<Option<CheckpointFile>, Failure> {
    let path = file_path(home);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Failure {
                code: 1,
                error: anyhow!("cannot read {}: {e}", path.display()),
            });
        }
    };
    if text.is_empty() {
        return Ok(None);
    }
    parse(origin, &text).map(Some).map_err(|what| Failure {
        code: 1,
        error: anyhow!(
            "{} does not verify: {what}. It is append-only evidence of what this log signed, so it was edited or damaged (a torn last entry means a crash or a full disk while appending). Agents will not run. Keep it as evidence: move it aside (mv {} {}.bad), compare the log with a checkpoint kept elsewhere (`bulwark audit verify --checkpoint FILE --key VKEY`), then rebuild it from the stored checkpoints with `bulwark audit checkpoint --rebuild-file`",
            path.display(),
            path.display(),
            path.display()
        ),
    })
}

/// What [`verify_local`] found.
pub(crate) struct LocalReport {
    pub(crate) report: VerifyReport,
    /// The checkpoint file, when there is one.
    pub(crate) file: Option<CheckpointFile>,
    /// Checkpoints from outside the database the log was checked against
    /// (distinct file entries and the exported one); `report` counts them
    /// in `checkpoints_checked` as well.
    pub(crate) external: usize,
}

impl LocalReport {
    /// Stored checkpoints that matched (when nothing failed).
    pub(crate) fn stored_matching(&self) -> usize {
        self.report
            .checkpoints_checked
            .saturating_sub(self.external)
    }
}

/// Everything this home can check the log against: the key chain from the
/// file (or the machine's key when there is no file yet), every
/// checkpoint in the file, and optionally one exported checkpoint.
///
/// `machine_key` is the verifier of `keys/audit.key` when it is present:
/// it must be the key the chain ends with, or someone replaced it.
pub(crate) fn verify_local(
    home: &Home,
    origin: &str,
    sink: &SqliteAuditSink,
    machine_key: Option<&VerifierKey>,
    exported: Option<ExternalCheckpoint>,
) -> Result<LocalReport, Failure> {
    let file = read(home, origin)?;
    let keys: Vec<ChainKey> = match &file {
        Some(file) => {
            if let (Some(machine), Some(current)) = (machine_key, file.current())
                && machine != current
            {
                return Err(replaced_key(home, machine, current));
            }
            file.keys.clone()
        }
        None => machine_key
            .map(|k| ChainKey {
                verifier: k.clone(),
                until: None,
            })
            .into_iter()
            .collect(),
    };
    let mut external: Vec<ExternalCheckpoint> = Vec::new();
    if let Some(file) = &file {
        let mut seen: Vec<&Checkpoint> = file.checkpoints.iter().collect();
        seen.sort_by_key(|c| c.size);
        seen.dedup_by(|a, b| a.size == b.size && a.root == b.root);
        external.extend(seen.into_iter().map(|cp| ExternalCheckpoint {
            checkpoint: cp.clone(),
            source: "the checkpoint in audit/checkpoints".to_owned(),
        }));
    }
    external.extend(exported);
    let mut report = if keys.is_empty() {
        // No key to check stored signatures with (no file, no key here):
        // the rows alone, and the missing file is the problem below.
        let mut report = sink.verify()?;
        if let Some(cp) = external.first() {
            report = sink.verify_against(&cp.checkpoint)?;
        }
        report
    } else {
        sink.verify_trusted(&|note| open_checkpoint(origin, &keys, note), &external)?
    };
    if report.problem.is_none() && file.is_none() {
        let stored = sink.checkpoint_count()?;
        if stored > 0 {
            report.problem = Some(bulwark_store::Problem {
                index: report.records,
                kind: ProblemKind::EvidenceMissing,
                what: format!(
                    "{} is missing (or empty) but the database holds {stored} signed checkpoint(s): it was removed, or this home predates it. If you did not remove it, compare the log with a checkpoint kept elsewhere first; then `bulwark audit checkpoint --rebuild-file` re-creates it from the stored checkpoints",
                    file_path(home).display()
                ),
            });
        }
    }
    Ok(LocalReport {
        report,
        file,
        external: external.len(),
    })
}

/// The machine's key is not the one the log's chain ends with.
fn replaced_key(home: &Home, machine: &VerifierKey, current: &VerifierKey) -> Failure {
    let key = crate::cmd_audit::key_path(home);
    let pending = key.with_extension("key.new");
    let hint = match crate::cmd_audit::read_key(&pending) {
        Ok(k) if crate::cmd_audit::verifier(&k).is_ok_and(|v| v == *current) => format!(
            " {} holds the chain's key: a rotation was interrupted; finish it with `mv {} {}`.",
            pending.display(),
            pending.display(),
            key.display()
        ),
        _ => String::new(),
    };
    Failure {
        code: 1,
        error: anyhow!(
            "{} is the key {machine}, but {} says this log is signed by {current}: the key was replaced.{hint} Restore the log's key from a backup (owner-only, chmod 600); a deliberate change of key is `bulwark audit rotate-key`, which needs the current key",
            key.display(),
            file_path(home).display()
        ),
    }
}

/// Appends `text` (whole entries, each `note + "\n"`) to the file and
/// syncs it. With `introduction`, the file is created with it first; if
/// another process created the file meanwhile, only `text` is appended.
///
/// One `write` of the whole text on an `O_APPEND` descriptor: entries of
/// concurrent appenders do not interleave on a local file system.
pub(crate) fn append(home: &Home, introduction: Option<&str>, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let path = file_path(home);
    let dir = path.parent().unwrap_or(home.root());
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let open = |create_new: bool| {
        std::fs::OpenOptions::new()
            .append(true)
            .create(!create_new)
            .create_new(create_new)
            .mode(0o600)
            .open(&path)
    };
    let (mut file, whole) = match introduction {
        Some(intro) => match open(true) {
            Ok(file) => (file, format!("{intro}\n{text}")),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let file = open(false).with_context(|| opening(&path))?;
                // An empty file holds no introduction yet.
                let empty = file.metadata().map(|m| m.len() == 0).unwrap_or(false);
                let whole = if empty {
                    format!("{intro}\n{text}")
                } else {
                    text.to_owned()
                };
                (file, whole)
            }
            Err(e) => return Err(anyhow!(e).context(opening(&path))),
        },
        None => (
            open(false).with_context(|| opening(&path))?,
            text.to_owned(),
        ),
    };
    file.write_all(whole.as_bytes())
        .with_context(|| format!("cannot append to {}", path.display()))?;
    file.sync_all()
        .with_context(|| format!("cannot sync {}", path.display()))?;
    if introduction.is_some()
        && let Ok(dir) = std::fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

fn opening(path: &Path) -> String {
    format!("cannot open {} for appending", path.display())
}
