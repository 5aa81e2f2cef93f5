//! A long-running sandboxed process with piped stdin and stdout (a stdio
//! MCP server): the confinement of [`run_sandboxed`](crate::run_sandboxed)
//! without its run-to-completion contract.
//!
//! The start is a handshake, so a caller never mistakes a refusal for a
//! server: the helper gets the write end of a pipe (see
//! [`crate::launch::READY_FD_ENV`]) on which it repeats each diagnostic
//! line (`D <line>`), then writes `EXEC` just before it execs the command,
//! whose exec closes the pipe (it is close-on-exec), or `FAIL` when the exec
//! failed. End of file without `EXEC` (a strict-mode refusal, an unusable
//! spec, a parent-death exit) or with `FAIL` is a
//! [`SandboxError::Refused`]; the handshake is bounded by
//! [`HANDSHAKE_TIMEOUT`].
//!
//! Once running, a task watches the process (a pidfd, or a blocking
//! `waitid` where there is none): when it exits, its whole process group is
//! killed, so a background child that kept stdout open cannot hide the
//! exit, and the caller reads end of file.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cgroup::RunCgroup;
use crate::launch::{Launched, launch};
use crate::runner::{SandboxError, TERM_GRACE};
use crate::spec::SandboxSpec;
use crate::supervise::wait_exit_no_reap;

/// How long the helper may take to confine itself and exec the command.
/// Setup takes milliseconds; this only bounds a helper that hangs.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of stderr [`SandboxedChild::stderr_tail`] keeps.
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// Bound on what the helper may write on the ready pipe.
const READY_MAX_BYTES: usize = 64 * 1024;
/// After SIGKILL, how long to wait for the exit before giving up waiting.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// A sandboxed process the caller talks to over its stdin and stdout.
///
/// Dropping it kills the whole process group (and empties its cgroup), so
/// a server that was never closed cannot outlive the session.
pub struct SandboxedChild {
    /// The process's stdin; `None` once taken.
    pub stdin: Option<tokio::process::ChildStdin>,
    /// The process's stdout; `None` once taken.
    pub stdout: Option<tokio::process::ChildStdout>,
    /// Confinement features that were missing (permissive mode), as the
    /// helper reported them before it started the command, and the
    /// runner's own (a cgroup that could not be made).
    pub warnings: Vec<String>,
    child: Option<tokio::process::Child>,
    pgid: Pid,
    run_cgroup: Option<RunCgroup>,
    memory_cgroup: Option<RunCgroup>,
    tail: Arc<Mutex<Vec<u8>>>,
    exited: watch::Receiver<bool>,
    /// Set before the leader is reaped; from then on its pid (the group
    /// id) may be reused, so the watcher must not kill the group.
    reaped: Arc<Mutex<bool>>,
    tasks: Vec<JoinHandle<()>>,
}

impl SandboxedChild {
    /// The last bytes (at most [`STDERR_TAIL_BYTES`]) the process wrote to
    /// stderr, helper diagnostics included, for an error message when it
    /// exits early.
    pub fn stderr_tail(&self) -> String {
        let tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        let from = tail.len().saturating_sub(STDERR_TAIL_BYTES);
        String::from_utf8_lossy(&tail[from..]).into_owned()
    }

    /// The process id of the command (the leader of its process group).
    pub fn id(&self) -> u32 {
        self.pgid.as_raw_nonzero().get().unsigned_abs()
    }

    /// True once the command has exited (its group is then killed).
    pub fn has_exited(&self) -> bool {
        *self.exited.borrow()
    }

    /// Stops the process group: closes stdin and sends SIGTERM, then
    /// SIGKILL after [`TERM_GRACE`]; waits for it and removes its cgroups.
    /// Returns the exit status when it could be collected.
    pub async fn shutdown(mut self) -> Option<ExitStatus> {
        self.stdin = None;
        if !self.has_exited() {
            let _ = kill_process_group(self.pgid, Signal::TERM);
        }
        self.stop(TERM_GRACE).await
    }

