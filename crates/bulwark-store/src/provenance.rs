//! The label table: taint labels of content Bulwark stored, keyed by root,
//! path and content digest.
//!
//! The file system cannot keep labels (an agent's file tools would have to
//! trust what they read back, and extended attributes do not survive a copy
//! or a backup), so the store keeps them: an entry says "these bytes at this
//! path were written by Bulwark, under these labels". Reading the same bytes
//! back re-applies the labels; bytes with no entry were changed outside
//! Bulwark and count as the workspace's default trust.
//!
//! Labels only grow: recording unions with what is there, in one
//! transaction, so no sequence of writes can make tainted bytes read clean.
//! An empty set is an entry too ("written by Bulwark, clean").
//!
//! # Size
//!
//! Every write of new content adds an entry, so the table is bounded per
//! file: at most [`MAX_DIGESTS_PER_PATH`] digests of one (root, path) are
//! kept. When a write goes past that, the entry just written always stays,
//! then entries with an untrusted label are kept before clean or trusted
//! ones, newest first; the rest are deleted. The trade-off: the bytes of a
//! deleted entry are no longer the file's (it was written over since), but
//! if the file is later put back to exactly those bytes (a revert outside
//! Bulwark, say) it reads as "no provenance", i.e. the workspace's default
//! trust, not as the labels it once had. Preferring untrusted entries makes
//! that happen to tainted bytes only after 64 tainted versions of the same
//! file; a workspace whose default is `untrusted` loses nothing by it.

use crate::{Store, StoreError, sqlite};
use bulwark_policy::TaintLabel;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use std::collections::BTreeSet;

/// Longest root key, in bytes (`root_key` of the longest agent and user
/// names is well under it).
pub const MAX_PROVENANCE_ROOT_BYTES: usize = 256;
/// Longest path, in bytes.
pub const MAX_PROVENANCE_PATH_BYTES: usize = 4096;
/// Longest label name, in bytes.
pub const MAX_LABEL_NAME_BYTES: usize = 32;
/// Most labels one entry may have (there are six today).
pub const MAX_LABELS_PER_ENTRY: usize = 16;
/// Longest source (the tool call id of the first labelling), in bytes.
pub const MAX_PROVENANCE_SOURCE_BYTES: usize = 256;
/// Most digests kept per (root, path); see the module's "Size".
pub const MAX_DIGESTS_PER_PATH: usize = 64;

fn invalid(field: &'static str, why: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        field,
        why: why.into(),
    }
}

