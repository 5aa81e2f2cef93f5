//! Where a workspace path really leads.
//!
//! A grant names paths ("`public/**`"), but a symlink inside the workspace
//! can make `public/link` lead to `secret.txt`. The directory handle keeps
//! every access beneath the root; it does not know about grants. So before a
//! file operation is allowed, the path is resolved here one component at a
//! time, by hand: every directory is opened relative to its parent with
//! `O_NOFOLLOW`, every symlink is read and its target spliced into the
//! remaining components, and `..` pops the handle stack. What comes out is
//! the path actually reached *and* the handle of its parent directory, so the
//! grant check and the operation use the same object: a symlink swapped in
//! after the walk makes the final `O_NOFOLLOW` open fail rather than lead
//! somewhere unchecked.

use std::collections::VecDeque;
use std::io;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;

use crate::path::RelPath;
use crate::workspace::{FsError, map_io};

/// Symlinks followed in one resolution before giving up (Linux's own limit).
const MAX_SYMLINKS: usize = 40;

/// What the last component may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Last {
    /// Follow a final symlink (reads, listings, searches).
    Follow,
    /// Stop at the final component, symlink or not (writes never follow).
    Stop,
}

/// The outcome of a resolution.
#[derive(Debug)]
pub(crate) struct Reached {
    /// The deepest existing directory on the way: the parent of `name`, or
    /// the directory reached when `name` is `None`.
    pub(crate) dir: Dir,
    /// Directories below `dir` that do not exist yet (only when the walk may
    /// continue through missing ones, for writes).
    pub(crate) missing: Vec<String>,
    /// The final component, if the path does not end at `dir` itself.
    pub(crate) name: Option<String>,
    /// The path reached, relative to the root, `/`-separated (`""` = root).
    pub(crate) path: String,
}

impl Reached {
    /// Create the missing directories below `dir` (a write's parents) and
    /// return the one the final component lives in. Each is created and then
    /// opened without following symlinks, so a symlink planted at a missing
    /// name between the grant check and now is refused, not followed.
    pub(crate) fn create_missing(self, shown: &str) -> Result<(Dir, Option<String>), FsError> {
        let mut dir = self.dir;
        for name in &self.missing {
            match dir.create_dir(name) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(map_io(shown, e)),
            }
            dir = dir.open_dir_nofollow(name).map_err(|e| map_io(shown, e))?;
        }
        Ok((dir, self.name))
    }
}

fn escape(shown: &str, detail: &str) -> FsError {
    FsError::Escape {
        path: shown.to_string(),
        detail: detail.to_string(),
    }
}

/// Resolve `rel` beneath `root`. `shown` is the path as the caller gave it,
/// for messages. With `through_missing`, missing intermediate directories
/// are allowed (listed in [`Reached::missing`]); otherwise they are
/// `NotFound`. A missing final component is always allowed: the caller's
/// open reports it.
pub(crate) fn reach(
    root: &Dir,
    shown: &str,
    rel: &RelPath,
    last: Last,
    through_missing: bool,
) -> Result<Reached, FsError> {
    let mut pending: VecDeque<String> = rel.components().iter().cloned().collect();
    let mut stack: Vec<Dir> = vec![root.try_clone().map_err(|e| map_io(shown, e))?];
    let mut names: Vec<String> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let mut links = 0usize;
    while let Some(comp) = pending.pop_front() {
        let is_last = pending.is_empty();
        if comp == ".." {
            if !missing.is_empty() {
                return Err(FsError::NotFound { path: shown.into() });
            }
            if names.pop().is_none() {
                return Err(escape(
                    shown,
                    "it resolves outside the workspace (through a symlink); use a path inside the workspace",
                ));
            }
            stack.pop();
            continue;
        }
        let path_with = |names: &[String], missing: &[String], comp: &str| {
            let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
            all.extend(missing.iter().map(String::as_str));
            all.push(comp);
            all.join("/")
        };
        if !missing.is_empty() {
            // Below a missing directory nothing exists, so nothing is a link.
            if is_last {
                let path = path_with(&names, &missing, &comp);
                return finish(shown, stack, missing, Some(comp), path);
            }
            missing.push(comp);
            continue;
        }
        if is_last && last == Last::Stop {
            let path = path_with(&names, &missing, &comp);
            return finish(shown, stack, missing, Some(comp), path);
        }
        let Some(cur) = stack.last() else {
            return Err(escape(shown, "the walk lost its directory handle"));
        };
        match cur.symlink_metadata(&comp) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(escape(shown, "it goes through too many symbolic links"));
                }
                let target = cur
                    .read_link_contents(&comp)
                    .map_err(|e| map_io(shown, e))?;
                if target.is_absolute() {
                    return Err(escape(
                        shown,
                        "it goes through a symbolic link to an absolute path, which is never followed",
                    ));
                }
                let Some(target) = target.to_str() else {
                    return Err(escape(shown, "a symbolic link on the way is not UTF-8"));
                };
                for part in target
                    .split('/')
                    .filter(|p| !p.is_empty() && *p != ".")
                    .rev()
                {
                    pending.push_front(part.to_string());
                }
            }
            Ok(meta) if meta.file_type().is_dir() => {
                let sub = cur.open_dir_nofollow(&comp).map_err(|e| map_io(shown, e))?;
                stack.push(sub);
                names.push(comp);
            }
            Ok(_) if is_last => {
                let path = path_with(&names, &missing, &comp);
                return finish(shown, stack, missing, Some(comp), path);
            }
            Ok(_) => {
                return Err(FsError::NotADirectory { path: shown.into() });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if is_last {
                    let path = path_with(&names, &missing, &comp);
                    return finish(shown, stack, missing, Some(comp), path);
                }
                if !through_missing {
                    return Err(FsError::NotFound { path: shown.into() });
                }
                missing.push(comp);
            }
            Err(e) => return Err(map_io(shown, e)),
        }
    }
    let path = names.join("/");
    finish(shown, stack, missing, None, path)
}

fn finish(
    shown: &str,
    mut stack: Vec<Dir>,
    missing: Vec<String>,
    name: Option<String>,
    path: String,
) -> Result<Reached, FsError> {
    // The root is pushed first and popped only with a name above it, so the
    // stack is never empty here.
    let dir = stack
        .pop()
        .ok_or_else(|| escape(shown, "the walk lost its directory handle"))?;
    Ok(Reached {
        dir,
        missing,
        name,
        path,
    })
}
