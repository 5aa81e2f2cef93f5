//! Verification of the Merkle-backed audit log.
//!
//! Two walks share one checker:
//! - the full walk recomputes every leaf from its row, in `seq` order, and
//!   compares the root (and, since schema v3, the frontier) at every stored
//!   checkpoint. It detects any edit, deletion, insertion or reordering of
//!   rows, and any stored checkpoint the rows do not reproduce;
//! - the incremental walk starts from the latest stored checkpoint's
//!   frontier (after checking it reproduces that checkpoint's root) and
//!   recomputes only the rows after it. It costs O(new rows), and detects
//!   problems in those rows, a truncation below the checkpoint, and a
//!   changed last row of the checkpoint; it cannot detect an edit of an
//!   earlier row, which only the full walk re-reads.
//!
//! Rows are read a chunk at a time on a second thread (see `scan`) and
//! checked in order here, so the first problem is reported at its exact
//! index. Rows appended while a verification runs are included, which is
//! harmless: the log only grows at the end. Only the first problem is
//! reported: after one, every later root differs too, so further findings
//! would be noise.

use crate::scan::{self, Chunk, ScannedRow, StoredLeaf};
use crate::{Store, StoreError, sqlite};
use bulwark_audit::merkle::HASH_LEN;
use bulwark_audit::{Checkpoint, CompactRange, Hash};
use std::ops::ControlFlow;

/// The result of [`SqliteAuditSink::verify`](crate::SqliteAuditSink::verify)
/// and its incremental variants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Records that verified: all of them when `problem` is `None`, else the
    /// prefix before the problem. For [`Coverage::SinceCheckpoint`] this
    /// includes the checkpoint's records, which were taken on trust.
    pub records: u64,
    /// Merkle root over those `records` leaves.
    pub root: Hash,
    /// Checkpoints (stored, plus the external one for `verify_against`)
    /// whose root was compared and matched. For an incremental check, the
    /// starting checkpoint counts once its frontier reproduced its root.
    pub checkpoints_checked: usize,
    /// Stored checkpoints whose signed note was checked and failed (bad or
    /// untrusted signature, another origin, or a size or root other than
    /// the row's). They are never counted as matching, and the first one is
    /// a [`ProblemKind::CheckpointSignature`] problem. Always 0 when no
    /// signatures were checked ([`SqliteAuditSink::verify`](crate::SqliteAuditSink::verify)).
    pub bad_signatures: usize,
    /// The first problem found, if any.
    pub problem: Option<Problem>,
    /// Which rows were re-read.
    pub coverage: Coverage,
}

impl VerifyReport {
    /// True when no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problem.is_none()
    }
}

/// Which part of the log a [`VerifyReport`] re-read from its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Coverage {
    /// Every row, and every stored checkpoint compared: a full verification.
    Full,
    /// An incremental check was asked for, but no stored checkpoint could
    /// anchor it, so every row was re-read: as strong as [`Coverage::Full`].
    FullFallback {
        /// Why the latest checkpoint was not usable (none stored, stored
        /// before frontiers were kept, frontier or signature does not check).
        reason: String,
    },
    /// Only the rows after the stored checkpoint of `size` leaves (plus that
    /// checkpoint's last row); the first `size` leaves are represented by the
    /// checkpoint's frontier, which reproduced its root. An edit to a row
    /// before it is not detected by this check.
    SinceCheckpoint { size: u64 },
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
    /// A stored checkpoint's root matches, but its stored frontier is not the
    /// frontier of the first `index` leaves: the checkpoint table was edited.
    FrontierMismatch,
    /// A stored checkpoint's note does not verify under the trusted keys,
    /// or signs another size or root than its row: the checkpoint table was
    /// edited, or the key was replaced.
    CheckpointSignature,
    /// Evidence kept outside the database (the checkpoint file) is missing
    /// or says the log was larger: reported by the caller that keeps it.
    EvidenceMissing,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} at {}: {}", self.kind, self.index, self.what)
    }
}

/// A frontier as stored: its hashes concatenated, largest subtree first.
pub(crate) fn frontier_bytes(range: &CompactRange) -> Vec<u8> {
    range.nodes().concat()
}

