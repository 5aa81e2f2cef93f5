//! Signed checkpoints while agents run: periodically, after every N records,
//! and once more when the run ends however it ends (return, error, Ctrl-C,
//! SIGTERM). A checkpoint held elsewhere is what makes a later rewrite of
//! the log detectable, so the gap between two of them is the window in
//! which history could be rewritten unnoticed; these triggers bound it.
//!
//! Under `bulwark serve` the server process signs for all its workers: a
//! worker is confined away from the signing key. Whether a process starts
//! a [`Checkpointer`] follows from its session's origin
//! (`bulwark_kernel::Origin::signs_checkpoints`): a worker never does.

use bulwark_kernel::Home;
use bulwark_policy::AuditSection;
use bulwark_store::SqliteAuditSink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::cmd_audit::{KEY_NAME, audit_key};
use crate::{Failure, evidence};
use anyhow::anyhow;
use bulwark_audit::SigningKey;
use bulwark_audit::note_file;

/// How often the record count is looked at (two index lookups).
const POLL: Duration = Duration::from_secs(1);

/// Owns the periodic task; signs the final checkpoint on [`finish`] or,
/// failing that, on drop.
///
/// [`finish`]: Checkpointer::finish
pub struct Checkpointer {
    home: Home,
    sink: SqliteAuditSink,
    /// The log's origin and witnesses.
    audit: AuditSection,
    task: Option<tokio::task::JoinHandle<()>>,
    finished: Arc<AtomicBool>,
}

impl Checkpointer {
    /// Starts the periodic task on the current tokio runtime. Only a
    /// process that signs checkpoints starts one: `run`/`chat` for their
    /// session, `serve` for its workers'.
    pub fn start(home: &Home, sink: SqliteAuditSink, config: &AuditSection) -> Self {
        let interval = Duration::from_secs(config.interval_secs());
        let every = config.every_records();
        let finished = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(periodic(
            home.clone(),
            sink.clone(),
            config.clone(),
            interval,
            every,
            finished.clone(),
        ));
        Self {
            home: home.clone(),
            sink,
            audit: config.clone(),
            task: Some(task),
            finished,
        }
    }

    /// Stops the periodic task and signs the checkpoint of the log as it
    /// is now. Reports a failure on stderr: the run's records are durable
    /// already, only the signed head is missing.
    pub fn finish(mut self) {
        self.sign_final();
    }

    fn sign_final(&mut self) {
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Err(err) = sign(&self.home, &self.sink, &self.audit) {
            eprintln!("warning: no audit checkpoint was signed at exit: {err:#}");
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.sign_final();
    }
}

/// Signs an incremental checkpoint (hashing only records since the last
/// one this key signed; a full verification when there is none) and
/// publishes it. Nothing is signed when no record was added since the
/// latest stored checkpoint (it was published when it was signed).
fn sign(home: &Home, sink: &SqliteAuditSink, audit: &AuditSection) -> anyhow::Result<()> {
    if sink.records_since_latest_checkpoint()? == 0 && sink.latest_checkpoint()?.is_some() {
        return Ok(());
    }
    file_kept(home, sink)?;
    let key = audit_key(home, sink).map_err(|f| f.error)?;
    let note = sink.checkpoint_incremental(&key, audit.origin(), KEY_NAME)?;
    publish(home, sink, &key, &note, audit)
}

/// Signs a checkpoint after the full verification and publishes it
/// (`bulwark audit checkpoint`, key rotation).
pub(crate) fn sign_full(
    home: &Home,
    sink: &SqliteAuditSink,
    key: &SigningKey,
    audit: &AuditSection,
) -> Result<String, Failure> {
    file_kept(home, sink)?;
    let note = sink.checkpoint(key, audit.origin(), KEY_NAME)?;
    publish(home, sink, key, &note, audit)?;
    Ok(note)
}

/// Refuses to sign while the checkpoint file is missing but the database
/// holds checkpoints: the file was removed, and the next checkpoint would
/// quietly start a new one.
fn file_kept(home: &Home, sink: &SqliteAuditSink) -> anyhow::Result<()> {
    let path = evidence::file_path(home);
    if !std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) && sink.checkpoint_count()? > 0 {
        return Err(anyhow!(
            "{} is missing while the database holds signed checkpoints; not re-creating it silently: see `bulwark audit verify`, then `bulwark audit checkpoint --rebuild-file`",
            path.display()
        ));
    }
    Ok(())
}

/// Every newly signed checkpoint passes here: it is appended to the
/// append-only checkpoint file (`audit/checkpoints`), so deleting the
/// database's checkpoint rows does not erase what was signed. This is
/// where a checkpoint leaves for anywhere else it must be kept.
///
/// A missing file is created (starting with the introduction of `key`)
/// only while the database holds no earlier checkpoint: otherwise the file
/// was removed, and re-creating it silently would hide that (the operator
/// decides: `bulwark audit checkpoint --rebuild-file`).
pub(crate) fn publish(
    home: &Home,
    sink: &SqliteAuditSink,
    key: &SigningKey,
    note: &str,
    audit: &AuditSection,
) -> anyhow::Result<()> {
    let path = evidence::file_path(home);
    let present = std::fs::metadata(&path).is_ok_and(|m| m.len() > 0);
    let introduction = if present {
        None
    } else {
        if sink.checkpoint_count()? > 1 {
            return Err(anyhow!(
                "{} is missing while the database holds earlier checkpoints; not re-creating it silently (see `bulwark audit verify`)",
                path.display()
            ));
        }
        Some(note_file::sign_introduction(audit.origin(), key, KEY_NAME)?)
    };
    evidence::append(home, introduction.as_deref(), &format!("{note}\n"))?;
    witness(sink, note, audit);
    Ok(())
}

