//! The egress relay: a command without network reaches the proxy socket
//! through `127.0.0.1:3128`, and nothing else.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bulwark_sandbox::{
    EGRESS_PROXY_PORT, Enforcement, SPEC_ENV, SandboxError, egress_proxy_url, probe, run_sandboxed,
    spawn_sandboxed,
};
use common::*;

const PYTHON: &str = "/usr/bin/python3";
const PROXY_REPLY: &str = "HELLO-FROM-PROXY";

/// A stand-in for the egress proxy: answers each connection's first line
/// with `HELLO-FROM-PROXY <line>`.
fn stand_in_proxy(path: &Path) {
    let listener = UnixListener::bind(path).expect("bind proxy socket");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            std::thread::spawn(move || {
                let mut line = String::new();
                let mut reader = BufReader::new(&conn);
                if reader.read_line(&mut line).is_ok() {
                    let mut w = &conn;
                    let _ = writeln!(w, "{PROXY_REPLY} {}", line.trim());
                }
            });
        }
    });
}

/// Each probe prints one line: `OPEN <what> <reply>` or `refused <what> <errno>`.
const CLIENT_PY: &str = r#"import os, socket, sys
def attempt(what, family, kind, addr, send=True):
    try:
        s = socket.socket(family, kind)
        s.settimeout(10)
        s.connect(addr)
        reply = ''
        if send:
            s.sendall(b'ping\n')
            reply = s.makefile().readline().strip()
        print('OPEN', what, reply)
    except OSError as e:
        print('refused', what, e.errno)
A, S = socket.AF_INET, socket.SOCK_STREAM
attempt('proxy', A, S, ('127.0.0.1', 3128))
for arg in sys.argv[1:]:
    kind, _, rest = arg.partition('=')
    if kind == 'tcp':
        host, port = rest.rsplit(':', 1)
        attempt(arg, A, S, (host, int(port)))
    elif kind == 'tcp6':
        attempt(arg, socket.AF_INET6, S, (rest, 3128))
    elif kind == 'unix':
        attempt(arg, socket.AF_UNIX, S, rest, send=False)
    elif kind == 'udp':
        attempt(arg, A, socket.SOCK_DGRAM, ('127.0.0.1', 3128), send=False)
    elif kind == 'raw':
        attempt(arg, A, socket.SOCK_RAW, ('127.0.0.1', 0), send=False)
    elif kind == 'bind':
        try:
            s = socket.socket(A, S)
            s.bind(('127.0.0.1', 0))
            s.listen()
            print('OPEN', arg)
        except OSError as e:
            print('refused', arg, e.errno)
for k in ['HTTP_PROXY', 'https_proxy', 'ALL_PROXY', 'npm_config_https_proxy', 'NO_PROXY']:
    print('ENV', k, repr(os.environ.get(k)))
"#;

fn proxied(fx: &Fx, socket: &Path, args: &[&str]) -> bulwark_sandbox::SandboxSpec {
    let mut argv = vec![PYTHON, "-c", CLIENT_PY];
    argv.extend_from_slice(args);
    let mut s = spec(fx, &argv);
    s.egress_proxy = Some(socket.to_path_buf());
    // A value the caller passed is replaced, not kept.
    s.env
        .push(("HTTP_PROXY".into(), "http://evil.example:1".into()));
    s
}

fn require_namespaces() {
    assert!(
        Path::new(PYTHON).exists(),
        "these tests need {PYTHON} inside the sandbox"
    );
    let support = probe();
    assert!(
        support.egress_relay.is_available(),
        "no network namespace here, so the egress relay cannot run: {}",
        support.egress_relay.detail()
    );
}

/// Live processes whose environment holds the helper's spec naming `ws`:
/// the helper before exec, and the relay it forked.
fn helper_processes(ws: &Path) -> Vec<u32> {
    let needle = format!("{SPEC_ENV}=");
    let ws = ws.display().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| !is_dead(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0).any(|var| {
                    let var = String::from_utf8_lossy(var);
                    var.starts_with(&needle) && var.contains(&ws)
                })
            })
        })
        .collect()
}

