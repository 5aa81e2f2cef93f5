//! A private mount namespace with a minimal root, built the way bubblewrap
//! builds one, so a sandboxed command cannot even name what it was not given.
//!
//! Landlock (at the ABIs this crate targets) does not mediate `connect` on a
//! pathname UNIX socket, and the command needs `AF_UNIX` for itself, so any
//! socket on the host file system (Docker, D-Bus, ssh-agent, a root-only
//! listener under `/run`) would be in reach. In the new root such a socket
//! simply does not exist: the root is an empty tmpfs holding only
//!
//! * [`SYSTEM_DIRS`] and [`ETC_ENTRIES`], bound read-only (`nosuid`,
//!   `nodev`); merged-`/usr` symlinks such as `/bin -> usr/bin` recreated;
//! * `/dev/{null,zero,full,random,urandom,tty}`, each node bound alone;
//! * the spec's read-only directories (read-only), its workspace and
//!   read-write directories (read-write, `nosuid`, `nodev`), at their own
//!   paths; the workspace's `.git/config` and `.git/hooks`, when they exist
//!   at spawn time, bound read-only over themselves so a command cannot
//!   plant an `fsmonitor` or a hook for a later `git`;
//! * fresh, empty tmpfs mounts at `/tmp` (the command's `TMPDIR`), `/run`,
//!   and [`SANDBOX_HOME`] (its `HOME` and XDG directories);
//! * no `/proc` and no `/sys`: there is no PID namespace for a fresh
//!   `/proc`, a bind of the host's would show every host process, and
//!   Landlock never granted either.
//!
//! Binds are made in this order: sources are cloned from the host tree
//! first (`open_tree`), so symbolic links in them resolve on the host;
//! then the tmpfs root is attached at `/tmp`, every clone is moved onto a
//! mount point created beneath it (resolved with `RESOLVE_IN_ROOT`, so no
//! link can lead out of the new root), the process `pivot_root`s into it
//! and detaches the old root, and the new root is made read-only.
//!
//! Abstract UNIX sockets have no path: they belong to the network
//! namespace. Without network the command has its own (empty) one; with
//! network it shares the host's, where Landlock scoping (ABI 6+) is what
//! keeps it from connecting to sockets created outside the sandbox.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountPropagationFlags, MoveMountFlags,
    OpenTreeFlags, UnmountFlags,
};

use crate::landlock_rules::{DEVICES_RO, DEVICES_RW, ETC_ENTRIES, SYSTEM_DIRS};
use crate::spec::SandboxSpec;

/// `HOME` of a sandboxed command: an empty tmpfs of its own (read-only
/// under a self-confined caller, whose commands share one namespace).
pub const SANDBOX_HOME: &str = "/home/agent";
/// The private `/tmp` of a sandboxed command, and its `TMPDIR`.
pub const SANDBOX_TMP: &str = "/tmp";
/// Where the new root is attached while it is built (it exists on every
/// system this runs on; the host's `/tmp` is not touched: the mount is in
/// the private namespace).
const STAGING: &str = "/tmp";
/// Size of the new root itself, which only holds mount points.
const ROOT_SIZE: u64 = 1 << 20;
/// Size of `/run`, which nothing needs to fill.
const RUN_SIZE: u64 = 1 << 20;

/// The environment a command gets inside the mount namespace, replacing
/// whatever the caller passed for these names.
pub(crate) fn private_env() -> Vec<(&'static str, String)> {
    let home = SANDBOX_HOME;
    vec![
        ("HOME", home.to_string()),
        ("XDG_CONFIG_HOME", format!("{home}/.config")),
        ("XDG_CACHE_HOME", format!("{home}/.cache")),
        ("XDG_DATA_HOME", format!("{home}/.local/share")),
        ("XDG_STATE_HOME", format!("{home}/.local/state")),
        ("TMPDIR", SANDBOX_TMP.to_string()),
    ]
}

