//! The capability-scoped workspace filesystem.
//!
//! Every operation resolves paths beneath one `cap_std::fs::Dir`. On Linux
//! cap-std uses `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` (or a
//! careful user-space walk where that is unavailable), so `..`, absolute
//! symlinks, relative symlinks that climb out, symlinked parent directories
//! and `/proc/self/root`-style magic links are all refused by the kernel at
//! the moment of use. There is no canonicalize-then-open step to race.
//!
//! On top of that boundary, this module refuses things that stay *inside* the
//! root but are still dangerous for an agent: writing through a symlink in
//! the final component (even one that dangles), files with more than one hard
//! link (which may alias a file outside the root), and FIFOs, sockets and
//! devices (which can hang a read or talk to hardware).

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, Metadata, MetadataExt, OpenOptions, OpenOptionsExt};

use crate::path::RelPath;

/// Size limit for [`Workspace::edit`], which has no caller-supplied cap:
/// edits are for source and text files, not for bulk data.
pub const EDIT_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// Files larger than this are skipped by [`Workspace::search`], so one huge
/// log or artifact cannot make a search slow or memory-hungry.
pub const SEARCH_MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Search hit text is cut to this many characters so one minified line does
/// not flood the model's context.
const SEARCH_MAX_LINE_CHARS: usize = 300;

/// Deeper directories are not searched; bounds the walk on pathological trees.
const SEARCH_MAX_DEPTH: usize = 64;

/// What went wrong with a workspace operation. Every variant names the path
/// as the caller gave it, so the message can be shown to the model as-is.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path is not allowed: lexically hostile, or it resolves outside the
    /// workspace, or it would write through a symlink.
    #[error("refused path {path:?}: {detail}")]
    Escape { path: String, detail: String },
    #[error(
        "{path:?} does not exist in the workspace; list the parent directory to see what is there"
    )]
    NotFound { path: String },
    #[error("{path:?} is not a regular file (it is a directory); pass the path of a file")]
    NotAFile { path: String },
    #[error(
        "{path:?} is not a directory (or one of its parents is a file); pass the path of a directory"
    )]
    NotADirectory { path: String },
    #[error("{path:?} is a FIFO, socket or device; only regular files and directories can be used")]
    SpecialFile { path: String },
    #[error(
        "{path:?} has more than one hard link and may alias a file outside the workspace; refusing it (copy the content to a new file instead)"
    )]
    HardLinked { path: String },
    #[error(
        "{path:?} is larger than the limit of {limit} bytes; use a smaller file or a narrower operation"
    )]
    TooLarge { path: String, limit: u64 },
    #[error(
        "the text to replace was not found in {path:?}; read the file and copy the exact text, including whitespace"
    )]
    NoMatch { path: String },
    #[error(
        "the text to replace occurs {count} times in {path:?}; include more surrounding text to make it unique, or set replace_all"
    )]
    AmbiguousMatch { path: String, count: usize },
    #[error("I/O error on {path:?}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// Kind of a directory entry, from `lstat` (symlinks are reported as such,
/// never followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One entry of [`Workspace::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    pub name: String,
    pub kind: EntryKind,
    /// Size in bytes from `lstat` (for a symlink: the length of its target).
    pub size: u64,
}

/// One line matched by [`Workspace::search`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    /// Workspace-relative path with `/` separators.
    pub path: String,
    /// 1-based line number.
    pub line: u64,
    /// The line, lossily decoded and cut to 300 characters.
    pub text: String,
}

/// A directory that agent file operations are confined to.
///
/// Holding a `Workspace` is the capability: the tool context hands one to a
/// tool only if the session's policy grants workspace access.
#[derive(Debug)]
pub struct Workspace {
    dir: Dir,
    root: PathBuf,
}

