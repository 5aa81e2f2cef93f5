//! `bulwark sandbox check` and `bulwark sandbox exec`: what confinement
//! this machine supports, and running any command inside it.

use crate::{Failure, usage_error};
use anyhow::anyhow;
use bulwark_kernel::Home;
use bulwark_policy::SandboxEnforcement;
use bulwark_sandbox::{Enforcement, ResourceLimits, SYSTEM_DIRS, SandboxSpec, minimal_env, probe};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub fn check(home: &Home) -> Result<(), Failure> {
    let global = home.load_global().map_err(usage_error)?;
    let support = probe();
    print!("{support}");
    let strict = global.sandbox.enforcement == SandboxEnforcement::Strict;
    println!();
    println!(
        "enforcement: {} ([sandbox] enforcement in config.toml)",
        if strict { "strict" } else { "permissive" }
    );
    println!(
        "every shell command an agent runs gets: an emptied environment, no_new_privs, \
         a private mount namespace (a minimal root: system paths read-only, the workspace \
         read-write, its .git/config and .git/hooks read-only, an empty private /tmp, /run \
         and HOME; no host UNIX sockets), Landlock (system paths read-only, the workspace \
         read-write, nothing else), seccomp (no ptrace, mount, kexec, bpf, perf, \
         userfaultfd, io_uring, keyctl, setsid, set-id mode bits, xattr writes; no network \
         sockets), new user and network namespaces, rlimits (CPU, memory, processes, file \
         size, open files, core 0), a pids cgroup and a memory cgroup for the whole \
         process tree when available, and a process-group kill on timeout."
    );
    if support.strict_ready() {
        println!("ready: everything above is enforced on this machine");
        Ok(())
    } else if strict {
        Err(Failure {
            code: 1,
            error: anyhow!(
                "this machine lacks a layer marked MISSING above: in strict mode agents' shell commands will not run (set [sandbox] enforcement = \"permissive\" to run them with a warning)"
            ),
        })
    } else {
        println!(
            "permissive: commands run without the MISSING layers, with a warning and an audit record"
        );
        Ok(())
    }
}

pub struct ExecArgs<'a> {
    pub workspace: Option<&'a Path>,
    pub write: &'a [PathBuf],
    pub read: &'a [PathBuf],
    pub net: bool,
    pub permissive: bool,
    pub timeout_secs: u64,
    pub argv: &'a [String],
}

fn absolute(p: &Path, what: &str) -> Result<PathBuf, Failure> {
    std::fs::canonicalize(p).map_err(|e| {
        usage_error(anyhow!(
            "{what} {}: {e}; give an existing directory",
            p.display()
        ))
    })
}

/// Top-level trees that are never a workspace (besides [`SYSTEM_DIRS`]).
const NOT_WORKSPACES: &[&str] = &[
    "/",
    "/etc",
    "/var",
    "/var/tmp",
    "/var/lib",
    "/home",
    "/root",
    "/tmp",
    "/run",
    "/srv",
    "/opt",
    "/mnt",
    "/media",
    "/snap",
    "/usr/local",
];

/// Trees no workspace may be in (system state, kernel interfaces).
const NOT_INSIDE: &[&str] = &["/etc", "/proc", "/sys", "/dev", "/boot", "/run"];

/// Why `dir` (canonical) must not be a writable workspace: `/`, a system
/// directory or one inside a system tree, shared scratch space, or the
/// home directory or one of its ancestors. `None` if it is fit.
pub fn unfit_workspace(dir: &Path, home: Option<&Path>) -> Option<&'static str> {
    if dir == Path::new("/") {
        return Some("the root of the file system");
    }
    if NOT_WORKSPACES.iter().any(|d| dir == Path::new(d)) {
        return Some("a system or shared directory");
    }
    let system = SYSTEM_DIRS.iter().chain(NOT_INSIDE);
    if system.into_iter().any(|d| dir.starts_with(d)) {
        return Some("a system directory");
    }
    if let Some(home) = home
        && home.starts_with(dir)
    {
        return Some(if home == dir {
            "your home directory"
        } else {
            "a directory that contains your home directory"
        });
    }
    None
}

/// Runs `argv` confined, passes its output through and exits with its
/// status (128 + signal when killed, 124 on timeout, as `timeout` does).
pub async fn exec(args: ExecArgs<'_>) -> Result<(), Failure> {
    if args.argv.is_empty() {
        return Err(usage_error(anyhow!(
            "no command given: bulwark sandbox exec [OPTIONS] -- COMMAND [ARGS...]"
        )));
    }
    let workspace = match args.workspace {
        Some(w) => absolute(w, "--workspace")?,
        None => absolute(Path::new("."), "the current directory")?,
    };
    let home = std::env::home_dir().and_then(|h| std::fs::canonicalize(h).ok());
    if let Some(why) = unfit_workspace(&workspace, home.as_deref()) {
        let how = if args.workspace.is_some() {
            "pass --workspace DIR naming a directory of its own (a project, a scratch \
             directory) that the command may change entirely"
        } else {
            "run it from a directory of its own (a project, a scratch directory), or pass \
             --workspace DIR: the workspace is the directory the command may change entirely"
        };
        return Err(usage_error(anyhow!(
            "refusing {} as the sandbox workspace: it is {why}; {how}",
            workspace.display()
        )));
    }
    // HOME and TMPDIR are the sandbox's own (an empty home, a private /tmp):
    // nothing is created in the workspace.
    let env = minimal_env(Path::new(bulwark_sandbox::SANDBOX_HOME));
    let spec = SandboxSpec {
        argv: args.argv.to_vec(),
        cwd: workspace.clone(),
        workspace,
        read_write: args
            .write
            .iter()
            .map(|p| absolute(p, "--write"))
            .collect::<Result<_, _>>()?,
        read_only: args
            .read
            .iter()
            .map(|p| absolute(p, "--read"))
            .collect::<Result<_, _>>()?,
        env,
        network: args.net,
        limits: ResourceLimits::default(),
        enforcement: if args.permissive {
            Enforcement::Permissive
        } else {
            Enforcement::Strict
        },
        pids_cgroup: None,
        memory_cgroup: None,
        egress_proxy: None,
    };
    let helper = std::env::current_exe()
        .map_err(|e| anyhow!("cannot find the bulwark binary to use as the sandbox helper: {e}"))?;
    let out = bulwark_sandbox::run_sandboxed(
        &helper,
        &spec,
        Duration::from_secs(args.timeout_secs),
        16 * 1024 * 1024,
    )
    .await
    .map_err(|e| anyhow!("the sandbox could not start: {e}"))?;
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    let code = if out.timed_out {
        eprintln!(
            "bulwark: timed out after {} s; the process group was killed",
            args.timeout_secs
        );
        124
    } else {
        match (out.exit_code, out.signal) {
            (Some(0), _) => return Ok(()),
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            _ => 1,
        }
    };
    Err(Failure {
        code: u8::try_from(code).unwrap_or(1),
        error: anyhow!("the command exited with status {code}"),
    })
}
