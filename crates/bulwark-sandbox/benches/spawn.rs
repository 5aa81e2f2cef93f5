//! Cost of confinement per command: a plain `true` through `run_process`
//! against the same command through the sandbox helper (namespaces,
//! Landlock, seccomp, and a pids cgroup when running as root); the start
//! of a long-running server (`spawn_sandboxed`, to its first echoed line),
//! with and without the egress relay; and one connection through the relay.

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Duration;

use bulwark_sandbox::{
    ProcessSpec, SandboxSpec, minimal_env, run_process, run_sandboxed, spawn_sandboxed,
};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

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
    servers(c, &rt, &sandboxed);
}

/// Spawn `spec`, write `line`, read one line back, shut it down.
async fn first_echo(spec: &SandboxSpec) {
    let mut child = spawn_sandboxed(Path::new(HELPER), spec)
        .await
        .expect("server starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout"));
    stdin.write_all(b"ping\n").await.expect("write");
    let mut line = String::new();
    stdout.read_line(&mut line).await.expect("read");
    assert_eq!(line, "ping\n");
    drop(stdin);
    child.shutdown().await;
}

/// A stand-in proxy answering each connection's first line.
fn stand_in_proxy(path: &Path) {
    let listener = UnixListener::bind(path).expect("bind proxy socket");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            std::thread::spawn(move || {
                let mut line = String::new();
                if BufReader::new(&conn).read_line(&mut line).is_ok() {
                    let _ = (&conn).write_all(line.as_bytes());
                }
            });
        }
    });
}

fn servers(c: &mut Criterion, rt: &tokio::runtime::Runtime, base: &SandboxSpec) {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("proxy.sock");
    stand_in_proxy(&socket);
    let mut cat = base.clone();
    cat.argv = vec!["cat".into()];
    cat.limits.cpu_seconds = 3600;
    let mut relayed = cat.clone();
    relayed.egress_proxy = Some(socket.clone());
    let mut group = c.benchmark_group("spawn_server_to_first_echo");
    group.sample_size(30);
    group.bench_function("sandboxed", |b| b.iter(|| rt.block_on(first_echo(&cat))));
    group.bench_function("sandboxed_with_relay", |b| {
        b.iter(|| rt.block_on(first_echo(&relayed)))
    });
    group.finish();

    // One TCP connection to 127.0.0.1:3128 inside the sandbox, a line to
    // the proxy socket and back, driven by a long-running client.
    let client = "import socket, sys\n\
                  for line in sys.stdin:\n    \
                  s = socket.create_connection(('127.0.0.1', 3128))\n    \
                  s.sendall(line.encode())\n    \
                  sys.stdout.write(s.makefile().readline())\n    \
                  sys.stdout.flush()\n    \
                  s.close()\n";
    let mut spec = relayed.clone();
    spec.argv = vec!["python3".into(), "-u".into(), "-c".into(), client.into()];
    let mut child = rt
        .block_on(spawn_sandboxed(Path::new(HELPER), &spec))
        .expect("client starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut group = c.benchmark_group("egress_relay");
    group.sample_size(50);
    group.bench_function("connect_and_round_trip", |b| {
        b.iter(|| {
            rt.block_on(async {
                stdin.write_all(b"ping\n").await.expect("write");
                let mut line = String::new();
                stdout.read_line(&mut line).await.expect("read");
                assert_eq!(line, "ping\n");
            })
        })
    });
    group.finish();
    drop(stdin);
    rt.block_on(child.shutdown());
}

criterion_group!(benches, spawn);
criterion_main!(benches);
