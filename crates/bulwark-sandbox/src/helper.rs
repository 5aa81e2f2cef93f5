//! Helper mode: the process that confines itself and then becomes the
//! command (`bulwark __sandbox-exec`).
//!
//! Confinement is applied by the process that will exec the command, not by
//! the parent between fork and exec: building a Landlock ruleset and a BPF
//! program allocates, which is not allowed after `fork` in a multi-threaded
//! parent such as the tokio runtime. The helper is a fresh single-threaded
//! process where every step can use ordinary, safe Rust.

use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::{Pid, Resource, Rlimit, Signal};

use crate::enforcement::{
    DIAGNOSTIC_PREFIX, Decision, EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, EXIT_SANDBOX_UNAVAILABLE,
    Feature, decide,
};
use crate::spec::{Enforcement, HELPER_ARG, MAX_SPEC_BYTES, SPEC_ENV, SandboxSpec, check_shape};
use crate::{landlock_rules, mount_ns, nested, seccomp_filter, userns};

/// Entry point of helper mode. The `bulwark` binary calls this first thing
/// in `main` when its first argument is `__sandbox-exec`; the spec comes as
/// JSON in `BULWARK_SANDBOX_SPEC`.
///
/// In order: mark inherited fds close-on-exec; join the pids and memory
/// cgroups; set the parent-death signal; rlimits; a new user namespace
/// (own ids mapped), without network a new network namespace (and, when the
/// spec names an egress proxy, loopback up and the relay forked there: see
/// [`crate::egress`]), and a mount
/// namespace with a minimal root (see [`crate::mount_ns`]) (or, under a
/// caller that confined itself, the ones it prepared: see
/// [`crate::nested`]), then `RLIMIT_NPROC`;
/// `no_new_privs`; Landlock; seccomp; then the environment is replaced by
/// `spec.env` (with the sandbox's own `HOME`, XDG directories and
/// `TMPDIR`), the cwd entered and the command exec'd.
///
/// Under [`spawn_sandboxed`](crate::spawn_sandboxed) every diagnostic
/// line is repeated on a ready pipe, followed by `EXEC` just before the
/// exec (see [`crate::child`]).
///
/// Never returns: exits 125 when the spec is unusable or a required feature
/// is missing in strict mode, 127 when the command is not found, 126 when
/// it cannot be executed, and otherwise becomes the command.
pub fn helper_main() -> ! {
    let code = match std::env::args_os().nth(1) {
        Some(arg) if arg == HELPER_ARG => run(),
        _ => {
            eprintln!(
                "{DIAGNOSTIC_PREFIX} invalid invocation: expected `{HELPER_ARG}` as the first \
                 argument; this mode is started by bulwark itself"
            );
            EXIT_SANDBOX_UNAVAILABLE
        }
    };
    std::process::exit(code)
}

fn run() -> i32 {
    // Read before anything else, so a parent that dies while we set up is
    // noticed after the parent-death signal is armed.
    let parent = rustix::process::getppid();
    let mut report = Report {
        enforcement: Enforcement::Strict,
        ready: ready_pipe(),
    };
    let spec = match load_spec() {
        Ok(spec) => spec,
        Err(msg) => {
            report.line(&format!("{DIAGNOSTIC_PREFIX} invalid spec: {msg}"));
            return EXIT_SANDBOX_UNAVAILABLE;
        }
    };
    report.enforcement = spec.enforcement;
    match confine(&spec, parent, &mut report) {
        Ok(confined) => exec(&spec, confined, &mut report),
        Err(code) => code,
    }
}

/// Where the helper's diagnostics go: stderr always, and the ready pipe of
/// [`spawn_sandboxed`](crate::spawn_sandboxed) when there is one, which
/// also learns the moment the command is exec'd (see [`crate::child`]).
struct Report {
    enforcement: Enforcement,
    ready: Option<std::fs::File>,
}

impl Report {
    fn line(&mut self, line: &str) {
        eprintln!("{line}");
        self.send(&format!("D {line}\n"));
    }

    fn send(&mut self, msg: &str) {
        if let Some(f) = &mut self.ready {
            let _ = std::io::Write::write_all(f, msg.as_bytes());
        }
    }