/// Restores a stored frontier of a tree of `size` leaves; says why not when
/// its length does not fit the size.
pub(crate) fn parse_frontier(size: u64, bytes: &[u8]) -> Result<CompactRange, String> {
    let (nodes, rest) = bytes.as_chunks::<HASH_LEN>();
    if !rest.is_empty() {
        return Err(format!("frontier is {} bytes", bytes.len()));
    }
    CompactRange::from_parts(size, nodes.to_vec()).map_err(|e| e.to_string())
}

/// A root (and maybe a frontier) the log must reproduce at `size` leaves.
struct Target {
    size: u64,
    root: Vec<u8>,
    frontier: Option<Vec<u8>>,
    label: String,
    /// The signed note of a stored checkpoint.
    note: Option<String>,
}

/// Checks a stored checkpoint's signed note and returns the checkpoint it
/// signs, or says why it does not verify.
pub type NoteCheck<'a> = &'a dyn Fn(&str) -> Result<Checkpoint, String>;

/// A checkpoint kept outside the database that the log must reproduce
/// (already signature-checked by the caller), and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalCheckpoint {
    pub checkpoint: Checkpoint,
    /// Names it in problems, e.g. "the checkpoint file's entry".
    pub source: String,
}

/// The stored checkpoints larger than `above` leaves, smallest first.
fn stored_targets(store: &Store, above: Option<u64>) -> Result<Vec<Target>, StoreError> {
    let conn = store.lock()?;
    let mut stmt = conn
        .prepare_cached(
            "SELECT size, root, frontier, note FROM audit_checkpoint WHERE size > ?1 \
             ORDER BY size ASC",
        )
        .map_err(sqlite("preparing checkpoint scan"))?;
    let above = match above {
        Some(size) => i64::try_from(size).unwrap_or(i64::MAX),
        None => i64::MIN,
    };
    let rows = stmt
        .query_map([above], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, Vec<u8>>(1)?,
                row.get::<_, Option<Vec<u8>>>(2)?,
                row.get::<_, String>(3)?,
            ))
        })
        .map_err(sqlite("reading checkpoints"))?;
    let mut out = Vec::new();
    for row in rows {
        let (size, root, frontier, note) = row.map_err(sqlite("reading checkpoint row"))?;
        // A negative size cannot be reached by any log: compare it never,
        // but as a target beyond everything it is reported.
        let size = u64::try_from(size).unwrap_or(u64::MAX);
        out.push(Target {
            size,
            root,
            frontier,
            label: format!("stored checkpoint at size {size}"),
            note: Some(note),
        });
    }
    Ok(out)
}

/// A verification's report and the frontier it ended with (the one a new
/// checkpoint of the verified size stores).
pub(crate) struct Outcome {
    pub(crate) report: VerifyReport,
    pub(crate) range: CompactRange,
}

/// Verifies the whole log against its stored checkpoints and, if given, one
/// more.
pub(crate) fn run(store: &Store, external: Option<&Checkpoint>) -> Result<Outcome, StoreError> {
    run_full(store, external, Coverage::Full)
}

/// [`run`] with the coverage to report (a fallback says why it happened).
pub(crate) fn run_full(
    store: &Store,
    external: Option<&Checkpoint>,
    coverage: Coverage,
) -> Result<Outcome, StoreError> {
    let external: Vec<ExternalCheckpoint> = external
        .map(|cp| ExternalCheckpoint {
            checkpoint: cp.clone(),
            source: "external checkpoint".to_owned(),
        })
        .into_iter()
        .collect();
    run_checked(store, None, &external, coverage)
}