/// What is mounted at one path of the new root.
#[derive(Debug, Clone, PartialEq, Eq)]
enum What {
    /// A clone of a host tree or file (a bind mount).
    Bind {
        source: PathBuf,
        /// A missing source is an error (the spec asked for it) rather
        /// than skipped (not every system has `/lib32`).
        required: bool,
        read_only: bool,
        /// A device node: the mount must not be `nodev`.
        device: bool,
    },
    /// A fresh tmpfs.
    Tmpfs {
        mode: u32,
        size: u64,
        read_only: bool,
    },
    /// A symbolic link with this target.
    Symlink(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    target: PathBuf,
    what: What,
}

/// The new root, as a list of mounts in the order they are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    entries: Vec<Entry>,
}

impl Layout {
    /// The root of one sandboxed command.
    pub(crate) fn for_spec(spec: &SandboxSpec) -> Self {
        let tmp_size = spec.limits.file_size_bytes.max(16 << 20);
        let mut entries = base(tmp_size, true);
        let bind = |path: &Path, read_only: bool| Entry {
            target: path.to_path_buf(),
            what: What::Bind {
                source: path.to_path_buf(),
                required: true,
                read_only,
                device: false,
            },
        };
        entries.extend(spec.read_only.iter().map(|d| bind(d, true)));
        entries.push(bind(&spec.workspace, false));
        entries.extend(spec.read_write.iter().map(|d| bind(d, false)));
        for name in [".git/config", ".git/hooks"] {
            let path = spec.workspace.join(name);
            // Only what exists now: making a mount point would change the
            // workspace. A symlinked entry is bound where it leads.
            if std::fs::metadata(&path).is_ok() {
                entries.push(Entry {
                    target: path.clone(),
                    what: What::Bind {
                        source: path,
                        required: false,
                        read_only: true,
                        device: false,
                    },
                });
            }
        }
        Self::ordered(entries)
    }

    /// The root shared by every command of a self-confined caller (see
    /// [`crate::nested`]): prepared once, before its Landlock domain forbids
    /// mounting, so it holds the caller's grants rather than one command's
    /// workspace. Its `HOME` is read-only, since it would outlive commands.
    pub(crate) fn for_confined_caller(read_only: &[PathBuf], read_write: &[PathBuf]) -> Self {
        let mut entries = base(1 << 30, false);
        for (dirs, ro) in [(read_only, true), (read_write, false)] {
            for d in dirs {
                entries.push(Entry {
                    target: d.clone(),
                    what: What::Bind {
                        source: d.clone(),
                        required: false,
                        read_only: ro,
                        device: false,
                    },
                });
            }
        }
        Self::ordered(entries)
    }

    /// Parents before children (a shallower target first, otherwise the
    /// order given), so a more specific mount lands on top.
    fn ordered(mut entries: Vec<Entry>) -> Self {
        entries.sort_by_key(|e| e.target.components().count());
        Self { entries }
    }
}

fn base(tmp_size: u64, home_writable: bool) -> Vec<Entry> {
    let mut entries = Vec::new();
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        let what = if meta.file_type().is_symlink() {
            match std::fs::read_link(path) {
                Ok(target) => What::Symlink(target),
                Err(_) => continue,
            }
        } else {
            What::Bind {
                source: path.to_path_buf(),
                required: false,
                read_only: true,
                device: false,
            }
        };
        entries.push(Entry {
            target: path.to_path_buf(),
            what,
        });
    }
    for entry in ETC_ENTRIES {
        let path = Path::new("/etc").join(entry);
        entries.push(Entry {
            target: path.clone(),
            what: What::Bind {
                source: path,
                required: false,
                read_only: true,
                device: false,
            },
        });
    }
    let devices = DEVICES_RW
        .iter()
        .map(|d| (*d, false))
        .chain(DEVICES_RO.iter().map(|d| (*d, true)))
        .chain([("/dev/tty", false)]);
    for (dev, read_only) in devices {
        entries.push(Entry {
            target: PathBuf::from(dev),
            what: What::Bind {
                source: PathBuf::from(dev),
                required: false,
                read_only,
                device: true,
            },
        });
    }
    let tmpfs = |target: &str, mode, size, read_only| Entry {
        target: PathBuf::from(target),
        what: What::Tmpfs {
            mode,
            size,
            read_only,
        },
    };
    entries.push(tmpfs(SANDBOX_TMP, 0o1777, tmp_size, false));
    entries.push(tmpfs("/run", 0o755, RUN_SIZE, false));
    entries.push(tmpfs(SANDBOX_HOME, 0o700, tmp_size, !home_writable));
    entries
}