    /// Wait up to `grace` for the leader to exit, SIGKILL the group, remove
    /// the cgroups and reap the leader.
    async fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut exited = self.exited.clone();
        let _ = tokio::time::timeout(grace, exited.wait_for(|e| *e)).await;
        let _ = kill_process_group(self.pgid, Signal::KILL);
        let _ = tokio::time::timeout(KILL_WAIT, exited.wait_for(|e| *e)).await;
        *self.reaped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        let (mut run, mut memory) = (self.run_cgroup.take(), self.memory_cgroup.take());
        let removed =
            tokio::task::spawn_blocking(move || Launched::remove_cgroups(&mut run, &mut memory))
                .await;
        self.warnings.extend(removed.unwrap_or_default());
        let mut child = self.child.take()?;
        let status = tokio::time::timeout(KILL_WAIT, child.wait()).await;
        status.ok().and_then(Result::ok)
    }
}

impl Drop for SandboxedChild {
    fn drop(&mut self) {
        if self.child.is_some() {
            // The leader is not reaped yet (only `stop` reaps it), so its
            // pid still names this group.
            let _ = kill_process_group(self.pgid, Signal::KILL);
            *self.reaped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        }
        for task in &self.tasks {
            task.abort();
        }
        // The cgroups' own Drop kills what is left in them and removes
        // them; the Child's `kill_on_drop` hands the leader to tokio's
        // reaper.
    }
}

/// Starts `spec` under the sandbox helper, with its stdin and stdout piped
/// to the caller. The same confinement as [`run_sandboxed`](crate::run_sandboxed)
/// (cgroups, namespaces, Landlock, seccomp, rlimits, cleared environment,
/// own process group, parent-death signal, the egress relay when the spec
/// names a proxy) but no overall timeout: `limits.cpu_seconds` still bounds
/// its CPU time, so a long-running server needs a large value.
///
/// Returns once the command is exec'd, or [`SandboxError::Refused`] when
/// the helper did not start it (strict mode missing a layer, command not
/// found). Call it from a runtime worker thread, as for `run_sandboxed`:
/// the helper's parent-death signal fires when the spawning thread exits.
pub async fn spawn_sandboxed(
    helper: &Path,
    spec: &SandboxSpec,
) -> Result<SandboxedChild, SandboxError> {
    let (reader, writer) = std::io::pipe()?;
    let launched = launch(helper, spec, Stdio::piped(), Some(writer.as_raw_fd()));
    // Only the helper may hold the write end now, or no end of file comes.
    drop(writer);
    let Launched {
        mut child,
        run_cgroup,
        memory_cgroup,
        warnings,
    } = launched?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw)
        .ok_or_else(|| std::io::Error::other("spawned helper has no process id"))?;
    let tail = Arc::new(Mutex::new(Vec::new()));
    let (exit_tx, exited) = watch::channel(false);
    let reaped = Arc::new(Mutex::new(false));
    let mut tasks = vec![tokio::spawn(watch_leader(pgid, exit_tx, reaped.clone()))];
    if let Some(stderr) = child.stderr.take() {
        tasks.push(tokio::spawn(drain_tail(stderr, tail.clone())));
    }
    let mut sandboxed = SandboxedChild {
        stdin: child.stdin.take(),
        stdout: child.stdout.take(),
        warnings,
        child: Some(child),
        pgid,
        run_cgroup,
        memory_cgroup,
        tail,
        exited,
        reaped,
        tasks,
    };
    let handshake = read_ready(reader, pgid).await;
    if handshake.started {
        sandboxed.warnings.extend(handshake.diagnostics);
        return Ok(sandboxed);
    }
    let status = sandboxed.stop(TERM_GRACE).await;
    Err(SandboxError::Refused {
        program: spec.argv.first().cloned().unwrap_or_default(),
        exit_code: status.and_then(|s| s.code()),
        diagnostics: handshake.diagnostics,
        stderr_tail: sandboxed.stderr_tail(),
    })
}

