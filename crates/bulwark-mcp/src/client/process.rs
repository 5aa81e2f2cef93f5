//! The server process behind a stdio connection: sandboxed (the sandbox
//! crate owns it) or unconfined (started here, in its own process group,
//! with a cleared environment), and the bounded tail of its stderr.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout};

/// Bytes of a server's stderr kept for error messages.
pub(crate) const STDERR_TAIL_BYTES: usize = 2048;
/// How long a server gets to exit after SIGTERM on `close`.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// The last [`STDERR_TAIL_BYTES`] a process wrote to stderr.
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    bytes: Mutex<Vec<u8>>,
    /// The stream reached its end (the process and its group exited).
    ended: AtomicBool,
}

/// How long an error waits for a dead server's last stderr bytes.
const TAIL_SETTLE: Duration = Duration::from_millis(500);

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let Ok(mut tail) = self.bytes.lock() else {
            return;
        };
        tail.extend_from_slice(bytes);
        if tail.len() > STDERR_TAIL_BYTES {
            let cut = tail.len() - STDERR_TAIL_BYTES;
            tail.drain(..cut);
        }
    }

    pub(crate) fn text(&self) -> String {
        let bytes = self.bytes.lock().map(|t| t.clone()).unwrap_or_default();
        clean_tail(&String::from_utf8_lossy(&bytes))
    }

    /// [`StderrTail::text`] once the stream has ended, or after
    /// [`TAIL_SETTLE`]: a server that just exited has usually written
    /// why, and its stdout and stderr close in no particular order.
    pub(crate) async fn settled_text(&self) -> String {
        let deadline = tokio::time::Instant::now() + TAIL_SETTLE;
        while !self.ended.load(Ordering::Acquire) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.text()
    }
}

/// A server's stderr as an error message may quote it: trimmed, control
/// characters (terminal escapes) replaced, bounded.
pub(crate) fn clean_tail(text: &str) -> String {
    let cleaned: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() && c != '\n' { '?' } else { c })
        .collect();
    let mut start = cleaned.len().saturating_sub(STDERR_TAIL_BYTES);
    while !cleaned.is_char_boundary(start) {
        start += 1;
    }
    cleaned[start..].to_string()
}

/// A server started without the process sandbox. Dropping it kills its
/// whole process group.
pub(crate) struct UnconfinedChild {
    child: Child,
    group: Option<Pid>,
    tail: Arc<StderrTail>,
}

impl UnconfinedChild {
    /// Starts `argv` in `cwd` with exactly `env`, in a new process group,
    /// stdin and stdout piped, stderr into a bounded tail.
    pub(crate) fn spawn(
        argv: &[String],
        cwd: &PathBuf,
        env: &[(String, String)],
    ) -> std::io::Result<(UnconfinedChild, ChildStdin, ChildStdout)> {
        let (program, args) = argv.split_first().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "the command is empty")
        })?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        let missing = || std::io::Error::other("the child's pipes were not set up");
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let tail = Arc::new(StderrTail::default());
        if let Some(mut stderr) = child.stderr.take() {
            let tail = tail.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stderr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    tail.push(&buf[..n]);
                }
                tail.ended.store(true, Ordering::Release);
            });
        }
        Ok((UnconfinedChild { child, group, tail }, stdin, stdout))
    }

    pub(crate) async fn stderr_tail(&self) -> String {
        self.tail.settled_text().await
    }

    /// SIGTERM to the group, SIGKILL after a grace period.
    pub(crate) async fn shutdown(mut self) {
        if let Some(group) = self.group {
            let _ = kill_process_group(group, Signal::TERM);
        }
        if tokio::time::timeout(TERM_GRACE, self.child.wait())
            .await
            .is_err()
        {
            self.kill_group();
            let _ = self.child.wait().await;
        }
    }

    fn kill_group(&mut self) {
        if let Some(group) = self.group.take() {
            let _ = kill_process_group(group, Signal::KILL);
        }
    }
}

impl Drop for UnconfinedChild {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// Whatever runs the server.
pub(crate) enum ServerProcess {
    /// Streamable HTTP, or an in-process server: nothing to stop.
    None,
    Unconfined(UnconfinedChild),
    Sandboxed(Box<bulwark_sandbox::SandboxedChild>),
}

impl ServerProcess {
    /// The confinement layers a permissive sandbox ran the server without.
    pub(crate) fn sandbox_warnings(&self) -> &[String] {
        match self {
            ServerProcess::Sandboxed(child) => &child.warnings,
            ServerProcess::None | ServerProcess::Unconfined(_) => &[],
        }
    }

    /// The server's last stderr lines, once they have arrived.
    pub(crate) async fn stderr_tail(&self) -> String {
        match self {
            ServerProcess::None => String::new(),
            ServerProcess::Unconfined(child) => child.stderr_tail().await,
            ServerProcess::Sandboxed(child) => clean_tail(&child.stderr_tail()),
        }
    }

    pub(crate) async fn shutdown(self) {
        match self {
            ServerProcess::None => {}
            ServerProcess::Unconfined(child) => child.shutdown().await,
            ServerProcess::Sandboxed(child) => {
                child.shutdown().await;
            }
        }
    }
}
