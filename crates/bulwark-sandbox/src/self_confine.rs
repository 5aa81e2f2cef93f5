//! Confining the calling process itself: `no_new_privs` and a Landlock
//! ruleset of exactly the paths it was granted, for the rest of its life.
//!
//! [`run_sandboxed`](crate::run_sandboxed) confines a command it is about
//! to start. This is for a long-running process that holds data worth
//! protecting from itself: `bulwark worker` runs one user's conversation
//! with a model and tools, and a bug there (in a parser, a driver, a tool)
//! must not become a way to read the server's keys or another user's
//! files. Once confined, the process and everything it starts can reach
//! only the granted paths, whatever its uid.
//!
//! Landlock binds the calling thread and the threads and processes it
//! creates afterwards, never threads that already exist. So this must run
//! while the process has one thread (before an async runtime is built),
//! and it refuses otherwise. It cannot be undone.

use std::fmt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::landlock_rules::{
    ABI_NET, ABI_SCOPE, DEVICES_RO, DEVICES_RW, ETC_ENTRIES, SYSTEM_DIRS, TARGET_ABI, kernel_abi,
    open_path,
};
use crate::mount_ns::Layout;
use crate::{cgroup, nested};

/// What the process may reach once confined, besides the baseline every
/// process gets: [`SYSTEM_DIRS`] (read + execute), [`ETC_ENTRIES`] (read),
/// and `/dev/null`, `/dev/zero`, `/dev/full` (read + write),
/// `/dev/random`, `/dev/urandom` (read).
///
/// A path that does not exist when the ruleset is built is skipped (and
/// listed in [`ConfinementReport::missing`]): it stays unreachable, even
/// if it is created later. Symbolic links are followed when the ruleset
/// is built; the rule is on what they pointed to then.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelfConfinement {
    /// Read only: a file's contents, a directory's listing and everything
    /// beneath it.
    pub read_only: Vec<PathBuf>,
    /// Read and execute (a program such as the process's own binary, which
    /// [`run_sandboxed`](crate::run_sandboxed) re-executes as its helper).
    pub read_exec: Vec<PathBuf>,
    /// Directories where everything is allowed beneath (create, write,
    /// remove, rename, execute), except making device nodes.
    pub read_write_dirs: Vec<PathBuf>,
    /// Existing files that may be read, written and truncated, but not
    /// removed or replaced. Creating a file needs rights on its whole
    /// directory, so a file that must be writable has to exist beforehand.
    pub read_write_files: Vec<PathBuf>,
    /// The process will run commands with
    /// [`run_sandboxed`](crate::run_sandboxed): prepare the namespaces its
    /// helpers join (see [`nested`]: user, network, and a mount namespace
    /// whose root holds these grants) and grant its pids and memory cgroup
    /// directories, where per-run cgroups are made and removed.
    pub sandboxed_children: bool,
}

/// What [`confine_current_process`] put in place, for the caller's log.
/// Holds no paths of the grants themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinementReport {
    /// The kernel's Landlock ABI.
    pub kernel_abi: i32,
    /// The ABI the ruleset was written for (the kernel's, at most 6).
    pub enforced_abi: i32,
    /// Every TCP `bind` is denied (ABI 4+), but for `sandboxed_children` the
    /// egress relay's port ([`EGRESS_PROXY_PORT`](crate::EGRESS_PROXY_PORT)). Outgoing connections are not
    /// restricted here: egress is policed by the HTTP client's policy.
    pub tcp_bind_denied: bool,
    /// Signals and abstract UNIX sockets cannot reach processes outside
    /// the domain (ABI 6+).
    pub scoped: bool,
    /// Rules added, baseline included.
    pub rules: usize,
    /// Granted paths that did not exist, and so stay unreachable.
    pub missing: Vec<PathBuf>,
    /// For `sandboxed_children`: the pids cgroup directory granted, or why
    /// there is none (then child runs fall back to `RLIMIT_NPROC`).
    pub pids_cgroup: Option<Result<PathBuf, String>>,
    /// For `sandboxed_children`: whether namespaces were prepared, or why
    /// not (then a strict child run is refused).
    pub namespaces: Option<Result<(), String>>,
}

