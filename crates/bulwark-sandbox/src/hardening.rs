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
    #[error(
        "the process already runs {threads} threads; its environment can only be scrubbed \
         while it has one, so call scrub_environment first thing in main, before any thread \
         (or async runtime) is started"
    )]
    MultiThreaded { threads: u64 },
    #[error("cannot tell whether the process is single-threaded: {0}")]
    ThreadCount(String),
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
/// The environment is not thread-safe to modify (which is why
/// `remove_var` is `unsafe`): another thread may be reading it through
/// libc at any moment. So this checks that the calling thread is the
/// process's only one (`Threads:` of `/proc/self/status`, as
/// [`confine_current_process`](crate::confine_current_process) does) and
/// otherwise changes nothing and returns
/// [`HardeningError::MultiThreaded`]. Only the calling thread could start
/// another one, so the answer cannot change before the scrub is done.
///
/// ```rust,standalone_crate
/// // A doctest runs as a process of its own, on its main thread.
/// let removed = bulwark_sandbox::scrub_environment(&["PATH"]).unwrap();
/// assert!(std::env::vars_os().all(|(k, _)| k == "PATH"));
/// assert!(!removed.iter().any(|k| k == "PATH"));
/// ```
pub fn scrub_environment(keep: &[&str]) -> Result<Vec<String>, HardeningError> {
    let threads = thread_count().map_err(HardeningError::ThreadCount)?;
    if threads != 1 {
        return Err(HardeningError::MultiThreaded { threads });
    }
    let doomed: Vec<std::ffi::OsString> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| !k.to_str().is_some_and(|k| keep.contains(&k)))
        .collect();
    for key in &doomed {
        // SAFETY: `remove_var` is unsound only while another thread may
        // read or write the environment. The check above found this thread
        // to be the process's only one, and nothing between it and here
        // starts a thread.
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
    Ok(doomed
        .into_iter()
        .map(|k| k.to_string_lossy().into_owned())
        .collect())
}

/// `Threads:` of `/proc/self/status`; the error says what could not be
/// read.
pub(crate) fn thread_count() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("/proc/self/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| "no Threads: line in /proc/self/status".to_string())
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
/// `names`. Only called by [`scrub_environment`], after its
/// single-thread check.
fn wipe_initial_environment(names: &[Vec<u8>]) {
    let Some((start, end)) = initial_environment_block() else {
        return;
    };
    // SAFETY: [start, end) is this process's initial environment block,
    // mapped readable and writable on the main stack for the life of the
    // process (the kernel reports it in /proc/self/stat), and `end > start`
    // was checked. No Rust reference points into it; libc's `environ`
    // still holds raw pointers to the kept entries, but the process has a
    // single thread (checked by `scrub_environment`, the only caller) and
    // nothing reads the environment while this slice lives. Only removed
    // entries, which `environ` no longer refers to, are written.
    #[allow(unsafe_code)]
    let block = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    wipe_entries(block, names);
}

/// Zero, in a block of NUL-separated `NAME=value` entries, every entry
/// whose name is in `names`.
fn wipe_entries(block: &mut [u8], names: &[Vec<u8>]) {
    for entry in block.split_mut(|&b| b == 0) {
        let doomed = names.iter().any(|n| {
            entry
                .strip_prefix(n.as_slice())
                .is_some_and(|rest| rest.first() == Some(&b'='))
        });
        if doomed {
            entry.fill(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_thread_alive_is_refused_and_nothing_is_removed() {
        let before: Vec<_> = std::env::vars_os().collect();
        let (stop, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || wait.recv());
        let result = scrub_environment(&[]);
        drop(stop);
        let _ = other.join();
        match result {
            Err(HardeningError::MultiThreaded { threads }) => assert!(threads >= 2),
            other => panic!("expected MultiThreaded, got {other:?}"),
        }
        assert_eq!(std::env::vars_os().collect::<Vec<_>>(), before);
    }

    #[test]
    fn only_entries_named_exactly_are_wiped() {
        let mut block = b"KEY=v\0KEYS=w\0OTHER=KEY=x\0KEY\0KEY=\0".to_vec();
        wipe_entries(&mut block, &[b"KEY".to_vec()]);
        assert_eq!(
            block,
            b"\0\0\0\0\0\0KEYS=w\0OTHER=KEY=x\0KEY\0\0\0\0\0\0".to_vec()
        );
    }
}