    /// Apply one step's outcome under the spec's enforcement mode: `Err`
    /// holds the exit code when the helper must stop.
    fn step(&mut self, feature: Feature, result: Result<(), String>) -> Result<(), i32> {
        let Err(reason) = result else { return Ok(()) };
        match decide(self.enforcement, feature, &reason) {
            Decision::Abort(line) => {
                self.line(&line);
                Err(EXIT_SANDBOX_UNAVAILABLE)
            }
            Decision::Warn(line) => {
                self.line(&line);
                Ok(())
            }
        }
    }
}

/// The ready pipe [`crate::launch`] passed, when it is an open descriptor.
/// It is close-on-exec after [`cloexec_inherited_fds`], so the command's
/// exec closes it; the relay closes it too.
fn ready_pipe() -> Option<std::fs::File> {
    use std::os::fd::FromRawFd;
    let fd: i32 = std::env::var(crate::launch::READY_FD_ENV)
        .ok()?
        .parse()
        .ok()?;
    if fd < 3 {
        return None;
    }
    // SAFETY: F_GETFD reads a descriptor's flags and touches no memory.
    #[allow(unsafe_code)]
    let open = unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
    if !open {
        return None;
    }
    // SAFETY: the runner passed this descriptor (the write end of a pipe)
    // to this process alone, named in the environment; nothing else in the
    // helper uses or closes it, so the File is its only owner.
    #[allow(unsafe_code)]
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    Some(file)
}

/// What the command gets besides the confinement itself.
#[derive(Clone, Copy)]
struct Confined {
    /// A private root (mount namespace), and so a private `/tmp` and `HOME`.
    private_root: bool,
    /// The egress relay listens on the command's loopback.
    relay: bool,
}

fn load_spec() -> Result<SandboxSpec, String> {
    let raw = std::env::var(SPEC_ENV).map_err(|e| format!("{SPEC_ENV}: {e}"))?;
    if raw.len() > MAX_SPEC_BYTES {
        return Err(format!("{SPEC_ENV} is longer than {MAX_SPEC_BYTES} bytes"));
    }
    let spec: SandboxSpec = serde_json::from_str(&raw).map_err(|e| format!("{SPEC_ENV}: {e}"))?;
    check_shape(&spec)?;
    Ok(spec)
}

