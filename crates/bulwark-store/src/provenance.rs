//! The label table: taint labels of content Bulwark stored, keyed by root,
//! path and content digest.
//!
//! SKELETON: the store helper implements the table.

use crate::{Store, StoreError};

impl Store {
    /// Adds `labels` to the entry (`root`, `path`, `digest`); an entry's
    /// labels only grow.
    pub fn record_provenance(
        &self,
        _root: &str,
        _path: &str,
        _digest: &[u8; 32],
        _labels: &[&str],
        _source: &str,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    /// The labels of (`root`, `path`, `digest`), `None` without an entry.
    pub fn provenance(
        &self,
        _root: &str,
        _path: &str,
        _digest: &[u8; 32],
    ) -> Result<Option<Vec<String>>, StoreError> {
        Ok(None)
    }
}
