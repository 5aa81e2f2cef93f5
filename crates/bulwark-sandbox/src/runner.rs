//! Running a command under the helper: the parent side of the sandbox.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::cgroup::{self, RunCgroup};
use crate::enforcement::{DIAGNOSTIC_PREFIX, EXIT_SANDBOX_UNAVAILABLE, leading_diagnostics};
use crate::nested::{self, Namespaces};
use crate::spec::{HELPER_ARG, MAX_SPEC_BYTES, SPEC_ENV, SandboxSpec, check_shape};
use crate::supervise::{Limits, supervise};

/// Between SIGTERM and SIGKILL on timeout: enough for a well-behaved tool
/// to flush and exit, short enough that ignoring SIGTERM gains nothing.
pub const TERM_GRACE: Duration = Duration::from_secs(2);

/// The outcome of [`run_sandboxed`]. A command that ran and failed is a
/// successful output with its exit code; so is a helper that refused to
/// run it (exit 125, see [`SandboxOutput::refused`]).
#[derive(Debug, Clone)]
pub struct SandboxOutput {
    /// Exit code if the process exited normally.
    pub exit_code: Option<i32>,
    /// Terminating signal if it was killed (9 after a timeout, or 15 if it
    /// exited on the SIGTERM).
    pub signal: Option<i32>,
    /// Lossy UTF-8 of the first `max_output` bytes of stdout.
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub timed_out: bool,
    /// The helper's `bulwark-sandbox:` lines (permissive-mode warnings, a
    /// strict-mode refusal, an exec failure) and the runner's own, for the
    /// caller's audit record. They also stay in `stderr`.
    pub warnings: Vec<String>,
    /// The per-run pids cgroup that was used (already removed).
    pub pids_cgroup: Option<PathBuf>,
    pub duration: Duration,
}

impl SandboxOutput {
    /// True when the helper refused to run the command: the sandbox could
    /// not be set up (strict mode) or the spec was unusable.
    pub fn refused(&self) -> bool {
        self.exit_code == Some(EXIT_SANDBOX_UNAVAILABLE)
            && self
                .warnings
                .iter()
                .any(|w| w.contains(" unavailable: ") || w.contains(" invalid spec: "))
    }
}

/// Why a sandboxed run could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("invalid sandbox spec: {0}")]
    InvalidSpec(String),
    #[error(
        "the sandbox helper {} could not be started: {source}; pass the path of the bulwark \
         binary (or bulwark-sandbox-helper)",
        path.display()
    )]
    Helper {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("supervising the sandboxed process failed: {0}")]
    Io(#[from] io::Error),
}

/// Run `spec` under the sandbox helper and collect its bounded output.
///
/// `helper` is a binary that calls [`helper_main`](crate::helper_main) for
/// `__sandbox-exec` (the `bulwark` binary itself, or
/// `bulwark-sandbox-helper`). It is started with an empty environment
/// except `BULWARK_SANDBOX_SPEC`, stdin from `/dev/null`, in its own
/// process group, and confines itself before it execs the command.
///
/// Where a pids cgroup is usable (as root, or delegated), a fresh
/// `bulwark-<random>` cgroup with `pids.max = limits.max_processes` is
/// created for the run and removed after it; otherwise the helper relies on
/// `RLIMIT_NPROC` (which does not bind root: a strict run as root without
/// the cgroup is refused).
///
/// On `timeout` the group gets SIGTERM, then SIGKILL [`TERM_GRACE`] later.
/// After the command exits the group is SIGKILLed anyway and the cgroup
/// emptied, so nothing it started survives the call.
///
/// The helper's parent-death signal fires when the *thread* that spawned it
/// exits: call this from a runtime worker thread (normal `async` use), not
/// from a short-lived thread.
pub async fn run_sandboxed(
    helper: &Path,
    spec: &SandboxSpec,
    timeout: Duration,
    max_output: usize,
) -> Result<SandboxOutput, SandboxError> {
    check_runnable(spec).map_err(SandboxError::InvalidSpec)?;
    let start = Instant::now();
    let mut warnings = Vec::new();
    let mut spec = spec.clone();
    let (mut run_cgroup, mut memory_cgroup, shared) = run_cgroups(&spec, &mut warnings);
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
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(ns) = nested::prepared() {
        pass_namespaces(&mut cmd, ns);
    }
    let child = cmd.spawn().map_err(|source| SandboxError::Helper {
        path: helper.to_path_buf(),
        source,
    })?;
    let limits = Limits {
        timeout,
        term_grace: Some(TERM_GRACE),
        max_output,
    };
    let mut cleanup_error = None;
    let finished = supervise(child, &limits, || {
        for cg in [run_cgroup.as_mut(), memory_cgroup.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Err(e) = cg.kill_and_remove() {
                cleanup_error = Some((cg.path().to_path_buf(), e));
            }
        }
    })
    .await?;
    if let Some((path, e)) = cleanup_error {
        warnings.push(format!(
            "{DIAGNOSTIC_PREFIX} WARNING: cgroup {} could not be removed: {e}",
            path.display()
        ));
    }
    let stderr = String::from_utf8_lossy(&finished.stderr).into_owned();
    warnings.extend(leading_diagnostics(&stderr));
    Ok(SandboxOutput {
        exit_code: finished.status.code(),
        signal: finished.status.signal(),
        stdout: String::from_utf8_lossy(&finished.stdout).into_owned(),
        stderr,
        stdout_truncated: finished.stdout_truncated,
        stderr_truncated: finished.stderr_truncated,
        timed_out: finished.timed_out,
        warnings,
        pids_cgroup: run_cgroup.map(|cg| cg.path().to_path_buf()),
        duration: start.elapsed(),
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
/// [`crate::nested`]): their numbers in the environment, and the two
/// descriptors inherited by this one child only (they stay close-on-exec
/// in this process, so no other child gets them).
fn pass_namespaces(cmd: &mut tokio::process::Command, ns: &'static Namespaces) {
    use std::os::fd::AsRawFd;
    cmd.env(nested::NS_FDS_ENV, nested::env_value(ns));
    let mnt = ns.mnt.as_ref().map(|fd| fd.as_raw_fd()).ok();
    let fds = [Some(ns.user.as_raw_fd()), Some(ns.net.as_raw_fd()), mnt];
    // SAFETY: the hook runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes up to three fcntl(F_SETFD)
    // calls on descriptor numbers copied before the fork, and allocates
    // nothing. The descriptors live in a process-wide static, so they are
    // open in the parent (and so in the child) for the whole spawn.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            for fd in fds.into_iter().flatten() {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
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
    Ok(())
}
