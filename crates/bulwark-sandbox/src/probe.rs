//! What confinement this machine can provide, for `bulwark preflight` and
//! for choosing between strict and permissive mode up front.

use std::fmt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::{cgroup, landlock_rules, userns};

/// One feature's availability, with the detail an operator needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Usable; the detail says how (e.g. the Landlock ABI, a path).
    Available(String),
    /// Not usable; the reason says why.
    Missing(String),
}

impl Support {
    pub fn is_available(&self) -> bool {
        matches!(self, Support::Available(_))
    }

    pub fn detail(&self) -> &str {
        match self {
            Support::Available(d) | Support::Missing(d) => d,
        }
    }
}

/// The result of [`probe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSupport {
    pub landlock: Support,
    /// The kernel's Landlock ABI, when Landlock is available.
    pub landlock_abi: Option<u32>,
    pub seccomp: Support,
    pub user_namespaces: Support,
    pub network_namespaces: Support,
    /// A private mount namespace (the minimal root that keeps host UNIX
    /// sockets, `/tmp` and `HOME` out of reach).
    pub mount_namespaces: Support,
    pub pids_cgroup: Support,
    /// The memory controller that bounds a command's whole process tree;
    /// without it only the per-process `RLIMIT_AS` applies.
    pub memory_cgroup: Support,
    /// Where per-run pids cgroups are created, when usable.
    pub pids_cgroup_path: Option<PathBuf>,
    /// Whether `RLIMIT_NPROC` binds this process's uid (it never binds 0).
    pub rlimit_nproc: Support,
    /// Whether the egress relay (see [`SandboxSpec::egress_proxy`]) can run:
    /// it needs a network namespace of the command's own. Without one a
    /// strict run with a proxy is refused and a permissive one gets no
    /// network at all, never the host's.
    ///
    /// [`SandboxSpec::egress_proxy`]: crate::SandboxSpec::egress_proxy
    pub egress_relay: Support,
}

impl SandboxSupport {
    /// True when a run with network denied can be fully confined in strict
    /// mode by this (non-)root process.
    pub fn strict_ready(&self) -> bool {
        self.landlock.is_available()
            && self.seccomp.is_available()
            && self.user_namespaces.is_available()
            && self.network_namespaces.is_available()
            && self.mount_namespaces.is_available()
            && (self.pids_cgroup.is_available() || self.rlimit_nproc.is_available())
    }

    /// The names of the layers strict mode needs that are missing here.
    pub fn missing_layers(&self) -> Vec<&'static str> {
        self.rows()
            .into_iter()
            .filter(|(name, available, _)| {
                !available && !matches!(*name, "pids cgroup" | "RLIMIT_NPROC" | "memory cgroup")
            })
            .map(|(name, _, _)| name)
            .collect()
    }

    /// (name, available, detail) per line of the table.
    fn rows(&self) -> Vec<(&'static str, bool, String)> {
        let row = |name, s: &Support| (name, s.is_available(), s.detail().to_string());
        let limited = self.pids_cgroup.is_available() || self.rlimit_nproc.is_available();
        vec![
            row("landlock", &self.landlock),
            row("seccomp", &self.seccomp),
            row("user namespaces", &self.user_namespaces),
            row("network namespaces", &self.network_namespaces),
            row("mount namespaces", &self.mount_namespaces),
            row("pids cgroup", &self.pids_cgroup),
            row("memory cgroup", &self.memory_cgroup),
            row("RLIMIT_NPROC", &self.rlimit_nproc),
            (
                "process limit",
                limited,
                if limited {
                    "pids cgroup or RLIMIT_NPROC".to_string()
                } else {
                    "neither a pids cgroup nor a binding RLIMIT_NPROC".to_string()
                },
            ),
        ]
    }
}

/// A table, one feature per line: name, `ok` or `MISSING`, detail.
impl fmt::Display for SandboxSupport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, available, detail) in self.rows() {
            let status = if available { "ok" } else { "MISSING" };
            writeln!(f, "{name:<20} {status:<8} {detail}")?;
        }
        Ok(())
    }
}

/// Probe this machine once (cached for the life of the process).
///
/// The first call runs two short child processes and blocks for a few
/// milliseconds; from async code, call it once at startup or through
/// `spawn_blocking`.
///
/// Never changes the calling process: namespaces are tried in a short-lived
/// child (`/bin/true`, entered between fork and exec), the rest is read
/// from `/proc` and `/sys`.
pub fn probe() -> SandboxSupport {
    static CACHE: OnceLock<SandboxSupport> = OnceLock::new();
    CACHE.get_or_init(run_probe).clone()
}

fn run_probe() -> SandboxSupport {
    let (landlock, landlock_abi) = match landlock_rules::kernel_abi() {
        Ok(abi) => (
            Support::Available(format!("ABI {abi}")),
            u32::try_from(abi).ok(),
        ),
        Err(reason) => (Support::Missing(reason), None),
    };
    let (pids_cgroup, pids_cgroup_path) = match cgroup::pids_parent() {
        Ok(p) => (
            Support::Available(p.dir.display().to_string()),
            Some(p.dir.clone()),
        ),
        Err(reason) => (Support::Missing(reason), None),
    };
    let uid = rustix::process::geteuid();
    let rlimit_nproc = if uid.is_root() {
        Support::Missing(
            "uid 0 is exempt from RLIMIT_NPROC; the pids cgroup must cap processes".into(),
        )
    } else {
        Support::Available(format!("binds uid {}", uid.as_raw()))
    };
    let memory_cgroup = match cgroup::memory_parent() {
        Ok(p) => Support::Available(format!(
            "{} (cgroup {}): bounds the whole process tree",
            p.dir.display(),
            if p.v2 { "v2" } else { "v1" }
        )),
        Err(reason) => Support::Missing(format!(
            "{reason}; memory is bound per process only (RLIMIT_AS)"
        )),
    };
    let user_namespaces = namespace_probe(true, NsKind::User);
    let in_user = user_namespaces.is_available();
    let network_namespaces = namespace_probe(in_user, NsKind::Net);
    let mount_namespaces = namespace_probe(in_user, NsKind::Mount);
    let egress_relay = match &network_namespaces {
        Support::Available(_) => Support::Available(
            "loopback relay to the proxy socket in the command's network namespace".into(),
        ),
        Support::Missing(why) => Support::Missing(format!(
            "needs a network namespace of the command's own ({why})"
        )),
    };
    SandboxSupport {
        egress_relay,
        landlock,
        landlock_abi,
        seccomp: seccomp_support(),
        user_namespaces,
        network_namespaces,
        mount_namespaces,
        pids_cgroup,
        memory_cgroup,
        pids_cgroup_path,
        rlimit_nproc,
    }
}