impl fmt::Display for ConfinementReport {
    /// One line, e.g. `landlock ABI 6 (kernel 7): files, tcp bind denied,
    /// signals and abstract sockets scoped; no_new_privs; 31 rules`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "landlock ABI {} (kernel {}): files",
            self.enforced_abi, self.kernel_abi
        )?;
        if self.tcp_bind_denied {
            f.write_str(", tcp bind denied")?;
        }
        if self.scoped {
            f.write_str(", signals and abstract sockets scoped")?;
        }
        write!(f, "; no_new_privs; {} rules", self.rules)?;
        if !self.missing.is_empty() {
            write!(f, " ({} granted paths absent)", self.missing.len())?;
        }
        if let Some(ns) = &self.namespaces {
            match ns {
                Ok(()) => f.write_str("; child sandboxes: namespaces prepared")?,
                Err(why) => write!(f, "; child sandboxes: no namespaces ({why})")?,
            }
            match &self.pids_cgroup {
                Some(Ok(_)) => f.write_str(", pids cgroup")?,
                Some(Err(_)) | None => f.write_str(", no pids cgroup")?,
            }
        }
        Ok(())
    }
}

/// Why the process could not be confined. Nothing was enforced, except
/// `no_new_privs` when the failure came after it.
#[derive(Debug, thiserror::Error)]
pub enum SelfConfineError {
    #[error(
        "the process already runs {threads} threads; Landlock would bind only this one, so \
         confinement must happen before any thread (or async runtime) is started"
    )]
    MultiThreaded { threads: u64 },
    #[error("cannot tell whether the process is single-threaded: {0}")]
    ThreadCount(String),
    #[error(
        "could not set no_new_privs: {0}; check for a seccomp or LSM policy around bulwark \
         that denies prctl"
    )]
    NoNewPrivs(rustix::io::Errno),
    #[error(
        "Landlock is unavailable: {0}; boot a kernel with Landlock enabled (Linux 5.13+, \
         lsm=...,landlock)"
    )]
    Unavailable(String),
    #[error("the Landlock rule for {path} could not be added: {reason}")]
    Rule { path: PathBuf, reason: String },
    #[error("the Landlock ruleset could not be applied: {0}")]
    Ruleset(String),
}

impl SelfConfineError {
    /// True when the kernel has no usable Landlock (as opposed to a
    /// mistake in the grants, or a process in the wrong state).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, SelfConfineError::Unavailable(_))
    }
}

