//! Persistence: sessions, messages and the durable audit sink on SQLite.
//!
//! The store treats message contents and session state as opaque JSON
//! strings. It deliberately knows nothing about `bulwark-llm` message types:
//! keeping the arrow out means a change to the message model never needs a
//! storage migration, and the store cannot be tempted to interpret content.
//!
//! One [`Store`] wraps one SQLite connection behind a mutex. SQLite serialises
//! writers anyway, so a pool would add contention without adding throughput
//! for this write-heavy, tiny-transaction workload; other processes open their
//! own connection and rely on WAL plus the busy timeout.
#![forbid(unsafe_code)]

mod audit;
mod checkpoint;
mod children;
mod cosignatures;
mod group_commit;
mod lease;
mod ledger;
mod merkle_log;
mod provenance;
mod scan;
mod schema;
mod verify;

pub use audit::{AuditQuery, SqliteAuditSink};
pub use children::{ChildRecord, ChildState};
pub use cosignatures::{NewCosignature, StoredCosignature};
pub use lease::{
    LEASE_RENEW_EVERY, LEASE_TTL, LeaseConflict, LeaseHolder, LeaseInfo, SessionLease,
};
pub use ledger::{
    AccountKind, AccountSummary, Actor, Balance, Budget, BudgetUse, HoldId, HoldRequest, ISSUER,
    JournalEntry, LedgerError, Policy, SettleReceipt, TransferReceipt, TransferRequest, USAGE,
    within_fraction,
};
pub use merkle_log::{ConsistencyProof, InclusionProof, StoredCheckpoint};
pub use provenance::{
    MAX_DIGESTS_PER_PATH, MAX_LABEL_NAME_BYTES, MAX_LABELS_PER_ENTRY, MAX_PROVENANCE_PATH_BYTES,
    MAX_PROVENANCE_ROOT_BYTES, MAX_PROVENANCE_SOURCE_BYTES,
};
pub use schema::SCHEMA_VERSION;
pub use verify::{Coverage, ExternalCheckpoint, NoteCheck, Problem, ProblemKind, VerifyReport};

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// Everything that can go wrong in the store. Messages name the operation but
/// never echo stored content, so an error cannot leak a transcript into logs.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("sqlite error while {context}: {source}")]
    Sqlite {
        context: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("not found: {0}")]
    NotFound(String),
    #[error("conflict: {0}")]
    Conflict(String),
    /// Another process holds the session's lease (it is running it).
    #[error("{0}")]
    LeaseHeld(LeaseConflict),
    /// This process no longer holds the session's lease: another process
    /// took it over after it lapsed, so nothing was written.
    #[error(
        "this process no longer holds the lease on session `{session}` (it lapsed and another \
         process took the session over); nothing was saved, so that process's state stands"
    )]
    LeaseLost { session: String },
    /// The database holds something this build cannot interpret (unknown
    /// decision string, negative counter, newer schema).
    #[error("store is corrupt or incompatible: {0}")]
    Corrupt(String),
    /// Creating the database file or restricting its permissions failed.
    #[error("i/o error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// Input that is not what the operation takes (a label name that is
    /// not a lowercase word, a path over its length): refused before
    /// anything is stored.
    #[error("refused `{field}`: {why}")]
    Invalid { field: &'static str, why: String },
    /// A thread panicked while holding the connection. Surfaced as an error
    /// rather than a panic so one crashed task cannot take the process down.
    #[error("store connection lock poisoned by a panicking thread")]
    Poisoned,
    /// A store operation performed by another process (the server, for a
    /// worker) was refused or failed there.
    #[error("the server did not perform a store operation: {0}")]
    Remote(String),
    /// An earlier batched write failed; the sink refuses further work so the
    /// hole in the log cannot go unnoticed.
    #[error("{0}")]
    Failed(String),
    /// A checkpoint could not be signed (invalid origin or key name).
    #[error("checkpoint: {0}")]
    Checkpoint(#[from] bulwark_audit::CheckpointError),
    /// A proof was requested for sizes or indices the log does not have.
    #[error("proof: {0}")]
    Proof(#[from] bulwark_audit::ProofError),
}

/// Builds a `map_err` closure that attaches what we were doing to a SQLite
/// error; the context is always our own text, never caller data. It becomes
/// a `String` only on error: this runs per row in scans of millions of rows.
pub(crate) fn sqlite(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Sqlite {
        context: context.into(),
        source,
    }
}

/// A session to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewSession {
    pub id: String,
    pub agent: String,
    pub user: String,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRow {
    pub id: String,
    pub agent: String,
    pub user: String,
    /// Milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// Last message append or state save; never moves backwards even if the
    /// wall clock does.
    pub updated_ms: i64,
    /// Opaque per-session state (loop guard etc.), `None` until first saved.
    pub state_json: Option<String>,
    pub message_count: u64,
}

/// A stored message; `content_json` is returned byte-identical to what was
/// appended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageRow {
    pub id: i64,
    pub role: String,
    pub content_json: String,
    pub created_ms: i64,
}

/// Handle to the database. Cloning is cheap and shares the connection.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    /// Shared by every clone; the last one dropped stops and joins it.
    _checkpointer: Option<Arc<checkpoint::Checkpointer>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

pub(crate) fn now_ms() -> i64 {
    // A clock before 1970 is a misconfigured host, not a reason to fail a
    // write; 0 keeps ordering by rowid intact.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Converts a stored count/sequence to `u64`; a negative value can only come
/// from a damaged or hand-edited file.
pub(crate) fn to_u64(value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("negative {what}: {value}")))
}

