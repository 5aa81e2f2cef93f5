//! The Merkle log API of [`SqliteAuditSink`]: verification, signed
//! checkpoints and proofs over the stored leaf hashes.

use crate::verify::{self, VerifyReport};
use crate::{SqliteAuditSink, StoreError, now_ms, sqlite, to_u64};
use bulwark_audit::merkle::HASH_LEN;
use bulwark_audit::{Checkpoint, Hash, ProofError, SigningKey, proof};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

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
    /// Recomputes every leaf from its row and the root at every stored
    /// checkpoint, reporting the first problem. Commits queued records first.
    /// `Err` only for failures to read; tampering is a `problem`.
    pub fn verify(&self) -> Result<VerifyReport, StoreError> {
        self.batches.flush()?;
        verify::run(&self.store, None)
    }

    /// [`verify`](Self::verify), plus the check that the log reproduces
    /// `checkpoint` (already signature-checked by the caller, e.g. with
    /// `bulwark_audit::parse_and_verify`). A checkpoint larger than the log
    /// is reported as [`ProblemKind::CheckpointBeyondLog`](crate::ProblemKind).
    pub fn verify_against(&self, checkpoint: &Checkpoint) -> Result<VerifyReport, StoreError> {
        self.batches.flush()?;
        verify::run(&self.store, Some(checkpoint))
    }

    /// Commits queued records, verifies the whole log, signs a checkpoint of
    /// it with `key` under `key_name` and stores it. Returns the signed note.
    ///
    /// Refuses ([`StoreError::Corrupt`]) to sign a log that does not verify.
    /// If a checkpoint of the same size is already stored (nothing was
    /// appended since), the new note is returned but not stored.
    pub fn checkpoint(
        &self,
        key: &SigningKey,
        origin: &str,
        key_name: &str,
    ) -> Result<String, StoreError> {
        let report = self.verify()?;
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
                    "INSERT INTO audit_checkpoint (size, root, note, time_ms) \
                     VALUES (?1, ?2, ?3, ?4)",
                    params![size, report.root.as_slice(), note, now_ms()],
                )
                .map_err(sqlite("storing checkpoint"))?;
            }
        }
        tx.commit().map_err(sqlite("committing checkpoint"))?;
        Ok(note)
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

    /// Inclusion proof of leaf `index` (0-based; `seq = index + 1`) in the
    /// current tree, from the stored leaf hashes. Loads all leaf hashes
    /// (32 bytes per record).
    pub fn inclusion_proof(&self, index: u64) -> Result<InclusionProof, StoreError> {
        let leaves = self.leaves()?;
        let size = leaves.len() as u64;
        let Some(leaf) = usize::try_from(index).ok().and_then(|i| leaves.get(i)) else {
            return Err(ProofError::IndexOutOfRange { index, size }.into());
        };
        let proof = proof::inclusion_proof(&leaves, index, size)?;
        Ok(InclusionProof {
            index,
            leaf: *leaf,
            size,
            root: bulwark_audit::root(&leaves),
            proof,
        })
    }

    /// Consistency proof from the tree of `old_size` leaves to the current
    /// tree, from the stored leaf hashes.
    pub fn consistency_proof(&self, old_size: u64) -> Result<ConsistencyProof, StoreError> {
        let leaves = self.leaves()?;
        let new_size = leaves.len() as u64;
        let proof = proof::consistency_proof(&leaves, old_size, new_size)?;
        // In range: consistency_proof checked 0 < old_size <= new_size.
        let old = usize::try_from(old_size)
            .ok()
            .and_then(|n| leaves.get(..n))
            .ok_or(ProofError::OldSizeAfterNewSize { old_size, new_size })?;
        Ok(ConsistencyProof {
            old_size,
            new_size,
            old_root: bulwark_audit::root(old),
            new_root: bulwark_audit::root(&leaves),
            proof,
        })
    }

    /// All stored leaf hashes in order, after committing queued records.
    /// A gap in `seq` or a missing leaf is [`StoreError::Corrupt`]: a proof
    /// over a damaged log would be meaningless.
    fn leaves(&self) -> Result<Vec<Hash>, StoreError> {
        self.batches.flush()?;
        let mut out: Vec<Hash> = Vec::new();
        loop {
            let from = i64::try_from(out.len() as u64 + 1)
                .map_err(|_| StoreError::Corrupt("audit log size exceeds i64".to_owned()))?;
            let conn = self.store.lock()?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, leaf FROM audit WHERE seq >= ?1 ORDER BY seq ASC LIMIT ?2",
                )
                .map_err(sqlite("preparing leaf scan"))?;
            let rows = stmt
                .query_map([from, verify::CHUNK], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, Option<Vec<u8>>>(1)?))
                })
                .map_err(sqlite("scanning leaves"))?;
            let before = out.len();
            for row in rows {
                let (seq, leaf) = row.map_err(sqlite("reading leaf"))?;
                let expected = out.len() as u64 + 1;
                if u64::try_from(seq) != Ok(expected) {
                    return Err(StoreError::Corrupt(format!(
                        "audit seq {seq} where {expected} was expected"
                    )));
                }
                let leaf = leaf.ok_or_else(|| {
                    StoreError::Corrupt(format!("audit seq {seq} has no leaf hash"))
                })?;
                out.push(to_hash(&leaf, "leaf hash")?);
            }
            if ((out.len() - before) as i64) < verify::CHUNK {
                return Ok(out);
            }
        }
    }
}
