//! The Landlock ruleset: which parts of the file system (and, when the ABI
//! has them, which TCP ports, abstract sockets and signal targets) the
//! command can reach.
//!
//! Landlock is the control that makes root inside the sandbox harmless to
//! the file system: `/etc/shadow`, `/proc` and `/root` are simply not in the
//! ruleset, whatever the process's uid or capabilities.

use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
};

use crate::spec::SandboxSpec;

/// System trees granted read + execute, when they exist (on merged-/usr
/// systems the top-level ones are symlinks into /usr).
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The `/etc` entries ordinary tools need (dynamic loader, TLS roots, user
/// and host lookups, time zone, git). Not `/etc` as a whole: as root,
/// Landlock is what keeps `/etc/shadow` and friends unreadable.
pub const ETC_ENTRIES: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl",
    "ca-certificates",
    "alternatives",
    "localtime",
    "timezone",
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "resolv.conf",
    "gitconfig",
    "os-release",
];

/// Device nodes granted read + write (writes are discarded or fail).
pub(crate) const DEVICES_RW: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];
/// Device nodes granted read only.
pub(crate) const DEVICES_RO: &[&str] = &["/dev/random", "/dev/urandom"];

/// The newest ABI whose semantics this ruleset has been written and tested
/// for (file system, TCP, scoping). A newer kernel is used at this level:
/// handling rights we have not vetted (e.g. ABI 9's UNIX-socket rights)
/// could break tools in ways no test here covers.
pub(crate) const TARGET_ABI: i32 = 6;
pub(crate) const ABI_NET: i32 = 4;
pub(crate) const ABI_SCOPE: i32 = 6;

/// `LANDLOCK_CREATE_RULESET_VERSION` from `<linux/landlock.h>`.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

/// The kernel's Landlock ABI version, or why there is none.
///
/// The `landlock` crate deliberately hides this number; we need it for the
/// probe table and to tell which optional layers are missing.
pub(crate) fn kernel_abi() -> Result<i32, String> {
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) is the documented
    // version query: the kernel reads no memory and returns a number.
    #[allow(unsafe_code)]
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v > 0 {
        return i32::try_from(v).map_err(|_| format!("implausible Landlock ABI {v}"));
    }
    let err = std::io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel is built without Landlock (ENOSYS)".into(),
        Some(libc::EOPNOTSUPP) => "Landlock is disabled at boot (EOPNOTSUPP)".into(),
        _ => format!("Landlock version query failed: {err}"),
    })
}

/// What [`restrict`] put in place beyond the file-system rules.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Applied {
    pub(crate) kernel_abi: i32,
    /// TCP bind/connect are denied (only requested without network), but
    /// for a connect to the egress relay's port when there is one.
    pub(crate) tcp_restricted: bool,
    /// Abstract UNIX sockets and signals are scoped to the sandbox.
    pub(crate) scoped: bool,
}

/// Build the ruleset for `spec` and restrict the calling thread (and so the
/// command it execs). Every requested right is a hard requirement at the
/// kernel's ABI: nothing is silently dropped. `private_rw` are directories
/// of the private mount namespace granted read-write besides the spec's
/// (its `/tmp` and `HOME`); empty when there is no such namespace, where
/// those paths are the host's. `proxy_port`: the egress relay's port, the
/// one TCP connect allowed (nothing may be bound).
pub(crate) fn restrict(
    spec: &SandboxSpec,
    private_rw: &[&str],
    proxy_port: Option<u16>,
) -> Result<Applied, String> {
    let kernel = kernel_abi()?;
    let abi = ABI::from(kernel.min(TARGET_ABI));
    let tcp_restricted = !spec.network && kernel >= ABI_NET;
    let scoped = kernel >= ABI_SCOPE;

    let read = AccessFs::from_read(abi);
    let etc = AccessFs::ReadFile | AccessFs::ReadDir;
    // mknod of char/block devices is withheld: as root without a user
    // namespace it would hand out raw disks inside the workspace.
    let write = AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let dev_rw =
        (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate) & AccessFs::from_file(abi);

    let err = |e: RulesetError| e.to_string();
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?;
    if tcp_restricted {
        // Handled with at most the relay's port: every bind and every other
        // connect is denied.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(err)?;
    }
    if scoped {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(err)?;
    }
    let mut created = ruleset.create().map_err(err)?;
    if tcp_restricted && let Some(port) = proxy_port {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| format!("rule for TCP port {port}: {e}"))?;
    }

    let mut rules: Vec<(String, BitFlags<AccessFs>, bool)> = Vec::new();
    for dir in SYSTEM_DIRS {
        rules.push((dir.to_string(), read, false));
    }
    for entry in ETC_ENTRIES {
        rules.push((format!("/etc/{entry}"), etc, false));
    }
    for dev in DEVICES_RW {
        rules.push((dev.to_string(), dev_rw, false));
    }
    for dev in DEVICES_RO {
        rules.push((dev.to_string(), AccessFs::ReadFile.into(), false));
    }
    for dir in &spec.read_only {
        rules.push((dir.display().to_string(), read, true));
    }
    rules.push((spec.workspace.display().to_string(), write, true));
    for dir in &spec.read_write {
        rules.push((dir.display().to_string(), write, true));
    }
    for dir in private_rw {
        rules.push((dir.to_string(), write, true));
    }

    for (path, access, required) in rules {
        let Some((fd, is_dir)) = open_path(Path::new(&path), required)? else {
            continue;
        };
        let access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("rule for {path}: {e}"))?;
    }
    let status = created.restrict_self().map_err(err)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(format!(
            "the ruleset was only {:?} at ABI {kernel}",
            status.ruleset
        ));
    }
    Ok(Applied {
        kernel_abi: kernel,
        tcp_restricted,
        scoped,
    })
}

/// Open `path` for a rule. A missing system path is skipped (not every
/// distribution has /lib32 or /etc/gitconfig); a missing path the spec asked
/// for is an error, since the command would silently lose access to it.
pub(crate) fn open_path(path: &Path, required: bool) -> Result<Option<(PathFd, bool)>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(_) if !required => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    match PathFd::new(path) {
        Ok(fd) => Ok(Some((fd, meta.is_dir()))),
        Err(_) if !required => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// A domain with no file-system, TCP or scope rights at all, for the
/// egress relay (see [`crate::egress`]), which needs none: it only accepts
/// on listeners it already has and connects to one pathname socket, which
/// Landlock does not mediate at the ABIs used here. Best effort: whatever
/// the kernel supports.
pub(crate) fn restrict_nothing() -> Result<(), String> {
    let kernel = kernel_abi()?;
    let abi = ABI::from(kernel.min(TARGET_ABI));
    let err = |e: RulesetError| e.to_string();
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?;
    if kernel >= ABI_NET {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(err)?;
    }
    if kernel >= ABI_SCOPE {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(err)?;
    }
    ruleset
        .create()
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    Ok(())
}
