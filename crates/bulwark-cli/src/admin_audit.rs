//! Security-event records for the operator's own commands (`access
//! create|rotate|revoke`, `keys trust|untrust`, `sign`).
//!
//! These commands change who may sign in and which agents may run, so each
//! change leaves one record in the audit log, under the local operator
//! (`user local`). The order is what makes the record trustworthy: the
//! database is opened before anything changes (a home whose log cannot be
//! opened changes nothing), the change is made, and its record is written
//! and flushed; if that write fails, the files the change touched are put
//! back as they were and the command fails. A change is therefore never in
//! effect without its record.
//!
//! A record names what changed (user, key name and ID, agent and version,
//! the digest of the signed listing) and never a token, private key or
//! other secret: the command's output shows a new token once, the log never.

use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use bulwark_audit::{AuditRecord, AuditSink, Decision};
use bulwark_kernel::{Home, LOCAL_USER};
use bulwark_store::{SqliteAuditSink, Store};

use crate::Failure;

/// One operator security event (the shared vocabulary: `access_change`,
/// `key_trust`, `agent_sign`).
pub(crate) struct Event {
    pub action: bulwark_audit::Action,
    pub operation: &'static str,
    /// The agent concerned, or "".
    pub agent: String,
    /// What changed, as JSON without secret values; its canonical digest
    /// is the record's `args_digest`.
    pub what: serde_json::Value,
    /// A human summary, without secret values.
    pub detail: String,
}

/// The audit log of a home, opened before a change is made.
pub(crate) struct AdminAudit {
    sink: SqliteAuditSink,
    db: PathBuf,
}

/// Opens (creating when missing, as `run` does) the home's database. Called
/// before the change, so a log that cannot be opened changes nothing.
pub(crate) fn open(home: &Home) -> Result<AdminAudit, Failure> {
    fs::create_dir_all(home.root())
        .with_context(|| format!("cannot create {}", home.root().display()))?;
    let db = home.db_path();
    let store = Store::open(&db).map_err(|e| Failure {
        code: 1,
        error: anyhow!(
            "cannot open the audit log in {}: {e}; nothing was changed, because this change must be recorded there. Fix or restore the database and run the command again",
            db.display()
        ),
    })?;
    let sink = store.audit_sink();
    crate::cmd_audit::ensure_key_of_fresh_log(home, &sink)?;
    Ok(AdminAudit { sink, db })
}

impl AdminAudit {
    fn write(&self, event: &Event) -> Result<(), bulwark_audit::AuditError> {
        let record = AuditRecord::new(
            bulwark_audit::Identity::new("", event.agent.clone(), LOCAL_USER),
            bulwark_audit::Event::new(
                event.action.clone(),
                Decision::Allowed,
                bulwark_audit::Reason::Operator,
            )
            .operation(event.operation)
            .args(&event.what)
            .detail(event.detail.clone()),
        );
        self.sink.record(&record)?;
        self.sink.flush()
    }

    /// Records `event` durably; if that fails, restores `undo` (the files
    /// as they were before the change) and fails with a message that says
    /// the change was undone.
    pub(crate) fn commit(&self, event: &Event, undo: &[Snapshot]) -> Result<(), Failure> {
        let Err(err) = self.write(event) else {
            return Ok(());
        };
        let mut not_restored = Vec::new();
        for snap in undo.iter().rev() {
            if let Err(e) = snap.restore() {
                not_restored.push(format!("{}: {e}", snap.path.display()));
            }
        }
        let undone = if not_restored.is_empty() {
            "the change was undone".to_owned()
        } else {
            format!(
                "and undoing the change FAILED for {} (restore these files by hand)",
                not_restored.join("; ")
            )
        };
        Err(Failure {
            code: 1,
            error: anyhow!(
                "could not record this change in the audit log at {} ({err}), {undone}. Fix the database and run the command again",
                self.db.display()
            ),
        })
    }
}

/// A file as it was before a change (its bytes and mode, or its absence),
/// to put back when the change's record cannot be written.
pub(crate) struct Snapshot {
    path: PathBuf,
    before: Option<(Vec<u8>, u32)>,
}

impl Snapshot {
    pub(crate) fn take(path: &Path) -> Result<Snapshot, Failure> {
        let before = match fs::read(path) {
            Ok(bytes) => {
                let mode = fs::metadata(path)
                    .with_context(|| format!("cannot read {}", path.display()))?
                    .permissions()
                    .mode();
                Some((bytes, mode & 0o7777))
            }
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => {
                return Err(anyhow!("cannot read {}: {e}", path.display()).into());
            }
        };
        Ok(Snapshot {
            path: path.to_owned(),
            before,
        })
    }

    /// A file that did not exist before the change (so undoing it removes
    /// the file).
    pub(crate) fn absent(path: &Path) -> Snapshot {
        Snapshot {
            path: path.to_owned(),
            before: None,
        }
    }

    /// Puts the file back: removed if it did not exist, else replaced
    /// atomically by its old bytes with its old mode.
    fn restore(&self) -> std::io::Result<()> {
        let Some((bytes, mode)) = &self.before else {
            return match fs::remove_file(&self.path) {
                Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        };
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = self.path.with_file_name(format!(".{name}.restore"));
        let _ = fs::remove_file(&tmp);
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(*mode)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, &self.path)
    }
}
