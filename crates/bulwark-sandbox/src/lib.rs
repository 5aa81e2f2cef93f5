//! Confinement: the capability-scoped workspace filesystem and sandboxed child
//! processes.
//!
//! Two halves, both built so that a tool handed one of these objects cannot
//! reach further than the object allows:
//!
//! * [`Workspace`]: every file operation an agent may cause is resolved
//!   *beneath* one directory handle (cap-std, `openat2(RESOLVE_BENEATH)` on
//!   Linux). String checks on the path run first as defense in depth, but the
//!   kernel-enforced handle is the real boundary, so a symlink, a symlinked
//!   parent, or a race between check and use cannot leave the root.
//! * [`run_sandboxed`]: a command runs under a helper process
//!   ([`helper_main`]) that confines itself before exec: pids cgroup,
//!   rlimits, user + network namespaces, a mount namespace with a minimal
//!   root (no host sockets, private `/tmp` and `HOME`), memory cgroup,
//!   `no_new_privs`, Landlock (the file
//!   system it may see), seccomp (kernel interfaces it may not use), and an
//!   environment of exactly what the caller passed. The runner kills the
//!   whole process group (and cgroup) on timeout and after exit.
//!   [`probe`] reports which of these the machine provides.
//! * [`spawn_sandboxed`]: the same confinement for a long-running process
//!   the caller talks to over stdin and stdout (a stdio MCP server); it
//!   returns only once the helper has exec'd the command, so a strict-mode
//!   refusal is an error, never a half-started child.
//! * The egress relay ([`SandboxSpec::egress_proxy`]): a command without
//!   network reaches one host Unix socket (an egress proxy) through
//!   `127.0.0.1:`[`EGRESS_PROXY_PORT`] in its own network namespace, and
//!   nothing else.
//! * [`confine_current_process`]: `no_new_privs` and Landlock for the
//!   calling process itself, for a long-running process (a `bulwark
//!   worker`) that must not reach beyond its own user's data; commands it
//!   runs with [`run_sandboxed`] keep working inside it.
//! * [`run_process`]: the unconfined runner (cleared environment, no stdin,
//!   own process group, bounded output, group kill) for trusted commands.
#![deny(unsafe_code)]

mod cgroup;
mod child;
mod egress;
mod enforcement;
mod hardening;
mod helper;
mod landlock_rules;
mod launch;
mod mount_ns;
mod nested;
mod path;
mod probe;
mod process;
mod reach;
mod runner;
mod seccomp_filter;
mod self_confine;
mod spec;
mod supervise;
mod userns;
mod workspace;

pub use child::{HANDSHAKE_TIMEOUT, STDERR_TAIL_BYTES, SandboxedChild, spawn_sandboxed};
pub use egress::{EGRESS_PROXY_PORT, egress_proxy_url};
pub use enforcement::{
    DIAGNOSTIC_PREFIX, EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, EXIT_SANDBOX_UNAVAILABLE,
};
pub use hardening::{HardeningError, INJECTION_VARIABLES, harden_process, scrub_environment};
pub use helper::helper_main;
pub use landlock_rules::{ETC_ENTRIES, SYSTEM_DIRS};
pub use mount_ns::{SANDBOX_HOME, SANDBOX_TMP};
pub use probe::{SandboxSupport, Support, probe};
pub use process::{PrivateHome, ProcessOutput, ProcessSpec, SpawnError, minimal_env, run_process};
pub use runner::{SandboxError, SandboxOutput, TERM_GRACE, run_sandboxed};
pub use self_confine::{
    ConfinementReport, SelfConfineError, SelfConfinement, confine_current_process,
};
pub use spec::{Enforcement, HELPER_ARG, MAX_SPEC_BYTES, ResourceLimits, SPEC_ENV, SandboxSpec};
pub use workspace::{
    EDIT_MAX_BYTES, EntryInfo, EntryKind, FsError, Gate, SEARCH_MAX_FILE_BYTES, SearchHit,
    Workspace,
};
