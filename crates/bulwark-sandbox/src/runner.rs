//! Running a command under the helper: the parent side of the sandbox.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::enforcement::{EXIT_SANDBOX_UNAVAILABLE, leading_diagnostics};
use crate::launch::{Launched, cgroup_path, launch};
use crate::spec::SandboxSpec;
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
    /// The helper did not start the command (from
    /// [`spawn_sandboxed`](crate::spawn_sandboxed), which, unlike
    /// [`run_sandboxed`], has no output to carry the refusal in): strict
    /// mode found a confinement layer missing, the spec was unusable, or
    /// the command could not be executed.
    #[error(
        "the sandbox did not start {program:?} (helper exit {exit_code:?}): {}",
        if diagnostics.is_empty() { "no diagnostic; see the stderr tail".to_string() } else { diagnostics.join("; ") }
    )]
    Refused {
        program: String,
        exit_code: Option<i32>,
        /// The helper's `bulwark-sandbox:` lines.
        diagnostics: Vec<String>,
        /// The end of the helper's stderr.
        stderr_tail: String,
    },
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
    let start = Instant::now();
    let Launched {
        child,
        mut run_cgroup,
        mut memory_cgroup,
        mut warnings,
    } = launch(helper, spec, Stdio::null(), None)?;
    let limits = Limits {
        timeout,
        term_grace: Some(TERM_GRACE),
        max_output,
    };
    let mut cleanup = Vec::new();
    let finished = supervise(child, &limits, || {
        cleanup = Launched::remove_cgroups(&mut run_cgroup, &mut memory_cgroup);
    })
    .await?;
    warnings.extend(cleanup);
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
        pids_cgroup: cgroup_path(run_cgroup.as_ref()),
        duration: start.elapsed(),
    })
}
