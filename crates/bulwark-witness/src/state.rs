//! The witness's memory: for each log origin, the latest checkpoint it
//! cosigned (size, root and the note as the log signed it).
//!
//! A small SQLite file, not a text file, because the check of a submission
//! against the stored size and the update that follows must be one atomic,
//! serialized step, across threads and across processes (two `witness
//! serve` on one data directory): an IMMEDIATE transaction gives exactly
//! that, `synchronous = FULL` makes the commit durable before the witness
//! answers (a witness that forgot a size after a crash could be rolled
//! back), and rusqlite is already how this workspace stores things.

use crate::WitnessError;
use bulwark_audit::Hash;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::path::Path;
use std::time::Duration;

/// The latest cosigned checkpoint of one log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogState {
    pub size: u64,
    pub root: Hash,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS log_state (
    origin  TEXT    NOT NULL PRIMARY KEY,
    size    INTEGER NOT NULL CHECK (size >= 0),
    root    BLOB    NOT NULL CHECK (length(root) = 32),
    note    TEXT    NOT NULL,
    time_ms INTEGER NOT NULL
) STRICT;
";

fn sql(context: &'static str) -> impl FnOnce(rusqlite::Error) -> WitnessError {
    move |source| WitnessError::Store { context, source }
}

/// Opens (creating, mode 0600) the state database at `path`.
pub(crate) fn open(path: &Path) -> Result<Connection, WitnessError> {
    crate::identity::create_private_file(path)?;
    let conn = Connection::open(path).map_err(sql("opening the witness state"))?;
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(sql("setting busy_timeout"))?;
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .map_err(sql("enabling WAL"))?;
    // FULL: a cosigned size must survive a power loss, or the witness could
    // later cosign a smaller tree.
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(sql("setting synchronous"))?;
    conn.execute_batch(SCHEMA)
        .map_err(sql("creating the witness schema"))?;
    Ok(conn)
}

/// Reads the state of `origin` (none: never cosigned), lets `decide` judge
/// the submission against it, and stores what `decide` returns, all in one
/// IMMEDIATE transaction: no other writer can change the state in between.
pub(crate) fn update<T>(
    conn: &mut Connection,
    origin: &str,
    decide: impl FnOnce(Option<LogState>) -> Result<(Option<(LogState, String)>, T), WitnessError>,
) -> Result<T, WitnessError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("starting a state update"))?;
    let current = read(&tx, origin)?;
    let (new, answer) = decide(current)?;
    if let Some((state, note)) = new {
        let size = i64::try_from(state.size)
            .map_err(|_| WitnessError::Corrupt("a size beyond 2^63".into()))?;
        tx.execute(
            "INSERT INTO log_state (origin, size, root, note, time_ms) VALUES (?1, ?2, ?3, ?4, ?5) \
             ON CONFLICT (origin) DO UPDATE SET size = excluded.size, root = excluded.root, \
             note = excluded.note, time_ms = excluded.time_ms",
            params![origin, size, state.root.as_slice(), note, now_ms()],
        )
        .map_err(sql("storing a log's state"))?;
    }
    tx.commit().map_err(sql("committing a state update"))?;
    Ok(answer)
}

/// The stored state of `origin`, if any.
pub(crate) fn read(conn: &Connection, origin: &str) -> Result<Option<LogState>, WitnessError> {
    let row: Option<(i64, Vec<u8>)> = conn
        .query_row(
            "SELECT size, root FROM log_state WHERE origin = ?1",
            [origin],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .map_err(sql("reading a log's state"))?;
    row.map(|(size, root)| {
        Ok(LogState {
            size: u64::try_from(size)
                .map_err(|_| WitnessError::Corrupt("a negative stored size".into()))?,
            root: Hash::try_from(root.as_slice())
                .map_err(|_| WitnessError::Corrupt("a stored root is not 32 bytes".into()))?,
        })
    })
    .transpose()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
