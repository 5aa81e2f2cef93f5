//! The seccomp deny list: kernel interfaces a tool command never needs and
//! that either attack the kernel (bpf, io_uring, userfaultfd, keyrings),
//! escape confinement (ptrace, mount, namespaces, open_by_handle_at) or
//! change the host (modules, reboot, swap, clock, hostname).
//!
//! It is a deny list returning `EPERM`, not an allow list: an allow list
//! precise enough to be worth its cost breaks compilers and interpreters in
//! ways nobody notices until a tool fails. Landlock and the namespaces are
//! the primary boundary; this removes kernel attack surface around them.
//!
//! `setsid` and `setpgid` are denied so nothing can leave the process group
//! the runner kills on timeout: the group kill then reaches every
//! descendant. (Daemonizing tools and interactive job control fail inside
//! the sandbox as a consequence.)

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the seccomp filter lists syscalls for x86_64 and aarch64 only");

/// Refused outright with `EPERM`.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_setsid,
    libc::SYS_setpgid,
    // The new mount API does everything `mount` does.
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_quotactl_fd,
    // Host-wide state that root (network granted, so no user namespace)
    // could otherwise change or read.
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    libc::SYS_fanotify_init,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// Since Linux 5.1 new system calls have one number on every
/// architecture; the libc crate lacks these two on aarch64.
const SYS_FCHMODAT2: libc::c_long = 452;
const SYS_SETXATTRAT: libc::c_long = 463;

/// The set-id bits refused in any mode argument.
const SETID_BITS: [libc::mode_t; 2] = [libc::S_ISUID, libc::S_ISGID];

/// System calls that take a file mode, and the index of that argument.
/// A set-user-id or set-group-id bit in it is refused with `EPERM`: a
/// command running as root (as the quickstart does) must not leave a
/// setuid-root program behind for the host, through `chmod` or by
/// creating the file with those bits (`open(O_CREAT, 04755)` keeps them,
/// the umask rarely clears them). `mkdir`/`mkdirat` are not listed: the
/// kernel drops set-id bits from a directory's mode, and a setgid
/// directory grants no privilege. `openat2` takes its mode behind a
/// pointer and is refused outright (`ENOSYS`, so callers fall back to
/// `openat`).
const SETID_MODE_ARGS: &[(libc::c_long, u8)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (SYS_FCHMODAT2, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, 2),
    (libc::SYS_openat, 3),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
];

/// Extended-attribute writes, refused with `EOPNOTSUPP` (what a file
/// system without xattrs answers, which `cp -a`, `tar` and Python's
/// `shutil` tolerate): `security.capability` would give a program file
/// capabilities valid on the host, the same hole as a setuid bit, and the
/// attribute name sits behind a pointer seccomp cannot read.
const XATTR_WRITES: &[libc::c_long] = &[
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    SYS_SETXATTRAT,
];

