//! Sandboxed children of a process that has confined itself.
//!
//! A helper started by [`run_sandboxed`](crate::run_sandboxed) normally
//! creates a fresh user namespace and writes its own id maps to
//! `/proc/self/{setgroups,uid_map,gid_map}`. Under its parent's Landlock
//! domain it cannot: `/proc/<its pid>` is a path like any other, and the
//! only rule that would cover every future child's pid is write access to
//! all of `/proc`, which for a root process includes `/proc/sys` (a
//! `core_pattern` pointing at a program is a way out of any sandbox).
//!
//! So a process about to confine itself prepares the namespaces once,
//! while it still may: a short-lived child enters a new user namespace and
//! a new, empty network namespace; the parent writes the child's id maps
//! (its own ids mapped to themselves, as the helper would) and keeps a
//! descriptor of each namespace. The child then exits; the descriptors keep
//! the namespaces alive. Each later helper *joins* them with `setns`
//! instead of creating its own. Namespace descriptors are not paths, so
//! Landlock does not stand in the way.
//!
//! What the commands of one confined process share: a network namespace
//! with only a downed loopback (which Landlock's TCP rules and seccomp keep
//! closed anyway) and a user namespace (whose `RLIMIT_NPROC` count then
//! spans their concurrent commands). Nothing is shared with anyone else.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

use rustix::process::{Pid, WaitOptions};
use rustix::thread::UnshareFlags;

use crate::userns;

/// Environment variable through which [`run_sandboxed`](crate::run_sandboxed)
/// hands the helper the two inherited descriptors: `<user fd>,<net fd>`.
pub(crate) const NS_FDS_ENV: &str = "BULWARK_SANDBOX_NS_FDS";

/// Descriptors of the prepared user and network namespaces.
#[derive(Debug)]
pub(crate) struct Namespaces {
    pub(crate) user: OwnedFd,
    pub(crate) net: OwnedFd,
}

static PREPARED: OnceLock<Namespaces> = OnceLock::new();

/// The namespaces prepared by [`prepare`], if it succeeded.
pub(crate) fn prepared() -> Option<&'static Namespaces> {
    PREPARED.get()
}

/// Create the shared namespaces (once per process). The caller must be
/// single-threaded: the holder is made with a bare `fork`.
pub(crate) fn prepare() -> Result<(), String> {
    if PREPARED.get().is_some() {
        return Ok(());
    }
    let namespaces = create()?;
    // Only ever set here, by a single-threaded caller: cannot be taken.
    let _ = PREPARED.set(namespaces);
    Ok(())
}

/// The value of [`NS_FDS_ENV`] for `ns`.
pub(crate) fn env_value(ns: &Namespaces) -> String {
    format!("{},{}", ns.user.as_raw_fd(), ns.net.as_raw_fd())
}

/// Parse [`NS_FDS_ENV`] in the helper: `None` when it is absent or not two
/// descriptor numbers above stderr.
pub(crate) fn parse_env_value(value: &str) -> Option<(i32, i32)> {
    let (user, net) = value.split_once(',')?;
    let user: i32 = user.parse().ok()?;
    let net: i32 = net.parse().ok()?;
    (user > 2 && net > 2 && user != net).then_some((user, net))
}

fn create() -> Result<Namespaces, String> {
    let maps = userns::IdMaps::own();
    let (ready_r, ready_w) =
        std::io::pipe().map_err(|e| format!("cannot create a pipe to the holder: {e}"))?;
    let (hold_r, hold_w) =
        std::io::pipe().map_err(|e| format!("cannot create a pipe to the holder: {e}"))?;
    // SAFETY: the caller is single-threaded (checked by
    // `confine_current_process` before it calls `prepare`), so the child
    // starts with consistent allocator and stdio state. The child only
    // makes system calls and ends with `_exit`, never returning into the
    // caller's code.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(ready_r);
        drop(hold_w);
        holder(ready_w, hold_r);
    }
    drop(ready_w);
    drop(hold_r);
    let result = map_and_open(pid, ready_r, &maps);
    // The holder waits for EOF on its pipe: closing our end lets it exit.
    drop(hold_w);
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
    }
    result
}

/// The child: enter the namespaces, report the errno (0 on success), wait
/// for the parent to finish with us, exit.
fn holder(mut ready: std::io::PipeWriter, mut hold: std::io::PipeReader) -> ! {
    // SAFETY: `unshare_unsafe` is unsafe only for `CLONE_FILES`; these
    // flags change credentials and the network namespace of this
    // single-threaded child.
    #[allow(unsafe_code)]
    let entered =
        unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNET) };
    let errno: i32 = match entered {
        Ok(()) => 0,
        Err(e) => e.raw_os_error(),
    };
    let _ = ready.write_all(&errno.to_ne_bytes());
    drop(ready);
    let mut byte = [0u8; 1];
    let _ = hold.read(&mut byte);
    // SAFETY: `_exit` ends the child without running the parent's atexit
    // handlers or destructors, which belong to the parent.
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(0)
    }
}

fn map_and_open(
    pid: i32,
    mut ready: std::io::PipeReader,
    maps: &userns::IdMaps,
) -> Result<Namespaces, String> {
    let mut errno = [0u8; 4];
    ready
        .read_exact(&mut errno)
        .map_err(|e| format!("the namespace holder did not report: {e}"))?;
    let errno = i32::from_ne_bytes(errno);
    if errno != 0 {
        return Err(format!(
            "unshare(CLONE_NEWUSER | CLONE_NEWNET): {}",
            std::io::Error::from_raw_os_error(errno)
        ));
    }
    userns::map_process(pid, maps)?;
    let open = |kind: &str| -> Result<OwnedFd, String> {
        let path = format!("/proc/{pid}/ns/{kind}");
        std::fs::File::open(&path)
            .map(OwnedFd::from)
            .map_err(|e| format!("open {path}: {e}"))
    };
    Ok(Namespaces {
        user: open("user")?,
        net: open("net")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_value_round_trips_and_rejects_junk() {
        assert_eq!(parse_env_value("5,6"), Some((5, 6)));
        for bad in ["", "5", "5,", ",6", "a,b", "1,6", "5,5", "5,6,7", "-1,4"] {
            assert_eq!(parse_env_value(bad), None, "{bad:?}");
        }
    }
}