#[tokio::test]
async fn the_relay_reaches_the_proxy_and_nothing_else() {
    require_namespaces();
    let fx = fixture();
    let socket = fx.outside.join("proxy.sock");
    stand_in_proxy(&socket);
    // Host objects that must stay out of reach.
    let other = fx.outside.join("other.sock");
    let other_listener = UnixListener::bind(&other).expect("bind other socket");
    other_listener.set_nonblocking(true).expect("nonblocking");
    let host_tcp = TcpListener::bind("127.0.0.1:0").expect("bind host tcp");
    host_tcp.set_nonblocking(true).expect("nonblocking");
    let host_port = host_tcp.local_addr().expect("addr").port();
    let targets = [
        format!("tcp=127.0.0.1:{host_port}"),
        "tcp=127.0.0.1:80".to_string(),
        "tcp=192.0.2.1:3128".to_string(),
        "tcp=192.0.2.1:443".to_string(),
        "tcp=10.0.0.1:3128".to_string(),
        format!("unix={}", other.display()),
        format!("unix={}", socket.display()),
        "udp=".to_string(),
        "raw=".to_string(),
    ];
    let mut args: Vec<&str> = targets.iter().map(String::as_str).collect();
    let abi = probe().landlock_abi.unwrap_or(0);
    if abi >= 4 {
        args.push("bind=");
    }
    let out = run(&proxied(&fx, &socket, &args)).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    // The work it must still allow.
    assert!(
        out.stdout
            .contains(&format!("OPEN proxy {PROXY_REPLY} ping")),
        "{out:?}"
    );
    let url = egress_proxy_url();
    assert_eq!(url, format!("http://127.0.0.1:{EGRESS_PROXY_PORT}"));
    for var in [
        "HTTP_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "npm_config_https_proxy",
    ] {
        assert!(
            out.stdout.contains(&format!("ENV {var} '{url}'")),
            "{var}: {out:?}"
        );
    }
    assert!(out.stdout.contains("ENV NO_PROXY ''"), "{out:?}");
    // The attacks.
    for t in &args {
        assert!(
            out.stdout.contains(&format!("refused {t} ")),
            "{t} was reachable: {out:?}"
        );
    }
    assert!(
        host_tcp.accept().is_err(),
        "the host's loopback was reached"
    );
    assert!(
        other_listener.accept().is_err(),
        "a host socket was reached"
    );
    // The relay died with the command.
    assert!(
        helper_processes(&fx.ws).is_empty(),
        "a relay outlived the run: {:?}",
        helper_processes(&fx.ws)
    );
}

#[tokio::test]
async fn ipv6_loopback_reaches_the_proxy_where_the_namespace_has_it() {
    require_namespaces();
    if std::fs::read_to_string("/proc/sys/net/ipv6/conf/default/disable_ipv6")
        .map_or(true, |v| v.trim() != "0")
    {
        eprintln!("IPv6 is disabled on this machine; only 127.0.0.1 is relayed");
        return;
    }
    let fx = fixture();
    let socket = fx.outside.join("proxy.sock");
    stand_in_proxy(&socket);
    let out = run(&proxied(&fx, &socket, &["tcp6=::1"])).await;
    assert!(
        out.stdout
            .contains(&format!("OPEN tcp6=::1 {PROXY_REPLY} ping")),
        "{out:?}"
    );
}

#[tokio::test]
async fn without_a_proxy_tcp_sockets_stay_refused() {
    require_namespaces();
    let fx = fixture();
    let script = "import socket\n\
                  try:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM); print('created')\n\
                  except OSError as e:\n    print('refused', e.errno)\n";
    let out = run(&spec(&fx, &[PYTHON, "-c", script])).await;
    assert!(out.stdout.contains("refused 1"), "{out:?}");
}