/// What the helper said on the ready pipe.
#[derive(Debug, Default, PartialEq, Eq)]
struct Handshake {
    started: bool,
    diagnostics: Vec<String>,
}

fn parse_handshake(bytes: &[u8]) -> Handshake {
    let text = String::from_utf8_lossy(bytes);
    let mut h = Handshake::default();
    for line in text.lines() {
        match line {
            "EXEC" => h.started = true,
            "FAIL" => h.started = false,
            _ => {
                if let Some(d) = line.strip_prefix("D ") {
                    h.diagnostics.push(d.to_string());
                }
            }
        }
    }
    h
}

/// Read the ready pipe to end of file (bounded in size and time; on
/// timeout the group is killed, which ends the file).
async fn read_ready(mut reader: std::io::PipeReader, pgid: Pid) -> Handshake {
    let mut reading = tokio::task::spawn_blocking(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = READY_MAX_BYTES.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        kept
    });
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, &mut reading).await {
        Ok(bytes) => parse_handshake(&bytes.unwrap_or_default()),
        Err(_) => {
            let _ = kill_process_group(pgid, Signal::KILL);
            let mut h = parse_handshake(&reading.await.unwrap_or_default());
            h.started = false;
            h.diagnostics.push(format!(
                "the sandbox helper did not start the command within {}s",
                HANDSHAKE_TIMEOUT.as_secs()
            ));
            h
        }
    }
}

/// Wait for the leader to exit (without reaping it), then kill its group
/// so nothing it left behind keeps stdout open, and tell the owner.
async fn watch_leader(pid: Pid, exited: watch::Sender<bool>, reaped: Arc<Mutex<bool>>) {
    leader_exit(pid).await;
    {
        let reaped = reaped.lock().unwrap_or_else(PoisonError::into_inner);
        if !*reaped {
            let _ = kill_process_group(pid, Signal::KILL);
        }
    }
    let _ = exited.send(true);
}

async fn leader_exit(pid: Pid) {
    use rustix::process::{PidfdFlags, pidfd_open};
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;
    if let Ok(fd) = pidfd_open(pid, PidfdFlags::NONBLOCK) {
        // SAFETY: `fd` is an OwnedFd moved into the AsyncFd, which owns it
        // until dropped: it stays open and `as_raw_fd` returns the same
        // number for the AsyncFd's whole life.
        #[allow(unsafe_code)]
        let registered = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) };
        if let Ok(fd) = registered {
            // A pidfd becomes readable when the process exits.
            let _ = fd.readable().await;
            return;
        }
    }
    let _ = tokio::task::spawn_blocking(move || wait_exit_no_reap(pid)).await;
}

/// Keep the last [`STDERR_TAIL_BYTES`] of stderr, reading until its end so
/// the process never blocks on a full pipe.
async fn drain_tail(mut stderr: tokio::process::ChildStderr, tail: Arc<Mutex<Vec<u8>>>) {
    let mut buf = vec![0u8; 4096];
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * STDERR_TAIL_BYTES {
            let cut = tail.len() - STDERR_TAIL_BYTES;
            tail.drain(..cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_lines() {
        let h = parse_handshake(b"D bulwark-sandbox: WARNING: x\nEXEC\n");
        assert!(h.started);
        assert_eq!(h.diagnostics, ["bulwark-sandbox: WARNING: x"]);
        let h = parse_handshake(b"EXEC\nFAIL\nD bulwark-sandbox: cannot run\n");
        assert!(!h.started);
        assert_eq!(h.diagnostics.len(), 1);
        let h = parse_handshake(b"D bulwark-sandbox: landlock unavailable: x\n");
        assert!(!h.started);
        assert!(!parse_handshake(b"").started);
        // Noise that is neither is ignored.
        assert_eq!(parse_handshake(b"junk\n"), Handshake::default());
    }
}