/// Distinguishes temp files of concurrent writes in the same process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Workspace {
    /// Open (creating if needed) the workspace rooted at `root`.
    ///
    /// This is the one place ambient authority is used: the operator's
    /// configuration names the root, and from here on every operation goes
    /// through the returned handle.
    pub fn open(root: &Path) -> Result<Workspace, FsError> {
        let io_err = |source| FsError::Io {
            path: root.display().to_string(),
            source,
        };
        std::fs::create_dir_all(root).map_err(io_err)?;
        let dir = Dir::open_ambient_dir(root, ambient_authority()).map_err(io_err)?;
        Ok(Workspace {
            dir,
            root: root.to_path_buf(),
        })
    }

    /// The root as given to [`Workspace::open`]; for messages only, never
    /// for opening files (that would bypass the handle).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Read a regular file of at most `max_bytes`.
    ///
    /// Symlinks are followed only while they stay inside the workspace.
    /// Hard-linked files are refused too: a link planted in the workspace to
    /// a file elsewhere on the same filesystem is indistinguishable from it.
    pub fn read(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>, FsError> {
        let rel = RelPath::parse(path)?;
        if rel.is_root() {
            return Err(FsError::NotAFile { path: path.into() });
        }
        let p = rel.to_path();
        // Refuse special files before opening them: opening a device can
        // have side effects. Re-checked on the handle below (no race).
        let pre = self.dir.metadata(&p).map_err(|e| map_io(path, e))?;
        check_regular(path, &pre)?;
        let file = self
            .dir
            .open_with(&p, &read_options(FollowSymlinks::Yes))
            .map_err(|e| map_io(path, e))?;
        read_checked(path, file, max_bytes)
    }

    /// Write `data` to `path`, creating parent directories inside the
    /// workspace. The final component is never followed if it is a symlink
    /// (even a dangling one), hard-linked targets are refused, and the
    /// content is written to a temporary file in the same directory and then
    /// renamed over the target, so readers never see a half-written file.
    pub fn write(&self, path: &str, data: &[u8], max_bytes: u64) -> Result<(), FsError> {
        if data.len() as u64 > max_bytes {
            return Err(FsError::TooLarge {
                path: path.into(),
                limit: max_bytes,
            });
        }
        let rel = RelPath::parse(path)?;
        let Some((parent_rel, name)) = rel.split_last() else {
            return Err(FsError::NotAFile { path: path.into() });
        };
        let parent = self.open_parent(path, &parent_rel, true)?;
        let existing = check_write_target(path, &parent, name)?;

        let tmp_name = format!(
            ".bulwark-tmp-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let result = write_temp_then_rename(path, &parent, &tmp_name, name, data, existing);
        if result.is_err() {
            // Best effort: the temp name is ours alone (O_EXCL), so removing
            // it cannot touch anything else.
            let _ = parent.remove_file(&tmp_name);
        }
        result
    }

    /// List a directory (`""` or `"."` is the root), sorted by name.
    pub fn list(&self, path: &str) -> Result<Vec<EntryInfo>, FsError> {
        let rel = RelPath::parse(path)?;
        let dir = self.open_dir(path, &rel)?;
        let mut out = Vec::new();
        for entry in dir.entries().map_err(|e| map_io(path, e))? {
            let entry = entry.map_err(|e| map_io(path, e))?;
            let meta = entry.metadata().map_err(|e| map_io(path, e))?;
            let ft = meta.file_type();
            let kind = if ft.is_symlink() {
                EntryKind::Symlink
            } else if ft.is_dir() {
                EntryKind::Dir
            } else if ft.is_file() {
                EntryKind::File
            } else {
                EntryKind::Other
            };
            out.push(EntryInfo {
                name: entry.file_name().to_string_lossy().into_owned(),
                kind,
                size: meta.len(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Replace `old` with `new` in a UTF-8 text file. Unless `replace_all`,
    /// `old` must occur exactly once, so the model cannot silently edit the
    /// wrong place. Returns the number of replacements.
    pub fn edit(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<usize, FsError> {
        if old.is_empty() {
            return Err(FsError::Io {
                path: path.into(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the text to replace is empty; pass the exact text to change",
                ),
            });
        }
        let bytes = self.read(path, EDIT_MAX_BYTES)?;
        let text = String::from_utf8(bytes).map_err(|_| FsError::Io {
            path: path.into(),
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                "file is not valid UTF-8; edit only works on text files",
            ),
        })?;
        let count = text.matches(old).count();
        if count == 0 {
            return Err(FsError::NoMatch { path: path.into() });
        }
        if count > 1 && !replace_all {
            return Err(FsError::AmbiguousMatch {
                path: path.into(),
                count,
            });
        }
        let updated = text.replace(old, new);
        self.write(path, updated.as_bytes(), EDIT_MAX_BYTES)?;
        Ok(count)
    }

    /// Recursive substring search under `path` (a file or directory).
    ///
    /// Symlinks are never followed (neither files nor directories), so a
    /// search cannot be steered into a loop or out of the tree. Files larger
    /// than [`SEARCH_MAX_FILE_BYTES`], binary files (containing NUL), special
    /// files and hard-linked files are skipped, as are unreadable entries.
    pub fn search(
        &self,
        path: &str,
        needle: &str,
        max_results: usize,
    ) -> Result<Vec<SearchHit>, FsError> {
        if needle.is_empty() {
            return Err(FsError::Io {
                path: path.into(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the search text is empty; pass the text to look for",
                ),
            });
        }
        let rel = RelPath::parse(path)?;
        let mut hits = Vec::new();
        if max_results == 0 {
            return Ok(hits);
        }
        let meta = self
            .dir
            .symlink_metadata(rel.to_path())
            .map_err(|e| map_io(path, e))?;
        let ft = meta.file_type();
        if ft.is_file() {
            let (parent_rel, name) = rel
                .split_last()
                .ok_or_else(|| FsError::NotAFile { path: path.into() })?;
            let parent = self.open_parent(path, &parent_rel, false)?;
            search_file(
                &parent,
                name,
                &rel.display(),
                needle,
                max_results,
                &mut hits,
            );
        } else if ft.is_dir() {
            let dir = self.open_dir(path, &rel)?;
            search_dir(dir, rel.display(), needle, max_results, &mut hits, 0);
        }
        Ok(hits)
    }

    /// Open a directory beneath the root (the root itself for `""`).
    fn open_dir(&self, path: &str, rel: &RelPath) -> Result<Dir, FsError> {
        if rel.is_root() {
            return self.dir.try_clone().map_err(|e| map_io(path, e));
        }
        self.dir
            .open_dir(rel.to_path())
            .map_err(|e| map_io(path, e))
    }

    /// Open the parent directory of a target, optionally creating it. cap-std
    /// resolves it beneath the root, so a symlinked parent pointing outside
    /// fails here.
    fn open_parent(&self, path: &str, parent: &RelPath, create: bool) -> Result<Dir, FsError> {
        if create && !parent.is_root() {
            match self.dir.create_dir_all(parent.to_path()) {
                // Something that is not a plain directory is in the way (a
                // file, or a symlink cap-std will not follow out of the
                // root); opening it below reports precisely which.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(map_io(path, e)),
                Ok(()) => {}
            }
        }
        self.open_dir(path, parent)
    }
}

/// Options for reading: non-blocking so that a FIFO swapped in after the
/// pre-check cannot hang the open or the read (the handle is then refused by
/// its type), and `O_NOCTTY` so a terminal device can never become ours.
fn read_options(follow: FollowSymlinks) -> OpenOptions {
    let mut opts = OpenOptions::new();
    opts.read(true)
        .follow(follow)
        .nonblock(true)
        .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32);
    opts
}

/// Check type, link count and size on the *opened handle* (no TOCTOU), then
/// read at most `max_bytes`, refusing files that grow past it while read.
fn read_checked(path: &str, file: File, max_bytes: u64) -> Result<Vec<u8>, FsError> {
    let meta = file.metadata().map_err(|e| map_io(path, e))?;
    check_regular(path, &meta)?;
    if meta.nlink() > 1 {
        return Err(FsError::HardLinked { path: path.into() });
    }
    let too_large = || FsError::TooLarge {
        path: path.into(),
        limit: max_bytes,
    };
    if meta.len() > max_bytes {
        return Err(too_large());
    }
    let mut buf = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| map_io(path, e))?;
    if buf.len() as u64 > max_bytes {
        return Err(too_large());
    }
    Ok(buf)
}

/// Regular files only: directories and special files are refused.
fn check_regular(path: &str, meta: &Metadata) -> Result<(), FsError> {
    let ft = meta.file_type();
    if ft.is_dir() {
        Err(FsError::NotAFile { path: path.into() })
    } else if !ft.is_file() {
        Err(FsError::SpecialFile { path: path.into() })
    } else {
        Ok(())
    }
}

/// Decide whether `name` in `parent` may be replaced. Returns the existing
/// file's metadata (to keep its permissions) or `None` for a new file.
fn check_write_target(path: &str, parent: &Dir, name: &str) -> Result<Option<Metadata>, FsError> {
    match parent.symlink_metadata(name) {
        Ok(meta) => {
            let ft = meta.file_type();
            if ft.is_symlink() {
                return Err(FsError::Escape {
                    path: path.into(),
                    detail: "the target is a symbolic link and writes never follow symlinks; \
                             write to the real file instead"
                        .into(),
                });
            }
            check_regular(path, &meta)?;
            if meta.nlink() > 1 {
                return Err(FsError::HardLinked { path: path.into() });
            }
            Ok(Some(meta))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(map_io(path, e)),
    }
}

/// Write to a fresh temp file (`O_CREAT|O_EXCL|O_NOFOLLOW`), fsync it, then
/// rename it over the target. `rename` replaces the directory entry itself
/// and never follows a symlink, so even if the target is swapped for a
/// symlink or hard link after [`check_write_target`], nothing outside the
/// workspace is written; the target is re-checked right before the rename to
/// keep the documented refusals as tight as possible.
fn write_temp_then_rename(
    path: &str,
    parent: &Dir,
    tmp_name: &str,
    name: &str,
    data: &[u8],
    existing: Option<Metadata>,
) -> Result<(), FsError> {
    let mut opts = OpenOptions::new();
    opts.write(true)
        .create_new(true)
        .follow(FollowSymlinks::No)
        .mode(0o666);
    let mut tmp = parent
        .open_with(tmp_name, &opts)
        .map_err(|e| map_io(path, e))?;
    tmp.write_all(data).map_err(|e| map_io(path, e))?;
    if let Some(meta) = existing {
        tmp.set_permissions(meta.permissions())
            .map_err(|e| map_io(path, e))?;
    }
    tmp.sync_all().map_err(|e| map_io(path, e))?;
    drop(tmp);
    check_write_target(path, parent, name)?;
    parent
        .rename(tmp_name, parent, name)
        .map_err(|e| map_io(path, e))
}

/// Search one file in `dir` without following symlinks; silently skips
/// anything that is not a small, single-linked, regular, non-binary file.
fn search_file(
    dir: &Dir,
    name: &str,
    display: &str,
    needle: &str,
    max_results: usize,
    hits: &mut Vec<SearchHit>,
) {
    let Ok(file) = dir.open_with(name, &read_options(FollowSymlinks::No)) else {
        return;
    };
    let Ok(data) = read_checked(display, file, SEARCH_MAX_FILE_BYTES) else {
        return;
    };
    if data.contains(&0) {
        return;
    }
    for (idx, line) in data.split(|b| *b == b'\n').enumerate() {
        if hits.len() >= max_results {
            return;
        }
        let line = String::from_utf8_lossy(line);
        if line.contains(needle) {
            let text: String = line
                .trim_end_matches('\r')
                .chars()
                .take(SEARCH_MAX_LINE_CHARS)
                .collect();
            hits.push(SearchHit {
                path: display.to_string(),
                line: idx as u64 + 1,
                text,
            });
        }
    }
}

/// Depth-first walk in name order (deterministic results). Subdirectories
/// are opened with `O_NOFOLLOW` relative to their parent handle, so swapping
/// a directory for a symlink mid-walk cannot redirect the search.
fn search_dir(
    dir: Dir,
    prefix: String,
    needle: &str,
    max_results: usize,
    hits: &mut Vec<SearchHit>,
    depth: usize,
) {
    if depth > SEARCH_MAX_DEPTH {
        return;
    }
    let Ok(entries) = dir.entries() else {
        return;
    };
    let mut children: Vec<(String, cap_std::fs::FileType)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let ft = e.file_type().ok()?;
            Some((name, ft))
        })
        .collect();
    children.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, ft) in children {
        if hits.len() >= max_results {
            return;
        }
        let child = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if ft.is_dir() {
            if let Ok(sub) = dir.open_dir_nofollow(&name) {
                search_dir(sub, child, needle, max_results, hits, depth + 1);
            }
        } else if ft.is_file() {
            search_file(&dir, &name, &child, needle, max_results, hits);
        }
    }
}

/// True for cap-std's "a path led outside of the filesystem" error, which it
/// raises (also for the kernel's `EXDEV` from `RESOLVE_BENEATH`) whenever
/// resolution would leave the root.
fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
        && e.raw_os_error().is_none()
        && e.to_string().contains("outside of the filesystem")
}

/// Map an I/O error to the variant that tells the model what to do.
fn map_io(path: &str, e: io::Error) -> FsError {
    let path = path.to_string();
    if is_escape(&e) {
        return FsError::Escape {
            path,
            detail: "it resolves outside the workspace (through a symlink or similar); \
                     use a path inside the workspace"
                .into(),
        };
    }
    if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        return FsError::Escape {
            path,
            detail: "it is a symbolic link (or a loop of them) that is not followed here".into(),
        };
    }
    match e.kind() {
        io::ErrorKind::NotFound => FsError::NotFound { path },
        io::ErrorKind::NotADirectory => FsError::NotADirectory { path },
        io::ErrorKind::IsADirectory => FsError::NotAFile { path },
        _ => FsError::Io { path, source: e },
    }
}
