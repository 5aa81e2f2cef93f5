//! Verification of the Merkle-backed audit log.
//!
//! The verifier walks the `audit` table in `seq` order, a chunk at a time:
//! the connection lock is held only while a chunk is read, never while it is
//! hashed, so verifying a large log stalls the door for at most one chunk
//! read, and memory stays bounded by the chunk size. Rows appended while a
//! verification runs are included, which is harmless: the log only grows at
//! the end.
//!
//! It reports the first problem only: after one, every later root differs
//! too, so further findings would be noise.

use crate::{Store, StoreError, sqlite};
use bulwark_audit::merkle::HASH_LEN;
use bulwark_audit::{AuditRecord, Checkpoint, CompactRange, Decision, Hash};
use rusqlite::Connection;
use rusqlite::types::ValueRef;

/// Rows read per lock acquisition.
pub(crate) const CHUNK: i64 = 4096;

/// The result of [`SqliteAuditSink::verify`](crate::SqliteAuditSink::verify).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Records that verified: all of them when `problem` is `None`, else the
    /// prefix before the problem.
    pub records: u64,
    /// Merkle root over those `records` leaves.
    pub root: Hash,
    /// Checkpoints (stored, plus the external one for `verify_against`)
    /// whose root was compared and matched.
    pub checkpoints_checked: usize,
    /// The first problem found, if any.
    pub problem: Option<Problem>,
}

impl VerifyReport {
    /// True when no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problem.is_none()
    }
}

/// What is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// For row problems, the 0-based leaf index of the offending row (its
    /// expected `seq` is `index + 1`). For checkpoint problems, the tree size
    /// at which the root does not match, or (for a checkpoint beyond the
    /// log) the number of records present.
    pub index: u64,
    pub kind: ProblemKind,
    /// Human-readable detail; names sequence numbers and sizes, never
    /// record contents.
    pub what: String,
}

/// The class of a [`Problem`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProblemKind {
    /// The row at this index does not carry `seq = index + 1`: a row was
    /// deleted, inserted or renumbered.
    SeqGap,
    /// The row has no stored leaf hash.
    MissingLeaf,
    /// The row's values cannot be turned back into a record (bad decision,
    /// negative duration, wrong column type, invalid UTF-8, oversized field).
    Undecodable,
    /// The leaf hash recomputed from the row differs from the stored one.
    LeafMismatch,
    /// The root over the first `index` leaves differs from a checkpoint's.
    CheckpointMismatch,
    /// A checkpoint covers more records than the log holds: truncation.
    CheckpointBeyondLog,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} at {}: {}", self.kind, self.index, self.what)
    }
}

/// One audit row as stored, decoded as far as it decodes.
pub(crate) struct LogRow {
    pub(crate) seq: i64,
    /// `None` when the column is NULL; a non-blob value reads as empty.
    pub(crate) leaf: Option<Vec<u8>>,
    record: Result<AuditRecord, String>,
}

impl LogRow {
    pub(crate) fn record(&self) -> Result<&AuditRecord, &str> {
        self.record.as_ref().map_err(String::as_str)
    }
}

fn text(row: &rusqlite::Row<'_>, idx: usize, name: &str) -> Result<String, String> {
    match row.get_ref(idx) {
        Ok(ValueRef::Text(bytes)) => std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| format!("field {name} is not valid UTF-8")),
        _ => Err(format!("field {name} is not text")),
    }
}

fn integer(row: &rusqlite::Row<'_>, idx: usize, name: &str) -> Result<i64, String> {
    match row.get_ref(idx) {
        Ok(ValueRef::Integer(v)) => Ok(v),
        _ => Err(format!("field {name} is not an integer")),
    }
}

fn decision(s: &str) -> Result<Decision, String> {
    Ok(match s {
        "allowed" => Decision::Allowed,
        "denied" => Decision::Denied,
        "approved" => Decision::Approved,
        "failed" => Decision::Failed,
        "warned" => Decision::Warned,
        _ => return Err("unknown decision".to_owned()),
    })
}

fn decode(row: &rusqlite::Row<'_>) -> Result<AuditRecord, String> {
    let duration = integer(row, 12, "duration_us")?;
    Ok(AuditRecord {
        time_ms: integer(row, 1, "time_ms")?,
        session: text(row, 2, "session")?,
        agent: text(row, 3, "agent")?,
        user: text(row, 4, "user")?,
        action: text(row, 5, "action")?,
        tool: text(row, 6, "tool")?,
        operation: text(row, 7, "operation")?,
        args_digest: text(row, 8, "args_digest")?,
        decision: decision(&text(row, 9, "decision")?)?,
        reason: text(row, 10, "reason")?,
        detail: text(row, 11, "detail")?,
        duration_us: u64::try_from(duration).map_err(|_| "negative duration".to_owned())?,
    })
}

/// Up to `limit` rows with `seq >= from`, in `seq` order.
pub(crate) fn read_rows(
    conn: &Connection,
    from: i64,
    limit: i64,
) -> Result<Vec<LogRow>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, time_ms, session, agent, user, action, tool, operation, args_digest, \
             decision, reason, detail, duration_us, leaf FROM audit \
             WHERE seq >= ?1 ORDER BY seq ASC LIMIT ?2",
        )
        .map_err(sqlite("preparing audit scan"))?;
    let mut rows = stmt
        .query([from, limit])
        .map_err(sqlite("scanning audit log"))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sqlite("reading audit row"))? {
        let seq: i64 = row.get(0).map_err(sqlite("reading audit seq"))?;
        let leaf = match row.get_ref(13) {
            Ok(ValueRef::Null) => None,
            Ok(ValueRef::Blob(b)) => Some(b.to_vec()),
            _ => Some(Vec::new()),
        };
        out.push(LogRow {
            seq,
            leaf,
            record: decode(row),
        });
    }
    Ok(out)
}