/// Which namespace [`namespace_probe`] tries (after a user namespace).
#[derive(Clone, Copy, PartialEq, Eq)]
enum NsKind {
    User,
    Net,
    Mount,
}

/// Seccomp filters exist when `/proc/self/status` has a `Seccomp:` line and
/// the kernel lists the `errno` action we return.
fn seccomp_support() -> Support {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if !status.lines().any(|l| l.starts_with("Seccomp:")) {
        return Support::Missing("the kernel is built without CONFIG_SECCOMP".into());
    }
    match std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail") {
        Ok(actions) if actions.split_whitespace().any(|a| a == "errno") => {
            Support::Available("filter mode, errno action".into())
        }
        Ok(actions) => Support::Missing(format!("no errno action (have: {})", actions.trim())),
        Err(e) => Support::Missing(format!("cannot read seccomp actions: {e}")),
    }
}

/// Enter the namespaces in a child between fork and exec of `/bin/true`:
/// the only way to learn whether an LSM, a sysctl or a container policy
/// allows it, without changing this (multi-threaded) process.
fn namespace_probe(user: bool, kind: NsKind) -> Support {
    let Some(true_bin) = ["/bin/true", "/usr/bin/true"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
    else {
        return Support::Missing("cannot probe: no /bin/true to run".into());
    };
    // Rendered before fork: nothing may allocate in the child.
    let maps = userns::IdMaps::own();
    let mut cmd = Command::new(true_bin);
    cmd.env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let hook = move || -> std::io::Result<()> {
        let to_io = |e: userns::NsError| std::io::Error::from_raw_os_error(e.errno.raw_os_error());
        if user {
            userns::enter_user_ns(&maps).map_err(to_io)?;
        }
        match kind {
            NsKind::User => {}
            NsKind::Net => userns::enter_net_ns().map_err(to_io)?,
            NsKind::Mount => {
                // SAFETY: as in `userns`: unshare(CLONE_NEWNS) touches no
                // descriptor table; this child is about to exec.
                #[allow(unsafe_code)]
                unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }
                    .map_err(std::io::Error::from)?;
            }
        }
        Ok(())
    };
    // SAFETY: the hook runs between fork and exec, where only
    // async-signal-safe work is allowed: it makes raw system calls
    // (unshare, open, write, close) on data rendered before the fork, and
    // allocates nothing.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(hook);
    }
    let what = match (user, kind) {
        (_, NsKind::User) => "unshare(CLONE_NEWUSER) + id maps",
        (true, NsKind::Net) => "unshare(CLONE_NEWNET) in a user namespace",
        (false, NsKind::Net) => "unshare(CLONE_NEWNET)",
        (true, NsKind::Mount) => "unshare(CLONE_NEWNS) in a user namespace",
        (false, NsKind::Mount) => "unshare(CLONE_NEWNS)",
    };
    match cmd.status() {
        Ok(s) if s.success() => Support::Available(what.into()),
        Ok(s) => Support::Missing(format!("{what}: probe child exited with {s}")),
        Err(e) => Support::Missing(format!("{what}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_ok() -> SandboxSupport {
        let ok = |d: &str| Support::Available(d.into());
        SandboxSupport {
            landlock: ok("ABI 7"),
            landlock_abi: Some(7),
            seccomp: ok("filter"),
            user_namespaces: ok("u"),
            network_namespaces: ok("n"),
            mount_namespaces: ok("m"),
            pids_cgroup: Support::Missing("not root".into()),
            memory_cgroup: Support::Missing("not delegated".into()),
            pids_cgroup_path: None,
            rlimit_nproc: ok("binds uid 1000"),
            egress_relay: ok("relay"),
        }
    }

    #[test]
    fn table_lists_every_feature() {
        let text = all_ok().to_string();
        assert_eq!(text.lines().count(), 9, "{text}");
        assert!(text.contains("landlock") && text.contains("ABI 7"));
        assert!(
            text.lines()
                .any(|l| l.starts_with("pids cgroup") && l.contains("MISSING"))
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with("process limit") && l.contains(" ok "))
        );
    }

    #[test]
    fn strict_ready_needs_a_binding_process_limit() {
        let mut s = all_ok();
        assert!(s.strict_ready());
        s.rlimit_nproc = Support::Missing("uid 0".into());
        assert!(!s.strict_ready());
        assert!(s.to_string().contains("neither a pids cgroup"));
        let mut s = all_ok();
        s.mount_namespaces = Support::Missing("EPERM".into());
        assert!(!s.strict_ready());
        assert_eq!(s.missing_layers(), ["mount namespaces"]);
        // The memory cgroup is optional: RLIMIT_AS still applies.
        assert!(all_ok().missing_layers().is_empty());
    }
}
