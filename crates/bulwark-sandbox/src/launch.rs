//! Starting the helper: what [`run_sandboxed`](crate::run_sandboxed) and
//! [`spawn_sandboxed`](crate::spawn_sandboxed) share. The spec is checked
//! against the file system, the run's cgroups are created, and the helper
//! is spawned with an empty environment except the spec, in its own
//! process group.

use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::cgroup::{self, RunCgroup};
use crate::enforcement::DIAGNOSTIC_PREFIX;
use crate::nested::{self, Namespaces};
use crate::runner::SandboxError;
use crate::spec::{HELPER_ARG, MAX_SPEC_BYTES, SPEC_ENV, SandboxSpec, check_shape};

/// Environment variable naming the descriptor on which the helper reports
/// its diagnostics and, last, that it is about to exec the command (see
/// [`crate::child`]). Only [`spawn_sandboxed`](crate::spawn_sandboxed)
/// passes one.
pub(crate) const READY_FD_ENV: &str = "BULWARK_SANDBOX_READY_FD";

/// A spawned helper and the cgroups of its run.
pub(crate) struct Launched {
    pub(crate) child: tokio::process::Child,
    pub(crate) run_cgroup: Option<RunCgroup>,
    pub(crate) memory_cgroup: Option<RunCgroup>,
    /// The runner's own diagnostics (a cgroup that could not be made).
    pub(crate) warnings: Vec<String>,
}

impl Launched {
    /// Kill what is left in the run's cgroups and remove them; a failure
    /// is returned as a diagnostic line for the caller's audit record.
    pub(crate) fn remove_cgroups(
        run_cgroup: &mut Option<RunCgroup>,
        memory_cgroup: &mut Option<RunCgroup>,
    ) -> Vec<String> {
        let mut warnings = Vec::new();
        for cg in [run_cgroup.as_mut(), memory_cgroup.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Err(e) = cg.kill_and_remove() {
                warnings.push(format!(
                    "{DIAGNOSTIC_PREFIX} WARNING: cgroup {} could not be removed: {e}",
                    cg.path().display()
                ));
            }
        }
        warnings
    }
}

/// Check `spec`, create its cgroups and spawn the helper with stdout and
/// stderr piped. `ready_fd` is a descriptor (close-on-exec in this
/// process) that only this child inherits, named in [`READY_FD_ENV`].
pub(crate) fn launch(
    helper: &Path,
    spec: &SandboxSpec,
    stdin: Stdio,
    ready_fd: Option<RawFd>,
) -> Result<Launched, SandboxError> {
    check_runnable(spec).map_err(SandboxError::InvalidSpec)?;
    let mut warnings = Vec::new();
    let mut spec = spec.clone();
    let (run_cgroup, memory_cgroup, shared) = run_cgroups(&spec, &mut warnings);
    spec.pids_cgroup = run_cgroup.as_ref().map(|cg| cg.path().to_path_buf());
    spec.memory_cgroup = if shared {
        // cgroup v2: one cgroup carries both controllers.
        spec.pids_cgroup.clone()
    } else {
        memory_cgroup.as_ref().map(|cg| cg.path().to_path_buf())
    };
    let json = serde_json::to_string(&spec)
        .map_err(|e| SandboxError::InvalidSpec(format!("cannot serialize: {e}")))?;
    if json.len() > MAX_SPEC_BYTES {
        return Err(SandboxError::InvalidSpec(format!(
            "the serialized spec is {} bytes, over the {MAX_SPEC_BYTES}-byte limit of one \
             environment variable; pass fewer or shorter arguments or variables",
            json.len()
        )));
    }

    let mut cmd = tokio::process::Command::new(helper);
    cmd.arg(HELPER_ARG)
        .env_clear()
        .env(SPEC_ENV, json)
        .current_dir("/")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut inherit: Vec<RawFd> = Vec::new();
    if let Some(ns) = nested::prepared() {
        inherit.extend(pass_namespaces(&mut cmd, ns));
    }
    if let Some(fd) = ready_fd {
        cmd.env(READY_FD_ENV, fd.to_string());
        inherit.push(fd);
    }
    if !inherit.is_empty() {
        inherit_fds(&mut cmd, inherit);
    }
    let child = cmd.spawn().map_err(|source| SandboxError::Helper {
        path: helper.to_path_buf(),
        source,
    })?;
    Ok(Launched {
        child,
        run_cgroup,
        memory_cgroup,
        warnings,
    })
}

