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
//! Landlock also forbids every mount operation, so the holder builds the
//! private root (see [`crate::mount_ns`]) too, once, from the caller's own
//! grants: system paths read-only, its read-only and read-write grants,
//! fresh `/tmp` and `/run`, and a read-only, empty `HOME`. Helpers join that
//! mount namespace; their own Landlock rules then narrow it to one
//! workspace.
//!
//! What the commands of one confined process share: a network namespace
//! with only a downed loopback (which Landlock's TCP rules and seccomp keep
//! closed anyway), a user namespace (whose `RLIMIT_NPROC` count then
//! spans their concurrent commands), and the mount namespace (so one
//! private `/tmp`; `HOME` is read-only there, so no command can leave a
//! dotfile for the next; the workspace's `.git/config` and `.git/hooks`
//! are not bound read-only per command). Nothing is shared with anyone
//! else.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

use rustix::process::{Pid, WaitOptions};
use rustix::thread::UnshareFlags;

use crate::mount_ns::{self, Layout};
use crate::userns;

/// Environment variable through which [`run_sandboxed`](crate::run_sandboxed)
/// hands the helper the inherited descriptors: `<user fd>,<net fd>` and,
/// when the private root was prepared, `,<mount fd>`.
pub(crate) const NS_FDS_ENV: &str = "BULWARK_SANDBOX_NS_FDS";

/// Descriptors of the prepared user, network and mount namespaces.
#[derive(Debug)]
pub(crate) struct Namespaces {
    pub(crate) user: OwnedFd,
    pub(crate) net: OwnedFd,
    /// The private root, or why the holder could not build it.
    pub(crate) mnt: Result<OwnedFd, String>,
}

/// The descriptor numbers a helper received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shared {
    pub(crate) user: i32,
    pub(crate) net: i32,
    pub(crate) mnt: Option<i32>,
}

static PREPARED: OnceLock<Namespaces> = OnceLock::new();

/// Longest error message the holder sends back.
const MAX_MESSAGE: usize = 4096;

/// The namespaces prepared by [`prepare`], if it succeeded.
pub(crate) fn prepared() -> Option<&'static Namespaces> {
    PREPARED.get()
}

/// Create the shared namespaces (once per process), the mount namespace
/// with `layout` as its root. The caller must be single-threaded: the
/// holder is made with a bare `fork`. A mount namespace that cannot be
/// built is not an error here (the namespaces are still prepared); the
/// reason is returned in `Ok(Some(_))` and each helper reports it.
pub(crate) fn prepare(layout: &Layout) -> Result<Option<String>, String> {
    if let Some(ns) = PREPARED.get() {
        return Ok(ns.mnt.as_ref().err().cloned());
    }
    let namespaces = create(layout)?;
    let why = namespaces.mnt.as_ref().err().cloned();
    // Only ever set here, by a single-threaded caller: cannot be taken.
    let _ = PREPARED.set(namespaces);
    Ok(why)
}

/// The value of [`NS_FDS_ENV`] for `ns`.
pub(crate) fn env_value(ns: &Namespaces) -> String {
    match &ns.mnt {
        Ok(mnt) => format!(
            "{},{},{}",
            ns.user.as_raw_fd(),
            ns.net.as_raw_fd(),
            mnt.as_raw_fd()
        ),
        Err(_) => format!("{},{}", ns.user.as_raw_fd(), ns.net.as_raw_fd()),
    }
}

/// Parse [`NS_FDS_ENV`] in the helper: `None` when it is absent or not two
/// or three distinct descriptor numbers above stderr.
pub(crate) fn parse_env_value(value: &str) -> Option<Shared> {
    let fds: Vec<i32> = value
        .split(',')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let distinct = fds.iter().enumerate().all(|(i, a)| !fds[..i].contains(a));
    if !distinct || fds.iter().any(|fd| *fd <= 2) {
        return None;
    }
    match fds[..] {
        [user, net] => Some(Shared {
            user,
            net,
            mnt: None,
        }),
        [user, net, mnt] => Some(Shared {
            user,
            net,
            mnt: Some(mnt),
        }),
        _ => None,
    }
}

fn create(layout: &Layout) -> Result<Namespaces, String> {
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
        holder(ready_w, hold_r, layout);
    }
    drop(ready_w);
    drop(hold_r);
    let result = map_and_open(pid, ready_r, &hold_w, &maps);
    // The holder waits for EOF on its pipe: closing our end lets it exit.
    drop(hold_w);
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
    }
    result
}

/// The child: enter the namespaces, report the errno (0 on success), wait
/// for the parent to write our id maps, build the private root and report
/// how that went (a length-prefixed message, empty on success), wait for
/// the parent to finish with us, exit.
fn holder(mut ready: std::io::PipeWriter, mut hold: std::io::PipeReader, layout: &Layout) -> ! {
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
    let mut byte = [0u8; 1];
    if errno == 0 && matches!(hold.read(&mut byte), Ok(1)) {
        // Single-threaded fork child of a single-threaded parent: it may
        // allocate. The namespace outlives us through the parent's fd.
        let message = match mount_ns::enter(layout) {
            Ok(()) => String::new(),
            Err(why) => why,
        };
        let bytes = message.as_bytes();
        let bytes = &bytes[..bytes.len().min(MAX_MESSAGE)];
        let len = u32::try_from(bytes.len()).unwrap_or(0);
        let _ = ready.write_all(&len.to_ne_bytes());
        let _ = ready.write_all(bytes);
    }
    drop(ready);
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
    mut hold: &std::io::PipeWriter,
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
    let user = open("user")?;
    let net = open("net")?;
    // The maps are written: the holder may now build the private root.
    let mnt = hold
        .write_all(&[1])
        .map_err(|e| format!("the namespace holder is gone: {e}"))
        .and_then(|()| {
            let mut len = [0u8; 4];
            ready
                .read_exact(&mut len)
                .map_err(|e| format!("the namespace holder did not report: {e}"))?;
            let len = usize::try_from(u32::from_ne_bytes(len)).unwrap_or(MAX_MESSAGE);
            let mut message = vec![0u8; len.min(MAX_MESSAGE)];
            ready
                .read_exact(&mut message)
                .map_err(|e| format!("the namespace holder did not report: {e}"))?;
            if message.is_empty() {
                open("mnt")
            } else {
                Err(String::from_utf8_lossy(&message).into_owned())
            }
        });
    Ok(Namespaces { user, net, mnt })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_value_round_trips_and_rejects_junk() {
        let two = Shared {
            user: 5,
            net: 6,
            mnt: None,
        };
        assert_eq!(parse_env_value("5,6"), Some(two));
        let three = Shared {
            mnt: Some(7),
            ..two
        };
        assert_eq!(parse_env_value("5,6,7"), Some(three));
        for bad in [
            "", "5", "5,", ",6", "a,b", "1,6", "5,5", "5,6,6", "5,6,7,8", "-1,4", "5,6,2",
        ] {
            assert_eq!(parse_env_value(bad), None, "{bad:?}");
        }
    }
}