/// Enter a new mount namespace and make `layout` its root. Needs
/// `CAP_SYS_ADMIN` in the current user namespace (a fresh one, or root),
/// and no Landlock domain (Landlock forbids every mount operation).
pub(crate) fn enter(layout: &Layout) -> Result<(), String> {
    let fail = |step: &str, path: &Path, e: Errno| format!("{step} {}: {e}", path.display());
    // SAFETY: `unshare_unsafe` is unsafe only for `CLONE_FILES`;
    // `CLONE_NEWNS` gives this (single-threaded) process its own copy of
    // the mount table and touches no descriptor table.
    #[allow(unsafe_code)]
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }
        .map_err(|e| format!("unshare(CLONE_NEWNS): {e}"))?;
    // Nothing we mount may propagate back to the host's namespace.
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(|e| fail("making private", Path::new("/"), e))?;

    // Clone every source while the host tree is still the root.
    let mut planned: Vec<(&Entry, Option<(OwnedFd, bool)>)> = Vec::new();
    for entry in &layout.entries {
        let clone = match &entry.what {
            What::Bind {
                source,
                required,
                read_only,
                device,
            } => clone_tree(source, *required, *read_only, *device)?,
            _ => None,
        };
        if matches!(entry.what, What::Bind { .. }) && clone.is_none() {
            continue;
        }
        planned.push((entry, clone));
    }

    let root = tmpfs(0o755, ROOT_SIZE, MountAttrFlags::empty())
        .map_err(|e| fail("tmpfs for", Path::new("/"), e))?;
    rustix::mount::move_mount(
        root.as_fd(),
        "",
        CWD,
        STAGING,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(|e| fail("attaching the new root at", Path::new(STAGING), e))?;

    for (entry, clone) in planned {
        let target = &entry.target;
        match (&entry.what, clone) {
            (What::Symlink(to), _) => {
                let (parent, name) = parent_of(root.as_fd(), target)?;
                rustix::fs::symlinkat(to.as_path(), &parent, &name)
                    .map_err(|e| fail("symlink", target, e))?;
            }
            (
                What::Tmpfs {
                    mode,
                    size,
                    read_only,
                },
                _,
            ) => {
                let mut attrs =
                    MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV;
                if *read_only {
                    attrs |= MountAttrFlags::MOUNT_ATTR_RDONLY;
                }
                let at = mount_point(root.as_fd(), target, true)?;
                let fs = tmpfs(*mode, *size, attrs).map_err(|e| fail("tmpfs for", target, e))?;
                attach(&fs, &at).map_err(|e| fail("mounting tmpfs on", target, e))?;
            }
            (What::Bind { .. }, Some((tree, is_dir))) => {
                let at = mount_point(root.as_fd(), target, is_dir)?;
                attach(&tree, &at).map_err(|e| fail("binding", target, e))?;
            }
            (What::Bind { .. }, None) => {}
        }
    }

    // pivot_root(".", ".") stacks the old root on the new one; detaching
    // it leaves the new root alone (the sequence runc uses).
    let old_root = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| fail("opening", Path::new("/"), e))?;
    rustix::process::fchdir(&root).map_err(|e| fail("entering", Path::new(STAGING), e))?;
    rustix::process::pivot_root(".", ".").map_err(|e| format!("pivot_root: {e}"))?;
    rustix::process::fchdir(&old_root).map_err(|e| format!("entering the old root: {e}"))?;
    rustix::mount::unmount(".", UnmountFlags::DETACH)
        .map_err(|e| format!("detaching the old root: {e}"))?;
    drop(old_root);
    rustix::process::chdir("/").map_err(|e| format!("chdir /: {e}"))?;
    set_attrs(CWD, "/", MountAttrFlags::MOUNT_ATTR_RDONLY, false)
        .map_err(|e| format!("making the new root read-only: {e}"))?;
    Ok(())
}

