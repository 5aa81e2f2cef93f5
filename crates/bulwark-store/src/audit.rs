//! The durable audit sink: one SQLite row per door decision.
//!
//! `record` sits on the door's hot path (one call per tool call, total door
//! overhead budget under 20 µs), so through the [`AuditSink`] trait it only
//! queues the record; a writer thread commits batches (see `group_commit`)
//! and `flush` waits for them. [`SqliteAuditSink::append`] is the
//! synchronous path that returns the assigned sequence number.
//!
//! "Durable" here means the standard `synchronous=NORMAL` in WAL mode gives:
//! once `flush` (or `append`) returns `Ok`, the rows survive a crash of this
//! process; an OS crash or power loss may drop the most recent commits (never
//! corrupt older ones). `FULL` would add an fsync per commit. WAL checkpoints
//! run on a background thread (see `checkpoint`), never inside a write.

use crate::group_commit::GroupCommit;
use crate::{Store, StoreError, sql_limit, sqlite, to_u64};
use bulwark_audit::{AuditError, AuditRecord, AuditSink, Decision, Hash, RecordRef, StoredRecord};
use rusqlite::{Row, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, LazyLock};

/// Filter for [`SqliteAuditSink::query`]. Results are oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    /// Only records of this session.
    pub session: Option<String>,
    /// Only records with `seq > since_seq` (exclusive), so a follower can pass
    /// the last sequence it saw and never receive it twice.
    pub since_seq: Option<u64>,
    /// At most this many records (the oldest matching ones).
    pub limit: usize,
}

/// [`AuditSink`] backed by the store's `audit` table. Cloning shares the
/// connection and the writer thread; the last clone to go drains the queue.
#[derive(Clone)]
pub struct SqliteAuditSink {
    pub(crate) store: Store,
    pub(crate) batches: Arc<GroupCommit>,
}

impl std::fmt::Debug for SqliteAuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteAuditSink")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

/// Rows per multi-row INSERT, largest first; a batch goes out in statements
/// of these sizes (so a remainder costs at most three of each smaller one).
///
/// Some of SQLite's work is per statement, not per row: the statement
/// journal that the append-only trigger's possible `RAISE` requires, and the
/// ephemeral table built for the `decision IN (...)` CHECK. With one
/// statement per row that was about a third of the append cost (perf:
/// statement setup and teardown, `sqlite3BtreeOpen` of the ephemeral table,
/// the statement savepoint); sixty-four rows share it.
const ROWS_PER_INSERT: [usize; 4] = [64, 16, 4, 1];

/// Columns bound per row, in [`bind_row`] order.
const INSERT_COLUMNS: &str = "seq, time_ms, session, agent, user, action, tool, operation, \
     args_digest, decision, reason, detail, duration_us, leaf";
const PARAMS_PER_ROW: usize = 14;

/// The INSERT statements of [`ROWS_PER_INSERT`], built once: the statement
/// cache is keyed by SQL text.
static INSERT_SQL: LazyLock<[String; 4]> = LazyLock::new(|| {
    ROWS_PER_INSERT.map(|rows| {
        let row = format!("({})", vec!["?"; PARAMS_PER_ROW].join(", "));
        format!(
            "INSERT INTO audit ({INSERT_COLUMNS}) VALUES {}",
            vec![row; rows].join(", ")
        )
    })
});

/// The highest sequence number stored (0 for an empty log). Called inside
/// the write transaction, so no other writer can take the next one.
fn max_seq(conn: &rusqlite::Connection) -> Result<u64, StoreError> {
    let max: i64 = conn
        .prepare_cached("SELECT coalesce(max(seq), 0) FROM audit")
        .map_err(sqlite("preparing audit max seq"))?
        .query_row([], |row| row.get(0))
        .map_err(sqlite("reading audit max seq"))?;
    to_u64(max, "audit sequence")
}

/// Binds `r` as entry `seq`, with its leaf hash, to the parameters of row
/// `row` of a multi-row INSERT.
fn bind_row(
    stmt: &mut rusqlite::CachedStatement<'_>,
    row: usize,
    seq: u64,
    r: &AuditRecord,
) -> Result<(), StoreError> {
    // SQLite integers are signed. A duration past i64::MAX µs (292k years)
    // is nonsense, but refusing it would lose the audit record, so it
    // saturates instead, and the leaf commits to the value actually stored.
    let mut fields = r.fields();
    fields.duration_us = fields.duration_us.min(i64::MAX as u64);
    let duration = i64::try_from(fields.duration_us).unwrap_or(i64::MAX);
    let leaf = fields
        .leaf_hash(seq)
        .map_err(|e| StoreError::Failed(format!("audit record {seq} cannot be encoded: {e}")))?;
    let seq_sql = i64::try_from(seq)
        .map_err(|_| StoreError::Failed("audit sequence exhausted".to_owned()))?;
    let base = row * PARAMS_PER_ROW;
    bind_values(stmt, base, seq_sql, &fields, duration, &leaf)
        .map_err(sqlite("binding audit record"))
}

