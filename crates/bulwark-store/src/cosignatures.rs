//! Witness cosignatures of this log's checkpoints, and the proofs a witness
//! needs to cosign them.
//!
//! The store keeps a cosignature only for a checkpoint it stored itself
//! (same size and root), and does not judge the signature: the caller
//! verified it under the witness key before storing it, and whoever reads
//! it back (`audit verify`, the agent start check) verifies it again, since
//! a row is only as trustworthy as the file it is in.

use crate::merkle_log::StoredCheckpoint;
use crate::{SqliteAuditSink, StoreError, now_ms, sqlite, to_u64};
use bulwark_audit::{Hash, proof};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

/// A cosignature to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCosignature<'a> {
    /// The cosigned checkpoint's size and root.
    pub size: u64,
    pub root: Hash,
    /// The witness's vkey (`<name>+<id>+<key>`): which witness this is.
    pub witness: &'a str,
    /// The cosignature line, `— <name> <base64>`.
    pub line: &'a str,
    /// The cosignature's own timestamp (seconds since the Unix epoch).
    pub timestamp: u64,
}

/// A stored cosignature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCosignature {
    pub size: u64,
    pub root: Hash,
    pub witness: String,
    pub line: String,
    pub timestamp: u64,
    /// When it was stored, milliseconds since the Unix epoch.
    pub time_ms: i64,
}

fn to_i64(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Corrupt(format!("{what} {value} exceeds i64")))
}

fn to_hash(bytes: &[u8], what: &str) -> Result<Hash, StoreError> {
    Hash::try_from(bytes).map_err(|_| StoreError::Corrupt(format!("{what} is not 32 bytes")))
}

