//! Self-hardening of the runtime process at start-up.
//!
//! The `bulwark` process holds API keys and credentials in memory. At start
//! it (1) refuses to run with injected libraries (`LD_PRELOAD` and
//! friends would run foreign code inside the process that holds the keys),
//! (2) marks itself not dumpable (no core file, no ptrace attach or
//! `/proc/<pid>/mem` reads by other processes of the same user), (3) sets
//! the core-file limit to zero, and (4) removes everything but a short list
//! of harmless variables from its own environment once the caller has
//! captured it, so secrets are not inherited and not in
//! `/proc/<pid>/environ`.

use rustix::process::{Resource, Rlimit, setrlimit};

/// Loader variables that inject code into a process.
pub const INJECTION_VARIABLES: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "LD_DEBUG_OUTPUT",
    "LD_PROFILE",
];

#[derive(Debug, thiserror::Error)]
pub enum HardeningError {
    #[error(
        "{0} is set: bulwark refuses to run with libraries injected into the process that holds its keys; unset {0} and start again"
    )]
    Injection(String),
    #[error("could not {what}: {errno}")]
    Syscall {
        what: &'static str,
        errno: rustix::io::Errno,
    },
}

/// Steps 1-3 (see the module doc). Call first thing in `main`.
pub fn harden_process() -> Result<(), HardeningError> {
    if let Some(var) = INJECTION_VARIABLES
        .iter()
        .find(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
    {
        return Err(HardeningError::Injection((*var).to_string()));
    }
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|errno| HardeningError::Syscall {
            what: "mark the process not dumpable",
            errno,
        })?;
    setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    )
    .map_err(|errno| HardeningError::Syscall {
        what: "set the core-file limit to 0",
        errno,
    })?;
    Ok(())
}

/// Step 4: remove every variable not in `keep` from the process
/// environment, and overwrite their original bytes. Returns the names
/// removed (never values).
///
/// `remove_var` only edits libc's `environ` array; the strings the kernel
/// placed on the stack at `exec` stay there, and `/proc/<pid>/environ`
/// shows exactly that block. So the removed entries are also zeroed in
/// place (kept entries, which `environ` still points to, are untouched).
///
/// Must be called while the process has a single thread (before any
/// runtime or thread is started): the environment is not thread-safe to
/// modify, which is why `remove_var` is `unsafe`.
pub fn scrub_environment(keep: &[&str]) -> Vec<String> {
    let doomed: Vec<std::ffi::OsString> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| !k.to_str().is_some_and(|k| keep.contains(&k)))
        .collect();
    for key in &doomed {
        // SAFETY: documented precondition of this function: no other thread
        // exists yet, so nothing reads the environment concurrently.
        #[allow(unsafe_code)]
        unsafe {
            std::env::remove_var(key)
        };
    }
    let names: Vec<Vec<u8>> = doomed
        .iter()
        .map(|k| std::os::unix::ffi::OsStrExt::as_bytes(k.as_os_str()).to_vec())
        .collect();
    wipe_initial_environment(&names);
    doomed
        .into_iter()
        .map(|k| k.to_string_lossy().into_owned())
        .collect()
}

/// `env_start` and `env_end` (fields 50 and 51 of `/proc/self/stat`): the
/// initial environment block.
fn initial_environment_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces and ')').
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3.
    let start: usize = fields.get(50 - 3)?.parse().ok()?;
    let end: usize = fields.get(51 - 3)?.parse().ok()?;
    (start != 0 && end > start && end - start < (1 << 24)).then_some((start, end))
}

/// Zero every `NAME=value` entry of the initial block whose name is in
/// `names`.
fn wipe_initial_environment(names: &[Vec<u8>]) {
    let Some((start, end)) = initial_environment_block() else {
        return;
    };
    let base = start as *mut u8;
    let len = end - start;
    let mut entry_start = 0;
    while entry_start < len {
        // SAFETY: [start, end) is this process's initial environment block,
        // mapped readable and writable on the main stack for the life of
        // the process (the kernel reports it in /proc/self/stat). Reads and
        // writes stay inside it; the process is single-threaded (see
        // `scrub_environment`), and after `remove_var` nothing refers to the
        // entries that are overwritten.
        #[allow(unsafe_code)]
        let entry_len = (entry_start..len)
            .position(|i| unsafe { base.add(i).read() } == 0)
            .unwrap_or(len - entry_start);
        #[allow(unsafe_code)]
        let doomed = names.iter().any(|n| {
            n.len() < entry_len
                && (0..n.len()).all(|i| unsafe { base.add(entry_start + i).read() } == n[i])
                && unsafe { base.add(entry_start + n.len()).read() } == b'='
        });
        if doomed {
            // SAFETY: as above; the range is this entry, inside the block.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::write_bytes(base.add(entry_start), 0, entry_len)
            };
        }
        entry_start += entry_len + 1;
    }
}