/// Confine this process for `spec`.
fn confine(spec: &SandboxSpec, parent: Option<Pid>, r: &mut Report) -> Result<Confined, i32> {
    r.step(Feature::FdCleanup, cloexec_inherited_fds())?;
    let mut in_cgroup = false;
    if let Some(cg) = &spec.pids_cgroup {
        let joined = join_cgroup(cg);
        in_cgroup = joined.is_ok();
        r.step(Feature::PidsCgroup, joined)?;
    }
    if let Some(cg) = &spec.memory_cgroup
        && Some(cg) != spec.pids_cgroup.as_ref()
    {
        r.step(Feature::MemoryCgroup, join_cgroup(cg))?;
    }
    r.step(Feature::ParentDeathSignal, parent_death_signal(parent))?;
    r.step(Feature::ResourceLimits, base_rlimits(spec))?;
    if rustix::process::geteuid().is_root() && !in_cgroup {
        r.step(
            Feature::ProcessLimit,
            Err("running as uid 0, which RLIMIT_NPROC does not bind, outside a pids cgroup".into()),
        )?;
    }
    let mut relay = false;
    let mounted = match shared_namespaces() {
        // The caller confined itself and prepared namespaces for us to
        // join: under its Landlock domain we could not map new ones, nor
        // mount anything.
        Some(shared) => {
            let joined = userns::join_user_ns(shared.user).map_err(|err| err.to_string());
            r.step(Feature::UserNamespace, joined)?;
            if !spec.network {
                let own_net = if spec.egress_proxy.is_some() {
                    // The relay's port must be this command's alone: a
                    // namespace of its own (no id maps to write for it).
                    userns::enter_net_ns().map_err(|err| err.to_string())
                } else {
                    userns::join_net_ns(shared.net).map_err(|err| err.to_string())
                };
                relay = egress_step(spec, own_net, r)?;
            }
            match shared.mnt {
                Some(fd) => userns::join_mnt_ns(fd).map_err(|err| err.to_string()),
                None => Err("the self-confined caller could not prepare one (see its \
                             confinement report)"
                    .into()),
            }
        }
        None => {
            let maps = userns::IdMaps::own();
            let user = userns::enter_user_ns(&maps).map_err(|err| err.to_string());
            if !spec.network {
                r.step(Feature::UserNamespace, user)?;
                // Tried even without a user namespace: root can still unshare it.
                let net = userns::enter_net_ns().map_err(|err| err.to_string());
                relay = egress_step(spec, net, r)?;
            }
            // With network the user namespace only serves the mount
            // namespace, which root can also make without one.
            mount_ns::enter(&mount_ns::Layout::for_spec(spec))
        }
    };
    let private_root = mounted.is_ok();
    r.step(Feature::MountNamespace, mounted)?;
    // After the user namespace: there the kernel counts only the sandbox's
    // own processes against it, instead of every process of our uid.
    let nproc = spec.limits.max_processes;
    r.step(
        Feature::ResourceLimits,
        set_limit(Resource::Nproc, nproc, nproc),
    )?;
    let nnp = rustix::thread::set_no_new_privs(true).map_err(|err| format!("prctl: {err}"));
    r.step(Feature::NoNewPrivs, nnp)?;
    let private_rw: &[&str] = if private_root {
        &[mount_ns::SANDBOX_TMP, mount_ns::SANDBOX_HOME]
    } else {
        &[]
    };
    let proxy_port = relay.then_some(crate::egress::EGRESS_PROXY_PORT);
    match landlock_rules::restrict(spec, private_rw, proxy_port) {
        Ok(applied) => {
            if !spec.network && !applied.tcp_restricted {
                let why = format!("kernel Landlock ABI {} < 4", applied.kernel_abi);
                r.step(Feature::LandlockNetwork, Err(why))?;
            }
            if !applied.scoped {
                let why = format!("kernel Landlock ABI {} < 6", applied.kernel_abi);
                r.step(Feature::LandlockScope, Err(why))?;
            }
        }
        Err(reason) => r.step(Feature::Landlock, Err(reason))?,
    }
    r.step(
        Feature::Seccomp,
        seccomp_filter::install(spec.network, relay),
    )?;
    if let Err(err) = std::env::set_current_dir(&spec.cwd) {
        r.line(&format!(
            "{DIAGNOSTIC_PREFIX} invalid spec: cannot enter working directory {}: {err}",
            spec.cwd.display()
        ));
        return Err(EXIT_SANDBOX_UNAVAILABLE);
    }
    Ok(Confined {
        private_root,
        relay,
    })
}

/// The network namespace step, then the egress relay when the spec asks
/// for one: `Ok(true)` when the relay is up. The relay is started only in
/// a namespace of the command's own: without one (permissive mode) the
/// command gets no network at all, never the host's.
fn egress_step(spec: &SandboxSpec, net: Result<(), String>, r: &mut Report) -> Result<bool, i32> {
    let own_net = net.is_ok();
    r.step(Feature::NetworkNamespace, net)?;
    let Some(socket) = &spec.egress_proxy else {
        return Ok(false);
    };
    let started = if own_net {
        crate::egress::start_relay(socket)
    } else {
        Err(
            "the command has no network namespace of its own, so it runs with no network \
             at all"
                .into(),
        )
    };
    let up = started.is_ok();
    r.step(Feature::EgressRelay, started)?;
    Ok(up)
}

fn join_cgroup(cg: &std::path::Path) -> Result<(), String> {
    let own = std::process::id().to_string();
    std::fs::write(cg.join("cgroup.procs"), own)
        .map_err(|err| format!("joining {}: {err}", cg.display()))
}

/// The namespace descriptors [`run_sandboxed`](crate::run_sandboxed)
/// passed down from a self-confined caller (see [`crate::nested`]).
fn shared_namespaces() -> Option<nested::Shared> {
    let value = std::env::var(nested::NS_FDS_ENV).ok()?;
    nested::parse_env_value(&value)
}

