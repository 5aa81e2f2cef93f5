//! Starting and ending one worker process.
//!
//! A worker leads its own process group (so a Ctrl-C at the server's
//! terminal reaches the server, which then shuts workers down in order) and
//! is killed with its group. The group is only ever signalled while the
//! leader is still unreaped: an unreaped zombie keeps its pid, so the group
//! id cannot have been reused by an unrelated process.

use crate::workers::env::WorkerEnv;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};
use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

/// How often a worker that should be exiting is looked at.
const EXIT_POLL: Duration = Duration::from_millis(10);
/// The longest stderr line logged; the rest of the line is dropped.
const MAX_STDERR_LINE: usize = 2048;

/// A running worker and its pipes.
pub(crate) struct Spawned {
    pub(crate) process: WorkerProcess,
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) stderr: ChildStderr,
}

/// What to start.
pub(crate) struct Launch<'a> {
    pub(crate) program: &'a Path,
    pub(crate) args: &'a [OsString],
    pub(crate) bulwark_home: &'a Path,
    pub(crate) env: &'a WorkerEnv,
    /// The conversation's user and agent, passed as arguments (see
    /// [`identity_args`]).
    pub(crate) user: &'a str,
    pub(crate) agent: &'a str,
}

/// `--user=<user> --agent=<agent>`, after the configured arguments.
///
/// A worker confines itself to its user's and agent's data before it
/// starts its runtime, which is before it can read `Start`: it needs
/// both names from its command line. (It then refuses a `Start` that
/// names others.) One `--flag=value` word each, so no name can be taken
/// for a flag.
pub(crate) fn identity_args(user: &str, agent: &str) -> [OsString; 2] {
    [
        format!("--user={user}").into(),
        format!("--agent={agent}").into(),
    ]
}

pub(crate) fn spawn(launch: &Launch<'_>) -> std::io::Result<Spawned> {
    let mut command = tokio::process::Command::new(launch.program);
    command
        .args(launch.args)
        .args(identity_args(launch.user, launch.agent))
        .env_clear()
        .envs(launch.env.vars(launch.bulwark_home))
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = command.spawn()?;
    let missing = || std::io::Error::other("a worker pipe was not created");
    let stdin = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?;
    let stderr = child.stderr.take().ok_or_else(missing)?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    Ok(Spawned {
        process: WorkerProcess { child, pgid },
        stdin,
        stdout,
        stderr,
    })
}

pub(crate) struct WorkerProcess {
    child: Child,
    /// The group (= the leader's pid), while the leader is unreaped.
    pgid: Option<Pid>,
}

impl WorkerProcess {
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pgid.map(|p| p.as_raw_nonzero().get().unsigned_abs())
    }

    /// Has the leader exited? (Without reaping it.)
    fn exited(&self) -> bool {
        let Some(pid) = self.pgid else {
            return true;
        };
        !matches!(
            waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
            ),
            Ok(None)
        )
    }

    /// Gives the worker up to `grace` to exit by itself, then kills its
    /// group, reaps it and describes how it ended.
    pub(crate) async fn end(&mut self, grace: Duration) -> String {
        let deadline = tokio::time::Instant::now() + grace;
        while !self.exited() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(EXIT_POLL).await;
        }
        self.kill().await
    }

    /// SIGKILLs the group now, reaps the leader and describes its status.
    pub(crate) async fn kill(&mut self) -> String {
        if let Some(pgid) = self.pgid.take() {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
        match self.child.wait().await {
            Ok(status) => describe(status),
            Err(err) => format!("its status could not be read ({err})"),
        }
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

/// Logs a worker's stderr line by line at info level (a worker writes
/// little there: what confines it, warnings, why it could not start, all
/// of which an operator needs): lines capped at
/// [`MAX_STDERR_LINE`] bytes, control characters replaced (a log viewer
/// must not interpret a worker's escape sequences).
pub(crate) async fn log_stderr(mut stderr: ChildStderr, worker: u64) {
    let mut chunk = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let mut dropping = false;
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in chunk.get(..n).unwrap_or_default() {
            if byte == b'\n' {
                emit(worker, &line, dropping);
                line.clear();
                dropping = false;
            } else if line.len() < MAX_STDERR_LINE {
                line.push(byte);
            } else {
                dropping = true;
            }
        }
    }
    if !line.is_empty() {
        emit(worker, &line, dropping);
    }
}

fn emit(worker: u64, line: &[u8], cut: bool) {
    let text: String = String::from_utf8_lossy(line)
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect();
    let marker = if cut { " [line cut]" } else { "" };
    tracing::info!(target: "bulwark_worker::stderr", worker, "{text}{marker}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_one_word_per_name() {
        let args = identity_args("alice", "helper");
        assert_eq!(
            args,
            [OsString::from("--user=alice"), "--agent=helper".into()]
        );
        // A name that looks like a flag stays the value of its own flag.
        let args = identity_args("--home=/", "x y");
        assert_eq!(args[0], "--user=--home=/");
        assert_eq!(args[1], "--agent=x y");
    }
}