/// The run's pids cgroup (with the memory limit too on cgroup v2, where
/// both controllers share one hierarchy) and, on cgroup v1, a separate
/// memory cgroup; the flag says the memory limit is in the pids cgroup.
/// Where a controller is unusable (normal for a non-root
/// user without delegation) the run relies on the rlimits; a controller
/// that is usable but fails here is reported as a warning.
fn run_cgroups(
    spec: &SandboxSpec,
    warnings: &mut Vec<String>,
) -> (Option<RunCgroup>, Option<RunCgroup>, bool) {
    let memory = cgroup::memory_parent().ok();
    let pids_settings = |with_memory: bool, v2: bool| {
        let mut s = vec![("pids.max", spec.limits.max_processes.to_string(), true)];
        if with_memory {
            s.extend(cgroup::memory_settings(v2, spec.limits.address_space_bytes));
        }
        s
    };
    let mut shared = false;
    let pids = match cgroup::pids_parent() {
        Ok(parent) => {
            shared = memory.as_ref().is_some_and(|m| m.v2 && m.dir == parent.dir);
            match RunCgroup::create(&parent, &pids_settings(shared, parent.v2)) {
                Ok(cg) => Some(cg),
                Err(e) => {
                    warnings.push(format!(
                        "{DIAGNOSTIC_PREFIX} WARNING: running without pids cgroup: creating one \
                         under {} failed: {e}",
                        parent.dir.display()
                    ));
                    shared = false;
                    None
                }
            }
        }
        Err(_) => None,
    };
    if shared {
        return (pids, None, true);
    }
    let memory = memory.and_then(|parent| {
        let settings = cgroup::memory_settings(parent.v2, spec.limits.address_space_bytes);
        match RunCgroup::create(&parent, &settings) {
            Ok(cg) => Some(cg),
            Err(e) => {
                warnings.push(format!(
                    "{DIAGNOSTIC_PREFIX} WARNING: running without memory cgroup (each process \
                     is still bound by RLIMIT_AS): creating one under {} failed: {e}",
                    parent.dir.display()
                ));
                None
            }
        }
    });
    (pids, memory, false)
}

/// Hand the helper the namespaces a self-confined caller prepared (see
/// [`crate::nested`]): their numbers in the environment; the descriptors
/// returned are to be inherited by this one child only.
fn pass_namespaces(cmd: &mut tokio::process::Command, ns: &'static Namespaces) -> Vec<RawFd> {
    use std::os::fd::AsRawFd;
    cmd.env(nested::NS_FDS_ENV, nested::env_value(ns));
    let mnt = ns.mnt.as_ref().map(|fd| fd.as_raw_fd()).ok();
    [Some(ns.user.as_raw_fd()), Some(ns.net.as_raw_fd()), mnt]
        .into_iter()
        .flatten()
        .collect()
}

/// Let this one child inherit `fds`: they stay close-on-exec in this
/// process, so no other child gets them.
fn inherit_fds(cmd: &mut tokio::process::Command, fds: Vec<RawFd>) {
    // SAFETY: the hook runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes one fcntl(F_SETFD) call
    // per descriptor number copied before the fork, and allocates nothing
    // (the vector was built before the fork and is only iterated). The
    // caller keeps every descriptor open for the whole spawn: the
    // namespaces live in a process-wide static, the ready pipe's write end
    // is dropped only after `spawn` returns.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::fcntl(*fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Checks that need the file system, so the caller gets a typed error
/// rather than a helper exit code for a plain mistake.
fn check_runnable(spec: &SandboxSpec) -> Result<(), String> {
    check_shape(spec)?;
    if spec.pids_cgroup.is_some() || spec.memory_cgroup.is_some() {
        return Err(
            "pids_cgroup and memory_cgroup are set by run_sandboxed; leave them None".into(),
        );
    }
    let dirs = [("workspace", &spec.workspace), ("cwd", &spec.cwd)]
        .into_iter()
        .chain(spec.read_write.iter().map(|d| ("read-write dir", d)))
        .chain(spec.read_only.iter().map(|d| ("read-only dir", d)));
    for (what, dir) in dirs {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(format!("{what} {} is not a directory", dir.display())),
            Err(e) => return Err(format!("{what} {} is not usable: {e}", dir.display())),
        }
    }
    if let Some(socket) = &spec.egress_proxy {
        crate::egress::check_socket(socket)?;
    }
    Ok(())
}

/// The path of a cgroup, for [`SandboxOutput::pids_cgroup`](crate::SandboxOutput).
pub(crate) fn cgroup_path(cg: Option<&RunCgroup>) -> Option<PathBuf> {
    cg.map(|cg| cg.path().to_path_buf())
}