/// The command's environment: `spec.env`, with `HOME` and the XDG base
/// directories always pointing at the sandbox's own home (empty, and
/// never a directory the agent writes outside the command: a
/// `.gitconfig` or `.bashrc` planted there by file tools is not read), and
/// `TMPDIR` at the private `/tmp` when there is one. Without the private
/// root (permissive mode) that home does not exist or is not granted, so
/// it is simply unusable.
fn command_env(spec: &SandboxSpec, confined: Confined) -> Vec<(String, String)> {
    let mut overrides: Vec<(&str, String)> = mount_ns::private_env()
        .into_iter()
        .filter(|(k, _)| confined.private_root || *k != "TMPDIR")
        .collect();
    if confined.relay {
        overrides.extend(crate::egress::proxy_env());
    }
    let mut env: Vec<(String, String)> = spec
        .env
        .iter()
        .filter(|(k, _)| !overrides.iter().any(|(o, _)| o == k))
        .cloned()
        .collect();
    env.extend(overrides.into_iter().map(|(k, v)| (k.to_string(), v)));
    env
}

/// Replace the helper with the command. Only returns (as an exit code) if
/// exec fails.
///
/// On the ready pipe, `EXEC` goes out just before the exec (which closes
/// the pipe) and `FAIL` after a failed one, so the caller can tell a
/// running command from a refusal.
fn exec(spec: &SandboxSpec, confined: Confined, r: &mut Report) -> i32 {
    let program = &spec.argv[0];
    let mut cmd = Command::new(program);
    cmd.args(&spec.argv[1..])
        .env_clear()
        .envs(command_env(spec, confined));
    r.send("EXEC\n");
    let err = cmd.exec();
    r.send("FAIL\n");
    if err.kind() == std::io::ErrorKind::NotFound {
        r.line(&format!(
            "{DIAGNOSTIC_PREFIX} cannot run {program:?}: command not found; check the name and \
             the PATH passed in the environment"
        ));
        EXIT_NOT_FOUND
    } else {
        r.line(&format!(
            "{DIAGNOSTIC_PREFIX} cannot run {program:?}: {err}; the sandbox may deny executing \
             it (grant its directory read-only)"
        ));
        EXIT_CANNOT_EXECUTE
    }
}

/// Mark every descriptor above stderr close-on-exec. One the runner's
/// process leaked without `O_CLOEXEC` (a database, a socket) would
/// otherwise reach the command, and Landlock only checks opens.
fn cloexec_inherited_fds() -> Result<(), String> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC closes nothing; it only
    // sets FD_CLOEXEC on the range, so no Rust owner's fd is invalidated.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("close_range: {}", std::io::Error::last_os_error()))
    }
}

/// SIGKILL us (and so the command, which keeps the setting across exec)
/// when the parent thread that spawned us dies, then check the parent did
/// not die before the signal was armed.
fn parent_death_signal(parent: Option<Pid>) -> Result<(), String> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| format!("prctl(PR_SET_PDEATHSIG): {e}"))?;
    if rustix::process::getppid() != parent {
        // Not a missing feature: the caller is gone, so stop outright.
        std::process::exit(EXIT_SANDBOX_UNAVAILABLE);
    }
    Ok(())
}

fn base_rlimits(spec: &SandboxSpec) -> Result<(), String> {
    let l = &spec.limits;
    set_limit(Resource::Core, 0, 0)?;
    // One second between the soft limit (SIGXCPU) and the hard (SIGKILL),
    // so a process that ignores SIGXCPU still dies.
    set_limit(
        Resource::Cpu,
        l.cpu_seconds,
        l.cpu_seconds.saturating_add(1),
    )?;
    set_limit(Resource::As, l.address_space_bytes, l.address_space_bytes)?;
    set_limit(Resource::Fsize, l.file_size_bytes, l.file_size_bytes)?;
    set_limit(Resource::Nofile, l.open_files, l.open_files)?;
    Ok(())
}

/// Set a limit, never above the current hard limit (raising it would fail
/// for non-root and loosen a limit the operator set).
fn set_limit(resource: Resource, soft: u64, hard: u64) -> Result<(), String> {
    let current = rustix::process::getrlimit(resource);
    let cap = |v: u64| current.maximum.map_or(v, |max| v.min(max));
    let hard = cap(hard);
    let new = Rlimit {
        current: Some(cap(soft).min(hard)),
        maximum: Some(hard),
    };
    rustix::process::setrlimit(resource, new).map_err(|e| format!("setrlimit({resource:?}): {e}"))
}