/// The parameters of one row, in [`INSERT_COLUMNS`] order from `base + 1`.
fn bind_values(
    stmt: &mut rusqlite::CachedStatement<'_>,
    base: usize,
    seq: i64,
    fields: &RecordRef<'_>,
    duration: i64,
    leaf: &Hash,
) -> rusqlite::Result<()> {
    stmt.raw_bind_parameter(base + 1, seq)?;
    stmt.raw_bind_parameter(base + 2, fields.time_ms)?;
    let texts = [
        fields.session,
        fields.agent,
        fields.user,
        fields.action,
        fields.tool,
        fields.operation,
        fields.args_digest,
        fields.decision.as_str(),
        fields.reason,
        fields.detail,
    ];
    for (i, text) in texts.into_iter().enumerate() {
        stmt.raw_bind_parameter(base + 3 + i, text)?;
    }
    stmt.raw_bind_parameter(base + 13, duration)?;
    stmt.raw_bind_parameter(base + 14, &leaf[..])
}

/// Commits `batch` in one transaction: all of it or none. Returns the
/// sequence number of the first record. `committed` runs once the commit
/// succeeded, while the connection is still locked.
pub(crate) fn insert_batch(
    store: &Store,
    batch: &[AuditRecord],
    committed: impl FnOnce(),
) -> Result<u64, StoreError> {
    let mut conn = store.lock()?;
    // IMMEDIATE: the max(seq) read and the inserts must not interleave with
    // another process's writer.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite("starting audit batch"))?;
    let first = append_in_tx(&tx, batch)?;
    tx.commit().map_err(sqlite("committing audit batch"))?;
    committed();
    Ok(first)
}

/// Appends `batch` inside a write transaction the caller already holds (it
/// must be IMMEDIATE or have written already, so that no other writer can
/// take the same sequence numbers), and returns the first sequence number.
/// Lets another table's write and its audit records commit together.
pub(crate) fn append_in_tx(
    tx: &rusqlite::Connection,
    batch: &[AuditRecord],
) -> Result<u64, StoreError> {
    let first = max_seq(tx)? + 1;
    let mut rest = batch;
    let mut seq = first;
    for (rows, sql) in ROWS_PER_INSERT.iter().zip(INSERT_SQL.iter()) {
        if rest.len() < *rows {
            continue;
        }
        let mut stmt = tx
            .prepare_cached(sql)
            .map_err(sqlite("preparing audit insert"))?;
        while rest.len() >= *rows {
            let (now, later) = rest.split_at(*rows);
            for (row, record) in now.iter().enumerate() {
                bind_row(&mut stmt, row, seq + row as u64, record)?;
            }
            stmt.raw_execute()
                .map_err(sqlite("inserting audit records"))?;
            seq += *rows as u64;
            rest = later;
        }
    }
    Ok(first)
}

const COLUMNS: &str = "seq, time_ms, session, agent, user, action, tool, operation, \
     args_digest, decision, reason, detail, duration_us";

fn parse_decision(s: &str) -> Result<Decision, StoreError> {
    Ok(match s {
        "allowed" => Decision::Allowed,
        "denied" => Decision::Denied,
        "approved" => Decision::Approved,
        "failed" => Decision::Failed,
        "warned" => Decision::Warned,
        other => {
            return Err(StoreError::Corrupt(format!(
                "unknown audit decision {other:?}"
            )));
        }
    })
}

/// Raw column values; conversion that can fail on bad data happens in
/// [`RawRecord::into_stored`] so it yields a `StoreError`, not a SQLite one.
struct RawRecord {
    seq: i64,
    decision: String,
    duration_us: i64,
    record: AuditRecord,
}

