//! The strict/permissive decision and the one-line diagnostics the helper
//! prints, kept apart from the system calls so they can be unit-tested: a
//! missing feature is hard to stage on a machine that has them all.

use crate::spec::Enforcement;

/// Prefix of every diagnostic line the helper writes to stderr. The runner
/// collects the leading lines that carry it into
/// [`SandboxOutput::warnings`](crate::SandboxOutput::warnings).
pub const DIAGNOSTIC_PREFIX: &str = "bulwark-sandbox:";

/// Exit status of the helper when it refuses to run the command because
/// confinement could not be set up (strict mode) or the spec is unusable.
pub const EXIT_SANDBOX_UNAVAILABLE: i32 = 125;
/// Exit status when the command exists but could not be executed.
pub const EXIT_CANNOT_EXECUTE: i32 = 126;
/// Exit status when the command was not found.
pub const EXIT_NOT_FOUND: i32 = 127;

/// One confinement step that can fail on some machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feature {
    /// Marking inherited descriptors close-on-exec, so an fd the runner's
    /// process leaked cannot carry access past Landlock.
    FdCleanup,
    PidsCgroup,
    ParentDeathSignal,
    ResourceLimits,
    /// A process cap that actually binds: `RLIMIT_NPROC` does not bind uid 0,
    /// so root needs the pids cgroup.
    ProcessLimit,
    UserNamespace,
    NetworkNamespace,
    /// A private mount namespace with a minimal root: no host UNIX
    /// sockets, private `/tmp` and `HOME`.
    MountNamespace,
    /// The memory cgroup that bounds the whole process tree (else only
    /// the per-process `RLIMIT_AS` applies).
    MemoryCgroup,
    NoNewPrivs,
    Landlock,
    /// Landlock TCP rules (ABI 4+). Defense in depth on top of the network
    /// namespace and seccomp, so its absence never blocks a run.
    LandlockNetwork,
    /// Landlock scoping of abstract UNIX sockets and signals (ABI 6+).
    LandlockScope,
    Seccomp,
    /// The loopback relay to the egress proxy socket, in the command's own
    /// network namespace. Without it the command has no network at all
    /// (never the host's).
    EgressRelay,
}

impl Feature {
    /// Human name used in the diagnostic line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Feature::FdCleanup => "descriptor cleanup",
            Feature::PidsCgroup => "pids cgroup",
            Feature::ParentDeathSignal => "parent-death signal",
            Feature::ResourceLimits => "resource limits",
            Feature::ProcessLimit => "process limit",
            Feature::UserNamespace => "user namespace",
            Feature::NetworkNamespace => "network namespace",
            Feature::MountNamespace => "mount namespace",
            Feature::MemoryCgroup => "memory cgroup",
            Feature::NoNewPrivs => "no_new_privs",
            Feature::Landlock => "landlock",
            Feature::LandlockNetwork => "landlock network rules",
            Feature::LandlockScope => "landlock scoping",
            Feature::Seccomp => "seccomp",
            Feature::EgressRelay => "egress proxy relay",
        }
    }

    /// Whether strict mode refuses to run without it. The optional ones are
    /// extra layers over a control that is still in place.
    pub(crate) fn required(self) -> bool {
        !matches!(
            self,
            Feature::LandlockNetwork | Feature::LandlockScope | Feature::MemoryCgroup
        )
    }

    /// What an operator can do about it, for the strict-mode line.
    fn remedy(self) -> &'static str {
        match self {
            Feature::PidsCgroup => {
                "make the pids cgroup writable (run as root, or delegate it) or use permissive mode"
            }
            Feature::FdCleanup => "use Linux 5.11 or newer (close_range with CLOSE_RANGE_CLOEXEC)",
            Feature::ParentDeathSignal | Feature::NoNewPrivs | Feature::ResourceLimits => {
                "check for a seccomp or LSM policy around bulwark that denies prctl/setrlimit"
            }
            Feature::ProcessLimit => {
                "run bulwark as a non-root user, or mount a writable cgroup pids controller"
            }
            Feature::MemoryCgroup => {
                "make the memory cgroup controller writable (run as root, or delegate it)"
            }
            Feature::UserNamespace | Feature::NetworkNamespace | Feature::MountNamespace => {
                "enable unprivileged user namespaces (sysctl user.max_user_namespaces, \
                 kernel.unprivileged_userns_clone, or the AppArmor userns restriction)"
            }
            Feature::Landlock => {
                "boot a kernel with Landlock enabled (Linux 5.13+, lsm=...,landlock)"
            }
            Feature::LandlockNetwork | Feature::LandlockScope => {
                "upgrade the kernel for a newer Landlock ABI"
            }
            Feature::Seccomp => "boot a kernel with CONFIG_SECCOMP_FILTER",
            Feature::EgressRelay => {
                "enable unprivileged user and network namespaces (the relay needs a network \
                 namespace of the command's own) and check the proxy socket exists"
            }
        }
    }
}