/// A field that is text a person could read back: not empty (when
/// `required`), within `max` bytes, no control characters.
fn check_text(
    field: &'static str,
    value: &str,
    max: usize,
    required: bool,
) -> Result<(), StoreError> {
    if required && value.is_empty() {
        return Err(invalid(field, "is empty"));
    }
    if value.len() > max {
        return Err(invalid(
            field,
            format!("is {} bytes; at most {max} are allowed", value.len()),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(invalid(field, "contains a control character"));
    }
    Ok(())
}

/// A label name: a short lowercase word (`a-z`, then `a-z`, `0-9`, `_`).
fn check_label(name: &str) -> Result<(), StoreError> {
    let mut bytes = name.bytes();
    let word = matches!(bytes.next(), Some(b'a'..=b'z'))
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !word || name.len() > MAX_LABEL_NAME_BYTES {
        return Err(invalid(
            "labels",
            format!(
                "a label name is a lowercase word of at most {MAX_LABEL_NAME_BYTES} bytes \
                 (a-z, then a-z, 0-9 or _); got {:?}",
                name.chars()
                    .take(MAX_LABEL_NAME_BYTES + 8)
                    .collect::<String>()
            ),
        ));
    }
    Ok(())
}

fn check_key(root: &str, path: &str) -> Result<(), StoreError> {
    check_text("root", root, MAX_PROVENANCE_ROOT_BYTES, true)?;
    check_text("path", path, MAX_PROVENANCE_PATH_BYTES, true)
}

/// Whether a set with these names is kept before clean ones when pruning:
/// a name this build does not know counts as untrusted.
fn untrusted(names: &BTreeSet<&str>) -> bool {
    names
        .iter()
        .any(|n| TaintLabel::parse(n).is_none_or(TaintLabel::is_untrusted))
}

impl Store {
    /// Adds `labels` to the entry (`root`, `path`, `digest`); an entry's
    /// labels only grow. An empty `labels` records "written by Bulwark,
    /// clean" (an entry with no labels). `source` (the tool call id) and
    /// the time are those of the first labelling and stay. Input that is
    /// not a root, a path or lowercase label names is refused with
    /// [`StoreError::Invalid`] and nothing is stored.
    pub fn record_provenance(
        &self,
        root: &str,
        path: &str,
        digest: &[u8; 32],
        labels: &[&str],
        source: &str,
    ) -> Result<(), StoreError> {
        check_key(root, path)?;
        check_text("source", source, MAX_PROVENANCE_SOURCE_BYTES, false)?;
        if labels.len() > MAX_LABELS_PER_ENTRY {
            return Err(invalid(
                "labels",
                format!(
                    "{} labels; at most {MAX_LABELS_PER_ENTRY} are allowed",
                    labels.len()
                ),
            ));
        }
        labels.iter().try_for_each(|l| check_label(l))?;

        let mut conn = self.lock()?;
        // IMMEDIATE: the read of the old labels and the write of the union
        // must not interleave with another process's record of the same key.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite("starting provenance record"))?;
        let stored: Option<String> = tx
            .prepare_cached(
                "SELECT labels FROM provenance WHERE root = ?1 AND path = ?2 AND digest = ?3",
            )
            .map_err(sqlite("preparing provenance read"))?
            .query_row(params![root, path, digest.as_slice()], |r| r.get(0))
            .optional()
            .map_err(sqlite("reading provenance"))?;
        let mut names: BTreeSet<&str> = labels.iter().copied().collect();
        if let Some(stored) = &stored {
            names.extend(stored.split_ascii_whitespace());
        }
        if names.len() > MAX_LABELS_PER_ENTRY {
            return Err(invalid(
                "labels",
                format!("an entry would have more than {MAX_LABELS_PER_ENTRY} labels"),
            ));
        }
        let joined = names.iter().copied().collect::<Vec<_>>().join(" ");
        let next_seq: i64 = tx
            .prepare_cached(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM provenance WHERE root = ?1 AND path = ?2",
            )
            .map_err(sqlite("preparing provenance sequence"))?
            .query_row(params![root, path], |r| r.get(0))
            .map_err(sqlite("reading provenance sequence"))?;
        // The first labelling's source and time stay; labels and recency
        // move.
        tx.prepare_cached(
            "INSERT INTO provenance (root, path, digest, labels, untrusted, source, time_ms, seq) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
             ON CONFLICT (root, path, digest) DO UPDATE SET \
                 labels = excluded.labels, untrusted = excluded.untrusted, seq = excluded.seq",
        )
        .map_err(sqlite("preparing provenance write"))?
        .execute(params![
            root,
            path,
            digest.as_slice(),
            joined,
            untrusted(&names),
            source,
            crate::now_ms(),
            next_seq
        ])
        .map_err(sqlite("writing provenance"))?;
        prune(&tx, root, path, digest)?;
        tx.commit().map_err(sqlite("committing provenance record"))
    }

    /// The labels of (`root`, `path`, `digest`), sorted; `None` without an
    /// entry (Bulwark never wrote these bytes there, or their entry was
    /// pruned), `Some(vec![])` for bytes Bulwark wrote clean.
    pub fn provenance(
        &self,
        root: &str,
        path: &str,
        digest: &[u8; 32],
    ) -> Result<Option<Vec<String>>, StoreError> {
        check_key(root, path)?;
        let conn = self.lock()?;
        let stored: Option<String> = conn
            .prepare_cached(
                "SELECT labels FROM provenance WHERE root = ?1 AND path = ?2 AND digest = ?3",
            )
            .map_err(sqlite("preparing provenance read"))?
            .query_row(params![root, path, digest.as_slice()], |r| r.get(0))
            .optional()
            .map_err(sqlite("reading provenance"))?;
        Ok(stored.map(|labels| labels.split_ascii_whitespace().map(str::to_owned).collect()))
    }

    /// How many digests of (`root`, `path`) have an entry.
    pub fn provenance_entries(&self, root: &str, path: &str) -> Result<u64, StoreError> {
        check_key(root, path)?;
        let conn = self.lock()?;
        let count: i64 = conn
            .prepare_cached("SELECT COUNT(*) FROM provenance WHERE root = ?1 AND path = ?2")
            .map_err(sqlite("preparing provenance count"))?
            .query_row(params![root, path], |r| r.get(0))
            .map_err(sqlite("counting provenance"))?;
        crate::to_u64(count, "provenance count")
    }
}

/// Keeps at most [`MAX_DIGESTS_PER_PATH`] digests of (`root`, `path`): the
/// one just written (`current`), then untrusted before clean, newest first.
fn prune(
    tx: &rusqlite::Transaction<'_>,
    root: &str,
    path: &str,
    current: &[u8; 32],
) -> Result<(), StoreError> {
    let others = crate::sql_limit(MAX_DIGESTS_PER_PATH - 1);
    tx.prepare_cached(
        "DELETE FROM provenance WHERE root = ?1 AND path = ?2 AND digest <> ?3 \
         AND digest NOT IN ( \
             SELECT digest FROM provenance WHERE root = ?1 AND path = ?2 AND digest <> ?3 \
             ORDER BY untrusted DESC, seq DESC LIMIT ?4)",
    )
    .map_err(sqlite("preparing provenance pruning"))?
    .execute(params![root, path, current.as_slice(), others])
    .map_err(sqlite("pruning provenance"))?;
    Ok(())
}
