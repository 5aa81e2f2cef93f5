//! Cost of confinement per command: a plain `true` through `run_process`
//! against the same command through the sandbox helper (namespaces,
//! Landlock, seccomp, and a pids cgroup when running as root).

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use bulwark_sandbox::{ProcessSpec, SandboxSpec, minimal_env, run_process, run_sandboxed};
use criterion::{Criterion, criterion_group, criterion_main};

const HELPER: &str = env!("CARGO_BIN_EXE_bulwark-sandbox-helper");

fn spawn(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().to_path_buf();
    let plain = ProcessSpec {
        argv: vec!["true".into()],
        cwd: ws.clone(),
        env: minimal_env(&ws),
        timeout: Duration::from_secs(10),
        max_output: 4096,
    };
    let sandboxed = SandboxSpec {
        argv: vec!["true".into()],
        cwd: ws.clone(),
        workspace: ws.clone(),
        read_write: Vec::new(),
        read_only: Vec::new(),
        env: minimal_env(&ws),
        network: false,
        limits: Default::default(),
        enforcement: Default::default(),
        pids_cgroup: None,
        memory_cgroup: None,
        egress_proxy: None,
    };
    let mut group = c.benchmark_group("spawn_true");
    group.sample_size(30);
    group.bench_function("plain", |b| {
        b.iter(|| rt.block_on(run_process(&plain)).expect("plain run"))
    });
    group.bench_function("sandboxed", |b| {
        b.iter(|| {
            let out = rt
                .block_on(run_sandboxed(
                    Path::new(HELPER),
                    &sandboxed,
                    Duration::from_secs(10),
                    4096,
                ))
                .expect("sandboxed run");
            assert_eq!(out.exit_code, Some(0), "{out:?}");
        })
    });
    group.finish();
}

criterion_group!(benches, spawn);
criterion_main!(benches);