/// SQLite limits are signed; a `usize` limit beyond `i64::MAX` means "all".
pub(crate) fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

const SESSION_COLUMNS: &str = "s.id, s.agent, s.user, s.created_ms, s.updated_ms, s.state_json, \
     (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)";

fn session_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(SessionRow, i64)> {
    Ok((
        SessionRow {
            id: row.get(0)?,
            agent: row.get(1)?,
            user: row.get(2)?,
            created_ms: row.get(3)?,
            updated_ms: row.get(4)?,
            state_json: row.get(5)?,
            message_count: 0,
        },
        row.get(6)?,
    ))
}

fn finish_session((mut s, count): (SessionRow, i64)) -> Result<SessionRow, StoreError> {
    s.message_count = to_u64(count, "message count")?;
    Ok(s)
}

impl Store {
    /// Opens (creating if needed) the database at `path`.
    ///
    /// The file is created with mode 0600 before SQLite touches it, so there
    /// is no window in which transcripts are world-readable; an existing file
    /// is tightened to 0600 too. SQLite gives the `-wal` and `-shm` files the
    /// database file's mode.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        create_private_file(path)?;
        let mut conn = Connection::open(path).map_err(sqlite("opening database"))?;
        schema::configure(&conn, true)?;
        schema::migrate(&mut conn)?;
        let mut store = Store::from_connection(conn);
        if let Some(checkpointer) = checkpoint::spawn(path) {
            store
                .lock()?
                .pragma_update(None, "wal_autocheckpoint", 0)
                .map_err(sqlite("disabling automatic checkpoints"))?;
            store._checkpointer = Some(Arc::new(checkpointer));
        }
        Ok(store)
    }

    /// A private, non-persistent database: for tests and one-shot runs.
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let mut conn =
            Connection::open_in_memory().map_err(sqlite("opening in-memory database"))?;
        schema::configure(&conn, false)?;
        schema::migrate(&mut conn)?;
        Ok(Store::from_connection(conn))
    }

    fn from_connection(conn: Connection) -> Store {
        // rusqlite keeps 16 prepared statements by default; the store uses
        // more than that (the audit insert alone has four sizes), and an
        // evicted statement is re-parsed on its next use.
        conn.set_prepared_statement_cache_capacity(64);
        Store {
            conn: Arc::new(Mutex::new(conn)),
            _checkpointer: None,
        }
    }

    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        self.conn.lock().map_err(|_| StoreError::Poisoned)
    }

    /// Creates a session; an existing id is a [`StoreError::Conflict`] so a
    /// caller can never silently adopt someone else's session.
    pub fn create_session(&self, s: &NewSession) -> Result<(), StoreError> {
        let conn = self.lock()?;
        let now = now_ms();
        let mut stmt = conn
            .prepare_cached(
                "INSERT INTO sessions (id, agent, user, created_ms, updated_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?4)",
            )
            .map_err(sqlite("preparing session insert"))?;
        match stmt.execute(params![s.id, s.agent, s.user, now]) {
            Ok(_) => Ok(()),
            Err(e) if e.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => Err(
                StoreError::Conflict(format!("session {:?} already exists", s.id)),
            ),
            Err(e) => Err(sqlite("inserting session")(e)),
        }
    }

    /// The session with this id, if any.
    pub fn session(&self, id: &str) -> Result<Option<SessionRow>, StoreError> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = ?1"
            ))
            .map_err(sqlite("preparing session lookup"))?;
        stmt.query_row([id], session_from_row)
            .optional()
            .map_err(sqlite("reading session"))?
            .map(finish_session)
            .transpose()
    }

    /// Up to `limit` sessions, most recently *created* first, optionally only
    /// those of one agent. Ties within a millisecond fall back to insertion
    /// order so the listing is deterministic.
    pub fn list_sessions(
        &self,
        agent: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SessionRow>, StoreError> {
        self.sessions_of(None, agent, limit)
    }

    /// Up to `limit` sessions of `user` (every user's when `None`),
    /// optionally of one agent, most recently created first.
    pub fn sessions_of(
        &self,
        user: Option<&str>,
        agent: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SessionRow>, StoreError> {
        let conn = self.lock()?;
        // Separate statements so each filter can use its index. SQLite
        // counts parameters up to the highest one named, so the limit
        // comes first and each filter takes the next free number.
        let limit = sql_limit(limit);
        let mut values: Vec<&dyn rusqlite::ToSql> = vec![&limit];
        let mut conditions = Vec::new();
        if let Some(user) = &user {
            values.push(user);
            conditions.push(format!("s.user = ?{}", values.len()));
        }
        if let Some(agent) = &agent {
            values.push(agent);
            conditions.push(format!("s.agent = ?{}", values.len()));
        }
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions s {filter} \
                 ORDER BY s.created_ms DESC, s.rowid DESC LIMIT ?1"
            ))
            .map_err(sqlite("preparing session listing"))?;
        let rows = stmt
            .query_map(values.as_slice(), session_from_row)
            .map_err(sqlite("listing sessions"))?;
        rows.map(|r| {
            r.map_err(sqlite("reading session row"))
                .and_then(finish_session)
        })
        .collect()
    }

    /// Appends one message and returns its id. The session check, the insert
    /// and the `updated_ms` touch commit together, so an unknown session
    /// leaves the database untouched.
    pub fn append_message(
        &self,
        session: &str,
        role: &str,
        content_json: &str,
    ) -> Result<i64, StoreError> {
        let mut conn = self.lock()?;
        let now = now_ms();
        // IMMEDIATE takes the write lock up front: a deferred transaction
        // that reads first can hit SQLITE_BUSY_SNAPSHOT under concurrent
        // writers, which the busy timeout does not retry.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite("starting message append"))?;
        let id = append_message_in(&tx, session, role, content_json, now)?;
        tx.commit().map_err(sqlite("committing message append"))?;
        Ok(id)
    }

    /// All messages of a session, oldest first. An unknown session is
    /// [`StoreError::NotFound`], so a resume of a mistyped id is not mistaken
    /// for an empty conversation.
    pub fn messages(&self, session: &str) -> Result<Vec<MessageRow>, StoreError> {
        let mut conn = self.lock()?;
        // One read transaction so the existence check and the rows come from
        // the same snapshot.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(sqlite("starting message read"))?;
        let exists = tx
            .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")
            .map_err(sqlite("preparing session check"))?
            .exists([session])
            .map_err(sqlite("checking session"))?;
        if !exists {
            return Err(StoreError::NotFound(format!("session {session:?}")));
        }
        let rows = {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT id, role, content_json, created_ms FROM messages \
                     WHERE session_id = ?1 ORDER BY id ASC",
                )
                .map_err(sqlite("preparing message read"))?;
            stmt.query_map([session], |row| {
                Ok(MessageRow {
                    id: row.get(0)?,
                    role: row.get(1)?,
                    content_json: row.get(2)?,
                    created_ms: row.get(3)?,
                })
            })
            .map_err(sqlite("reading messages"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(sqlite("reading message row"))?
        };
        tx.commit().map_err(sqlite("ending message read"))?;
        Ok(rows)
    }

    /// Replaces the session's opaque state (loop guard counters etc.).
    /// Whoever runs the session under a lease saves with
    /// [`Store::save_state_leased`] instead, which checks the lease.
    pub fn save_state(&self, session: &str, state_json: &str) -> Result<(), StoreError> {
        save_state_in(&*self.lock()?, session, state_json, now_ms())
    }

    /// Records the tokens one model call of `session` used, under the
    /// session's user (so budgets sum without a join).
    pub fn record_tokens(&self, session: &str, user: &str, tokens: u64) -> Result<(), StoreError> {
        let tokens = i64::try_from(tokens).unwrap_or(i64::MAX);
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "INSERT INTO token_usage (session, user, time_ms, tokens) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(sqlite("preparing token usage insert"))?;
        stmt.execute(params![session, user, now_ms(), tokens])
            .map_err(sqlite("recording token usage"))?;
        Ok(())
    }

    /// Tokens `user`'s sessions used at or after `since_ms` (Unix ms).
    pub fn tokens_since(&self, user: &str, since_ms: i64) -> Result<u64, StoreError> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT COALESCE(SUM(tokens), 0) FROM token_usage WHERE user = ?1 AND time_ms >= ?2",
            )
            .map_err(sqlite("preparing token usage sum"))?;
        let sum: i64 = stmt
            .query_row(params![user, since_ms], |row| row.get(0))
            .map_err(sqlite("summing token usage"))?;
        Ok(u64::try_from(sum).unwrap_or(0))
    }

    /// The durable audit sink, sharing this store's connection.
    pub fn audit_sink(&self) -> SqliteAuditSink {
        SqliteAuditSink::new(self.clone())
    }
}