/// A detached clone of `source` (recursive, so locked submounts stay
/// covered), with its attributes set; `None` when an optional source is
/// missing. Also says whether it is a directory.
fn clone_tree(
    source: &Path,
    required: bool,
    read_only: bool,
    device: bool,
) -> Result<Option<(OwnedFd, bool)>, String> {
    let is_dir = match std::fs::metadata(source) {
        Ok(m) => m.is_dir(),
        Err(_) if !required => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", source.display())),
    };
    let flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_RECURSIVE;
    let tree = match rustix::mount::open_tree(CWD, source, flags) {
        Ok(fd) => fd,
        Err(_) if !required => return Ok(None),
        Err(e) => return Err(format!("cloning {}: {e}", source.display())),
    };
    let mut attrs = MountAttrFlags::MOUNT_ATTR_NOSUID;
    if device {
        attrs |= MountAttrFlags::MOUNT_ATTR_NOEXEC;
    } else {
        attrs |= MountAttrFlags::MOUNT_ATTR_NODEV;
    }
    if read_only {
        attrs |= MountAttrFlags::MOUNT_ATTR_RDONLY;
    }
    set_attrs(tree.as_fd(), "", attrs, true)
        .map_err(|e| format!("setting mount flags on {}: {e}", source.display()))?;
    Ok(Some((tree, is_dir)))
}

/// A new, detached tmpfs.
fn tmpfs(mode: u32, size: u64, attrs: MountAttrFlags) -> Result<OwnedFd, Errno> {
    let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
    rustix::mount::fsconfig_set_string(fs.as_fd(), "mode", format!("{mode:o}"))?;
    rustix::mount::fsconfig_set_string(fs.as_fd(), "size", size.to_string())?;
    rustix::mount::fsconfig_create(fs.as_fd())?;
    rustix::mount::fsmount(fs.as_fd(), FsMountFlags::FSMOUNT_CLOEXEC, attrs)
}