/// The full walk, with each stored checkpoint's note checked by `check`
/// (when given) and every external checkpoint as one more target.
pub(crate) fn run_checked(
    store: &Store,
    check: Option<NoteCheck<'_>>,
    external: &[ExternalCheckpoint],
    coverage: Coverage,
) -> Result<Outcome, StoreError> {
    let mut targets = Vec::new();
    let mut unsigned: Vec<Problem> = Vec::new();
    for target in stored_targets(store, None)? {
        match (check, &target.note) {
            (Some(check), Some(note)) => match signed_as_stored(check, note, &target) {
                Ok(()) => targets.push(target),
                Err(what) => unsigned.push(Problem {
                    index: target.size,
                    kind: ProblemKind::CheckpointSignature,
                    what,
                }),
            },
            _ => targets.push(target),
        }
    }
    for ext in external {
        let cp = &ext.checkpoint;
        targets.push(Target {
            size: cp.size,
            root: cp.root.to_vec(),
            frontier: None,
            label: format!("{} at size {}", ext.source, cp.size),
            note: None,
        });
    }
    targets.sort_by_key(|t| t.size);
    let mut walk = Walk::new(CompactRange::new(), targets, 0);
    let problem = walk.scan(store, i64::MIN)?;
    let mut outcome = walk.finish(problem, coverage);
    outcome.report.bad_signatures = unsigned.len();
    if let Some(first) = unsigned.into_iter().next() {
        let report = &mut outcome.report;
        if report
            .problem
            .as_ref()
            .is_none_or(|p| first.index < p.index)
        {
            report.problem = Some(first);
        }
    }
    Ok(outcome)
}

/// Whether a stored checkpoint's note verifies and signs exactly its row.
fn signed_as_stored(check: NoteCheck<'_>, note: &str, target: &Target) -> Result<(), String> {
    let size = target.size;
    let signed = check(note).map_err(|e| {
        format!("the note of the stored checkpoint at size {size} does not verify: {e}")
    })?;
    if signed.size != size || signed.root.as_slice() != target.root.as_slice() {
        return Err(format!(
            "the note of the stored checkpoint at size {size} signs size {} with another root",
            signed.size
        ));
    }
    Ok(())
}

/// The starting point of an incremental check: a stored checkpoint whose
/// frontier reproduced its root.
pub(crate) struct Base {
    pub(crate) range: CompactRange,
}

/// Verifies the rows after `base` (and `base`'s last row), starting from its
/// frontier.
pub(crate) fn run_since(store: &Store, base: Base) -> Result<Outcome, StoreError> {
    let size = base.range.size();
    let coverage = Coverage::SinceCheckpoint { size };
    let targets = stored_targets(store, Some(size))?;
    let mut walk = Walk::new(base.range, targets, 1);
    if let Some(problem) = walk.boundary(store)? {
        return Ok(walk.finish(Some(problem), coverage));
    }
    let from = i64::try_from(size)
        .ok()
        .and_then(|s| s.checked_add(1))
        .ok_or_else(|| StoreError::Corrupt("audit log size exceeds i64".to_owned()))?;
    let problem = walk.scan(store, from)?;
    Ok(walk.finish(problem, coverage))
}

struct Walk {
    range: CompactRange,
    targets: std::iter::Peekable<std::vec::IntoIter<Target>>,
    checked: usize,
}

impl Walk {
    fn new(range: CompactRange, targets: Vec<Target>, checked: usize) -> Self {
        Self {
            range,
            targets: targets.into_iter().peekable(),
            checked,
        }
    }

    fn finish(self, problem: Option<Problem>, coverage: Coverage) -> Outcome {
        Outcome {
            report: VerifyReport {
                records: self.range.size(),
                root: self.range.root(),
                checkpoints_checked: self.checked,
                bad_signatures: 0,
                problem,
                coverage,
            },
            range: self.range,
        }
    }