/// Namespace flags refused in `clone` (the same door as `unshare`).
const CLONE_NS_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// The filters to install, in order. Separate programs because their
/// match actions differ; the kernel applies the most restrictive result.
/// `proxy`: the command reaches the egress relay on its loopback (see
/// [`crate::egress`]), so TCP sockets are allowed though `network` is off.
pub(crate) fn build(network: bool, proxy: bool) -> Result<Vec<BpfProgram>, String> {
    let err = |e: seccompiler::BackendError| e.to_string();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in DENIED {
        rules.insert(*nr, Vec::new());
    }
    // ioctl's request is an `unsigned int`: compare the low 32 bits only,
    // or junk in the upper half would slip past.
    let ioctl_cmd = |cmd: libc::c_ulong| {
        cond(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, cmd)
            .and_then(|c| SeccompRule::new(vec![c]))
    };
    rules.insert(
        libc::SYS_ioctl,
        vec![
            ioctl_cmd(libc::TIOCSTI).map_err(err)?,
            ioctl_cmd(libc::TIOCLINUX).map_err(err)?,
        ],
    );
    rules.insert(libc::SYS_socket, socket_rules(network, proxy).map_err(err)?);
    for (nr, mode_arg) in SETID_MODE_ARGS {
        // One rule per bit (rules are OR-ed): refused if either is set.
        let per_bit = SETID_BITS
            .into_iter()
            .map(|bit| {
                let bit = u64::from(bit);
                cond(
                    *mode_arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(bit),
                    bit,
                )
                .and_then(|c| SeccompRule::new(vec![c]))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        rules.insert(*nr, per_bit);
    }
    let clone_rules = CLONE_NS_FLAGS
        .iter()
        .map(|flag| {
            let flag = u64::from(flag.unsigned_abs());
            cond(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .and_then(|c| SeccompRule::new(vec![c]))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    rules.insert(libc::SYS_clone, clone_rules);

    let deny = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno(libc::EPERM)),
        ARCH,
    )
    .map_err(err)?;
    // clone3 takes its flags behind a pointer seccomp cannot read. ENOSYS
    // (not EPERM) makes glibc fall back to clone, whose flags we can check.
    // openat2 likewise hides its mode behind a pointer (see
    // SETID_MODE_ARGS): ENOSYS makes callers use openat.
    let clone3 = SeccompFilter::new(
        BTreeMap::from([
            (libc::SYS_clone3, Vec::new()),
            (libc::SYS_openat2, Vec::new()),
        ]),
        SeccompAction::Allow,
        SeccompAction::Errno(errno(libc::ENOSYS)),
        ARCH,
    )
    .map_err(err)?;
    let xattr = SeccompFilter::new(
        XATTR_WRITES.iter().map(|nr| (*nr, Vec::new())).collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(errno(libc::EOPNOTSUPP)),
        ARCH,
    )
    .map_err(err)?;
    let mut programs = vec![
        BpfProgram::try_from(deny).map_err(|e| e.to_string())?,
        BpfProgram::try_from(clone3).map_err(|e| e.to_string())?,
        BpfProgram::try_from(xattr).map_err(|e| e.to_string())?,
    ];
    #[cfg(target_arch = "x86_64")]
    programs.push(x32_filter());
    Ok(programs)
}

/// Install every filter on the calling thread. `no_new_privs` must already
/// be set (seccompiler sets it again, harmlessly).
pub(crate) fn install(network: bool, proxy: bool) -> Result<(), String> {
    for program in build(network, proxy)? {
        seccompiler::apply_filter(&program).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Without network only `AF_UNIX` sockets may be created. With it,
/// `AF_INET`/`AF_INET6` too, but no raw sockets and no other families:
/// netlink and packet sockets would let root reconfigure or sniff the
/// host's network, which "network access" does not mean.
///
/// With only the egress relay (`proxy`, no `network`): `AF_INET`/`AF_INET6`
/// stream sockets with protocol 0 or TCP, nothing else (no UDP, raw,
/// SCTP or MPTCP). The namespace holds only loopback, so the relay is all
/// such a socket can reach (and Landlock narrows it to the relay's port).
fn socket_rules(network: bool, proxy: bool) -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    let family_ne = |af: libc::c_int| {
        cond(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            af.unsigned_abs().into(),
        )
    };
    if !network && !proxy {
        return Ok(vec![SeccompRule::new(vec![family_ne(libc::AF_UNIX)?])?]);
    }
    if !network {
        return proxy_socket_rules(family_ne);
    }
    let other_family = SeccompRule::new(vec![
        family_ne(libc::AF_UNIX)?,
        family_ne(libc::AF_INET)?,
        family_ne(libc::AF_INET6)?,
    ])?;
    // The low bits of the type argument are the socket type; the high bits
    // carry SOCK_NONBLOCK / SOCK_CLOEXEC.
    let raw = SeccompRule::new(vec![cond(
        1,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(0xf),
        libc::SOCK_RAW.unsigned_abs().into(),
    )?])?;
    Ok(vec![other_family, raw])
}

/// The refused `socket` calls when only TCP to the relay is allowed
/// (rules are OR-ed, the conditions of one rule AND-ed).
fn proxy_socket_rules(
    family_ne: impl Fn(libc::c_int) -> Result<SeccompCondition, seccompiler::BackendError>,
) -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    let mut rules = vec![SeccompRule::new(vec![
        family_ne(libc::AF_UNIX)?,
        family_ne(libc::AF_INET)?,
        family_ne(libc::AF_INET6)?,
    ])?];
    let stream = libc::SOCK_STREAM.unsigned_abs();
    for af in [libc::AF_INET, libc::AF_INET6] {
        let family_eq = || {
            cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                af.unsigned_abs().into(),
            )
        };
        // Every socket type but SOCK_STREAM (the low four bits; the high
        // ones carry SOCK_NONBLOCK / SOCK_CLOEXEC).
        for kind in (0..16u32).filter(|k| *k != stream) {
            rules.push(SeccompRule::new(vec![
                family_eq()?,
                cond(
                    1,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(0xf),
                    kind.into(),
                )?,
            ])?);
        }
        // A stream socket of another protocol (SCTP, MPTCP).
        rules.push(SeccompRule::new(vec![
            family_eq()?,
            cond(2, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0)?,
            cond(
                2,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                libc::IPPROTO_TCP.unsigned_abs().into(),
            )?,
        ])?);
    }
    Ok(rules)
}

fn cond(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, seccompiler::BackendError> {
    SeccompCondition::new(arg, len, op, value)
}

fn errno(e: libc::c_int) -> u32 {
    e.unsigned_abs()
}

/// x32 system calls share the x86_64 audit arch but carry bit 30 in their
/// number, so a filter keyed on exact x86_64 numbers would not see them.
/// Refuse them all (kernels built without x32 refuse them anyway).
#[cfg(target_arch = "x86_64")]
fn x32_filter() -> BpfProgram {
    use seccompiler::sock_filter;
    // Opcodes from <linux/bpf_common.h>.
    const LD_W_ABS: u16 = 0x20; // BPF_LD (0) | BPF_W (0) | BPF_ABS (0x20)
    const JEQ_K: u16 = 0x15; // BPF_JMP (5) | BPF_JEQ (0x10) | BPF_K (0)
    const JGE_K: u16 = 0x35; // BPF_JMP (5) | BPF_JGE (0x30) | BPF_K (0)
    const RET_K: u16 = 0x06; // BPF_RET (6) | BPF_K (0)
    const ARCH_OFFSET: u32 = 4;
    const NR_OFFSET: u32 = 0;
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        ins(LD_W_ABS, 0, 0, ARCH_OFFSET),
        // Another arch: allow here; the main filter kills the process.
        ins(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
        ins(LD_W_ABS, 0, 0, NR_OFFSET),
        ins(JGE_K, 0, 1, X32_SYSCALL_BIT),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | errno(libc::EPERM)),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_compile_for_both_network_settings() {
        for (network, proxy) in [(false, false), (true, false), (false, true)] {
            let programs = build(network, proxy).expect("filters build");
            assert!(programs.len() >= 2);
            assert!(programs.iter().all(|p| !p.is_empty() && p.len() < 4096));
        }
    }

    #[test]
    fn deny_list_has_no_duplicates() {
        let mut v = DENIED.to_vec();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), DENIED.len());
    }
}
