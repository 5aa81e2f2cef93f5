//! Entering a fresh user namespace (mapping only our own ids) and a fresh,
//! empty network namespace.
//!
//! Used by the helper and by [`probe`](crate::probe), whose child runs this
//! between `fork` and `exec`. That is why nothing here allocates: the map
//! lines are rendered beforehand and only raw system calls run after.

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::thread::UnshareFlags;

/// The `uid_map`/`gid_map` contents: our own effective ids mapped to
/// themselves, so files the command creates in the workspace keep the
/// caller's owner, and every other id shows up as the overflow id.
pub(crate) struct IdMaps {
    uid: Vec<u8>,
    gid: Vec<u8>,
}

impl IdMaps {
    pub(crate) fn own() -> Self {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        Self {
            uid: format!("{uid} {uid} 1\n").into_bytes(),
            gid: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }
}

/// Which system call failed, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NsError {
    pub(crate) step: &'static str,
    pub(crate) errno: Errno,
}

impl std::fmt::Display for NsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {}", self.step, self.errno)
    }
}

/// `unshare(CLONE_NEWUSER)` and write the id maps (`setgroups` is denied
/// first, as the kernel requires before an unprivileged `gid_map` write and
/// so the command cannot drop groups that deny it access).
pub(crate) fn enter_user_ns(maps: &IdMaps) -> Result<(), NsError> {
    // SAFETY: `unshare_unsafe` is unsafe only for `CLONE_FILES`, which can
    // leave threads with diverging fd tables; `CLONE_NEWUSER` changes only
    // credentials, and the kernel refuses it in a multi-threaded process.
    #[allow(unsafe_code)]
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER) }.map_err(|errno| NsError {
        step: "unshare(CLONE_NEWUSER)",
        errno,
    })?;
    write_proc(
        c"/proc/self/setgroups",
        b"deny\n",
        "write /proc/self/setgroups",
    )?;
    write_proc(c"/proc/self/uid_map", &maps.uid, "write /proc/self/uid_map")?;
    write_proc(c"/proc/self/gid_map", &maps.gid, "write /proc/self/gid_map")?;
    Ok(())
}

/// `unshare(CLONE_NEWNET)`: a namespace with only a downed loopback, so no
/// address (the host's loopback services included) is reachable. Works
/// after [`enter_user_ns`] (capabilities in the new user namespace) or as
/// root without it.
pub(crate) fn enter_net_ns() -> Result<(), NsError> {
    // SAFETY: see `enter_user_ns`; `CLONE_NEWNET` does not touch fd tables.
    #[allow(unsafe_code)]
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }.map_err(|errno| NsError {
        step: "unshare(CLONE_NEWNET)",
        errno,
    })
}

fn write_proc(path: &std::ffi::CStr, data: &[u8], step: &'static str) -> Result<(), NsError> {
    let err = |errno| NsError { step, errno };
    let fd =
        rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty()).map_err(err)?;
    let n = rustix::io::write(&fd, data).map_err(err)?;
    if n != data.len() {
        return Err(err(Errno::IO));
    }
    Ok(())
}

/// Write `maps` for process `pid`, which has just entered a new user
/// namespace: `setgroups` denied first (the kernel requires it before an
/// unprivileged `gid_map` write), then the uid and gid maps. Run by the
/// parent of that process, which may allocate.
pub(crate) fn map_process(pid: i32, maps: &IdMaps) -> Result<(), String> {
    let files: [(&str, &[u8]); 3] = [
        ("setgroups", b"deny\n"),
        ("uid_map", &maps.uid),
        ("gid_map", &maps.gid),
    ];
    for (name, data) in files {
        let path = format!("/proc/{pid}/{name}");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, data))
            .map_err(|e| format!("write {path}: {e}"))?;
    }
    Ok(())
}

/// Join the user namespace `fd` (a `/proc/<pid>/ns/user` descriptor)
/// instead of creating one.
///
/// Used by a helper whose caller is itself confined and so cannot write
/// the id maps of a new namespace under `/proc` (see [`crate::nested`]).
/// As the namespace owner's euid in its parent namespace we hold every
/// capability in it, which `setns` requires.
pub(crate) fn join_user_ns(fd: i32) -> Result<(), NsError> {
    set_ns(fd, libc::CLONE_NEWUSER, "setns(CLONE_NEWUSER)")
}

/// Join the network namespace `fd`; after [`join_user_ns`] of the user
/// namespace that owns it, where we hold the capability it takes.
pub(crate) fn join_net_ns(fd: i32) -> Result<(), NsError> {
    set_ns(fd, libc::CLONE_NEWNET, "setns(CLONE_NEWNET)")
}

/// Join the prepared mount namespace `fd` (its root becomes ours); after
/// [`join_user_ns`] of the user namespace that owns it.
pub(crate) fn join_mnt_ns(fd: i32) -> Result<(), NsError> {
    set_ns(fd, libc::CLONE_NEWNS, "setns(CLONE_NEWNS)")
}

fn set_ns(fd: i32, kind: libc::c_int, step: &'static str) -> Result<(), NsError> {
    // SAFETY: setns takes a descriptor number and a flag and reads no
    // memory of ours; a number that is not an open namespace descriptor of
    // the right kind fails with EBADF or EINVAL.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::setns(fd, kind) };
    if rc == 0 {
        return Ok(());
    }
    let errno = Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO);
    Err(NsError { step, errno })
}
