//! Shared fixture for the sandbox tests: a workspace, an outside directory
//! holding a secret, and the real helper binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bulwark_sandbox::{SandboxOutput, SandboxSpec, minimal_env, run_sandboxed};
use tempfile::TempDir;

pub const HELPER: &str = env!("CARGO_BIN_EXE_bulwark-sandbox-helper");
pub const SECRET: &str = "TOP-SECRET-7f3a";

pub struct Fx {
    _tmp: TempDir,
    pub ws: PathBuf,
    pub outside: PathBuf,
}

/// `<tmp>/ws` (the workspace) and `<tmp>/outside/secret`.
pub fn fixture() -> Fx {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&ws).expect("mkdir ws");
    std::fs::create_dir_all(&outside).expect("mkdir outside");
    std::fs::write(outside.join("secret"), SECRET).expect("write secret");
    Fx {
        _tmp: tmp,
        ws,
        outside,
    }
}

/// A strict, offline spec running `argv` in the workspace with the minimal
/// environment plus `TMPDIR` inside the workspace (compilers need one).
pub fn spec(fx: &Fx, argv: &[&str]) -> SandboxSpec {
    let mut env = minimal_env(&fx.ws);
    env.push(("TMPDIR".into(), fx.ws.display().to_string()));
    SandboxSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: fx.ws.clone(),
        workspace: fx.ws.clone(),
        read_write: Vec::new(),
        read_only: Vec::new(),
        env,
        network: false,
        limits: Default::default(),
        enforcement: Default::default(),
        pids_cgroup: None,
        memory_cgroup: None,
        egress_proxy: None,
    }
}

pub fn sh(fx: &Fx, script: &str) -> SandboxSpec {
    spec(fx, &["sh", "-c", script])
}

pub async fn run_for(spec: &SandboxSpec, timeout: Duration) -> SandboxOutput {
    let out = run_sandboxed(Path::new(HELPER), spec, timeout, 64 * 1024)
        .await
        .expect("sandboxed run starts");
    assert!(
        !out.refused(),
        "the sandbox refused to run (is this machine missing a feature?): {out:?}"
    );
    out
}

pub async fn run(spec: &SandboxSpec) -> SandboxOutput {
    run_for(spec, Duration::from_secs(60)).await
}

/// True once `pid` no longer exists or is a zombie.
pub fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => matches!(stat_field(&stat, 0), Some("Z") | Some("X")),
    }
}

/// Field `n` after the `(comm)` of a `/proc/<pid>/stat` line: 0 = state,
/// 1 = ppid, 2 = pgrp.
fn stat_field(stat: &str, n: usize) -> Option<&str> {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(n))
}

pub fn wait_dead(pid: u32) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if is_dead(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn live_in_group(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                let state = stat_field(&s, 0);
                stat_field(&s, 2) == Some(&pgid.to_string())
                    && !matches!(state, Some("Z") | Some("X"))
            })
        })
        .collect()
}

pub fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid")
}

pub fn is_root() -> bool {
    rustix_uid() == 0
}

fn rustix_uid() -> u32 {
    // Tests avoid a rustix dev-dependency: the owner of /proc/self is us.
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}

pub fn have(cmd: &str) -> bool {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(cmd).exists())
}