fn attach(mount: &OwnedFd, at: &OwnedFd) -> Result<(), Errno> {
    rustix::mount::move_mount(
        mount.as_fd(),
        "",
        at.as_fd(),
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
}

/// `struct mount_attr` of `<linux/mount.h>` (not in the libc crate).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(2)`, which rustix does not wrap: only sets flags, so
/// the locked flags of a mount inherited from the host are kept.
fn set_attrs(
    dirfd: BorrowedFd<'_>,
    path: &str,
    set: MountAttrFlags,
    recursive: bool,
) -> Result<(), std::io::Error> {
    let path = std::ffi::CString::new(path).map_err(std::io::Error::other)?;
    let mut flags = 0;
    if path.is_empty() {
        flags |= libc::AT_EMPTY_PATH;
    }
    if recursive {
        flags |= libc::AT_RECURSIVE;
    }
    let attr = MountAttr {
        attr_set: u64::from(set.bits()),
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    use std::os::fd::AsRawFd;
    // SAFETY: mount_setattr reads a NUL-terminated path and a
    // `struct mount_attr` of the size passed; both outlive the call, and
    // the descriptor is borrowed for its duration.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd.as_raw_fd(),
            path.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Resolve `rel` beneath `root` without ever leaving it.
fn open_in(root: BorrowedFd<'_>, rel: &Path, dir: bool) -> Result<OwnedFd, Errno> {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if dir {
        flags |= OFlags::DIRECTORY;
    }
    let rel: &Path = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    rustix::fs::openat2(
        root,
        rel,
        flags,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
}

/// The directory holding `target` in the new root (created as needed) and
/// the final name.
fn parent_of(root: BorrowedFd<'_>, target: &Path) -> Result<(OwnedFd, PathBuf), String> {
    let rel = relative(target)?;
    let name = rel
        .file_name()
        .map(PathBuf::from)
        .ok_or_else(|| format!("{} has no file name", target.display()))?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    Ok((make_dirs(root, parent, target)?, name))
}

/// Create (if needed) and open the mount point for `target`: a directory,
/// or an empty file for a file bind.
fn mount_point(root: BorrowedFd<'_>, target: &Path, dir: bool) -> Result<OwnedFd, String> {
    let rel = relative(target)?;
    if dir {
        return make_dirs(root, &rel, target);
    }
    if let Ok(fd) = open_in(root, &rel, false) {
        return Ok(fd);
    }
    let (parent, name) = parent_of(root, target)?;
    rustix::fs::openat(
        &parent,
        &name,
        OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|e| format!("creating mount point {}: {e}", target.display()))?;
    open_in(root, &rel, false).map_err(|e| format!("opening {}: {e}", target.display()))
}

/// `mkdir -p` of `rel` beneath `root`, every step resolved in the root.
fn make_dirs(root: BorrowedFd<'_>, rel: &Path, target: &Path) -> Result<OwnedFd, String> {
    let mut current =
        open_in(root, Path::new(""), true).map_err(|e| format!("opening the new root: {e}"))?;
    let mut so_far = PathBuf::new();
    for part in rel.components() {
        so_far.push(part);
        current = match open_in(root, &so_far, true) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => {
                match rustix::fs::mkdirat(&current, part.as_os_str(), Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => {
                        return Err(format!(
                            "creating mount point {} for {}: {e}",
                            so_far.display(),
                            target.display()
                        ));
                    }
                }
                open_in(root, &so_far, true)
                    .map_err(|e| format!("opening {}: {e}", so_far.display()))?
            }
            Err(e) => return Err(format!("opening {}: {e}", so_far.display())),
        };
    }
    Ok(current)
}

/// `target` without its leading `/`, refusing `..` (a spec path is
/// absolute and, for a mount point, must name where it lands).
fn relative(target: &Path) -> Result<PathBuf, String> {
    let mut rel = PathBuf::new();
    for c in target.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(p) => rel.push(p),
            Component::ParentDir | Component::Prefix(_) => {
                return Err(format!(
                    "{} contains '..'; pass a normalized absolute path",
                    target.display()
                ));
            }
        }
    }
    Ok(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(ws: &str) -> SandboxSpec {
        serde_json::from_str(&format!(
            r#"{{"argv":["true"],"cwd":"{ws}","workspace":"{ws}","read_only":["/opt/x"]}}"#
        ))
        .expect("spec parses")
    }

    #[test]
    fn parents_are_mounted_before_children() {
        let layout = Layout::for_spec(&spec("/tmp/a/ws"));
        let pos = |p: &str| {
            layout
                .entries
                .iter()
                .position(|e| e.target == Path::new(p))
                .unwrap_or_else(|| panic!("{p} missing from {layout:?}"))
        };
        assert!(pos("/tmp") < pos("/tmp/a/ws"));
        assert!(pos(SANDBOX_HOME) < pos("/tmp/a/ws"));
        let ws = &layout.entries[pos("/tmp/a/ws")];
        assert!(matches!(
            ws.what,
            What::Bind {
                read_only: false,
                required: true,
                ..
            }
        ));
        assert!(matches!(
            layout.entries[pos("/opt/x")].what,
            What::Bind {
                read_only: true,
                ..
            }
        ));
    }

    #[test]
    fn no_host_run_proc_or_sys() {
        let layout = Layout::for_spec(&spec("/w"));
        for e in &layout.entries {
            if let What::Bind { source, .. } = &e.what {
                for banned in ["/run", "/var", "/proc", "/sys", "/home", "/root"] {
                    assert!(!source.starts_with(banned), "{source:?} is bound");
                }
            }
        }
    }

    #[test]
    fn relative_refuses_dotdot() {
        assert_eq!(
            relative(Path::new("/a/./b")).expect("ok"),
            PathBuf::from("a/b")
        );
        assert!(relative(Path::new("/a/../b")).is_err());
    }
}
