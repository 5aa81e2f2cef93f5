//! Long-running sandboxed processes (`spawn_sandboxed`): a stdio server
//! round-trips lines, stays confined, and dies with its handle.

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use bulwark_sandbox::{SandboxError, SandboxSpec, SandboxedChild, probe, spawn_sandboxed};
use common::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const PYTHON: &str = "/usr/bin/python3";
/// Bounds each read, so a broken server fails the test instead of hanging it.
const READ_BOUND: Duration = Duration::from_secs(30);

/// Echoes each line; `open <path>` answers `read <n>` or `denied <errno>`.
const SERVER_PY: &str = r#"import sys
for line in sys.stdin:
    if line.startswith('open '):
        try:
            with open(line[5:].strip()) as f:
                print('read', len(f.read()))
        except OSError as e:
            print('denied', e.errno)
    else:
        sys.stdout.write(line)
    sys.stdout.flush()
"#;

fn server(fx: &Fx) -> SandboxSpec {
    let mut s = spec(fx, &[PYTHON, "-u", "-c", SERVER_PY]);
    // A server runs for the session, not one tool call.
    s.limits.cpu_seconds = 24 * 3600;
    s
}

async fn start(s: &SandboxSpec) -> SandboxedChild {
    assert!(Path::new(PYTHON).exists(), "these tests need {PYTHON}");
    spawn_sandboxed(Path::new(HELPER), s)
        .await
        .unwrap_or_else(|e| panic!("the sandbox refused to start the server: {e}"))
}

struct Io {
    stdin: tokio::process::ChildStdin,
    stdout: BufReader<tokio::process::ChildStdout>,
}

impl Io {
    fn take(child: &mut SandboxedChild) -> Self {
        Self {
            stdin: child.stdin.take().expect("stdin"),
            stdout: BufReader::new(child.stdout.take().expect("stdout")),
        }
    }

    async fn ask(&mut self, line: &str) -> String {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write");
        self.line().await
    }

    /// The next line; empty at end of file.
    async fn line(&mut self) -> String {
        let mut out = String::new();
        tokio::time::timeout(READ_BOUND, self.stdout.read_line(&mut out))
            .await
            .expect("the server answered within the bound")
            .expect("read");
        out
    }
}

#[tokio::test]
async fn an_echo_server_round_trips_lines() {
    let fx = fixture();
    let mut child = start(&server(&fx)).await;
    assert!(!child.has_exited());
    let mut io = Io::take(&mut child);
    assert_eq!(io.ask("hello").await, "hello\n");
    let long = "x".repeat(100_000);
    assert_eq!(io.ask(&long).await, format!("{long}\n"));
    assert_eq!(io.ask("bye").await, "bye\n");
    drop(io);
    let status = child.shutdown().await.expect("status collected");
    // Closing stdin ended the loop, or the SIGTERM did.
    assert!(
        status.code() == Some(0) || status.signal() == Some(15),
        "{status:?}"
    );
}

#[tokio::test]
async fn the_server_is_confined() {
    let fx = fixture();
    std::fs::write(fx.ws.join("inside"), "visible").expect("write");
    let mut child = start(&server(&fx)).await;
    let mut io = Io::take(&mut child);
    assert_eq!(io.ask("open inside").await, "read 7\n");
    let secret = fx.outside.join("secret");
    let answer = io.ask(&format!("open {}", secret.display())).await;
    assert!(answer.starts_with("denied "), "{answer}");
    assert_eq!(
        io.ask("open /etc/shadow").await.split(' ').next(),
        Some("denied")
    );
}

#[tokio::test]
async fn dropping_the_handle_kills_the_group() {
    let fx = fixture();
    // A background child in the group too, which must die with it.
    let script = format!("sleep 600 & exec {PYTHON} -u -c \"$0\"");
    let mut s = spec(&fx, &["sh", "-c", &script, SERVER_PY]);
    s.limits.cpu_seconds = 3600;
    let mut child = start(&s).await;
    let pid = child.id();
    let mut io = Io::take(&mut child);
    assert_eq!(io.ask("ping").await, "ping\n");
    assert!(live_in_group(pid).len() >= 2, "{:?}", live_in_group(pid));
    drop(child);
    assert!(wait_dead(pid), "the server outlived its handle");
    let start = std::time::Instant::now();
    while !live_in_group(pid).is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(live_in_group(pid).is_empty(), "{:?}", live_in_group(pid));
    // The caller sees end of file.
    assert_eq!(io.line().await, "");
}