/// Appends one message in the caller's transaction; its id.
pub(crate) fn append_message_in(
    conn: &Connection,
    session: &str,
    role: &str,
    content_json: &str,
    now: i64,
) -> Result<i64, StoreError> {
    touch_session(conn, session, now)?;
    conn.prepare_cached(
        "INSERT INTO messages (session_id, role, content_json, created_ms) \
         VALUES (?1, ?2, ?3, ?4)",
    )
    .map_err(sqlite("preparing message insert"))?
    .execute(params![session, role, content_json, now])
    .map_err(sqlite("inserting message"))?;
    Ok(conn.last_insert_rowid())
}

/// Replaces the session's state, or reports the session missing.
pub(crate) fn save_state_in(
    conn: &Connection,
    session: &str,
    state_json: &str,
    now: i64,
) -> Result<(), StoreError> {
    let changed = conn
        .prepare_cached(
            "UPDATE sessions SET state_json = ?2, updated_ms = max(updated_ms, ?3) \
             WHERE id = ?1",
        )
        .map_err(sqlite("preparing state save"))?
        .execute(params![session, state_json, now])
        .map_err(sqlite("saving session state"))?;
    if changed == 0 {
        return Err(StoreError::NotFound(format!("session {session:?}")));
    }
    Ok(())
}

