//! Where models live and whether one is there and right.

use crate::verify;
use crate::{ModelSpec, Progress, Stage};
use std::path::{Path, PathBuf};

/// `$BULWARK_HOME/models`: the one place fetched models are installed and
/// `local:NAME` looks them up.
pub fn models_dir(home_root: &Path) -> PathBuf {
    home_root.join("models")
}

/// What is at a model's path, found without hashing (for listings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// No file.
    Missing,
    /// Something else than a regular file of the pinned size is there.
    Wrong,
    /// The right size, and the marker says it was hashed and matched.
    Verified,
    /// The right size but not yet hashed (copied in by hand, or the marker
    /// is gone); [`verify_installed`] decides.
    Unverified,
}

/// The path `spec` is installed at in `dir`, and its [`Status`].
pub fn status(spec: &ModelSpec, dir: &Path) -> (PathBuf, Status) {
    let path = dir.join(&spec.file);
    let status = match std::fs::symlink_metadata(&path) {
        Err(_) => Status::Missing,
        Ok(meta) if !meta.is_file() || meta.len() != spec.size => Status::Wrong,
        Ok(_) if verify::marker_valid(dir, spec, &path) => Status::Verified,
        Ok(_) => Status::Unverified,
    };
    (path, status)
}

/// Why [`verify_installed`] has no path to give.
#[derive(Debug, thiserror::Error)]
pub enum NotInstalled {
    #[error("{name} is not installed: {} does not exist", path.display())]
    Missing { name: String, path: PathBuf },
    #[error("{name} at {} is damaged: {reason}", path.display())]
    Wrong {
        name: String,
        path: PathBuf,
        reason: String,
    },
    #[error("cannot check {name} at {}: {source}", path.display())]
    Io {
        name: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The path of `spec` in `dir` if the file there has the pinned size and
/// SHA-256. Hashes at most once per file (a marker records the result), so
/// a driver can call this on every start. A wrong file is left alone
/// (fetching replaces it); the error says what is wrong.
pub fn verify_installed(
    spec: &ModelSpec,
    dir: &Path,
    progress: &mut dyn Progress,
) -> Result<PathBuf, NotInstalled> {
    let (path, status) = status(spec, dir);
    let wrong = |reason: String| NotInstalled::Wrong {
        name: spec.name.clone(),
        path: path.clone(),
        reason,
    };
    match status {
        Status::Verified => Ok(path),
        Status::Missing => Err(NotInstalled::Missing {
            name: spec.name.clone(),
            path,
        }),
        Status::Wrong => Err(wrong(format!(
            "it is not a regular file of {} bytes",
            spec.size
        ))),
        Status::Unverified => {
            progress.stage(Stage::Checking { path: &path }, Some(spec.size));
            let actual = verify::hash_file(&path, progress).map_err(|source| NotInstalled::Io {
                name: spec.name.clone(),
                path: path.clone(),
                source,
            })?;
            if actual != spec.sha256 {
                return Err(wrong(format!(
                    "its SHA-256 is {actual}, expected {}",
                    spec.sha256
                )));
            }
            verify::write_marker(dir, spec, &path);
            Ok(path)
        }
    }
}

/// Where the test suite and benchmarks find the default model:
/// `$BULWARK_TEST_MODEL`, else the cache `scripts/fetch-test-model` fills
/// (`$BULWARK_MODEL_CACHE`, else `~/.cache/bulwark/models`). `None` when
/// neither variable nor a home directory says where.
pub fn test_model_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("BULWARK_TEST_MODEL") {
        return Some(PathBuf::from(path));
    }
    let cache = std::env::var_os("BULWARK_MODEL_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/bulwark/models"))
        })?;
    Some(cache.join(crate::Catalogue::builtin().resolve(None).ok()?.file.clone()))
}