impl SqliteAuditSink {
    /// Stores a witness's cosignature of the stored checkpoint of
    /// `cosignature.size`. Returns false when this witness's cosignature of
    /// that size was already stored (the first one is kept). Refuses
    /// ([`StoreError::Conflict`]) a cosignature of a size this log has no
    /// checkpoint of, or of another root.
    pub fn add_cosignature(&self, cosignature: &NewCosignature<'_>) -> Result<bool, StoreError> {
        let size = to_i64(cosignature.size, "checkpoint size")?;
        let timestamp = to_i64(cosignature.timestamp, "cosignature timestamp")?;
        let mut conn = self.store.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite("starting cosignature insert"))?;
        let root: Option<Vec<u8>> = tx
            .query_row(
                "SELECT root FROM audit_checkpoint WHERE size = ?1",
                [size],
                |row| row.get(0),
            )
            .optional()
            .map_err(sqlite("reading checkpoint"))?;
        match root {
            Some(root) if root.as_slice() == cosignature.root.as_slice() => {}
            Some(_) => {
                return Err(StoreError::Conflict(format!(
                    "the stored checkpoint of size {size} has another root than the cosigned one"
                )));
            }
            None => {
                return Err(StoreError::Conflict(format!(
                    "no checkpoint of size {size} is stored"
                )));
            }
        }
        let inserted = tx
            .execute(
                "INSERT OR IGNORE INTO audit_cosignature \
                 (size, witness, root, line, timestamp, time_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    size,
                    cosignature.witness,
                    cosignature.root.as_slice(),
                    cosignature.line,
                    timestamp,
                    now_ms()
                ],
            )
            .map_err(sqlite("storing cosignature"))?;
        tx.commit().map_err(sqlite("committing cosignature"))?;
        Ok(inserted == 1)
    }

    /// The cosignatures stored for the checkpoint of `size`, by witness.
    pub fn cosignatures_at(&self, size: u64) -> Result<Vec<StoredCosignature>, StoreError> {
        let size = to_i64(size, "checkpoint size")?;
        let conn = self.store.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT size, root, witness, line, timestamp, time_ms FROM audit_cosignature \
                 WHERE size = ?1 ORDER BY witness",
            )
            .map_err(sqlite("preparing cosignature read"))?;
        let rows = stmt
            .query_map([size], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, Vec<u8>>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, i64>(4)?,
                    row.get::<_, i64>(5)?,
                ))
            })
            .map_err(sqlite("reading cosignatures"))?;
        let mut out = Vec::new();
        for row in rows {
            let (size, root, witness, line, timestamp, time_ms) =
                row.map_err(sqlite("reading cosignature"))?;
            out.push(StoredCosignature {
                size: to_u64(size, "cosigned size")?,
                root: to_hash(&root, "cosigned root")?,
                witness,
                line,
                timestamp: to_u64(timestamp, "cosignature timestamp")?,
                time_ms,
            });
        }
        Ok(out)
    }

    /// The largest checkpoint size `witness` (its vkey) has cosigned, as
    /// far as this store knows: the old size of the next submission to it.
    pub fn latest_cosigned_size(&self, witness: &str) -> Result<Option<u64>, StoreError> {
        let conn = self.store.lock()?;
        let size: Option<i64> = conn
            .query_row(
                "SELECT max(size) FROM audit_cosignature WHERE witness = ?1",
                [witness],
                |row| row.get(0),
            )
            .map_err(sqlite("reading latest cosigned size"))?;
        size.map(|s| to_u64(s, "cosigned size")).transpose()
    }

    /// The latest stored checkpoint and the cosignatures stored for it.
    pub fn latest_checkpoint_cosignatures(
        &self,
    ) -> Result<Option<(StoredCheckpoint, Vec<StoredCosignature>)>, StoreError> {
        let Some(latest) = self.latest_checkpoint()? else {
            return Ok(None);
        };
        let cosignatures = self.cosignatures_at(latest.size)?;
        Ok(Some((latest, cosignatures)))
    }

    /// The stored checkpoint of exactly `size`, if any.
    pub fn checkpoint_at(&self, size: u64) -> Result<Option<StoredCheckpoint>, StoreError> {
        let key = to_i64(size, "checkpoint size")?;
        let conn = self.store.lock()?;
        let row = conn
            .query_row(
                "SELECT root, note, time_ms FROM audit_checkpoint WHERE size = ?1",
                [key],
                |row| {
                    Ok((
                        row.get::<_, Vec<u8>>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                },
            )
            .optional()
            .map_err(sqlite("reading checkpoint"))?;
        row.map(|(root, note, time_ms)| {
            Ok(StoredCheckpoint {
                size,
                root: to_hash(&root, "checkpoint root")?,
                note,
                time_ms,
            })
        })
        .transpose()
    }

    /// The consistency proof from the tree of `old_size` leaves to the tree
    /// of `new_size` leaves (not necessarily the current tree: records may
    /// have been appended since the checkpoint being witnessed), from the
    /// stored leaf hashes. Empty when `old_size` is 0 or equals `new_size`,
    /// which is what a witness expects then.
    pub fn consistency_proof_between(
        &self,
        old_size: u64,
        new_size: u64,
    ) -> Result<Vec<Hash>, StoreError> {
        if old_size > new_size {
            return Err(
                bulwark_audit::ProofError::OldSizeAfterNewSize { old_size, new_size }.into(),
            );
        }
        if old_size == 0 || old_size == new_size {
            return Ok(Vec::new());
        }
        let leaves = self.leaves_up_to(Some(new_size))?;
        Ok(proof::consistency_proof(&leaves, old_size, new_size)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use bulwark_audit::{AuditRecord, Decision};

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
            detail: String::new(),
            duration_us: n,
        }
    }

    fn sink_with(records: u64) -> SqliteAuditSink {
        let sink = Store::open_in_memory().unwrap().audit_sink();
        for n in 0..records {
            sink.append(&record(n)).unwrap();
        }
        sink
    }

    #[test]
    fn cosignatures_are_kept_per_witness_for_stored_checkpoints_only() {
        let sink = sink_with(5);
        let key = bulwark_audit::generate_signing_key();
        sink.checkpoint(&key, "o", "o").unwrap();
        let latest = sink.latest_checkpoint().unwrap().unwrap();
        let new = |witness, line| NewCosignature {
            size: 5,
            root: latest.root,
            witness,
            line,
            timestamp: 9,
        };
        assert!(sink.add_cosignature(&new("w1", "— w1 a")).unwrap());
        assert!(sink.add_cosignature(&new("w2", "— w2 b")).unwrap());
        // The first of one witness's cosignatures of one size is kept.
        assert!(!sink.add_cosignature(&new("w1", "— w1 c")).unwrap());
        let (checkpoint, stored) = sink.latest_checkpoint_cosignatures().unwrap().unwrap();
        assert_eq!(checkpoint.size, 5);
        assert_eq!(
            stored.iter().map(|c| c.line.as_str()).collect::<Vec<_>>(),
            ["— w1 a", "— w2 b"]
        );
        assert_eq!(sink.latest_cosigned_size("w1").unwrap(), Some(5));
        assert_eq!(sink.latest_cosigned_size("w3").unwrap(), None);

        // Not for a size or root this log never signed.
        let mut other = new("w3", "— w3 d");
        other.root = [0; 32];
        assert!(matches!(
            sink.add_cosignature(&other),
            Err(StoreError::Conflict(_))
        ));
        other.root = latest.root;
        other.size = 4;
        assert!(matches!(
            sink.add_cosignature(&other),
            Err(StoreError::Conflict(_))
        ));
        // Append-only.
        assert!(
            sink.store
                .lock()
                .unwrap()
                .execute("DELETE FROM audit_cosignature", [])
                .is_err()
        );
    }

    #[test]
    fn proofs_between_sizes_verify_even_after_more_records() {
        let sink = sink_with(11);
        let key = bulwark_audit::generate_signing_key();
        sink.checkpoint(&key, "o", "o").unwrap();
        let old = sink.latest_checkpoint().unwrap().unwrap();
        for n in 11..29 {
            sink.append(&record(n)).unwrap();
        }
        sink.checkpoint(&key, "o", "o").unwrap();
        let new = sink.latest_checkpoint().unwrap().unwrap();
        for n in 29..40 {
            sink.append(&record(n)).unwrap();
        }
        let proof = sink.consistency_proof_between(11, 29).unwrap();
        bulwark_audit::verify_consistency(11, 29, &old.root, &new.root, &proof).unwrap();
        assert!(sink.consistency_proof_between(0, 29).unwrap().is_empty());
        assert!(sink.consistency_proof_between(29, 29).unwrap().is_empty());
        assert!(sink.consistency_proof_between(30, 29).is_err());
        assert!(sink.consistency_proof_between(11, 41).is_err());
        assert_eq!(sink.checkpoint_at(11).unwrap().unwrap().root, old.root);
        assert_eq!(sink.checkpoint_at(12).unwrap(), None);
    }
}