/// Confine the calling process to `grants` for the rest of its life:
/// `no_new_privs`, then a Landlock ruleset that handles every file-system
/// right of the ABI (so anything not granted is denied), TCP `bind` (no
/// port is granted) and, at ABI 6, signal and abstract-socket scoping.
///
/// The calling thread must be the process's only thread (checked through
/// `/proc/self/status`); otherwise [`SelfConfineError::MultiThreaded`].
/// Every requested right is enforced as asked or the call fails: nothing
/// is silently dropped. On success the returned report says what is in
/// force.
pub fn confine_current_process(
    grants: &SelfConfinement,
) -> Result<ConfinementReport, SelfConfineError> {
    let threads = thread_count()?;
    if threads != 1 {
        return Err(SelfConfineError::MultiThreaded { threads });
    }
    let kernel = kernel_abi().map_err(SelfConfineError::Unavailable)?;
    let (pids_cgroup, namespaces) = if grants.sandboxed_children {
        // Both read /proc or make a child: done while nothing forbids it.
        // The cgroup lookup is cached for `run_sandboxed` to use later.
        let cgroup = cgroup::pids_parent().map(|p| p.dir);
        let read_only: Vec<PathBuf> = grants
            .read_only
            .iter()
            .chain(&grants.read_exec)
            .cloned()
            .collect();
        let read_write: Vec<PathBuf> = grants
            .read_write_dirs
            .iter()
            .chain(&grants.read_write_files)
            .cloned()
            .collect();
        let root = Layout::for_confined_caller(&read_only, &read_write);
        // A mount namespace that could not be built leaves strict child
        // runs refused, like missing namespaces do.
        let prepared = match nested::prepare(&root) {
            Ok(None) => Ok(()),
            Ok(Some(why)) => Err(format!("no private mount namespace: {why}")),
            Err(why) => Err(why),
        };
        (Some(cgroup), Some(prepared))
    } else {
        (None, None)
    };
    rustix::thread::set_no_new_privs(true).map_err(SelfConfineError::NoNewPrivs)?;

    let abi_level = kernel.min(TARGET_ABI);
    let abi = ABI::from(abi_level);
    let tcp_bind_denied = kernel >= ABI_NET;
    let scoped = kernel >= ABI_SCOPE;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(ruleset_error)?;
    if tcp_bind_denied {
        // Handled with no port rule: every bind is denied. Connect is not
        // handled, so outgoing connections stay possible.
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp)
            .map_err(ruleset_error)?;
    }
    if scoped {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(ruleset_error)?;
    }
    let mut created = ruleset.create().map_err(ruleset_error)?;
    if tcp_bind_denied && grants.sandboxed_children {
        // The egress relay of a proxied child listens on this port inside
        // the child's own network namespace, and Landlock's port rules do
        // not know namespaces: without this one port, a worker's sandboxed
        // MCP servers and shell commands could never reach their proxy.
        // The cost: this process may listen on it too (loopback or not);
        // every other port stays denied.
        created = created
            .add_rule(NetPort::new(crate::EGRESS_PROXY_PORT, AccessNet::BindTcp))
            .map_err(ruleset_error)?;
    }

    let memory_dir = grants
        .sandboxed_children
        .then(|| cgroup::memory_parent().ok().map(|p| p.dir))
        .flatten();
    let cgroup_dirs: Vec<&Path> = pids_cgroup
        .as_ref()
        .and_then(|c| c.as_ref().ok())
        .map(PathBuf::as_path)
        .into_iter()
        .chain(memory_dir.as_deref())
        .collect();
    let mut rules = 0;
    let mut missing = Vec::new();
    for (path, access, required) in rule_list(grants, abi, &cgroup_dirs) {
        if required && !exists(&path) {
            missing.push(path);
            continue;
        }
        let Some((fd, is_dir)) =
            open_path(&path, required).map_err(|reason| SelfConfineError::Rule {
                path: path.clone(),
                reason,
            })?
        else {
            continue;
        };
        let access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| SelfConfineError::Rule {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        rules += 1;
    }
    let status = created.restrict_self().map_err(ruleset_error)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(SelfConfineError::Ruleset(format!(
            "it was only {:?} at ABI {kernel}",
            status.ruleset
        )));
    }
    Ok(ConfinementReport {
        kernel_abi: kernel,
        enforced_abi: abi_level,
        tcp_bind_denied,
        scoped,
        rules,
        missing,
        pids_cgroup: pids_cgroup.map(|c| c.map_err(|why| one_line(&why))),
        namespaces: namespaces.map(|n| n.map_err(|why| one_line(&why))),
    })
}

