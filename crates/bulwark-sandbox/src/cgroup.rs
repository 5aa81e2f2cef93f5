//! A fresh pids cgroup, and a memory cgroup, per sandboxed run.
//!
//! `RLIMIT_NPROC` never binds uid 0 (the kernel exempts the root user from
//! it, even inside a user namespace), so as root a fork bomb is only
//! contained by a cgroup's `pids.max`. The cgroup also lists every process
//! the command started, whatever its process group, which makes "nothing
//! left behind" checkable and enforceable.
//!
//! `RLIMIT_AS` bounds each process, not the command: three children of
//! 2 GiB each fit under a 4 GiB limit side by side. The memory controller
//! bounds the whole tree (`memory.max` and `memory.swap.max = 0` on cgroup
//! v2; `memory.limit_in_bytes` and `memory.memsw.limit_in_bytes` on v1);
//! the kernel's OOM killer then ends a process of the command, never one
//! outside it. On cgroup v2 both controllers share one per-run cgroup.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use rustix::process::{Pid, Signal};

/// Where a controller (pids or memory) is mounted and how to use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PidsParent {
    /// Directory under which per-run cgroups are created: our own cgroup in
    /// the pids hierarchy, so limits set above us still apply.
    pub(crate) dir: PathBuf,
    /// cgroup v2 (has `cgroup.kill`) rather than v1.
    pub(crate) v2: bool,
}

/// The usable pids cgroup parent, or why there is none (cached: mounts do
/// not change under a running process in any setup we support).
pub(crate) fn pids_parent() -> Result<PidsParent, String> {
    static CACHE: OnceLock<Result<PidsParent, String>> = OnceLock::new();
    CACHE.get_or_init(|| find_parent("pids")).clone()
}

/// The usable memory cgroup parent, or why there is none (cached).
pub(crate) fn memory_parent() -> Result<PidsParent, String> {
    static CACHE: OnceLock<Result<PidsParent, String>> = OnceLock::new();
    CACHE.get_or_init(|| find_parent("memory")).clone()
}

fn find_parent(controller: &str) -> Result<PidsParent, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let parent = locate(&mountinfo, &own, controller)
        .ok_or_else(|| format!("no cgroup {controller} controller is mounted"))?;
    if parent.v2 {
        let ctl =
            std::fs::read_to_string(parent.dir.join("cgroup.subtree_control")).unwrap_or_default();
        if !ctl.split_whitespace().any(|c| c == controller) {
            return Err(format!(
                "{controller} is not enabled in {}/cgroup.subtree_control",
                parent.dir.display()
            ));
        }
    }
    rustix::fs::access(&parent.dir, rustix::fs::Access::WRITE_OK).map_err(|e| {
        format!(
            "{} is not writable ({e}); run as root or delegate it",
            parent.dir.display()
        )
    })?;
    Ok(parent)
}

/// Find the `controller` hierarchy in `/proc/self/mountinfo` and our place
/// in it from `/proc/self/cgroup`. A v1 mount of it wins over v2.
fn locate(mountinfo: &str, own_cgroups: &str, controller: &str) -> Option<PidsParent> {
    let mut v2 = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mount_point), Some(fstype), Some(opts)) =
            (left.get(3), left.get(4), right.first(), right.get(2))
        else {
            continue;
        };
        let join = |own: &str| -> Option<PathBuf> {
            // The mount may show only a subtree (containers): strip it.
            let rel = own.strip_prefix(root.trim_end_matches('/')).unwrap_or(own);
            let rel = rel.trim_matches('/');
            let base = Path::new(mount_point);
            Some(if rel.is_empty() {
                base.to_path_buf()
            } else {
                base.join(rel)
            })
        };
        if *fstype == "cgroup" && opts.split(',').any(|o| o == controller) {
            let own = own_cgroups.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
                ctrls.split(',').any(|c| c == controller).then_some(path)
            })?;
            return Some(PidsParent {
                dir: join(own)?,
                v2: false,
            });
        }
        if *fstype == "cgroup2" && v2.is_none() {
            let own = own_cgroups.lines().find_map(|l| l.strip_prefix("0::"));
            v2 = own.and_then(join).map(|dir| PidsParent { dir, v2: true });
        }
    }
    v2
}