fn raw_from_row(row: &Row<'_>) -> rusqlite::Result<RawRecord> {
    Ok(RawRecord {
        seq: row.get(0)?,
        decision: row.get(9)?,
        duration_us: row.get(12)?,
        record: AuditRecord {
            time_ms: row.get(1)?,
            session: row.get(2)?,
            agent: row.get(3)?,
            user: row.get(4)?,
            action: row.get::<_, String>(5)?.into(),
            tool: row.get(6)?,
            operation: row.get(7)?,
            args_digest: row.get(8)?,
            // Placeholder, replaced from `decision` in `into_stored`.
            decision: Decision::Warned,
            reason: row.get::<_, String>(10)?.into(),
            detail: row.get(11)?,
            duration_us: 0,
        },
    })
}

impl RawRecord {
    fn into_stored(self) -> Result<StoredRecord, StoreError> {
        let mut record = self.record;
        record.decision = parse_decision(&self.decision)?;
        record.duration_us = to_u64(self.duration_us, "audit duration")?;
        Ok(StoredRecord {
            seq: to_u64(self.seq, "audit sequence")?,
            record,
        })
    }
}

fn to_audit_error(e: StoreError) -> AuditError {
    AuditError::Store(e.to_string())
}

impl SqliteAuditSink {
    pub(crate) fn new(store: Store) -> Self {
        let batches = Arc::new(GroupCommit::start(store.clone()));
        Self { store, batches }
    }

    /// Appends one record and returns its sequence number (1, 2, 3, ...).
    ///
    /// Records queued by [`AuditSink::record`] before this call may still be
    /// uncommitted; they get later sequence numbers than this one.
    pub fn append(&self, r: &AuditRecord) -> Result<u64, StoreError> {
        insert_batch(&self.store, std::slice::from_ref(r), || {})
    }

    /// The newest `limit` records, oldest first.
    pub fn newest(&self, limit: usize) -> Result<Vec<StoredRecord>, StoreError> {
        let conn = self.store.lock()?;
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM audit ORDER BY seq DESC LIMIT ?1"
            ))
            .map_err(sqlite("preparing audit tail"))?;
        let mut out = stmt
            .query_map([sql_limit(limit)], raw_from_row)
            .map_err(sqlite("reading audit tail"))?
            .map(|r| {
                r.map_err(sqlite("reading audit row"))
                    .and_then(RawRecord::into_stored)
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.reverse();
        Ok(out)
    }

    /// Records matching `q`, oldest first.
    pub fn query(&self, q: &AuditQuery) -> Result<Vec<StoredRecord>, StoreError> {
        // Read-your-writes: what this sink accepted is committed first.
        self.batches.flush()?;
        // A `since_seq` beyond i64::MAX cannot be exceeded by any row.
        let since = match q.since_seq {
            None => 0,
            Some(s) => match i64::try_from(s) {
                Ok(s) => s,
                Err(_) => return Ok(Vec::new()),
            },
        };
        let limit = sql_limit(q.limit);
        let conn = self.store.lock()?;
        // Two statements rather than `?2 IS NULL OR session = ?2`, so that a
        // future (session, seq) index is usable (the planner cannot see
        // through that OR). The unscoped statement leaves ?2 unused; SQLite
        // allows gaps in numbered parameters.
        let (sql, session) = match q.session.as_deref() {
            Some(session) => (
                format!(
                    "SELECT {COLUMNS} FROM audit WHERE session = ?2 AND seq > ?1 \
                     ORDER BY seq ASC LIMIT ?3"
                ),
                session,
            ),
            None => (
                format!(
                    "SELECT {COLUMNS} FROM audit WHERE seq > ?1 \
                     ORDER BY seq ASC LIMIT ?3"
                ),
                "",
            ),
        };
        let mut stmt = conn
            .prepare_cached(&sql)
            .map_err(sqlite("preparing audit query"))?;
        stmt.query_map(params![since, session, limit], raw_from_row)
            .map_err(sqlite("querying audit log"))?
            .map(|r| {
                r.map_err(sqlite("reading audit row"))
                    .and_then(RawRecord::into_stored)
            })
            .collect()
    }
}

impl AuditSink for SqliteAuditSink {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        if !self.batches.has_writer() {
            return self.append(record).map(|_| ()).map_err(to_audit_error);
        }
        self.batches.enqueue(record.clone()).map_err(to_audit_error)
    }

    fn flush(&self) -> Result<(), AuditError> {
        self.batches.flush().map_err(to_audit_error)
    }

    fn tail(&self, limit: usize) -> Result<Vec<StoredRecord>, AuditError> {
        self.flush()?;
        self.newest(limit).map_err(to_audit_error)
    }
}