fn ruleset_error(e: impl std::error::Error) -> SelfConfineError {
    SelfConfineError::Ruleset(e.to_string())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every rule as (path, rights, asked for by the caller). Baseline paths
/// that a distribution lacks are skipped silently; the caller's missing
/// paths are reported.
fn rule_list(
    grants: &SelfConfinement,
    abi: ABI,
    cgroup_dirs: &[&Path],
) -> Vec<(PathBuf, BitFlags<AccessFs>, bool)> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let read_exec = AccessFs::from_read(abi);
    // mknod of char/block devices is withheld: as root it would hand out
    // raw disks inside a writable directory.
    let write = AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let file_rw =
        (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate) & AccessFs::from_file(abi);
    // A cgroup directory needs subdirectories made and removed and control
    // files read and written; nothing else.
    let cgroup = (AccessFs::ReadFile
        | AccessFs::ReadDir
        | AccessFs::WriteFile
        | AccessFs::MakeDir
        | AccessFs::RemoveDir
        | AccessFs::Truncate)
        & AccessFs::from_all(abi);

    let mut rules = Vec::new();
    for dir in SYSTEM_DIRS {
        rules.push((PathBuf::from(dir), read_exec, false));
    }
    for entry in ETC_ENTRIES {
        rules.push((Path::new("/etc").join(entry), read, false));
    }
    for dev in DEVICES_RW {
        rules.push((PathBuf::from(dev), file_rw, false));
    }
    for dev in DEVICES_RO {
        rules.push((PathBuf::from(dev), AccessFs::ReadFile.into(), false));
    }
    for dir in cgroup_dirs {
        rules.push((dir.to_path_buf(), cgroup, false));
    }
    let asked = [
        (&grants.read_only, read),
        (&grants.read_exec, read_exec),
        (&grants.read_write_dirs, write),
        (&grants.read_write_files, file_rw),
    ];
    for (paths, access) in asked {
        for path in paths {
            rules.push((path.clone(), access, true));
        }
    }
    rules
}

/// False only when nothing is there (a dangling link counts as absent);
/// any other error is left for the rule to report.
fn exists(path: &Path) -> bool {
    !matches!(std::fs::metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// `Threads:` of `/proc/self/status`.
fn thread_count() -> Result<u64, SelfConfineError> {
    crate::hardening::thread_count().map_err(SelfConfineError::ThreadCount)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_cover_the_baseline_and_every_grant() {
        let grants = SelfConfinement {
            read_only: vec!["/ro".into()],
            read_exec: vec!["/bin/x".into()],
            read_write_dirs: vec!["/rw".into()],
            read_write_files: vec!["/db".into()],
            sandboxed_children: false,
        };
        let rules = rule_list(&grants, ABI::V6, &[Path::new("/cg")]);
        let find = |p: &str| {
            rules
                .iter()
                .find(|(path, _, _)| path == Path::new(p))
                .unwrap_or_else(|| panic!("no rule for {p}"))
        };
        assert!(find("/usr").1.contains(AccessFs::Execute));
        assert!(!find("/etc/passwd").1.contains(AccessFs::Execute));
        assert!(!find("/ro").1.contains(AccessFs::WriteFile));
        assert!(!find("/ro").1.contains(AccessFs::Execute));
        assert!(find("/bin/x").1.contains(AccessFs::Execute));
        assert!(find("/rw").1.contains(AccessFs::MakeReg));
        assert!(!find("/rw").1.contains(AccessFs::MakeBlock));
        let db = find("/db").1;
        assert!(db.contains(AccessFs::WriteFile) && !db.contains(AccessFs::RemoveFile));
        assert!(find("/cg").1.contains(AccessFs::MakeDir));
        assert!(!find("/cg").1.contains(AccessFs::Execute));
        // Only the caller's grants are reported when missing.
        assert!(find("/ro").2 && !find("/usr").2 && !find("/cg").2);
        assert!(
            !rules
                .iter()
                .any(|(p, _, _)| p == Path::new("/etc") || p == Path::new("/proc"))
        );
    }

    #[test]
    fn the_report_is_one_line_without_paths() {
        let report = ConfinementReport {
            kernel_abi: 7,
            enforced_abi: 6,
            tcp_bind_denied: true,
            scoped: true,
            rules: 30,
            missing: vec!["/secret/path".into()],
            pids_cgroup: Some(Ok("/sys/fs/cgroup/x".into())),
            namespaces: Some(Ok(())),
        };
        let line = report.to_string();
        assert_eq!(
            line,
            "landlock ABI 6 (kernel 7): files, tcp bind denied, signals and abstract sockets \
             scoped; no_new_privs; 30 rules (1 granted paths absent); child sandboxes: \
             namespaces prepared, pids cgroup"
        );
        assert!(!line.contains('/'), "{line}");
    }
}
