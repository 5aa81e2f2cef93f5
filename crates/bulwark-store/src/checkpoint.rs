//! WAL checkpoints off the hot path.
//!
//! SQLite's automatic checkpoint runs inside whichever commit crosses the
//! threshold: that one `record()` copies about a thousand pages and waits for
//! two fsyncs, which amortized over the commits in between costs more than the
//! inserts themselves. The store's connection therefore disables automatic
//! checkpoints and this thread, on a connection of its own, runs a PASSIVE
//! checkpoint (which never blocks writers) every interval. It exits once the
//! store it serves is dropped; if it cannot start, the store keeps SQLite's
//! automatic checkpoints instead, so the WAL can never grow without bound.

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Weak};
use std::time::Duration;

pub(crate) const INTERVAL: Duration = Duration::from_millis(200);

/// Starts the checkpointer for the database at `path`. Returns false when it
/// could not start (the caller then leaves automatic checkpoints on).
pub(crate) fn spawn(path: &Path, alive: Weak<Mutex<Connection>>) -> bool {
    let Ok(conn) = Connection::open(path) else {
        return false;
    };
    if conn.busy_timeout(Duration::from_millis(100)).is_err() {
        return false;
    }
    let path: PathBuf = path.to_path_buf();
    std::thread::Builder::new()
        .name("bulwark-store-checkpoint".into())
        .spawn(move || run(conn, alive, path))
        .is_ok()
}

fn run(conn: Connection, alive: Weak<Mutex<Connection>>, path: PathBuf) {
    loop {
        std::thread::sleep(INTERVAL);
        if alive.strong_count() == 0 {
            break;
        }
        // A busy or failed PASSIVE checkpoint is simply retried next time;
        // nothing is lost, the WAL is only a little longer meanwhile.
        if let Err(err) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::debug!(db = %path.display(), %err, "background checkpoint skipped");
        }
    }
}
