//! Watching a spawned process group: bounded output, timeout, group kill.
//! Shared by [`run_process`](crate::run_process) and
//! [`run_sandboxed`](crate::run_sandboxed).

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

/// How long to keep draining stdout/stderr after the process group is dead.
/// Only a process that escaped the group (e.g. via `setsid`) can still hold
/// the pipes open; we stop waiting for it after this grace period.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

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

/// How to end a run.
pub(crate) struct Limits {
    pub(crate) timeout: Duration,
    /// `None`: SIGKILL the group at the timeout. `Some(grace)`: SIGTERM
    /// first, SIGKILL after `grace`.
    pub(crate) term_grace: Option<Duration>,
    /// Cap on each of stdout and stderr, in bytes.
    pub(crate) max_output: usize,
}

/// What happened to a supervised process.
pub(crate) struct Finished {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stdout_truncated: bool,
    pub(crate) stderr: Vec<u8>,
    pub(crate) stderr_truncated: bool,
    pub(crate) timed_out: bool,
}

/// Watch `child`, which must lead its own process group
/// (`process_group(0)`), until it exits or times out; then SIGKILL the
/// whole group, call `after_exit` (e.g. to empty a cgroup) while the leader
/// is still an unreaped zombie, reap it, and collect the capped output.
pub(crate) async fn supervise(
    mut child: tokio::process::Child,
    limits: &Limits,
    after_exit: impl FnOnce(),
) -> io::Result<Finished> {
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::other("spawned child has no process id"))?;
    // process_group(0) makes the child's pid its process group id.
    let mut guard = GroupGuard {
        pgid: pid,
        armed: true,
    };

    let (cancel_tx, cancel_rx) = watch::channel(false);
    let cap = limits.max_output;
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
    let mut done = tokio::time::timeout(limits.timeout, &mut exited)
        .await
        .is_ok();
    let timed_out = !done;
    if timed_out && let Some(grace) = limits.term_grace {
        let _ = kill_process_group(pid, Signal::TERM);
        done = tokio::time::timeout(grace, &mut exited).await.is_ok();
    }
    // Always, even after a normal exit: background jobs die with the call.
    let _ = kill_process_group(pid, Signal::KILL);
    if !done {
        // The SIGKILL makes the blocking waitid return promptly.
        let _ = exited.await;
    }
    after_exit();
    guard.armed = false;
    let status = child.wait().await?;

    let deadline = tokio::time::Instant::now() + DRAIN_GRACE;
    let (stdout, stdout_truncated) = finish_reader(stdout, deadline, &cancel_tx).await;
    let (stderr, stderr_truncated) = finish_reader(stderr, deadline, &cancel_tx).await;
    Ok(Finished {
        status,
        stdout,
        stdout_truncated,
        stderr,
        stderr_truncated,
        timed_out,
    })
}

/// Block until `pid` has exited, leaving it waitable for tokio to reap.
pub(crate) fn wait_exit_no_reap(pid: Pid) {
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
) -> (Vec<u8>, bool) {
    let Some(mut handle) = handle else {
        return (Vec::new(), false);
    };
    let result = match tokio::time::timeout_at(deadline, &mut handle).await {
        Ok(r) => r,
        Err(_) => {
            let _ = cancel.send(true);
            handle.await
        }
    };
    result.unwrap_or_default()
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