#[tokio::test]
async fn an_exit_is_end_of_file_even_with_a_child_holding_stdout() {
    let fx = fixture();
    let mut child = start(&spec(
        &fx,
        &["sh", "-c", "sleep 600 & echo started; exit 3"],
    ))
    .await;
    let pid = child.id();
    let mut io = Io::take(&mut child);
    assert_eq!(io.line().await, "started\n");
    // Without the group kill on exit, the sleep would hold stdout open.
    assert_eq!(io.line().await, "");
    assert!(child.has_exited() || wait_dead(pid));
    let status = child.shutdown().await.expect("status");
    assert_eq!(status.code(), Some(3));
    assert!(live_in_group(pid).is_empty());
}

#[tokio::test]
async fn stderr_keeps_a_bounded_tail() {
    let fx = fixture();
    let script = "i=0; while [ $i -lt 3000 ]; do echo line-$i >&2; i=$((i+1)); done; echo done";
    let mut child = start(&spec(&fx, &["sh", "-c", script])).await;
    let mut io = Io::take(&mut child);
    assert_eq!(io.line().await, "done\n");
    assert_eq!(io.line().await, "");
    // The drain may still be catching up with the last writes.
    let start = std::time::Instant::now();
    while !child.stderr_tail().ends_with("line-2999\n") && start.elapsed() < READ_BOUND {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tail = child.stderr_tail();
    assert!(tail.ends_with("line-2999\n"), "{tail}");
    assert!(tail.len() <= bulwark_sandbox::STDERR_TAIL_BYTES);
    assert!(!tail.contains("line-0\n"));
}

#[tokio::test]
async fn a_refusal_is_an_error_not_a_child() {
    let fx = fixture();
    // The working directory exists on the host but not in the sandbox's
    // root: the helper refuses before it execs anything.
    let mut s = server(&fx);
    s.cwd = fx.outside.clone();
    let err = spawn_sandboxed(Path::new(HELPER), &s)
        .await
        .err()
        .expect("refused");
    let SandboxError::Refused {
        exit_code,
        diagnostics,
        ..
    } = &err
    else {
        panic!("not a refusal: {err}")
    };
    assert_eq!(*exit_code, Some(125), "{err}");
    assert!(
        diagnostics
            .iter()
            .any(|d| d.contains("cannot enter working directory")),
        "{err}"
    );
    // A command that is not there: exec fails after the helper confined itself.
    let s = spec(&fx, &["no-such-server-xyz"]);
    let err = spawn_sandboxed(Path::new(HELPER), &s)
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(
            &err,
            SandboxError::Refused {
                exit_code: Some(127),
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("command not found"), "{err}");
}

#[tokio::test]
async fn a_proxied_server_reaches_the_proxy_and_its_relay_dies_with_it() {
    use std::io::{BufRead, BufReader as StdBufReader, Write};
    use std::os::unix::net::UnixListener;
    assert!(
        probe().egress_relay.is_available(),
        "no network namespace for the relay: {}",
        probe().egress_relay.detail()
    );
    let fx = fixture();
    let socket = fx.outside.join("proxy.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let mut line = String::new();
            let _ = StdBufReader::new(&conn).read_line(&mut line);
            let _ = writeln!(&conn, "PROXY {}", line.trim());
        }
    });
    let client = r#"import socket, sys
for line in sys.stdin:
    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
    s.sendall(line.encode())
    print(s.makefile().readline().strip(), flush=True)
"#;
    let mut s = spec(&fx, &[PYTHON, "-u", "-c", client]);
    s.egress_proxy = Some(socket);
    s.limits.cpu_seconds = 3600;
    let mut child = start(&s).await;
    let pid = child.id();
    let mut io = Io::take(&mut child);
    assert_eq!(io.ask("one").await, "PROXY one\n");
    assert_eq!(io.ask("two").await, "PROXY two\n");
    // The command and its relay.
    assert_eq!(live_in_group(pid).len(), 2, "{:?}", live_in_group(pid));
    child.shutdown().await;
    assert!(live_in_group(pid).is_empty(), "{:?}", live_in_group(pid));
}
