//! A long-running sandboxed process with piped stdin and stdout (a stdio
//! MCP server): the confinement of [`run_sandboxed`](crate::run_sandboxed)
//! without its run-to-completion contract.

use std::path::Path;

use crate::runner::SandboxError;
use crate::spec::SandboxSpec;

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
    /// helper reported them before it started the command.
    pub warnings: Vec<String>,
}

impl SandboxedChild {
    /// The last bytes the process wrote to stderr (bounded), for an error
    /// message when it exits early.
    pub fn stderr_tail(&self) -> String {
        String::new()
    }

    /// Stops the process group: SIGTERM, then SIGKILL after
    /// [`TERM_GRACE`](crate::TERM_GRACE); waits for it.
    pub async fn shutdown(self) {}
}

/// Starts `spec` under the sandbox helper, with its stdin and stdout piped
/// to the caller. The same confinement as [`run_sandboxed`](crate::run_sandboxed)
/// (cgroups, namespaces, Landlock, seccomp, rlimits, cleared environment);
/// `limits.cpu_seconds` still bounds its CPU time.
pub async fn spawn_sandboxed(
    helper: &Path,
    spec: &SandboxSpec,
) -> Result<SandboxedChild, SandboxError> {
    let _ = (helper, spec);
    Err(SandboxError::InvalidSpec(
        "long-running sandboxed processes are not built yet".into(),
    ))
}