/// The files that cap a run's memory at `bytes`, swap included.
pub(crate) fn memory_settings(v2: bool, bytes: u64) -> Vec<(&'static str, String, bool)> {
    if v2 {
        vec![
            ("memory.max", bytes.to_string(), true),
            ("memory.swap.max", "0".into(), false),
        ]
    } else {
        vec![
            ("memory.limit_in_bytes", bytes.to_string(), true),
            // Memory plus swap, so the command cannot swap past the limit.
            ("memory.memsw.limit_in_bytes", bytes.to_string(), false),
        ]
    }
}

/// One run's cgroup. Dropping it kills what is left inside and removes it,
/// so a cancelled run cleans up too.
#[derive(Debug)]
pub(crate) struct RunCgroup {
    path: PathBuf,
    v2: bool,
    removed: bool,
}

impl RunCgroup {
    /// Create `bulwark-<random>` under `parent` and write each
    /// `(file, value, required)`, in order; an optional file the kernel
    /// does not have (swap accounting off) is skipped.
    pub(crate) fn create(
        parent: &PidsParent,
        settings: &[(&str, String, bool)],
    ) -> io::Result<Self> {
        let mut last = io::Error::other("no attempt");
        for _ in 0..8 {
            let path = parent.dir.join(format!("bulwark-{:016x}", random_u64()));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    let cg = Self {
                        path,
                        v2: parent.v2,
                        removed: false,
                    };
                    for (file, value, required) in settings {
                        match std::fs::write(cg.path.join(file), value) {
                            Ok(()) => {}
                            Err(e) if !required && e.kind() == io::ErrorKind::NotFound => {}
                            Err(e) => {
                                return Err(io::Error::new(
                                    e.kind(),
                                    format!("writing {file}: {e}"),
                                ));
                            }
                        }
                    }
                    return Ok(cg);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// SIGKILL every process in the cgroup until it is empty, then remove
    /// it. Processes escaping the process group (which seccomp prevents)
    /// are caught here. Best effort and bounded: about two seconds at most.
    pub(crate) fn kill_and_remove(&mut self) -> io::Result<()> {
        if self.removed {
            return Ok(());
        }
        for _ in 0..100 {
            if self.v2 {
                let _ = std::fs::write(self.path.join("cgroup.kill"), "1");
            }
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                // A pid read here belongs to the cgroup; the window for it
                // to exit and be reused before this kill is negligible.
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut result = Ok(());
        for _ in 0..200 {
            // EBUSY while killed tasks are still exiting.
            result = std::fs::remove_dir(&self.path);
            match &result {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    result = Ok(());
                    break;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        self.removed = result.is_ok();
        result
    }

    fn pids(&self) -> Vec<Pid> {
        std::fs::read_to_string(self.path.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
            .filter_map(Pid::from_raw)
            .collect()
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        let _ = self.kill_and_remove();
    }
}

/// A random 64-bit value from std's per-process hashing keys, mixed with
/// a counter. Uniqueness is all the cgroup name needs.
pub(crate) fn random_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO_V1: &str = "\
25 1 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
35 25 0:31 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
36 25 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
";

    #[test]
    fn finds_v1_pids_hierarchy_and_own_path() {
        let own = "8:pids:/user.slice/x\n4:memory:/m\n0::/user.slice/x\n";
        let p = locate(MOUNTINFO_V1, own, "pids").expect("found");
        assert_eq!(p.dir, Path::new("/sys/fs/cgroup/pids/user.slice/x"));
        assert!(!p.v2);
        let m = locate(MOUNTINFO_V1, own, "memory").expect("found");
        assert_eq!(m.dir, Path::new("/sys/fs/cgroup/memory/m"));
        let p = locate(MOUNTINFO_V1, "8:pids:/\n0::/\n", "pids").expect("found");
        assert_eq!(p.dir.as_os_str(), "/sys/fs/cgroup/pids");
    }

    #[test]
    fn container_mount_root_is_stripped() {
        let mi = "35 25 0:31 /docker/abc /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
        let p = locate(mi, "3:pids:/docker/abc/sub\n", "pids").expect("found");
        assert_eq!(p.dir, Path::new("/sys/fs/cgroup/pids/sub"));
    }

    #[test]
    fn falls_back_to_v2() {
        let mi = "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let p = locate(mi, "0::/a/b\n", "pids").expect("found");
        assert_eq!(p.dir, Path::new("/sys/fs/cgroup/a/b"));
        assert!(p.v2);
        assert_eq!(locate(mi, "0::/a/b\n", "memory"), Some(p));
        assert!(locate("", "0::/\n", "pids").is_none());
    }

    #[test]
    fn random_names_differ() {
        assert_ne!(random_u64(), random_u64());
    }
}