/// What the helper does about a feature that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Print the line and exit [`EXIT_SANDBOX_UNAVAILABLE`] before exec.
    Abort(String),
    /// Print the line and go on without the feature.
    Warn(String),
}

/// Strict mode refuses to run without a required feature; permissive mode,
/// and any mode for an optional feature, warns and goes on.
pub(crate) fn decide(enforcement: Enforcement, feature: Feature, reason: &str) -> Decision {
    let reason = one_line(reason);
    if feature.required() && enforcement == Enforcement::Strict {
        Decision::Abort(format!(
            "{DIAGNOSTIC_PREFIX} {} unavailable: {reason}; {}",
            feature.name(),
            feature.remedy()
        ))
    } else {
        Decision::Warn(format!(
            "{DIAGNOSTIC_PREFIX} WARNING: running without {}: {reason}",
            feature.name()
        ))
    }
}

/// Keep a diagnostic on one line, whatever an error's Display holds.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The helper's diagnostics at the start of `stderr`.
///
/// The helper prints only before it execs, so its lines come first; the
/// scan stops at the first line without the prefix, which keeps a command
/// from appending lines that look like the helper's after its own output.
/// (A command whose *first* stderr line forges the prefix can still add a
/// spurious warning; it cannot hide a real one.)
pub(crate) fn leading_diagnostics(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .take_while(|l| l.starts_with(DIAGNOSTIC_PREFIX))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_aborts_on_required_features() {
        let d = decide(Enforcement::Strict, Feature::Landlock, "ENOSYS");
        let Decision::Abort(line) = d else {
            panic!("strict must abort: {d:?}")
        };
        assert!(
            line.starts_with("bulwark-sandbox: landlock unavailable: ENOSYS; "),
            "{line}"
        );
        for f in [
            Feature::PidsCgroup,
            Feature::ProcessLimit,
            Feature::UserNamespace,
            Feature::NetworkNamespace,
            Feature::MountNamespace,
            Feature::NoNewPrivs,
            Feature::Seccomp,
            Feature::ResourceLimits,
            Feature::ParentDeathSignal,
            Feature::EgressRelay,
        ] {
            assert!(matches!(
                decide(Enforcement::Strict, f, "x"),
                Decision::Abort(_)
            ));
        }
    }

    #[test]
    fn permissive_warns_and_continues() {
        let d = decide(Enforcement::Permissive, Feature::Seccomp, "EINVAL");
        assert_eq!(
            d,
            Decision::Warn("bulwark-sandbox: WARNING: running without seccomp: EINVAL".into())
        );
    }

    #[test]
    fn optional_features_never_abort() {
        for e in [Enforcement::Strict, Enforcement::Permissive] {
            for f in [
                Feature::LandlockNetwork,
                Feature::LandlockScope,
                Feature::MemoryCgroup,
            ] {
                assert!(matches!(decide(e, f, "ABI 3"), Decision::Warn(_)));
            }
        }
    }

    #[test]
    fn reasons_are_kept_on_one_line() {
        let Decision::Warn(line) = decide(Enforcement::Permissive, Feature::Landlock, "a\nb\tc")
        else {
            panic!("permissive must warn")
        };
        assert!(line.ends_with(": a b c"), "{line}");
    }

    #[test]
    fn only_leading_prefixed_lines_are_diagnostics() {
        let stderr = "bulwark-sandbox: WARNING: running without seccomp: x\n\
                      bulwark-sandbox: WARNING: running without landlock: y\n\
                      real error\n\
                      bulwark-sandbox: WARNING: forged by the command\n";
        let d = leading_diagnostics(stderr);
        assert_eq!(d.len(), 2);
        assert!(d[1].ends_with("landlock: y"));
        assert!(leading_diagnostics("plain\n").is_empty());
        assert!(leading_diagnostics("").is_empty());
    }
}