/// A root the log must reproduce at `size` leaves.
struct Target {
    size: u64,
    root: Vec<u8>,
    label: String,
}

fn stored_targets(store: &Store) -> Result<Vec<Target>, StoreError> {
    let conn = store.lock()?;
    let mut stmt = conn
        .prepare_cached("SELECT size, root FROM audit_checkpoint ORDER BY size ASC")
        .map_err(sqlite("preparing checkpoint scan"))?;
    let rows = stmt
        .query_map([], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, Vec<u8>>(1)?))
        })
        .map_err(sqlite("reading checkpoints"))?;
    let mut out = Vec::new();
    for row in rows {
        let (size, root) = row.map_err(sqlite("reading checkpoint row"))?;
        // A negative size cannot be reached by any log: compare it never,
        // but as a target beyond everything it is reported.
        let size = u64::try_from(size).unwrap_or(u64::MAX);
        out.push(Target {
            size,
            root,
            label: format!("stored checkpoint at size {size}"),
        });
    }
    Ok(out)
}

/// Verifies the log against its stored checkpoints and, if given, one more.
pub(crate) fn run(
    store: &Store,
    external: Option<&Checkpoint>,
) -> Result<VerifyReport, StoreError> {
    let mut targets = stored_targets(store)?;
    if let Some(cp) = external {
        targets.push(Target {
            size: cp.size,
            root: cp.root.to_vec(),
            label: format!("external checkpoint at size {}", cp.size),
        });
    }
    targets.sort_by_key(|t| t.size);
    let mut walk = Walk {
        range: CompactRange::new(),
        targets: targets.into_iter().peekable(),
        checked: 0,
    };
    let problem = walk.scan(store)?;
    Ok(VerifyReport {
        records: walk.range.size(),
        root: walk.range.root(),
        checkpoints_checked: walk.checked,
        problem,
    })
}

struct Walk {
    range: CompactRange,
    targets: std::iter::Peekable<std::vec::IntoIter<Target>>,
    checked: usize,
}

impl Walk {
    fn scan(&mut self, store: &Store) -> Result<Option<Problem>, StoreError> {
        if let Some(p) = self.check_targets() {
            return Ok(Some(p));
        }
        let mut from = i64::MIN;
        loop {
            let rows = read_rows(&*store.lock()?, from, CHUNK)?;
            let Some(last) = rows.last() else { break };
            let done = last.seq == i64::MAX;
            from = last.seq.saturating_add(1);
            for row in &rows {
                if let Some(p) = self.row(row).or_else(|| self.check_targets()) {
                    return Ok(Some(p));
                }
            }
            if done || (rows.len() as i64) < CHUNK {
                break;
            }
        }
        let records = self.range.size();
        Ok(self.targets.next().map(|t| Problem {
            index: records,
            kind: ProblemKind::CheckpointBeyondLog,
            what: format!(
                "{} but the log holds only {records} records (truncated?)",
                t.label
            ),
        }))
    }

    /// Checks one row and appends its leaf.
    fn row(&mut self, row: &LogRow) -> Option<Problem> {
        let index = self.range.size();
        let seq = index + 1;
        let problem = |kind, what: String| Some(Problem { index, kind, what });
        if u64::try_from(row.seq) != Ok(seq) {
            return problem(
                ProblemKind::SeqGap,
                format!("expected seq {seq}, found seq {}", row.seq),
            );
        }
        let Some(stored) = &row.leaf else {
            return problem(
                ProblemKind::MissingLeaf,
                format!("seq {seq} has no leaf hash"),
            );
        };
        let record = match row.record() {
            Ok(r) => r,
            Err(e) => return problem(ProblemKind::Undecodable, format!("seq {seq}: {e}")),
        };
        let leaf = match record.leaf_hash(seq) {
            Ok(l) => l,
            Err(e) => return problem(ProblemKind::Undecodable, format!("seq {seq}: {e}")),
        };
        if stored.as_slice() != leaf.as_slice() {
            return problem(
                ProblemKind::LeafMismatch,
                format!("seq {seq}: stored leaf hash does not match the record"),
            );
        }
        match self.range.append(leaf) {
            Ok(()) => None,
            Err(e) => problem(ProblemKind::SeqGap, e.to_string()),
        }
    }

    /// Compares every target at the current size.
    fn check_targets(&mut self) -> Option<Problem> {
        let size = self.range.size();
        while let Some(t) = self.targets.next_if(|t| t.size <= size) {
            let root = self.range.root();
            if t.size < size || t.root.len() != HASH_LEN || t.root.as_slice() != root.as_slice() {
                return Some(Problem {
                    index: t.size,
                    kind: ProblemKind::CheckpointMismatch,
                    what: format!(
                        "the log's root at size {} differs from the {}",
                        t.size, t.label
                    ),
                });
            }
            self.checked += 1;
        }
        None
    }
}
