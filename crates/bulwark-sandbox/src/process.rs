//! Child processes with a cleared environment, bounded output and a
//! process-group kill.
//!
//! Earlier agent runtimes let shell timeouts kill only the direct child, so
//! `sleep 100 &` outlived the tool call, and handed the parent's environment
//! (API keys included) to every command. Here the child gets only the
//! variables the caller lists, runs in its own process group, and the whole
//! group is SIGKILLed on timeout *and* when the leader exits, so nothing the
//! command started survives it.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::supervise::{Limits, supervise};

/// What to run. `argv[0]` is looked up in the `PATH` given in `env` (not the
/// parent's), and nothing is interpreted by a shell.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment of the child; nothing is inherited.
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    /// Cap on each of stdout and stderr, in bytes.
    pub max_output: usize,
}

/// The outcome of [`run_process`].
#[derive(Debug, Clone)]
pub struct ProcessOutput {
    /// Exit code if the process exited normally.
    pub exit_code: Option<i32>,
    /// Terminating signal if it was killed (9 after a timeout).
    pub signal: Option<i32>,
    /// Lossy UTF-8 of the first `max_output` bytes of stdout.
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    /// True if either stream was cut at `max_output`.
    pub truncated: bool,
    pub duration: Duration,
}

/// Why a process could not be started (a process that starts and fails is a
/// successful [`ProcessOutput`] with its exit code).
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("argv is empty; pass the program to run as argv[0]")]
    EmptyArgv,
    #[error(
        "program {program:?} was not found; check the name and the PATH passed in the environment"
    )]
    NotFound { program: String },
    #[error("invalid process spec: {detail}")]
    InvalidSpec { detail: String },
    #[error("could not run {program:?}: {source}")]
    Io {
        program: String,
        #[source]
        source: io::Error,
    },
}

/// A fixed, minimal environment: nothing from the parent process (which holds
/// provider keys and tokens) reaches the child.
pub fn minimal_env(home: &Path) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME".into(), home.display().to_string()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
        ("TZ".into(), "UTC".into()),
    ]
}

/// A fresh, empty `HOME` for one unconfined command, outside any workspace
/// (`bulwark-home-<random>` under the system temporary directory, mode
/// 0700), removed with everything in it when dropped.
///
/// A command run without the sandbox must not find a `~/.gitconfig` or
/// `.bashrc` that an agent wrote with its file tools, as it would if
/// `HOME` were the workspace. [`run_sandboxed`](crate::run_sandboxed)
/// does the same inside its mount namespace.
#[derive(Debug)]
pub struct PrivateHome {
    path: PathBuf,
}

impl PrivateHome {
    pub fn create() -> io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let mut last = io::Error::other("no attempt");
        for _ in 0..8 {
            let path = base.join(format!("bulwark-home-{:016x}", crate::cgroup::random_u64()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(Self { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("creating a private HOME under {}: {e}", base.display()),
                    ));
                }
            }
        }
        Err(last)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `env` with `HOME` pointing here and no XDG base directory set (so
    /// they default to beneath this `HOME`, whatever the caller passed).
    pub fn apply(&self, env: &[(String, String)]) -> Vec<(String, String)> {
        const NAMES: [&str; 5] = [
            "HOME",
            "XDG_CONFIG_HOME",
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
        ];
        let mut out: Vec<(String, String)> = env
            .iter()
            .filter(|(k, _)| !NAMES.contains(&k.as_str()))
            .cloned()
            .collect();
        out.push(("HOME".into(), self.path.display().to_string()));
        out
    }
}

impl Drop for PrivateHome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn validate(spec: &ProcessSpec) -> Result<&str, SpawnError> {
    let program = spec.argv.first().ok_or(SpawnError::EmptyArgv)?;
    let invalid = |detail: String| SpawnError::InvalidSpec { detail };
    if program.is_empty() {
        return Err(invalid("argv[0] is empty; pass the program to run".into()));
    }
    if let Some(i) = spec.argv.iter().position(|a| a.contains('\0')) {
        return Err(invalid(format!("argv[{i}] contains a NUL byte")));
    }
    for (k, v) in &spec.env {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(invalid(format!(
                "environment variable name {k:?} is empty or contains '=' or NUL"
            )));
        }
        if v.contains('\0') {
            return Err(invalid(format!(
                "environment variable {k:?} contains a NUL byte"
            )));
        }
    }
    // Checked here because a missing cwd makes spawn fail with NotFound,
    // which would otherwise be misreported as a missing program.
    match std::fs::metadata(&spec.cwd) {
        Ok(m) if m.is_dir() => Ok(program),
        Ok(_) => Err(invalid(format!(
            "working directory {} is not a directory",
            spec.cwd.display()
        ))),
        Err(e) => Err(invalid(format!(
            "working directory {} is not usable: {e}",
            spec.cwd.display()
        ))),
    }
}

/// Run `spec.argv` directly (no shell) and collect its bounded output.
///
/// This runner does not confine the command (no Landlock, seccomp or
/// namespaces): use [`run_sandboxed`](crate::run_sandboxed) for anything an
/// agent chose to run.
///
/// The child gets: `env_clear()` plus exactly `spec.env`; stdin from
/// `/dev/null`; its own process group; stdout/stderr read concurrently, each
/// capped at `spec.max_output` bytes (the rest is read and discarded so the
/// child never blocks on a full pipe). On timeout the whole group is
/// SIGKILLed and reaped. When the leader exits on its own, the rest of its
/// group is SIGKILLed too: background jobs do not outlive the call.
pub async fn run_process(spec: &ProcessSpec) -> Result<ProcessOutput, SpawnError> {
    let program = validate(spec)?;
    let start = Instant::now();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&spec.argv[1..])
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let io_err = |source| SpawnError::Io {
        program: program.to_string(),
        source,
    };
    let child = cmd.spawn().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            SpawnError::NotFound {
                program: program.to_string(),
            }
        } else {
            io_err(e)
        }
    })?;
    let finished = supervise(
        child,
        &Limits {
            timeout: spec.timeout,
            term_grace: None,
            max_output: spec.max_output,
        },
        || {},
    )
    .await
    .map_err(io_err)?;
    Ok(ProcessOutput {
        exit_code: finished.status.code(),
        signal: finished.status.signal(),
        stdout: String::from_utf8_lossy(&finished.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&finished.stderr).into_owned(),
        timed_out: finished.timed_out,
        truncated: finished.stdout_truncated || finished.stderr_truncated,
        duration: start.elapsed(),
    })
}
