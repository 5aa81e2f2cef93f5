//! WAL checkpoints off the hot path.
//!
//! SQLite's automatic checkpoint runs inside whichever commit crosses the
//! threshold: that one `record()` copies about a thousand pages and waits for
//! two fsyncs, which amortized over the commits in between costs more than the
//! inserts themselves. The store's connection therefore disables automatic
//! checkpoints and this thread, on a connection of its own, runs a PASSIVE
//! checkpoint (which never blocks writers) every interval. If it cannot start,
//! the store keeps SQLite's automatic checkpoints instead, so the WAL can
//! never grow without bound.
//!
//! When the last handle of the store is dropped, the thread is told at once
//! and joined, so its connection is closed by the time the drop returns. The
//! last connection to close folds the WAL into the database file; a thread
//! that lingered would leave the file incomplete for whoever copies, backs
//! up or checkpoints it right after the store is gone.

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

pub(crate) const INTERVAL: Duration = Duration::from_millis(200);

/// The running checkpointer; dropping it stops and joins the thread.
pub(crate) struct Checkpointer {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Dropping the sender disconnects the channel, which wakes the
        // thread from its wait at once.
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            // A panicked checkpointer has nothing left to close.
            let _ = thread.join();
        }
    }
}

/// Starts the checkpointer for the database at `path`, or `None` when it
/// could not start (the caller then leaves automatic checkpoints on).
pub(crate) fn spawn(path: &Path) -> Option<Checkpointer> {
    let conn = Connection::open(path).ok()?;
    conn.busy_timeout(Duration::from_millis(100)).ok()?;
    let path: PathBuf = path.to_path_buf();
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("bulwark-store-checkpoint".into())
        .spawn(move || run(conn, &stopped, &path))
        .ok()?;
    Some(Checkpointer {
        stop: Some(stop),
        thread: Some(thread),
    })
}

fn run(conn: Connection, stopped: &mpsc::Receiver<()>, path: &Path) {
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(INTERVAL) {
        // A busy or failed PASSIVE checkpoint is simply retried next time;
        // nothing is lost, the WAL is only a little longer meanwhile.
        if let Err(err) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::debug!(db = %path.display(), %err, "background checkpoint skipped");
        }
    }
}
