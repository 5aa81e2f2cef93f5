//! Reading the audit table for verification, fast.
//!
//! Rows come out of SQLite a chunk at a time and are written straight into
//! one reusable buffer in their canonical encoding, borrowing the column
//! values instead of building an owned record per row (eleven allocations
//! each, a quarter of the old verifier's time). Reading runs on other threads
//! than the checking: for a file-backed log, the rows present when the scan
//! starts are read as fixed `seq` ranges by up to [`MAX_READERS`] threads,
//! each with its own read-only connection (besides one on the store's), and
//! hashed there. The SQLite scan was the bottleneck; on two cores this
//! took a full verification of a million rows from about 1.5 s (one reader
//! thread) to about 1 s. The checker still sees every chunk in `seq` order, so it can
//! name the first problem exactly. The store's connection is locked once per
//! chunk it reads and never while waiting, and each reader keeps at most
//! [`QUEUE`] + 1 chunks, so memory stays bounded however long the log is.

use crate::{Store, StoreError, sqlite};
use bulwark_audit::{Decision, Hash, RecordRef, leaf_hash};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use std::ops::{ControlFlow, Range, RangeInclusive};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// Rows read per lock acquisition: the longest the door can be stalled by a
/// verification is the time to read this many rows (a few milliseconds).
pub(crate) const CHUNK: usize = 4096;

/// Chunks read ahead of the checker.
const QUEUE: usize = 2;

/// What a row's `leaf` column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoredLeaf {
    Null,
    Hash(Hash),
    /// Anything but NULL or a 32-byte blob: it can match no leaf.
    Malformed,
}

/// One row as scanned.
pub(crate) struct ScannedRow {
    pub(crate) seq: i64,
    pub(crate) stored: StoredLeaf,
    /// Where the row's canonical encoding (at its own `seq`) lies in the
    /// chunk's buffer, or why the row does not encode.
    pub(crate) encoded: Result<Range<usize>, String>,
    /// The leaf hash of the encoding, once [`Chunk::hash`] ran; all zeros
    /// for a row that does not encode.
    pub(crate) leaf: Hash,
}

/// Consecutive rows in `seq` order, encoded into one buffer.
#[derive(Default)]
pub(crate) struct Chunk {
    bytes: Vec<u8>,
    pub(crate) rows: Vec<ScannedRow>,
    /// For a chunk read as a fixed range: its last seq. Every row up to it
    /// is in this chunk or an earlier one, so if the checker has not reached
    /// it by the chunk's end, a row is missing.
    pub(crate) dense_until: Option<i64>,
}

impl Chunk {
    fn clear(&mut self) {
        self.bytes.clear();
        self.rows.clear();
        self.dense_until = None;
    }

    /// Computes every encodable row's leaf hash.
    pub(crate) fn hash(&mut self) {
        for row in &mut self.rows {
            let bytes = row
                .encoded
                .as_ref()
                .ok()
                .and_then(|r| self.bytes.get(r.clone()));
            match bytes {
                Some(bytes) => row.leaf = leaf_hash(bytes),
                // Unreachable: the ranges are our own. Treat as undecodable
                // rather than panic.
                None if row.encoded.is_ok() => {
                    row.encoded = Err("internal: encoding out of range".to_owned());
                }
                None => {}
            }
        }
    }
}

const SCAN_SQL: &str = "SELECT seq, time_ms, session, agent, user, action, tool, operation, \
     args_digest, decision, reason, detail, duration_us, leaf FROM audit \
     WHERE seq >= ?1 AND seq <= ?2 ORDER BY seq ASC LIMIT ?3";

