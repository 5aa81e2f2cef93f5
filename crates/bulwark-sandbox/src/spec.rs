//! What a sandboxed child may do: the wire format between [`run_sandboxed`]
//! and the helper process.
//!
//! The spec crosses a process boundary (as JSON in one environment
//! variable), so it is a closed serde type with `deny_unknown_fields` and
//! explicit length bounds: a misspelt field fails closed instead of
//! silently granting the default.
//!
//! [`run_sandboxed`]: crate::run_sandboxed

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Environment variable that carries the JSON spec to the helper. The helper
/// never passes it on to the command it runs.
pub const SPEC_ENV: &str = "BULWARK_SANDBOX_SPEC";

/// First argument that selects helper mode: `bulwark __sandbox-exec`.
pub const HELPER_ARG: &str = "__sandbox-exec";

/// Upper bound on the serialized spec. Linux refuses a single environment
/// string longer than `MAX_ARG_STRLEN` (128 KiB); staying under it turns an
/// oversized spec into a clear error here instead of an `E2BIG` at spawn.
pub const MAX_SPEC_BYTES: usize = 120 * 1024;

/// Bounds on list lengths: far above real use, low enough that a hostile
/// spec cannot make the helper build a huge ruleset.
const MAX_ARGV: usize = 4096;
const MAX_ENV: usize = 1024;
const MAX_EXTRA_DIRS: usize = 64;

/// Everything the helper needs to confine and run one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSpec {
    /// Program and arguments; `argv[0]` is looked up in `env`'s `PATH`.
    pub argv: Vec<String>,
    /// Working directory of the command (normally inside `workspace`).
    pub cwd: PathBuf,
    /// The read-write root: the only tree the command may change, besides
    /// `read_write`.
    pub workspace: PathBuf,
    /// Further directories granted read-write (e.g. a private `TMPDIR`).
    #[serde(default)]
    pub read_write: Vec<PathBuf>,
    /// Further directories granted read + execute (e.g. a toolchain).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// The environment of the command, already filtered by the caller;
    /// nothing else is inherited. The helper replaces `HOME`, the XDG base
    /// directories and `TMPDIR` (see [`SANDBOX_HOME`](crate::SANDBOX_HOME)):
    /// `HOME` is never a directory the agent can write outside the command,
    /// and `TMPDIR` is the command's private `/tmp` (or, without a mount
    /// namespace in permissive mode, what the caller passed).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Whether the command may use the network. Without it the command gets
    /// an empty network namespace, Landlock denies TCP, and seccomp refuses
    /// every socket family but `AF_UNIX`.
    #[serde(default)]
    pub network: bool,
    #[serde(default)]
    pub limits: ResourceLimits,
    #[serde(default)]
    pub enforcement: Enforcement,
    /// A pids cgroup directory the helper joins before anything else. Set by
    /// [`run_sandboxed`](crate::run_sandboxed), which creates and removes it;
    /// callers leave it `None`.
    #[serde(default)]
    pub pids_cgroup: Option<PathBuf>,
    /// A memory cgroup directory the helper joins, capping the whole
    /// process tree at `limits.address_space_bytes`. Set by
    /// [`run_sandboxed`](crate::run_sandboxed) like `pids_cgroup` (the same
    /// directory on cgroup v2); callers leave it `None`.
    #[serde(default)]
    pub memory_cgroup: Option<PathBuf>,
    /// A Unix socket on the host where an egress proxy listens (see
    /// [`crate::egress`]). Only with `network = false`: the command keeps its
    /// empty network namespace, where the helper brings up loopback and
    /// relays `127.0.0.1:`[`EGRESS_PROXY_PORT`](crate::EGRESS_PROXY_PORT)
    /// to this socket, and sets `HTTP_PROXY`/`HTTPS_PROXY` (and the
    /// lowercase forms) to it. Nothing else on the host is reachable.
    #[serde(default)]
    pub egress_proxy: Option<PathBuf>,
}

/// Per-process resource limits (rlimits), plus the process cap that the
/// pids cgroup or `RLIMIT_NPROC` enforces. Core dumps are always disabled:
/// a core file would copy the process memory into the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResourceLimits {
    /// `RLIMIT_CPU`: CPU time, after which the kernel kills the process.
    pub cpu_seconds: u64,
    /// Memory: `RLIMIT_AS` of each process (virtual memory; a memory bomb
    /// fails to allocate) and, where the memory cgroup controller is
    /// usable, `memory.max` of the whole process tree (swap included), so
    /// several processes side by side cannot together exceed it either.
    pub address_space_bytes: u64,
    /// Processes (threads included) in the sandbox: `pids.max` of the
    /// cgroup, and `RLIMIT_NPROC`. Inside the user namespace the rlimit
    /// counts only the sandbox's processes; with network granted (no user
    /// namespace) it counts every process of the caller's uid, and it never
    /// binds uid 0, which is what the cgroup is for.
    pub max_processes: u64,
    /// `RLIMIT_FSIZE`: largest file the command may write.
    pub file_size_bytes: u64,
    /// `RLIMIT_NOFILE`: open file descriptors.
    pub open_files: u64,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self {
            cpu_seconds: 60,
            address_space_bytes: 4 << 30,
            max_processes: 256,
            file_size_bytes: 1 << 30,
            open_files: 1024,
        }
    }
}

/// What the helper does when a confinement feature cannot be set up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    /// Refuse to run the command (exit 125) unless every feature is in place.
    #[default]
    Strict,
    /// Run anyway, printing a warning per missing feature, which
    /// [`SandboxOutput::warnings`](crate::SandboxOutput::warnings) carries
    /// to the caller's audit trail.
    Permissive,
}