/// Bumps `updated_ms` (monotonically) or reports the session missing.
fn touch_session(conn: &Connection, session: &str, now: i64) -> Result<(), StoreError> {
    let changed = conn
        .prepare_cached("UPDATE sessions SET updated_ms = max(updated_ms, ?2) WHERE id = ?1")
        .map_err(sqlite("preparing session touch"))?
        .execute(params![session, now])
        .map_err(sqlite("touching session"))?;
    if changed == 0 {
        return Err(StoreError::NotFound(format!("session {session:?}")));
    }
    Ok(())
}

/// Creates the database file owner-only if it does not exist and tightens it
/// if it does.
///
/// An existing file is never opened here: closing a descriptor of a file
/// drops every POSIX lock this process holds on it, including those of a
/// connection already open on it (a second `Store` in the server, say).
/// Without its shared lock, another process closing its connection thinks
/// it is the last one and deletes the WAL under this one (seen as "disk
/// I/O error" and stale reads). A file another process creates meanwhile
/// is fine: it exists, and is tightened below.
#[cfg(unix)]
fn create_private_file(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let io = |context: &str| {
        let context = format!("{context} {}", path.display());
        move |source| StoreError::Io { context, source }
    };
    if !path.exists() {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(io("creating")(err)),
        }
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io("restricting permissions of"))
}

#[cfg(not(unix))]
fn create_private_file(_path: &Path) -> Result<(), StoreError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisoned_lock_is_an_error_not_a_panic() {
        let store = Store::open_in_memory().unwrap();
        let clone = store.clone();
        let joined = std::thread::spawn(move || {
            let _guard = clone.conn.lock();
            panic!("deliberate panic while holding the connection");
        })
        .join();
        assert!(joined.is_err());
        let err = store.session("x").unwrap_err();
        assert!(matches!(err, StoreError::Poisoned), "{err:?}");
        let sink = store.audit_sink();
        assert!(bulwark_audit::AuditSink::tail(&sink, 1).is_err());
    }

    #[test]
    fn newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.db");
        drop(Store::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        let err = Store::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    }
}