fn text<'r>(row: &'r rusqlite::Row<'_>, idx: usize, name: &str) -> Result<&'r str, String> {
    match row.get_ref(idx) {
        Ok(ValueRef::Text(bytes)) => {
            std::str::from_utf8(bytes).map_err(|_| format!("field {name} is not valid UTF-8"))
        }
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

/// Appends the canonical encoding of the record in `row` as entry `seq` to
/// `out`, or says why the stored values are not a record (wrong column type,
/// invalid UTF-8, unknown decision, negative duration, oversized field).
fn encode_row(row: &rusqlite::Row<'_>, seq: u64, out: &mut Vec<u8>) -> Result<(), String> {
    let duration = integer(row, 12, "duration_us")?;
    let fields = RecordRef {
        time_ms: integer(row, 1, "time_ms")?,
        session: text(row, 2, "session")?,
        agent: text(row, 3, "agent")?,
        user: text(row, 4, "user")?,
        action: text(row, 5, "action")?,
        tool: text(row, 6, "tool")?,
        operation: text(row, 7, "operation")?,
        args_digest: text(row, 8, "args_digest")?,
        decision: decision(text(row, 9, "decision")?)?,
        reason: text(row, 10, "reason")?,
        detail: text(row, 11, "detail")?,
        duration_us: u64::try_from(duration).map_err(|_| "negative duration".to_owned())?,
    };
    fields.encode_into(seq, out).map_err(|e| e.to_string())
}

/// Replaces `chunk` with up to `limit` rows with `seq >= from`, in `seq`
/// order, encoded but not yet hashed.
pub(crate) fn read_chunk(
    conn: &Connection,
    from: i64,
    limit: usize,
    chunk: &mut Chunk,
) -> Result<(), StoreError> {
    read_rows(conn, from..=i64::MAX, limit, chunk)
}

/// Replaces `chunk` with up to `limit` rows with `seq` in `seqs`.
fn read_rows(
    conn: &Connection,
    seqs: RangeInclusive<i64>,
    limit: usize,
    chunk: &mut Chunk,
) -> Result<(), StoreError> {
    chunk.clear();
    let mut stmt = conn
        .prepare_cached(SCAN_SQL)
        .map_err(sqlite("preparing audit scan"))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut rows = stmt
        .query([*seqs.start(), *seqs.end(), limit])
        .map_err(sqlite("scanning audit log"))?;
    while let Some(row) = rows.next().map_err(sqlite("reading audit row"))? {
        let seq: i64 = row.get(0).map_err(sqlite("reading audit seq"))?;
        let stored = match row.get_ref(13) {
            Ok(ValueRef::Null) => StoredLeaf::Null,
            Ok(ValueRef::Blob(b)) => {
                Hash::try_from(b).map_or(StoredLeaf::Malformed, StoredLeaf::Hash)
            }
            _ => StoredLeaf::Malformed,
        };
        let start = chunk.bytes.len();
        // A negative seq is reported as a gap before its encoding matters.
        let encoded = encode_row(row, u64::try_from(seq).unwrap_or(0), &mut chunk.bytes)
            .map(|()| start..chunk.bytes.len());
        chunk.rows.push(ScannedRow {
            seq,
            stored,
            encoded,
            leaf: [0; 32],
        });
    }
    Ok(())
}

/// Whether the chunk just read may be followed by more rows, and where they
/// start.
fn next_from(chunk: &Chunk) -> Option<i64> {
    let last = chunk.rows.last()?.seq;
    (chunk.rows.len() == CHUNK)
        .then(|| last.checked_add(1))
        .flatten()
}

/// Reads every row with `seq >= from` and hands the chunks, hashed and in
/// order, to `check` until it breaks; returns what it broke with.
///
/// The rows that existed when the scan started are read as fixed `seq`
/// ranges of [`CHUNK`] by up to [`MAX_READERS`] threads at once, each with
/// its own connection to the file besides the store's, hashing what they
/// read. Each such chunk says where its range ends, so `check` can tell a
/// gap even when whole ranges are empty. The rest (rows appended meanwhile,
/// and all of an in-memory or small log) is read after the last seen `seq`
/// by one reader thread, as is everything when no second connection or
/// thread can be had.
pub(crate) fn scan<B>(
    store: &Store,
    from: i64,
    mut check: impl FnMut(&Chunk) -> ControlFlow<B>,
) -> Result<Option<B>, StoreError> {
    let (max_seq, path) = {
        let conn = store.lock()?;
        let max_seq: i64 = conn
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM audit")
            .map_err(sqlite("preparing audit max seq"))?
            .query_row([], |row| row.get(0))
            .map_err(sqlite("reading audit max seq"))?;
        let path = conn.path().filter(|p| !p.is_empty()).map(PathBuf::from);
        (max_seq, path)
    };
    // The ranges start at seq 1 (or `from`); the first also takes any
    // lower seq, which can only be a tampered row and is reported as such.
    let base = from.max(1);
    let ranges = u64::try_from(max_seq.saturating_sub(base).saturating_add(1))
        .map_or(0, |rows| rows / CHUNK as u64);
    let readers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_READERS);
    let mut tail = from;
    if ranges >= 2 && readers >= 2 {
        let extra: Vec<Connection> = path
            .as_deref()
            .map(|path| (1..readers).filter_map(|_| open_reader(path)).collect())
            .unwrap_or_default();
        if !extra.is_empty() {
            let plan = Ranges {
                from,
                base,
                count: ranges,
            };
            match scan_ranges(store, extra, &plan, &mut check)? {
                Ranged::Broke(b) => return Ok(Some(b)),
                Ranged::Done => tail = plan.seqs(ranges).start().to_owned(),
                Ranged::NoThreads => {}
            }
        }
    }
    scan_tail(store, tail, check)
}

/// Most threads reading ranges at once. Beyond four the checker, which
/// must see the chunks in order, becomes the bottleneck.
const MAX_READERS: usize = 4;

/// A second, read-only connection to the store's file for a range reader.
fn open_reader(path: &Path) -> Option<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).ok()?;
    conn.busy_timeout(crate::schema::BUSY_TIMEOUT).ok()?;
    Some(conn)
}