/// Check the spec's shape (not the file system): what the helper could not
/// do anything sensible with.
pub(crate) fn check_shape(spec: &SandboxSpec) -> Result<(), String> {
    let program = spec
        .argv
        .first()
        .ok_or("argv is empty; pass the program to run as argv[0]")?;
    if program.is_empty() {
        return Err("argv[0] is empty; pass the program to run".into());
    }
    if spec.argv.len() > MAX_ARGV {
        return Err(format!("argv has more than {MAX_ARGV} entries"));
    }
    if let Some(i) = spec.argv.iter().position(|a| a.contains('\0')) {
        return Err(format!("argv[{i}] contains a NUL byte"));
    }
    if spec.env.len() > MAX_ENV {
        return Err(format!("env has more than {MAX_ENV} variables"));
    }
    for (k, v) in &spec.env {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(format!(
                "environment variable name {k:?} is empty or contains '=' or NUL"
            ));
        }
        if v.contains('\0') {
            return Err(format!("environment variable {k:?} contains a NUL byte"));
        }
        if k == SPEC_ENV {
            return Err(format!(
                "{SPEC_ENV} is reserved for the sandbox helper and is never passed on"
            ));
        }
    }
    if spec.read_write.len() + spec.read_only.len() > MAX_EXTRA_DIRS {
        return Err(format!(
            "more than {MAX_EXTRA_DIRS} extra directories; grant a common parent instead"
        ));
    }
    let paths = [&spec.cwd, &spec.workspace]
        .into_iter()
        .chain(&spec.read_write)
        .chain(&spec.read_only)
        .chain(spec.pids_cgroup.as_ref())
        .chain(spec.memory_cgroup.as_ref())
        .chain(spec.egress_proxy.as_ref());
    for p in paths {
        if !p.is_absolute() {
            return Err(format!("path {} is not absolute", p.display()));
        }
    }
    if spec.egress_proxy.is_some() && spec.network {
        return Err(
            "egress_proxy is for commands without network: with network = true the \
                    command would bypass the proxy; set network = false to route it through \
                    the proxy"
                .into(),
        );
    }
    let l = &spec.limits;
    if l.max_processes == 0 || l.open_files < 3 || l.cpu_seconds == 0 {
        return Err(
            "limits too small to run anything: max_processes and cpu_seconds must be at \
             least 1, open_files at least 3"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> SandboxSpec {
        serde_json::from_str(r#"{"argv":["true"],"cwd":"/w","workspace":"/w"}"#)
            .expect("minimal spec parses")
    }

    #[test]
    fn defaults_are_strict_offline_and_bounded() {
        let s = minimal();
        assert_eq!(s.enforcement, Enforcement::Strict);
        assert!(!s.network);
        assert!(s.env.is_empty() && s.read_write.is_empty() && s.read_only.is_empty());
        assert_eq!(s.limits, ResourceLimits::default());
        assert_eq!(s.limits.cpu_seconds, 60);
        assert_eq!(s.limits.address_space_bytes, 4 * 1024 * 1024 * 1024);
        assert_eq!(s.limits.max_processes, 256);
        assert_eq!(s.limits.file_size_bytes, 1024 * 1024 * 1024);
        assert_eq!(s.limits.open_files, 1024);
        assert!(check_shape(&s).is_ok());
    }

    #[test]
    fn unknown_fields_fail_closed() {
        let typo = r#"{"argv":["true"],"cwd":"/w","workspace":"/w","netwrok":true}"#;
        assert!(serde_json::from_str::<SandboxSpec>(typo).is_err());
        let typo = r#"{"argv":["true"],"cwd":"/w","workspace":"/w","limits":{"cpu":1}}"#;
        assert!(serde_json::from_str::<SandboxSpec>(typo).is_err());
        let bad = r#"{"argv":["true"],"cwd":"/w","workspace":"/w","enforcement":"lax"}"#;
        assert!(serde_json::from_str::<SandboxSpec>(bad).is_err());
    }

    #[test]
    fn round_trips_through_json() {
        let mut s = minimal();
        s.env = vec![("PATH".into(), "/bin".into())];
        s.enforcement = Enforcement::Permissive;
        s.limits.max_processes = 8;
        let json = serde_json::to_string(&s).expect("serialize");
        assert!(json.contains(r#""enforcement":"permissive""#), "{json}");
        let back: SandboxSpec = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, s);
    }

    #[test]
    fn shape_errors() {
        let mut s = minimal();
        s.argv.clear();
        assert!(check_shape(&s).is_err());
        let mut s = minimal();
        s.env.push((SPEC_ENV.into(), "{}".into()));
        assert!(check_shape(&s).unwrap_err().contains("reserved"));
        let mut s = minimal();
        s.env.push(("A=B".into(), "x".into()));
        assert!(check_shape(&s).is_err());
        let mut s = minimal();
        s.workspace = "relative".into();
        assert!(check_shape(&s).unwrap_err().contains("absolute"));
        let mut s = minimal();
        s.limits.max_processes = 0;
        assert!(check_shape(&s).is_err());
        let mut s = minimal();
        s.egress_proxy = Some("proxy.sock".into());
        assert!(check_shape(&s).unwrap_err().contains("absolute"));
        let mut s = minimal();
        s.egress_proxy = Some("/run/proxy.sock".into());
        assert!(check_shape(&s).is_ok());
        s.network = true;
        assert!(check_shape(&s).unwrap_err().contains("egress_proxy"));
    }
}