#[tokio::test]
async fn unusable_proxy_specs_are_typed_errors() {
    let fx = fixture();
    let socket = fx.outside.join("proxy.sock");
    stand_in_proxy(&socket);
    let file = fx.outside.join("secret");
    let cases: [(Option<PathBuf>, bool, &str); 4] = [
        (Some(socket.clone()), true, "network"),
        (Some("proxy.sock".into()), false, "absolute"),
        (Some(fx.outside.join("missing.sock")), false, "missing.sock"),
        (Some(file), false, "not a Unix socket"),
    ];
    for (proxy, network, expect) in cases {
        let mut s = spec(&fx, &["true"]);
        s.egress_proxy = proxy;
        s.network = network;
        let err = run_sandboxed(Path::new(HELPER), &s, Duration::from_secs(10), 1024)
            .await
            .expect_err("refused");
        assert!(
            matches!(&err, SandboxError::InvalidSpec(m) if m.contains(expect)),
            "{expect}: {err}"
        );
        let err = spawn_sandboxed(Path::new(HELPER), &s)
            .await
            .err()
            .expect("refused");
        assert!(matches!(err, SandboxError::InvalidSpec(_)), "{err}");
    }
}

/// Drive the helper directly with a relay that cannot start (the path is
/// not a socket: the runner would have refused it). Strict mode refuses;
/// permissive mode runs the command with no network at all.
fn helper_with_broken_relay(fx: &Fx, enforcement: Enforcement) -> std::process::Output {
    let script = "import os, socket\n\
                  print('proxy', os.environ.get('HTTP_PROXY'))\n\
                  try:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM); print('tcp created')\n\
                  except OSError as e:\n    print('tcp refused', e.errno)\n";
    let mut s = spec(fx, &[PYTHON, "-c", script]);
    s.enforcement = enforcement;
    s.egress_proxy = Some(fx.outside.join("secret"));
    // As root the helper needs a pids cgroup (RLIMIT_NPROC does not bind
    // uid 0); the runner would make one, so make one here.
    let cgroup = probe()
        .pids_cgroup_path
        .filter(|_| is_root())
        .map(|parent| parent.join(format!("bulwark-egress-test-{}", std::process::id())));
    if let Some(cg) = &cgroup {
        std::fs::create_dir_all(cg).expect("create a pids cgroup");
        s.pids_cgroup = Some(cg.clone());
    }
    let json = serde_json::to_string(&s).expect("json");
    let out = std::process::Command::new(HELPER)
        .arg("__sandbox-exec")
        .env_clear()
        .env(SPEC_ENV, json)
        .output()
        .expect("helper runs");
    if let Some(cg) = &cgroup {
        // Every process in it has exited (the command and, by its
        // parent-death signal, the relay); retry while they are reaped.
        for _ in 0..100 {
            if std::fs::remove_dir(cg).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    out
}

#[test]
fn a_relay_that_cannot_start_never_opens_the_network() {
    require_namespaces();
    let fx = fixture();
    let out = helper_with_broken_relay(&fx, Enforcement::Strict);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.starts_with("bulwark-sandbox: egress proxy relay unavailable: "),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "the command ran");
    let out = helper_with_broken_relay(&fx, Enforcement::Permissive);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("WARNING: running without egress proxy relay"),
        "{stderr}"
    );
    assert!(stdout.contains("proxy None"), "{stdout}");
    assert!(stdout.contains("tcp refused 1"), "{stdout}");
}

#[test]
fn probe_reports_the_relay_with_the_network_namespace() {
    let support = probe();
    assert_eq!(
        support.egress_relay.is_available(),
        support.network_namespaces.is_available()
    );
}

#[tokio::test]
async fn more_connections_than_the_relay_holds_at_once_are_all_served() {
    require_namespaces();
    let fx = fixture();
    let socket = fx.outside.join("proxy.sock");
    stand_in_proxy(&socket);
    // 100 connections open at once (the relay holds 64; the rest wait in
    // the backlog), each answered once earlier ones are closed.
    let script = "import socket\n\
                  conns = [socket.create_connection(('127.0.0.1', 3128), timeout=30) for _ in range(100)]\n\
                  for i, s in enumerate(conns):\n    s.sendall(b'n%d\\n' % i)\n\
                  ok = 0\n\
                  for i, s in enumerate(conns):\n    \
                  if s.makefile().readline().strip() == 'HELLO-FROM-PROXY n%d' % i: ok += 1\n    \
                  s.close()\n\
                  print('served', ok)\n";
    let mut s = spec(&fx, &[PYTHON, "-c", script]);
    s.egress_proxy = Some(socket);
    let out = run(&s).await;
    assert!(out.stdout.contains("served 100"), "{out:?}");
}