/// The fixed `seq` ranges the rows present at the start are read in.
struct Ranges {
    from: i64,
    base: i64,
    count: u64,
}

impl Ranges {
    /// The seqs of range `k`: [`CHUNK`] of them from `base`, except that the
    /// first starts at `from`.
    fn seqs(&self, k: u64) -> RangeInclusive<i64> {
        let offset = |k: u64| {
            i64::try_from(k.saturating_mul(CHUNK as u64))
                .ok()
                .and_then(|o| self.base.checked_add(o))
                .unwrap_or(i64::MAX)
        };
        let start = if k == 0 { self.from } else { offset(k) };
        start..=offset(k + 1).saturating_sub(1)
    }
}

enum Ranged<B> {
    Broke(B),
    Done,
    NoThreads,
}

/// Where a range reader reads from.
enum Source<'s> {
    /// The store's connection, locked per chunk.
    Store(&'s Store),
    /// A connection of the reader's own.
    Own(Connection),
}

/// Reads the ranges of `plan` with one reader on the store's connection and
/// one on each of `extra`, range `k` by reader `k % readers`, and checks
/// them in order.
fn scan_ranges<B>(
    store: &Store,
    extra: Vec<Connection>,
    plan: &Ranges,
    check: &mut impl FnMut(&Chunk) -> ControlFlow<B>,
) -> Result<Ranged<B>, StoreError> {
    let readers = 1 + extra.len();
    let sources = std::iter::once(Source::Store(store)).chain(extra.into_iter().map(Source::Own));
    std::thread::scope(|scope| {
        let mut queues = Vec::with_capacity(readers);
        let mut handles = Vec::with_capacity(readers);
        for (first, source) in sources.enumerate() {
            let (tx, rx) = mpsc::sync_channel::<Chunk>(QUEUE);
            let spawned = std::thread::Builder::new()
                .name("bulwark-audit-scan".into())
                .spawn_scoped(scope, move || {
                    read_ranges(source, plan, first as u64, readers as u64, &tx)
                });
            match spawned {
                Ok(handle) => handles.push(handle),
                // Readers already started see their queue closed and stop.
                Err(_) => return Ok(Ranged::NoThreads),
            }
            queues.push(rx);
        }
        let mut outcome = Ranged::Done;
        for k in 0..plan.count {
            let queue = usize::try_from(k % readers as u64)
                .ok()
                .and_then(|q| queues.get(q));
            // A closed queue: that reader failed; its error is collected below.
            let Some(Ok(chunk)) = queue.map(mpsc::Receiver::recv) else {
                break;
            };
            if let ControlFlow::Break(b) = check(&chunk) {
                outcome = Ranged::Broke(b);
                break;
            }
        }
        // Closing the queues stops readers still reading ahead.
        drop(queues);
        let mut failed = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(_) => {
                    failed = failed.or(Some(StoreError::Failed(
                        "an audit scan thread panicked".to_owned(),
                    )));
                }
            }
        }
        match (outcome, failed) {
            (Ranged::Broke(b), _) => Ok(Ranged::Broke(b)),
            (_, Some(e)) => Err(e),
            (outcome, None) => Ok(outcome),
        }
    })
}

/// A range reader: reads and hashes ranges `first`, `first + step`, ...
fn read_ranges(
    source: Source<'_>,
    plan: &Ranges,
    first: u64,
    step: u64,
    queue: &mpsc::SyncSender<Chunk>,
) -> Result<(), StoreError> {
    let mut k = first;
    while k < plan.count {
        let seqs = plan.seqs(k);
        let mut chunk = Chunk::default();
        match &source {
            Source::Store(store) => read_rows(&*store.lock()?, seqs.clone(), CHUNK, &mut chunk)?,
            Source::Own(conn) => read_rows(conn, seqs.clone(), CHUNK, &mut chunk)?,
        }
        chunk.dense_until = Some(*seqs.end());
        chunk.hash();
        if queue.send(chunk).is_err() {
            return Ok(());
        }
        k += step;
    }
    Ok(())
}

