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

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

/// How long to keep draining stdout/stderr after the process group is dead.
/// Only a process that escaped the group (e.g. via `setsid`) can still hold
/// the pipes open; we stop waiting for it after this grace period.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

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

/// Kills the process group when dropped while armed, so cancelling the
/// future (e.g. the session ends mid-command) also ends grandchildren;
/// tokio's `kill_on_drop` alone would only kill the leader.
struct GroupGuard {
    pgid: Pid,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = kill_process_group(self.pgid, Signal::KILL);
        }
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
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            SpawnError::NotFound {
                program: program.to_string(),
            }
        } else {
            io_err(e)
        }
    })?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw)
        .ok_or_else(|| io_err(io::Error::other("spawned child has no process id")))?;
    // process_group(0) makes the child's pid its process group id.
    let mut guard = GroupGuard {
        pgid: pid,
        armed: true,
    };

    let (cancel_tx, cancel_rx) = watch::channel(false);
    let cap = spec.max_output;
    let stdout = child.stdout.take().map(|r| {
        let rx = cancel_rx.clone();
        tokio::spawn(read_capped(r, cap, rx))
    });
    let stderr = child.stderr.take().map(|r| {
        let rx = cancel_rx.clone();
        tokio::spawn(read_capped(r, cap, rx))
    });

    // Wait for the leader to exit WITHOUT reaping it (WNOWAIT): while it is
    // an unreaped zombie its pid cannot be reused, so the group kill below
    // can never hit an unrelated process group.
    let mut exited = tokio::task::spawn_blocking(move || wait_exit_no_reap(pid));
    let timed_out = tokio::time::timeout(spec.timeout, &mut exited)
        .await
        .is_err();
    let _ = kill_process_group(pid, Signal::KILL);
    if timed_out {
        // The SIGKILL makes the blocking waitid return promptly.
        let _ = exited.await;
    }
    guard.armed = false;
    let status = child.wait().await.map_err(io_err)?;

    let deadline = tokio::time::Instant::now() + DRAIN_GRACE;
    let (stdout, out_trunc) = finish_reader(stdout, deadline, &cancel_tx).await;
    let (stderr, err_trunc) = finish_reader(stderr, deadline, &cancel_tx).await;

    Ok(ProcessOutput {
        exit_code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        timed_out,
        truncated: out_trunc || err_trunc,
        duration: start.elapsed(),
    })
}

/// Block until `pid` has exited, leaving it waitable for tokio to reap.
fn wait_exit_no_reap(pid: Pid) {
    loop {
        match waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            // Exited, or an error such as ECHILD (already reaped): either
            // way there is nothing left to wait for.
            _ => return,
        }
    }
}

/// Wait for a reader until `deadline`, then cancel it and take what it read.
async fn finish_reader(
    handle: Option<tokio::task::JoinHandle<(Vec<u8>, bool)>>,
    deadline: tokio::time::Instant,
    cancel: &watch::Sender<bool>,
) -> (String, bool) {
    let Some(mut handle) = handle else {
        return (String::new(), false);
    };
    let result = match tokio::time::timeout_at(deadline, &mut handle).await {
        Ok(r) => r,
        Err(_) => {
            let _ = cancel.send(true);
            handle.await
        }
    };
    match result {
        Ok((bytes, truncated)) => (String::from_utf8_lossy(&bytes).into_owned(), truncated),
        Err(_) => (String::new(), false),
    }
}

/// Read until EOF or cancellation, keeping the first `cap` bytes and
/// discarding the rest (still reading, so the writer never blocks).
async fn read_capped<R: AsyncRead + Unpin>(
    mut reader: R,
    cap: usize,
    mut cancel: watch::Receiver<bool>,
) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(cap.min(64 * 1024));
    let mut truncated = false;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            biased;
            _ = cancel.changed() => break,
            r = reader.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
        };
        let room = cap.saturating_sub(out.len());
        if n > room {
            truncated = true;
        }
        out.extend_from_slice(&buf[..n.min(room)]);
    }
    (out, truncated)
}