    /// Checks rows from `seq = from` on, then that no target lies beyond.
    fn scan(&mut self, store: &Store, from: i64) -> Result<Option<Problem>, StoreError> {
        if let Some(p) = self.check_targets() {
            return Ok(Some(p));
        }
        if let Some(p) = scan::scan(store, from, |chunk| self.chunk(chunk))? {
            return Ok(Some(p));
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

    fn chunk(&mut self, chunk: &Chunk) -> ControlFlow<Problem> {
        for row in &chunk.rows {
            if let Some(p) = self.row(row).or_else(|| self.check_targets()) {
                return ControlFlow::Break(p);
            }
        }
        // A range chunk must have brought the walk past its last seq.
        let index = self.range.size();
        let next = index.saturating_add(1);
        match chunk.dense_until {
            Some(last) if u64::try_from(last).is_ok_and(|last| next <= last) => {
                ControlFlow::Break(Problem {
                    index,
                    kind: ProblemKind::SeqGap,
                    what: format!("expected seq {next}, found no row with it"),
                })
            }
            _ => ControlFlow::Continue(()),
        }
    }

    /// Checks that `row` is a sound entry `index` (its seq, stored leaf and
    /// encoding); returns its leaf hash.
    fn check_row(index: u64, row: &ScannedRow) -> Result<Hash, Problem> {
        let seq = index + 1;
        let problem = |kind, what: String| Problem { index, kind, what };
        if u64::try_from(row.seq) != Ok(seq) {
            return Err(problem(
                ProblemKind::SeqGap,
                format!("expected seq {seq}, found seq {}", row.seq),
            ));
        }
        if row.stored == StoredLeaf::Null {
            return Err(problem(
                ProblemKind::MissingLeaf,
                format!("seq {seq} has no leaf hash"),
            ));
        }
        if let Err(e) = &row.encoded {
            return Err(problem(ProblemKind::Undecodable, format!("seq {seq}: {e}")));
        }
        if row.stored != StoredLeaf::Hash(row.leaf) {
            return Err(problem(
                ProblemKind::LeafMismatch,
                format!("seq {seq}: stored leaf hash does not match the record"),
            ));
        }
        Ok(row.leaf)
    }

    /// Checks one row and appends its leaf.
    fn row(&mut self, row: &ScannedRow) -> Option<Problem> {
        let index = self.range.size();
        match Self::check_row(index, row) {
            Ok(leaf) => self.range.append(leaf).err().map(|e| Problem {
                index,
                kind: ProblemKind::SeqGap,
                what: e.to_string(),
            }),
            Err(problem) => Some(problem),
        }
    }

    /// For an incremental walk: the checkpoint's last row is still there, is
    /// sound, and (when the frontier holds it as a subtree of its own, i.e.
    /// the size is odd) is the leaf the checkpoint committed to. A missing
    /// row below a larger log is a gap; an empty tail is a truncation.
    fn boundary(&mut self, store: &Store) -> Result<Option<Problem>, StoreError> {
        let size = self.range.size();
        let Some(index) = size.checked_sub(1) else {
            return Ok(None);
        };
        let seq = i64::try_from(size)
            .map_err(|_| StoreError::Corrupt("audit log size exceeds i64".to_owned()))?;
        let mut chunk = Chunk::default();
        let max_seq = {
            let conn = store.lock()?;
            scan::read_chunk(&conn, seq, 1, &mut chunk)?;
            conn.prepare_cached("SELECT coalesce(max(seq), 0) FROM audit")
                .map_err(sqlite("preparing audit max seq"))?
                .query_row([], |row| row.get::<_, i64>(0))
                .map_err(sqlite("reading audit max seq"))?
        };
        chunk.hash();
        let row = match chunk.rows.first() {
            Some(row) if row.seq == seq => row,
            _ if max_seq < seq => {
                let records = u64::try_from(max_seq).unwrap_or(0);
                return Ok(Some(Problem {
                    index: records,
                    kind: ProblemKind::CheckpointBeyondLog,
                    what: format!(
                        "stored checkpoint at size {size} but the log ends at seq {max_seq} \
                         (truncated?)"
                    ),
                }));
            }
            _ => {
                return Ok(Some(Problem {
                    index,
                    kind: ProblemKind::SeqGap,
                    what: format!("seq {size}, the last leaf of the latest checkpoint, is missing"),
                }));
            }
        };
        let leaf = match Self::check_row(index, row) {
            Ok(leaf) => leaf,
            Err(problem) => return Ok(Some(problem)),
        };
        let last_node = self.range.nodes().last().copied();
        if size % 2 == 1 && last_node != Some(leaf) {
            return Ok(Some(Problem {
                index: size,
                kind: ProblemKind::CheckpointMismatch,
                what: format!(
                    "seq {size} is not the last leaf the stored checkpoint at size {size} \
                     committed to"
                ),
            }));
        }
        Ok(None)
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
            if let Some(stored) = &t.frontier
                && *stored != frontier_bytes(&self.range)
            {
                return Some(Problem {
                    index: t.size,
                    kind: ProblemKind::FrontierMismatch,
                    what: format!(
                        "the frontier stored with the {} is not the log's frontier at that size",
                        t.label
                    ),
                });
            }
            self.checked += 1;
        }
        None
    }
}
