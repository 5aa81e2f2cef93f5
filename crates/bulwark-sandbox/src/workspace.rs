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
use crate::reach::{Last, reach};

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
    /// The path leads (through symlinks) somewhere the caller's grants do
    /// not cover.
    #[error(
        "{path:?} leads to {reached:?} in the workspace, which the agent's file grants do not cover; use a path the grants cover (symbolic links are checked where they lead)"
    )]
    NotCovered { path: String, reached: String },
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

    /// Read a regular file of at most `max_bytes`, with no grant to check
    /// (memory notes, tests): [`Workspace::read_gated`] with an open gate.
    pub fn read(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>, FsError> {
        self.read_gated(path, max_bytes, &open_gate)
    }

    /// Read a regular file of at most `max_bytes`, if `gate` allows the path
    /// it actually leads to.
    ///
    /// Symlinks are followed only while they stay inside the workspace, and
    /// the gate sees where they lead, not the path as written. Hard-linked
    /// files are refused too: a link planted in the workspace to a file
    /// elsewhere on the same filesystem is indistinguishable from it.
    pub fn read_gated(
        &self,
        path: &str,
        max_bytes: u64,
        gate: Gate<'_>,
    ) -> Result<Vec<u8>, FsError> {
        let rel = RelPath::parse(path)?;
        if rel.is_root() {
            return Err(FsError::NotAFile { path: path.into() });
        }
        let reached = reach(&self.dir, path, &rel, Last::Follow, false)?;
        let Some(name) = reached.name.as_deref() else {
            return Err(FsError::NotAFile { path: path.into() });
        };
        check_gate(path, &reached.path, gate)?;
        // Refuse special files before opening them: opening a device can
        // have side effects. Re-checked on the handle below (no race).
        let pre = reached
            .dir
            .symlink_metadata(name)
            .map_err(|e| map_io(path, e))?;
        if pre.file_type().is_symlink() {
            return Err(changed_underfoot(path));
        }
        check_regular(path, &pre)?;
        let file = reached
            .dir
            .open_with(name, &read_options(FollowSymlinks::No))
            .map_err(|e| map_io(path, e))?;
        read_checked(path, file, max_bytes)
    }

    /// Write with no grant to check: [`Workspace::write_gated`] with an open
    /// gate.
    pub fn write(&self, path: &str, data: &[u8], max_bytes: u64) -> Result<(), FsError> {
        self.write_gated(path, data, max_bytes, &open_gate)
    }

    /// Write `data` to `path`, creating parent directories inside the
    /// workspace, if `gate` allows the path actually written (a symlinked
    /// parent directory is resolved first). The final component is never
    /// followed if it is a symlink (even a dangling one), hard-linked targets
    /// are refused, and the content is written to a temporary file in the
    /// same directory and then renamed over the target, so readers never see
    /// a half-written file.
    pub fn write_gated(
        &self,
        path: &str,
        data: &[u8],
        max_bytes: u64,
        gate: Gate<'_>,
    ) -> Result<(), FsError> {
        if data.len() as u64 > max_bytes {
            return Err(FsError::TooLarge {
                path: path.into(),
                limit: max_bytes,
            });
        }
        let rel = RelPath::parse(path)?;
        if rel.is_root() {
            return Err(FsError::NotAFile { path: path.into() });
        }
        let reached = reach(&self.dir, path, &rel, Last::Stop, true)?;
        // Checked before any parent directory is created: making `config/x`
        // through `out/cfg -> ../config` is already a write there.
        check_gate(path, &reached.path, gate)?;
        let (parent, name) = reached.create_missing(path)?;
        let Some(name) = name else {
            return Err(FsError::NotAFile { path: path.into() });
        };
        let existing = check_write_target(path, &parent, &name)?;

        let tmp_name = format!(
            ".bulwark-tmp-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let result = write_temp_then_rename(path, &parent, &tmp_name, &name, data, existing);
        if result.is_err() {
            // Best effort: the temp name is ours alone (O_EXCL), so removing
            // it cannot touch anything else.
            let _ = parent.remove_file(&tmp_name);
        }
        result
    }

    /// List a directory (`""` or `"."` is the root), sorted by name.
    pub fn list(&self, path: &str) -> Result<Vec<EntryInfo>, FsError> {
        self.list_gated(path, &open_gate)
            .map(|(entries, _)| entries)
    }

    /// List a directory the gate allows (where it really is), returning only
    /// the entries the gate allows too, and how many were left out.
    pub fn list_gated(
        &self,
        path: &str,
        gate: Gate<'_>,
    ) -> Result<(Vec<EntryInfo>, usize), FsError> {
        let rel = RelPath::parse(path)?;
        let reached = reach(&self.dir, path, &rel, Last::Follow, false)?;
        if let Some(name) = reached.name.as_deref() {
            return Err(match reached.dir.symlink_metadata(name) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    FsError::NotFound { path: path.into() }
                }
                Ok(meta) if meta.file_type().is_symlink() => changed_underfoot(path),
                _ => FsError::NotADirectory { path: path.into() },
            });
        }
        check_gate(path, &reached.path, gate)?;
        let mut out = Vec::new();
        let mut hidden = 0usize;
        for entry in reached.dir.entries().map_err(|e| map_io(path, e))? {
            let entry = entry.map_err(|e| map_io(path, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !gate(&child_path(&reached.path, &name)) {
                hidden += 1;
                continue;
            }
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
                name,
                kind,
                size: meta.len(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((out, hidden))
    }

    /// Edit with no grant to check: [`Workspace::edit_gated`] with open
    /// gates.
    pub fn edit(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<usize, FsError> {
        self.edit_gated(path, old, new, replace_all, &open_gate, &open_gate)
    }

    /// Replace `old` with `new` in a UTF-8 text file. Unless `replace_all`,
    /// `old` must occur exactly once, so the model cannot silently edit the
    /// wrong place. The read and the write each pass their own gate on the
    /// path really reached. Returns the number of replacements.
    pub fn edit_gated(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
        read_gate: Gate<'_>,
        write_gate: Gate<'_>,
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
        let bytes = self.read_gated(path, EDIT_MAX_BYTES, read_gate)?;
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
        self.write_gated(path, updated.as_bytes(), EDIT_MAX_BYTES, write_gate)?;
        Ok(count)
    }

    /// Search with no grant to check: [`Workspace::search_gated`] with an
    /// open gate.
    pub fn search(
        &self,
        path: &str,
        needle: &str,
        max_results: usize,
    ) -> Result<Vec<SearchHit>, FsError> {
        self.search_gated(path, needle, max_results, &open_gate)
            .map(|(hits, _)| hits)
    }

    /// Recursive substring search under `path` (a file or directory, where
    /// it really is), reading only files the gate allows; returns the hits
    /// and how many files were skipped for the gate.
    ///
    /// Below the starting point symlinks are never followed (neither files
    /// nor directories), so a search cannot be steered into a loop or out of
    /// the tree. Files larger than [`SEARCH_MAX_FILE_BYTES`], binary files
    /// (containing NUL), special files and hard-linked files are skipped, as
    /// are unreadable entries.
    pub fn search_gated(
        &self,
        path: &str,
        needle: &str,
        max_results: usize,
        gate: Gate<'_>,
    ) -> Result<(Vec<SearchHit>, usize), FsError> {
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
        let mut walk = SearchWalk {
            needle: &needle.to_lowercase(),
            max_results,
            gate,
            hits: Vec::new(),
            skipped: 0,
        };
        if max_results == 0 {
            return Ok((walk.hits, 0));
        }
        let reached = reach(&self.dir, path, &rel, Last::Follow, false)?;
        check_gate(path, &reached.path, gate)?;
        match reached.name.as_deref() {
            None => walk.dir(reached.dir, reached.path.clone(), 0),
            Some(name) => {
                let meta = reached
                    .dir
                    .symlink_metadata(name)
                    .map_err(|e| map_io(path, e))?;
                if meta.file_type().is_file() {
                    walk.file(&reached.dir, name, &reached.path);
                }
            }
        }
        Ok((walk.hits, walk.skipped))
    }
}

/// Decides, for each path an operation really reaches (relative to the
/// root, `/`-separated, `""` for the root), whether it may be touched.
pub type Gate<'a> = &'a (dyn Fn(&str) -> bool + Sync);

/// The gate of callers with no grants to check.
fn open_gate(_: &str) -> bool {
    true
}

fn check_gate(shown: &str, reached: &str, gate: Gate<'_>) -> Result<(), FsError> {
    if gate(reached) {
        Ok(())
    } else {
        Err(FsError::NotCovered {
            path: shown.into(),
            reached: reached.into(),
        })
    }
}

fn child_path(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn changed_underfoot(path: &str) -> FsError {
    FsError::Escape {
        path: path.into(),
        detail: "it was replaced by a symbolic link while being opened; try again".into(),
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

/// One search: what to look for, where it may look, what it found.
struct SearchWalk<'a> {
    /// Lowercased: a search ignores case ("rufus" finds "Rufus").
    needle: &'a str,
    max_results: usize,
    gate: Gate<'a>,
    hits: Vec<SearchHit>,
    /// Files left unread because the gate does not allow them.
    skipped: usize,
}

impl SearchWalk<'_> {
    fn full(&self) -> bool {
        self.hits.len() >= self.max_results
    }

    /// Search one file in `dir` without following symlinks; silently skips
    /// anything that is not a small, single-linked, regular, non-binary
    /// file, and counts what the gate does not allow.
    fn file(&mut self, dir: &Dir, name: &str, display: &str) {
        if !(self.gate)(display) {
            self.skipped += 1;
            return;
        }
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
            if self.full() {
                return;
            }
            let line = String::from_utf8_lossy(line);
            if line.to_lowercase().contains(self.needle) {
                let text: String = line
                    .trim_end_matches('\r')
                    .chars()
                    .take(SEARCH_MAX_LINE_CHARS)
                    .collect();
                self.hits.push(SearchHit {
                    path: display.to_string(),
                    line: idx as u64 + 1,
                    text,
                });
            }
        }
    }

    /// Depth-first walk in name order (deterministic results).
    /// Subdirectories are opened with `O_NOFOLLOW` relative to their parent
    /// handle, so swapping a directory for a symlink mid-walk cannot redirect
    /// the search. Directories the gate does not allow are still walked (a
    /// grant like `**/*.md` covers files below them), but only files the
    /// gate allows are read.
    fn dir(&mut self, dir: Dir, prefix: String, depth: usize) {
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
            if self.full() {
                return;
            }
            let child = child_path(&prefix, &name);
            if ft.is_dir() {
                if let Ok(sub) = dir.open_dir_nofollow(&name) {
                    self.dir(sub, child, depth + 1);
                }
            } else if ft.is_file() {
                self.file(&dir, &name, &child);
            }
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
pub(crate) fn map_io(path: &str, e: io::Error) -> FsError {
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
