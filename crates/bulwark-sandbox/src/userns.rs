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
