//! The Merkle log API of [`SqliteAuditSink`]: verification (full and
//! incremental), signed checkpoints and proofs over the stored leaf hashes.
//!
//! Every stored checkpoint since schema v3 carries the frontier of its tree
//! (the at most 64 roots of the perfect subtrees its leaves split into).
//! That frontier is bound to the checkpoint's signed root, since it must
//! hash to it, so a later checkpoint can start from it and hash only the
//! rows appended since, instead of the whole log.

use crate::verify::{self, Base, Coverage, ExternalCheckpoint, NoteCheck, Outcome, VerifyReport};
use crate::{SqliteAuditSink, StoreError, now_ms, sqlite, to_u64};
use bulwark_audit::merkle::HASH_LEN;
use bulwark_audit::{Checkpoint, CompactRange, Hash, ProofError, SigningKey, VerifierKey, proof};
use rusqlite::types::ValueRef;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use std::sync::{Mutex, PoisonError};

/// A checkpoint as stored in `audit_checkpoint`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCheckpoint {
    pub size: u64,
    pub root: Hash,
    /// The signed C2SP checkpoint note.
    pub note: String,
    pub time_ms: i64,
}

/// Proof that leaf `index` is in the tree of `size` leaves with `root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InclusionProof {
    pub index: u64,
    pub leaf: Hash,
    pub size: u64,
    pub root: Hash,
    pub proof: Vec<Hash>,
}

/// Proof that the tree of `old_size` leaves is a prefix of the one of
/// `new_size` leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsistencyProof {
    pub old_size: u64,
    pub new_size: u64,
    pub old_root: Hash,
    pub new_root: Hash,
    pub proof: Vec<Hash>,
}

fn to_hash(bytes: &[u8], what: &str) -> Result<Hash, StoreError> {
    Hash::try_from(bytes).map_err(|_| {
        StoreError::Corrupt(format!("{what} is {} bytes, not {HASH_LEN}", bytes.len()))
    })
}

impl SqliteAuditSink {
    /// The full check: recomputes every leaf from its row and the root (and
    /// stored frontier) at every stored checkpoint, reporting the first
    /// problem. Commits queued records first. `Err` only for failures to
    /// read; tampering is a `problem`.
    ///
    /// Detects any edit, deletion, insertion or reordering of rows, and any
    /// stored checkpoint the rows do not reproduce. It cannot detect a
    /// truncation that also removed the checkpoints covering the removed
    /// rows, or a consistent rewrite of rows and checkpoints: only a
    /// checkpoint kept elsewhere can ([`verify_against`](Self::verify_against),
    /// [`verify_trusted`](Self::verify_trusted)). Stored checkpoints are
    /// taken as stored: their signatures are checked by `verify_trusted`.
    /// O(records): about a second per million records on two cores.
    pub fn verify(&self) -> Result<VerifyReport, StoreError> {
        self.batches.flush()?;
        Ok(verify::run(&self.store, None)?.report)
    }

    /// [`verify`](Self::verify), plus the check that the log reproduces
    /// `checkpoint` (already signature-checked by the caller, e.g. with
    /// `bulwark_audit::parse_and_verify`). A checkpoint larger than the log
    /// is reported as [`ProblemKind::CheckpointBeyondLog`](crate::ProblemKind).
    pub fn verify_against(&self, checkpoint: &Checkpoint) -> Result<VerifyReport, StoreError> {
        self.batches.flush()?;
        Ok(verify::run(&self.store, Some(checkpoint))?.report)
    }

    /// The full check of [`verify`](Self::verify), as strong as the
    /// evidence a caller holds allows:
    /// - every stored checkpoint's note is opened with `check` (which
    ///   verifies its signature under the keys the caller trusts and returns
    ///   the checkpoint it signs) and must sign exactly its row's size and
    ///   root. One that does not is counted in
    ///   [`VerifyReport::bad_signatures`], never as matching, and is a
    ///   [`ProblemKind::CheckpointSignature`](crate::ProblemKind) problem;
    /// - the log must reproduce every `external` checkpoint (kept outside
    ///   the database, signature-checked by the caller), so deleting stored
    ///   checkpoints and then rewriting or truncating records is detected
    ///   as long as one of them covers the change.
    ///
    /// Commits queued records first. O(records + checkpoints).
    pub fn verify_trusted(
        &self,
        check: NoteCheck<'_>,
        external: &[ExternalCheckpoint],
    ) -> Result<VerifyReport, StoreError> {
        self.batches.flush()?;
        Ok(verify::run_checked(&self.store, Some(check), external, Coverage::Full)?.report)
    }