/// Reads every row with `seq >= from` after the last one seen, a chunk at a
/// time, on a second thread while this one checks; if no thread can be
/// started, reading and checking alternate here.
fn scan_tail<B>(
    store: &Store,
    from: i64,
    mut check: impl FnMut(&Chunk) -> ControlFlow<B>,
) -> Result<Option<B>, StoreError> {
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = mpsc::sync_channel::<Chunk>(QUEUE);
        let (empty_tx, empty_rx) = mpsc::channel::<Chunk>();
        let reader = std::thread::Builder::new()
            .name("bulwark-audit-scan".into())
            .spawn_scoped(scope, move || read_ahead(store, from, &full_tx, &empty_rx));
        let Ok(reader) = reader else {
            return scan_here(store, from, check);
        };
        let mut outcome = None;
        for mut chunk in full_rx {
            chunk.hash();
            if let ControlFlow::Break(b) = check(&chunk) {
                outcome = Some(b);
                break;
            }
            // The reader may be gone already; then the chunk is just freed.
            let _ = empty_tx.send(chunk);
        }
        // Leaving the loop dropped the receiver, so a reader blocked on a
        // full queue wakes up, sees it, and stops.
        match reader.join() {
            Ok(read) => read.map(|()| outcome),
            Err(_) => Err(StoreError::Failed(
                "the audit scan thread panicked".to_owned(),
            )),
        }
    })
}

/// The tail reader thread: chunks into `full` until the log ends, the
/// checker stops listening, or reading fails.
fn read_ahead(
    store: &Store,
    mut from: i64,
    full: &mpsc::SyncSender<Chunk>,
    empty: &mpsc::Receiver<Chunk>,
) -> Result<(), StoreError> {
    loop {
        let mut chunk = empty.try_recv().unwrap_or_default();
        read_chunk(&*store.lock()?, from, CHUNK, &mut chunk)?;
        let next = next_from(&chunk);
        if chunk.rows.is_empty() || full.send(chunk).is_err() {
            return Ok(());
        }
        match next {
            Some(seq) => from = seq,
            None => return Ok(()),
        }
    }
}

/// [`scan_tail`] without a second thread.
fn scan_here<B>(
    store: &Store,
    mut from: i64,
    mut check: impl FnMut(&Chunk) -> ControlFlow<B>,
) -> Result<Option<B>, StoreError> {
    let mut chunk = Chunk::default();
    loop {
        read_chunk(&*store.lock()?, from, CHUNK, &mut chunk)?;
        chunk.hash();
        if let ControlFlow::Break(b) = check(&chunk) {
            return Ok(Some(b));
        }
        match next_from(&chunk) {
            Some(seq) => from = seq,
            None => return Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulwark_audit::{AuditRecord, AuditSink};

    fn record(n: u64) -> AuditRecord {
        AuditRecord {
            time_ms: 1_700_000_000_000 + n as i64,
            session: "s".into(),
            agent: "a".into(),
            user: "u".into(),
            action: bulwark_audit::Action::ToolCall,
            tool: "shell".into(),
            operation: "exec".into(),
            args_digest: String::new(),
            decision: Decision::Allowed,
            reason: bulwark_audit::Reason::Ok,
            detail: format!("{n}"),
            duration_us: n,
        }
    }

    /// Every row once, in order; ranges where there are threads and a file,
    /// and the tail read after them.
    #[test]
    fn rows_come_in_order_through_ranges_and_tail() {
        let rows = 2 * CHUNK as u64 + 10;
        let dir = tempfile::tempdir().unwrap();
        for store in [
            Store::open(&dir.path().join("scan.db")).unwrap(),
            Store::open_in_memory().unwrap(),
        ] {
            let sink = store.audit_sink();
            for n in 0..rows {
                sink.record(&record(n)).unwrap();
            }
            sink.flush().unwrap();
            let file = store.lock().unwrap().path().is_some_and(|p| !p.is_empty());
            for from in [i64::MIN, 1, 7] {
                let mut seqs = Vec::new();
                let mut ranged = 0;
                let outcome: Option<()> = scan(&store, from, |chunk| {
                    ranged += usize::from(chunk.dense_until.is_some());
                    for row in &chunk.rows {
                        let leaf = record(row.seq as u64 - 1).leaf_hash(row.seq as u64);
                        assert_eq!(Ok(row.leaf), leaf);
                        seqs.push(row.seq);
                    }
                    ControlFlow::Continue(())
                })
                .unwrap();
                assert_eq!(outcome, None);
                let first = from.max(1);
                assert_eq!(seqs, (first..=rows as i64).collect::<Vec<_>>());
                // Two full ranges (from 1 or 7), then the tail; in memory
                // or on one core, the tail reader alone.
                let threads = std::thread::available_parallelism().map_or(1, usize::from);
                let expected = if file && threads > 1 { 2 } else { 0 };
                assert_eq!(ranged, expected, "from {from}");
            }
        }
    }
}