/// Sends a newly signed checkpoint to the `[audit] witnesses` and keeps
/// their cosignatures. A witness that cannot be reached or refuses is a
/// warning, not a failure: the checkpoint is signed and kept locally
/// either way, and `[audit] require_witnesses` is what makes a missing
/// cosignature stop agents (at their next start).
fn witness(sink: &SqliteAuditSink, note: &str, audit: &AuditSection) {
    if audit.witnesses.is_empty() {
        return;
    }
    match crate::witnessing::witness_checkpoint_blocking(audit, sink, note) {
        Ok(report) => {
            for failure in report.failures() {
                eprintln!("warning: {failure}");
            }
        }
        Err(err) => eprintln!("warning: the checkpoint was not sent to witnesses: {err:#}"),
    }
}

/// Re-creates a missing checkpoint file from the stored checkpoints, each
/// of which must verify under `key`, after the log verifies against them.
/// It trusts the database's checkpoints as they are now: what an intruder
/// removed together with the file is not brought back.
pub(crate) fn rebuild_file(
    home: &Home,
    sink: &SqliteAuditSink,
    key: &SigningKey,
    origin: &str,
) -> Result<(), Failure> {
    let path = evidence::file_path(home);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
        return Err(crate::usage_error(anyhow!(
            "{} exists; --rebuild-file only re-creates a missing one (move a damaged one aside first, keeping it as evidence)",
            path.display()
        )));
    }
    let verifier = crate::cmd_audit::verifier(key)?;
    let keys = [evidence::ChainKey {
        verifier,
        until: None,
    }];
    let report =
        sink.verify_trusted(&|note| evidence::open_checkpoint(origin, &keys, note), &[])?;
    if let Some(problem) = report.problem {
        return Err(Failure {
            code: 1,
            error: anyhow!(
                "the log does not verify against its stored checkpoints under this key ({problem}); not rebuilding {} from them",
                path.display()
            ),
        });
    }
    let mut text = String::new();
    for stored in sink.stored_checkpoints()? {
        text.push_str(&stored.note);
        text.push('\n');
    }
    let introduction =
        note_file::sign_introduction(origin, key, KEY_NAME).map_err(|e| anyhow!("{e}"))?;
    evidence::append(home, Some(&introduction), &text)?;
    eprintln!(
        "re-created {} from {} stored checkpoint(s)",
        path.display(),
        report.checkpoints_checked
    );
    Ok(())
}

async fn periodic(
    home: Home,
    sink: SqliteAuditSink,
    audit: AuditSection,
    interval: Duration,
    every: u64,
    finished: Arc<AtomicBool>,
) {
    let mut last = Instant::now();
    let mut warned = false;
    loop {
        tokio::time::sleep(POLL.min(interval)).await;
        if finished.load(Ordering::SeqCst) {
            return;
        }
        let pending = match sink.records_since_latest_checkpoint() {
            Ok(n) => n,
            Err(err) => {
                if !warned {
                    eprintln!("warning: periodic audit checkpoints stopped: {err}");
                    warned = true;
                }
                continue;
            }
        };
        let due = pending >= every || (pending > 0 && last.elapsed() >= interval);
        if !due {
            continue;
        }
        let (home, sink, audit) = (home.clone(), sink.clone(), audit.clone());
        let signed = tokio::task::spawn_blocking(move || sign(&home, &sink, &audit)).await;
        match signed {
            Ok(Ok(())) => {
                last = Instant::now();
                warned = false;
            }
            Ok(Err(err)) if !warned => {
                eprintln!("warning: a periodic audit checkpoint failed: {err:#}");
                warned = true;
            }
            _ => {}
        }
    }
}

/// Ctrl-C and SIGTERM, remembered: once [`listen`](Self::listen) returns,
/// the handlers are installed, so a signal that arrives while nothing is
/// waiting is not lost (and no longer kills the process before the final
/// checkpoint is signed).
pub struct Shutdown {
    requested: tokio::sync::watch::Receiver<bool>,
}

impl Shutdown {
    /// Installs the handlers now (on the current tokio runtime).
    pub fn listen() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let (tx, requested) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            let _ = tx.send(true);
        });
        Ok(Self { requested })
    }

    /// Resolves once a signal has arrived (immediately if one already did).
    pub async fn requested(&self) {
        let mut requested = self.requested.clone();
        if requested.wait_for(|&stop| stop).await.is_err() {
            // The listener ended without a signal: never resolve.
            std::future::pending::<()>().await;
        }
    }
}