    /// How many records the log holds (its largest `seq`), after
    /// committing queued records. One index lookup.
    pub fn record_count(&self) -> Result<u64, StoreError> {
        self.batches.flush()?;
        let conn = self.store.lock()?;
        let max: i64 = conn
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM audit")
            .map_err(sqlite("preparing audit max seq"))?
            .query_row([], |row| row.get(0))
            .map_err(sqlite("reading audit max seq"))?;
        to_u64(max, "audit seq")
    }

    /// How many checkpoints are stored.
    pub fn checkpoint_count(&self) -> Result<u64, StoreError> {
        let conn = self.store.lock()?;
        let count: i64 = conn
            .prepare_cached("SELECT count(*) FROM audit_checkpoint")
            .map_err(sqlite("preparing checkpoint count"))?
            .query_row([], |row| row.get(0))
            .map_err(sqlite("reading checkpoint count"))?;
        to_u64(count, "checkpoint count")
    }

    /// Every stored checkpoint, smallest first.
    pub fn stored_checkpoints(&self) -> Result<Vec<StoredCheckpoint>, StoreError> {
        let conn = self.store.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT size, root, note, time_ms FROM audit_checkpoint ORDER BY size ASC",
            )
            .map_err(sqlite("preparing checkpoint list"))?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, Vec<u8>>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, i64>(3)?,
                ))
            })
            .map_err(sqlite("reading checkpoints"))?;
        let mut out = Vec::new();
        for row in rows {
            let (size, root, note, time_ms) = row.map_err(sqlite("reading checkpoint row"))?;
            out.push(StoredCheckpoint {
                size: to_u64(size, "checkpoint size")?,
                root: to_hash(&root, "checkpoint root")?,
                note,
                time_ms,
            });
        }
        Ok(out)
    }

    /// The cheap check: verifies only the rows appended since the latest
    /// stored checkpoint, starting from that checkpoint's stored frontier.
    /// Commits queued records first. O(records since the checkpoint).
    ///
    /// The frontier must reproduce the checkpoint's stored root, and the
    /// checkpoint's last row must still be there and sound. The stored root
    /// is trusted as stored, as [`verify`](Self::verify) trusts stored
    /// checkpoints; its signature is not checked (that needs the key: see
    /// [`checkpoint_incremental`](Self::checkpoint_incremental)).
    ///
    /// Detects: a bad row (gap, missing or wrong leaf, undecodable) after the
    /// checkpoint, a truncation below it, a changed last row of it, and a
    /// frontier that does not match its root. Does **not** detect an edit,
    /// deletion or reordering of any earlier row: run [`verify`](Self::verify)
    /// for that. When no stored checkpoint has a usable frontier it falls
    /// back to the full check, reported as [`Coverage::FullFallback`].
    pub fn verify_since_latest_checkpoint(&self) -> Result<VerifyReport, StoreError> {
        self.batches.flush()?;
        Ok(self.verify_incremental(None)?.report)
    }

    /// Commits queued records, verifies the whole log, signs a checkpoint of
    /// it with `key` under `key_name` and stores it with its frontier.
    /// Returns the signed note.
    ///
    /// Refuses ([`StoreError::Corrupt`]) to sign a log that does not verify.
    /// If a checkpoint of the same size is already stored (nothing was
    /// appended since), the new note is returned but not stored. O(records);
    /// [`checkpoint_incremental`](Self::checkpoint_incremental) is the
    /// O(new records) variant.
    pub fn checkpoint(
        &self,
        key: &SigningKey,
        origin: &str,
        key_name: &str,
    ) -> Result<String, StoreError> {
        self.batches.flush()?;
        let outcome = verify::run(&self.store, None)?;
        self.sign_and_store(outcome, key, origin, key_name)
    }

    /// [`checkpoint`](Self::checkpoint), but hashing only the records
    /// appended since the latest stored checkpoint.
    ///
    /// That checkpoint is used only if its note verifies under `key` (as
    /// `key_name`) and names `origin`, size and root as stored, and its
    /// stored frontier reproduces the root: then the new root extends a tree
    /// this key already signed, so the new checkpoint cannot launder an edit
    /// made to older rows (their edited hashes are never used), though it
    /// does not detect one either; [`verify`](Self::verify) does. Otherwise
    /// (no checkpoint, one stored before schema v3, another key, or a
    /// frontier that does not check) it falls back to the full
    /// verification, as [`checkpoint`](Self::checkpoint) does.
    ///
    /// Refuses ([`StoreError::Corrupt`]) to sign when the rows it checked do
    /// not verify.
    pub fn checkpoint_incremental(
        &self,
        key: &SigningKey,
        origin: &str,
        key_name: &str,
    ) -> Result<String, StoreError> {
        // Fails early, before any hashing, on a key name signing would refuse.
        let verifier = VerifierKey::from_signing_key(key_name, key)?;
        self.batches.flush()?;
        let outcome = self.verify_incremental(Some((&verifier, origin)))?;
        self.sign_and_store(outcome, key, origin, key_name)
    }

    /// How many records were appended since the latest stored checkpoint,
    /// counting those this sink has accepted but not yet committed. Two
    /// index lookups and no flush, so it is cheap enough to call after every
    /// record, e.g. to checkpoint every N records.
    pub fn records_since_latest_checkpoint(&self) -> Result<u64, StoreError> {
        let conn = self.store.lock()?;
        // Read under the connection lock: no batch can move from pending
        // to committed in between.
        let pending = self.batches.pending();
        let (records, size): (i64, i64) = conn
            .prepare_cached(
                "SELECT (SELECT coalesce(max(seq), 0) FROM audit), \
                 (SELECT coalesce(max(size), 0) FROM audit_checkpoint)",
            )
            .map_err(sqlite("preparing checkpoint distance"))?
            .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(sqlite("reading checkpoint distance"))?;
        Ok(u64::try_from(records.saturating_sub(size)).unwrap_or(0) + pending)
    }

    /// The stored checkpoint of the largest size, if any.
    pub fn latest_checkpoint(&self) -> Result<Option<StoredCheckpoint>, StoreError> {
        let conn = self.store.lock()?;
        let row = conn
            .query_row(
                "SELECT size, root, note, time_ms FROM audit_checkpoint \
                 ORDER BY size DESC LIMIT 1",
                [],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, Vec<u8>>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, i64>(3)?,
                    ))
                },
            )
            .optional()
            .map_err(sqlite("reading latest checkpoint"))?;
        row.map(|(size, root, note, time_ms)| {
            Ok(StoredCheckpoint {
                size: to_u64(size, "checkpoint size")?,
                root: to_hash(&root, "checkpoint root")?,
                note,
                time_ms,
            })
        })
        .transpose()
    }

    /// The incremental check from the latest stored checkpoint, or the full
    /// one when that checkpoint cannot anchor it. With a signer, the
    /// checkpoint's note must verify under it and name `origin`.
    fn verify_incremental(
        &self,
        signer: Option<(&VerifierKey, &str)>,
    ) -> Result<Outcome, StoreError> {
        match self.incremental_base(signer)? {
            Ok(base) => verify::run_since(&self.store, base),
            Err(reason) => {
                tracing::info!(%reason, "audit log: incremental check falls back to a full one");
                verify::run_full(&self.store, None, Coverage::FullFallback { reason })
            }
        }
    }

    /// The latest stored checkpoint as the start of an incremental check,
    /// or why it cannot be.
    fn incremental_base(
        &self,
        signer: Option<(&VerifierKey, &str)>,
    ) -> Result<Result<Base, String>, StoreError> {
        let latest = {
            let conn = self.store.lock()?;
            conn.query_row(
                "SELECT size, root, note, frontier FROM audit_checkpoint \
                 ORDER BY size DESC LIMIT 1",
                [],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, Vec<u8>>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, Option<Vec<u8>>>(3)?,
                    ))
                },
            )
            .optional()
            .map_err(sqlite("reading latest checkpoint"))?
        };
        let Some((size, root, note, frontier)) = latest else {
            return Ok(Err("no checkpoint is stored".to_owned()));
        };
        let Ok(size) = u64::try_from(size) else {
            return Ok(Err(format!(
                "the latest checkpoint has negative size {size}"
            )));
        };
        let Some(frontier) = frontier else {
            return Ok(Err(format!(
                "the checkpoint at size {size} has no stored frontier (written before schema v3)"
            )));
        };
        let range = match verify::parse_frontier(size, &frontier) {
            Ok(range) => range,
            Err(e) => {
                return Ok(Err(format!(
                    "the frontier of the checkpoint at size {size} is malformed: {e}"
                )));
            }
        };
        if range.root().as_slice() != root.as_slice() {
            tracing::warn!(
                size,
                "audit log: a stored frontier does not reproduce its root"
            );
            return Ok(Err(format!(
                "the frontier of the checkpoint at size {size} does not reproduce its root"
            )));
        }
        if let Some((verifier, origin)) = signer {
            let signed =
                match bulwark_audit::parse_and_verify(&note, std::slice::from_ref(verifier)) {
                    Ok(signed) => signed,
                    Err(e) => {
                        return Ok(Err(format!(
                            "the checkpoint at size {size} does not verify under this key: {e}"
                        )));
                    }
                };
            if signed.size != size || signed.root.as_slice() != root.as_slice() {
                tracing::warn!(
                    size,
                    "audit log: a stored checkpoint's note disagrees with its row"
                );
                return Ok(Err(format!(
                    "the note of the checkpoint at size {size} names another size or root"
                )));
            }
            if signed.origin != origin {
                return Ok(Err(format!(
                    "the checkpoint at size {size} is of origin {:?}",
                    signed.origin
                )));
            }
        }
        Ok(Ok(Base { range }))
    }

    /// Signs the verified tree of `outcome` and stores the checkpoint with
    /// its frontier, unless the log did not verify.
    fn sign_and_store(
        &self,
        outcome: Outcome,
        key: &SigningKey,
        origin: &str,
        key_name: &str,
    ) -> Result<String, StoreError> {
        let Outcome { report, range } = outcome;
        if let Some(problem) = report.problem {
            return Err(StoreError::Corrupt(format!(
                "refusing to checkpoint an audit log that does not verify: {problem}"
            )));
        }
        let checkpoint = Checkpoint::new(origin, report.records, report.root);
        let note = bulwark_audit::sign(&checkpoint, key, key_name)?;
        let size = i64::try_from(report.records)
            .map_err(|_| StoreError::Corrupt("audit log size exceeds i64".to_owned()))?;
        let mut conn = self.store.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite("starting checkpoint insert"))?;
        let existing: Option<Vec<u8>> = tx
            .query_row(
                "SELECT root FROM audit_checkpoint WHERE size = ?1",
                [size],
                |row| row.get(0),
            )
            .optional()
            .map_err(sqlite("reading checkpoint"))?;
        match existing {
            Some(root) if root.as_slice() == report.root.as_slice() => {}
            Some(_) => {
                return Err(StoreError::Corrupt(format!(
                    "a stored checkpoint at size {size} has a different root"
                )));
            }
            None => {
                tx.execute(
                    "INSERT INTO audit_checkpoint (size, root, note, time_ms, frontier) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        size,
                        report.root.as_slice(),
                        note,
                        now_ms(),
                        verify::frontier_bytes(&range)
                    ],
                )
                .map_err(sqlite("storing checkpoint"))?;
            }
        }
        tx.commit().map_err(sqlite("committing checkpoint"))?;
        Ok(note)
    }

    /// Inclusion proof of leaf `index` (0-based; `seq = index + 1`) in the
    /// current tree, from the stored leaf hashes. Loads all leaf hashes
    /// (32 bytes per record); the proof and the root are computed on two
    /// threads.
    pub fn inclusion_proof(&self, index: u64) -> Result<InclusionProof, StoreError> {
        let leaves = self.leaves()?;
        let size = leaves.len() as u64;
        let Some(leaf) = usize::try_from(index).ok().and_then(|i| leaves.get(i)) else {
            return Err(ProofError::IndexOutOfRange { index, size }.into());
        };
        let (proof, root) = both(
            || proof::inclusion_proof(&leaves, index, size),
            || bulwark_audit::root(&leaves),
        )?;
        Ok(InclusionProof {
            index,
            leaf: *leaf,
            size,
            root,
            proof: proof?,
        })
    }

    /// Consistency proof from the tree of `old_size` leaves to the current
    /// tree, from the stored leaf hashes. The proof and the two roots are
    /// computed on two threads.
    pub fn consistency_proof(&self, old_size: u64) -> Result<ConsistencyProof, StoreError> {
        let leaves = self.leaves()?;
        let new_size = leaves.len() as u64;
        let (old, new) = usize::try_from(old_size)
            .ok()
            .and_then(|n| Some((leaves.get(..n)?, leaves.get(n..)?)))
            .ok_or(ProofError::OldSizeAfterNewSize { old_size, new_size })?;
        let (proof, (old_root, new_root)) = both(
            || proof::consistency_proof(&leaves, old_size, new_size),
            || {
                // One pass for both roots: the new tree extends the old one.
                let mut range = CompactRange::from_leaf_hashes(old);
                let old_root = range.root();
                for leaf in new {
                    // A slice cannot hold u64::MAX leaves.
                    let _ = range.append(*leaf);
                }
                (old_root, range.root())
            },
        )?;
        Ok(ConsistencyProof {
            old_size,
            new_size,
            old_root,
            new_root,
            proof: proof?,
        })
    }

    /// All stored leaf hashes in order, after committing queued records.
    /// A gap in `seq` or a missing leaf is [`StoreError::Corrupt`]: a proof
    /// over a damaged log would be meaningless.
    fn leaves(&self) -> Result<Vec<Hash>, StoreError> {
        self.batches.flush()?;
        self.leaves_up_to(None)
    }

    /// The leaf hashes of seq 1 to `last` (all of them for `None`), read a
    /// chunk at a time so writers are not held off for the whole scan. A
    /// gap, a missing leaf, or fewer rows than `last` asks for is corrupt.
    pub(crate) fn leaves_up_to(&self, last: Option<u64>) -> Result<Vec<Hash>, StoreError> {
        let size_err = || StoreError::Corrupt("audit log size exceeds i64".to_owned());
        let last = match last {
            Some(size) => i64::try_from(size).map_err(|_| size_err())?,
            None => i64::MAX,
        };
        let mut out: Vec<Hash> = Vec::new();
        loop {
            let from = i64::try_from(out.len() as u64 + 1).map_err(|_| size_err())?;
            if from > last {
                return Ok(out);
            }
            let before = out.len();
            let conn = self.store.lock()?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, leaf FROM audit WHERE seq >= ?1 AND seq <= ?2 \
                     ORDER BY seq ASC LIMIT ?3",
                )
                .map_err(sqlite("preparing leaf scan"))?;
            let mut rows = stmt
                .query(params![from, last, crate::scan::CHUNK as i64])
                .map_err(sqlite("scanning leaves"))?;
            while let Some(row) = rows.next().map_err(sqlite("reading leaf"))? {
                let seq: i64 = row.get(0).map_err(sqlite("reading leaf seq"))?;
                let expected = out.len() as u64 + 1;
                if u64::try_from(seq) != Ok(expected) {
                    return Err(StoreError::Corrupt(format!(
                        "audit seq {seq} where {expected} was expected"
                    )));
                }
                // Borrowed, not copied into a Vec: a million allocations
                // were a third of a proof's cost.
                let leaf = match row.get_ref(1) {
                    Ok(ValueRef::Blob(leaf)) => to_hash(leaf, "leaf hash")?,
                    _ => {
                        return Err(StoreError::Corrupt(format!(
                            "audit seq {seq} has no leaf hash"
                        )));
                    }
                };
                out.push(leaf);
            }
            let read = out.len() - before;
            if last == i64::MAX && read < crate::scan::CHUNK {
                return Ok(out);
            }
            if read == 0 {
                return Err(StoreError::Corrupt(format!(
                    "the log has {} records, fewer than the {last} asked for",
                    out.len()
                )));
            }
        }
    }
}

/// Runs `a` on a second thread while `b` runs on this one (a proof and a
/// root are each O(n) hashing over the same leaves). If no thread can be
/// started, `a` runs here afterwards.
fn both<A: Send, B>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B,
) -> Result<(A, B), StoreError> {
    let slot = Mutex::new(Some(a));
    let take = || slot.lock().unwrap_or_else(PoisonError::into_inner).take();
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("bulwark-audit-proof".into())
            .spawn_scoped(scope, || take().map(|a| a()));
        let b = b();
        let a = match spawned {
            Ok(handle) => handle
                .join()
                .map_err(|_| StoreError::Failed("a proof thread panicked".to_owned()))?,
            Err(_) => None,
        };
        let a = match a {
            Some(a) => a,
            None => take()
                .map(|a| a())
                .ok_or_else(|| StoreError::Failed("a proof computation was lost".to_owned()))?,
        };
        Ok((a, b))
    })
}
