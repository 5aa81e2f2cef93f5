//! Hashing while writing, and the marker that spares re-hashing a file that
//! was already verified.

use crate::fetch::SourceError;
use crate::{ModelSpec, Progress};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use tempfile::NamedTempFile;

/// Prefix of everything the fetcher creates temporarily in the models
/// directory; under the fetch lock, leftovers with it are from a fetch that
/// was killed and are removed.
pub(crate) const TEMP_PREFIX: &str = ".fetch-";

const BUFFER: usize = 1 << 20;
/// Progress callbacks at most every this many bytes.
const REPORT_EVERY: u64 = 4 << 20;

/// A temporary file in the models directory that hashes what is written to
/// it and refuses more than the expected size. Dropping it deletes the file,
/// so a failed or abandoned attempt leaves nothing behind.
pub(crate) struct Sink {
    file: NamedTempFile,
    hasher: Sha256,
    written: u64,
    expected: u64,
    last_report: u64,
}

impl Sink {
    pub(crate) fn new(dir: &Path, expected: u64) -> Result<Self, SourceError> {
        let mut builder = tempfile::Builder::new();
        builder.prefix(TEMP_PREFIX).suffix(".partial");
        // Weights are public data: readable like any downloaded file (the
        // home directory itself is owner-only), not tempfile's 0600.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
        let file = builder
            .tempfile_in(dir)
            .map_err(|source| SourceError::Write {
                dir: dir.to_owned(),
                source,
            })?;
        Ok(Self {
            file,
            hasher: Sha256::new(),
            written: 0,
            expected,
            last_report: 0,
        })
    }

    /// Copies all of `reader` in, naming `what` in errors. The byte count
    /// reported to `progress` is the sink's total, so parts joined one after
    /// another count up as one file.
    pub(crate) fn pump(
        &mut self,
        reader: &mut dyn Read,
        what: &str,
        progress: &mut dyn Progress,
    ) -> Result<(), SourceError> {
        let mut buf = vec![0u8; BUFFER];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => {
                    progress.bytes(self.written);
                    return Ok(());
                }
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(SourceError::Read {
                        what: what.to_owned(),
                        source,
                    });
                }
            };
            let chunk = buf.get(..n).unwrap_or_default();
            // Stop as soon as the stream is longer than the model: a wrong
            // or hostile source cannot fill the disk.
            if self.written + n as u64 > self.expected {
                return Err(SourceError::TooLarge {
                    what: what.to_owned(),
                    expected: self.expected,
                });
            }
            self.hasher.update(chunk);
            self.file
                .write_all(chunk)
                .map_err(|source| SourceError::Write {
                    dir: self.dir(),
                    source,
                })?;
            self.written += n as u64;
            if self.written - self.last_report >= REPORT_EVERY {
                self.last_report = self.written;
                progress.bytes(self.written);
            }
        }
    }

    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    fn dir(&self) -> PathBuf {
        self.file
            .path()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// The file, if its size and hash are the spec's; otherwise it is
    /// deleted and the error says what was wrong with `what`.
    pub(crate) fn finish(self, spec: &ModelSpec, what: &str) -> Result<NamedTempFile, SourceError> {
        if self.written != spec.size {
            return Err(SourceError::Size {
                what: what.to_owned(),
                actual: self.written,
                expected: spec.size,
            });
        }
        let dir = self.dir();
        let actual = hex::encode(self.hasher.finalize());
        if actual != spec.sha256 {
            return Err(SourceError::Hash {
                what: what.to_owned(),
                actual,
                expected: spec.sha256.clone(),
            });
        }
        // Durable before the rename makes it the model.
        self.file
            .as_file()
            .sync_all()
            .map_err(|source| SourceError::Write { dir, source })?;
        Ok(self.file)
    }
}

/// The SHA-256 of the file at `path`, reporting progress in bytes.
pub(crate) fn hash_file(path: &Path, progress: &mut dyn Progress) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; BUFFER];
    let (mut done, mut last) = (0u64, 0u64);
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(buf.get(..n).unwrap_or_default());
        done += n as u64;
        if done - last >= REPORT_EVERY {
            last = done;
            progress.bytes(done);
        }
    }
    progress.bytes(done);
    Ok(hex::encode(hasher.finalize()))
}

/// `models/.<file>.verified`: records that the file with this identity
/// (size, modification time, device and inode) had the pinned hash, so
/// `model path` and the driver need not re-hash hundreds of megabytes on
/// every start. Anyone who can replace the model can replace the marker
/// too, so it protects against accidents (a re-download, a truncation),
/// which change the identity, not against the directory's owner.
pub(crate) fn marker_path(dir: &Path, spec: &ModelSpec) -> PathBuf {
    dir.join(format!(".{}.verified", spec.file))
}

fn fingerprint(spec: &ModelSpec, meta: &std::fs::Metadata) -> String {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    #[cfg(unix)]
    let (dev, ino) = {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    };
    #[cfg(not(unix))]
    let (dev, ino) = (0u64, 0u64);
    format!(
        "sha256={} size={} mtime_ns={mtime} dev={dev} ino={ino}\n",
        spec.sha256,
        meta.len()
    )
}

/// Whether the marker vouches for the file at `path` as it is now.
pub(crate) fn marker_valid(dir: &Path, spec: &ModelSpec, path: &Path) -> bool {
    let (Ok(meta), Ok(marker)) = (
        std::fs::metadata(path),
        std::fs::read_to_string(marker_path(dir, spec)),
    ) else {
        return false;
    };
    meta.len() == spec.size && marker == fingerprint(spec, &meta)
}

/// Records that the file at `path` was verified. Best effort: without the
/// marker the next check hashes again, which is slow but correct.
pub(crate) fn write_marker(dir: &Path, spec: &ModelSpec, path: &Path) {
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::write(marker_path(dir, spec), fingerprint(spec, &meta));
    }
}

pub(crate) fn remove_marker(dir: &Path, spec: &ModelSpec) {
    let _ = std::fs::remove_file(marker_path(dir, spec));
}
