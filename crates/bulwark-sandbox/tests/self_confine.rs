//! `confine_current_process`: what a confined process can no longer do,
//! and the work it still can.
//!
//! Confinement is per process, irreversible, and needs a single-threaded
//! caller, which a libtest test (always on a thread of its own) never is.
//! So this file has its own `main` (`harness = false`): run without
//! `SELF_CONFINE_CASE` it starts itself again once per case; run with it,
//! it is that case's confined child, which tries one operation per line
//! and prints `name=ok` or `name=denied` (or `name=error: ...`) for the
//! parent to check. They run as root in CI, where only Landlock (not file
//! permissions) stands between the child and the files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bulwark_sandbox::{
    SandboxSpec, SelfConfineError, SelfConfinement, confine_current_process, minimal_env, probe,
    run_sandboxed,
};

const CASE_ENV: &str = "SELF_CONFINE_CASE";
const DIR_ENV: &str = "SELF_CONFINE_DIR";
const PORT_ENV: &str = "SELF_CONFINE_PORT";
const HELPER: &str = env!("CARGO_BIN_EXE_bulwark-sandbox-helper");
const SECRET: &str = "TOP-SECRET-5b1c";

fn main() {
    if let Ok(case) = std::env::var(CASE_ENV) {
        let dir = PathBuf::from(std::env::var_os(DIR_ENV).expect("the fixture directory"));
        let code = match case.as_str() {
            "attack_and_work" => child_attack_and_work(&dir),
            "threads" => child_threads(&dir),
            "nested" => child_nested(&dir),
            other => {
                eprintln!("unknown case {other}");
                2
            }
        };
        std::process::exit(code);
    }
    if !probe().landlock.is_available() {
        eprintln!(
            "skipped: Landlock is unavailable here ({})",
            probe().landlock.detail()
        );
        return;
    }
    let (filters, list, ignored_only) = parse_args();
    let tests: [(&str, fn()); 3] = [
        (
            "outside_grants_is_refused_and_inside_works",
            attack_and_work,
        ),
        ("refuses_a_multi_threaded_caller", threads),
        ("sandboxed_commands_still_run_when_confined", nested),
    ];
    let chosen: Vec<(&str, fn())> = tests
        .into_iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .filter(|_| !ignored_only)
        .collect();
    if list {
        for (name, _) in &chosen {
            println!("{name}: test");
        }
        return;
    }
    println!("\nrunning {} tests", chosen.len());
    let mut failed = 0;
    for (name, test) in &chosen {
        match std::panic::catch_unwind(test) {
            Ok(()) => println!("test {name} ... ok"),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    let passed = chosen.len() - failed;
    let verdict = if failed > 0 { "FAILED" } else { "ok" };
    println!("\ntest result: {verdict}. {passed} passed; {failed} failed\n");
    if failed > 0 {
        std::process::exit(101);
    }
}

/// The libtest arguments that matter here: name filters, `--list`, and
/// `--ignored` (there are no ignored tests). Flags that take a value are
/// skipped with their value, so it is not taken for a filter.
fn parse_args() -> (Vec<String>, bool, bool) {
    const WITH_VALUE: &[&str] = &[
        "--test-threads",
        "--skip",
        "--format",
        "--color",
        "--logfile",
        "--shuffle-seed",
        "-Z",
    ];
    let (mut filters, mut list, mut ignored) = (Vec::new(), false, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--list" => list = true,
            "--ignored" => ignored = true,
            a if WITH_VALUE.contains(&a) => {
                args.next();
            }
            a if a.starts_with('-') => {}
            _ => filters.push(arg),
        }
    }
    (filters, list, ignored)
}

/// A fixture: `ro/data` (read-only grant), `rw/` (read-write dir), `db`
/// (read-write file), `outside/secret` (no grant), `ws/` (a workspace).
fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    for dir in ["ro", "rw", "outside", "ws"] {
        std::fs::create_dir(tmp.path().join(dir)).expect("mkdir");
    }
    std::fs::write(tmp.path().join("ro/data"), "readable").expect("write");
    std::fs::write(tmp.path().join("db"), "db-v1").expect("write");
    std::fs::write(tmp.path().join("outside/secret"), SECRET).expect("write");
    tmp
}

/// Run `case` confined in a child; its `name=result` lines, and stderr.
fn run_child(case: &str, dir: &Path, port: Option<u16>) -> (BTreeMap<String, String>, String) {
    let exe = std::env::current_exe().expect("own path");
    let mut cmd = Command::new(exe);
    cmd.env(CASE_ENV, case).env(DIR_ENV, dir);
    if let Some(port) = port {
        cmd.env(PORT_ENV, port.to_string());
    }
    let out = cmd.output().expect("the child runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "child {case} failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    let results = stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (results, stderr)
}

#[track_caller]
fn expect(results: &BTreeMap<String, String>, name: &str, want: &str) {
    let got = results.get(name).map(String::as_str).unwrap_or("(missing)");
    assert!(
        got == want || (want == "ok" && got.starts_with("ok")),
        "{name}: expected {want}, got {got}\nall: {results:#?}"
    );
}

fn attack_and_work() {
    let tmp = fixture();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (r, stderr) = run_child("attack_and_work", tmp.path(), Some(port));
    // The attack: nothing outside the grants, no writes to read-only
    // grants, no new files outside the read-write directories, no server.
    for name in [
        "read_outside",
        "list_outside",
        "create_outside",
        "write_read_only",
        "create_in_read_only",
        "remove_rw_file",
        "create_beside_rw_file",
        "read_etc_shadow",
        "read_proc_1_environ",
        "bind_tcp",
        "signal_parent",
    ] {
        expect(&r, name, "denied");
    }
    // The work: reads and writes inside the grants, system binaries, a
    // connection out.
    for name in [
        "read_read_only",
        "read_etc_passwd",
        "create_write_read_in_rw",
        "mkdir_rename_remove_in_rw",
        "write_rw_file",
        "run_bin_true",
        "connect_tcp",
        "no_new_privs",
    ] {
        expect(&r, name, "ok");
    }
    assert!(stderr.contains("landlock ABI"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("outside/secret")).expect("kept"),
        SECRET
    );
    assert!(!tmp.path().join("outside/new").exists());
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("ro/data")).expect("kept"),
        "readable"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("db")).expect("kept"),
        "db-v2"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("rw/new")).expect("made"),
        "inside"
    );
    listener.set_nonblocking(true).expect("nonblocking");
    assert!(listener.accept().is_ok(), "the child's connection arrived");
}

fn threads() {
    let tmp = fixture();
    let (r, _) = run_child("threads", tmp.path(), None);
    expect(&r, "confine_with_two_threads", "refused");
    expect(&r, "read_outside_after_refusal", "ok");
}

fn nested() {
    let tmp = fixture();
    let (r, stderr) = run_child("nested", tmp.path(), None);
    expect(&r, "refused", "false");
    expect(&r, "exit_code", "Some(0)");
    expect(&r, "wrote_in_workspace", "true");
    expect(&r, "secret_leaked", "false");
    expect(&r, "read_outside", "denied");
    // The caller's Landlock denies every TCP bind but the relay's port, so
    // a proxied child under a confined worker reaches its proxy (and only
    // through the socket the caller named).
    expect(&r, "probe_relay", "true");
    assert_eq!(
        r.get("proxied").map(String::as_str),
        Some("reached"),
        "the proxied run under a confined caller: {stderr}"
    );
    assert!(
        stderr.contains("namespaces prepared"),
        "the helper joins prepared namespaces: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("ws/made")).expect("made"),
        "by the command\n"
    );
}

// ---- the children ----

fn report(name: &str, result: std::io::Result<()>) {
    let line = match result {
        Ok(()) => "ok".to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => "denied".to_string(),
        Err(e) => format!("error: {e}"),
    };
    println!("{name}={line}");
}

fn denied_errno(e: rustix::io::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

fn grants(dir: &Path) -> SelfConfinement {
    SelfConfinement {
        read_only: vec![dir.join("ro")],
        read_exec: Vec::new(),
        read_write_dirs: vec![dir.join("rw")],
        read_write_files: vec![dir.join("db")],
        sandboxed_children: false,
    }
}

fn child_attack_and_work(dir: &Path) -> i32 {
    let report_line = match confine_current_process(&grants(dir)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("confinement failed: {e}");
            return 1;
        }
    };
    eprintln!("{report_line}");
    let port: u16 = std::env::var(PORT_ENV)
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let read = |p: &Path| std::fs::read_to_string(p).map(|_| ());
    report("read_outside", read(&dir.join("outside/secret")));
    report(
        "list_outside",
        std::fs::read_dir(dir.join("outside")).map(|_| ()),
    );
    report(
        "create_outside",
        std::fs::write(dir.join("outside/new"), "x"),
    );
    report(
        "write_read_only",
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("ro/data"))
            .map(|_| ()),
    );
    report(
        "create_in_read_only",
        std::fs::write(dir.join("ro/new"), "x"),
    );
    report("remove_rw_file", std::fs::remove_file(dir.join("db")));
    report(
        "create_beside_rw_file",
        std::fs::write(dir.join("db-journal"), "x"),
    );
    report("read_etc_shadow", read(Path::new("/etc/shadow")));
    report("read_proc_1_environ", read(Path::new("/proc/1/environ")));
    report("bind_tcp", TcpListener::bind("127.0.0.1:0").map(|_| ()));
    let parent = rustix::process::getppid();
    report(
        "signal_parent",
        match parent {
            Some(pid) => rustix::process::test_kill_process(pid).map_err(denied_errno),
            None => Err(std::io::Error::other("no parent")),
        },
    );

    report("read_read_only", read(&dir.join("ro/data")));
    report("read_etc_passwd", read(Path::new("/etc/passwd")));
    report(
        "create_write_read_in_rw",
        std::fs::write(dir.join("rw/new"), "inside").and_then(|()| {
            let back = std::fs::read_to_string(dir.join("rw/new"))?;
            if back == "inside" {
                Ok(())
            } else {
                Err(std::io::Error::other("read back differs"))
            }
        }),
    );
    report(
        "mkdir_rename_remove_in_rw",
        std::fs::create_dir(dir.join("rw/sub"))
            .and_then(|()| std::fs::write(dir.join("rw/sub/a"), "a"))
            .and_then(|()| std::fs::rename(dir.join("rw/sub/a"), dir.join("rw/sub/b")))
            .and_then(|()| std::fs::remove_file(dir.join("rw/sub/b")))
            .and_then(|()| std::fs::remove_dir(dir.join("rw/sub"))),
    );
    report(
        "write_rw_file",
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(dir.join("db"))
            .and_then(|mut f| f.write_all(b"db-v2")),
    );
    report(
        "run_bin_true",
        Command::new("/bin/true").status().and_then(|s| {
            if s.success() {
                Ok(())
            } else {
                Err(std::io::Error::other(format!("{s}")))
            }
        }),
    );
    report(
        "connect_tcp",
        TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| s.write_all(b"hi")),
    );
    report(
        "no_new_privs",
        match rustix::thread::no_new_privs() {
            Ok(true) => Ok(()),
            Ok(false) => Err(std::io::Error::other("no_new_privs is off")),
            Err(e) => Err(denied_errno(e)),
        },
    );
    0
}

fn child_threads(dir: &Path) -> i32 {
    let (stop, wait) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let _ = wait.recv();
    });
    let result = confine_current_process(&grants(dir));
    let line = match &result {
        Err(SelfConfineError::MultiThreaded { threads: 2 }) => "refused".to_string(),
        other => format!("unexpected: {other:?}"),
    };
    println!("confine_with_two_threads={line}");
    // Nothing was enforced: the refusal left the process as it was.
    report(
        "read_outside_after_refusal",
        std::fs::read_to_string(dir.join("outside/secret")).map(|_| ()),
    );
    let _ = stop.send(());
    let _ = thread.join();
    0
}

fn child_nested(dir: &Path) -> i32 {
    let ws = dir.join("ws");
    // A stand-in egress proxy, bound before confinement (afterwards no
    // socket can be made outside the grants); answered from a thread
    // started after it (confinement needs a single thread).
    let proxy_path = dir.join("outside/proxy.sock");
    let proxy = match std::os::unix::net::UnixListener::bind(&proxy_path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("proxy socket: {e}");
            return 1;
        }
    };
    let grants = SelfConfinement {
        read_only: Vec::new(),
        read_exec: vec![PathBuf::from(HELPER)],
        read_write_dirs: vec![ws.clone()],
        read_write_files: Vec::new(),
        sandboxed_children: true,
    };
    match confine_current_process(&grants) {
        Ok(r) => eprintln!("{r}"),
        Err(e) => {
            eprintln!("confinement failed: {e}");
            return 1;
        }
    }
    report(
        "read_outside",
        std::fs::read_to_string(dir.join("outside/secret")).map(|_| ()),
    );
    std::thread::spawn(move || {
        use std::io::BufRead;
        for conn in proxy.incoming() {
            let Ok(conn) = conn else { return };
            let mut line = String::new();
            let _ = std::io::BufReader::new(&conn).read_line(&mut line);
            let _ = writeln!(&conn, "PROXY {}", line.trim());
        }
    });
    // The runtime (and its threads) only now: they inherit the domain.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            return 1;
        }
    };
    let mut env = minimal_env(&ws);
    env.push(("TMPDIR".into(), ws.display().to_string()));
    let script = format!(
        "echo 'by the command' > made; cat '{}'; echo done",
        dir.join("outside/secret").display()
    );
    let spec = SandboxSpec {
        argv: vec!["sh".into(), "-c".into(), script],
        cwd: ws.clone(),
        workspace: ws.clone(),
        read_write: Vec::new(),
        read_only: Vec::new(),
        env,
        network: false,
        limits: Default::default(),
        enforcement: Default::default(),
        pids_cgroup: None,
        memory_cgroup: None,
        egress_proxy: None,
    };
    let out = runtime.block_on(run_sandboxed(
        Path::new(HELPER),
        &spec,
        Duration::from_secs(60),
        64 * 1024,
    ));
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            eprintln!("run_sandboxed: {e}");
            return 1;
        }
    };
    eprintln!("nested run: {out:?}");
    println!("refused={}", out.refused());
    // `cat` of the secret fails, so the script's status is echo's.
    println!("exit_code={:?}", out.exit_code);
    println!("wrote_in_workspace={}", ws.join("made").is_file());
    println!("secret_leaked={}", out.stdout.contains(SECRET));
    // The egress relay under a self-confined caller.
    println!(
        "probe_relay={}",
        bulwark_sandbox::probe().egress_relay.is_available()
    );
    let client = "import socket\n\
                  s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n\
                  s.sendall(b'hi\\n')\n\
                  print(s.makefile().readline().strip())\n";
    let mut proxied = spec.clone();
    proxied.argv = vec!["python3".into(), "-c".into(), client.into()];
    proxied.egress_proxy = Some(proxy_path);
    let out = runtime.block_on(run_sandboxed(
        Path::new(HELPER),
        &proxied,
        Duration::from_secs(60),
        64 * 1024,
    ));
    match out {
        Ok(out) => {
            eprintln!("proxied run: {out:?}");
            let relay_refused = out.refused()
                && out
                    .warnings
                    .iter()
                    .any(|w| w.contains("egress proxy relay unavailable"));
            let state = if out.stdout.contains("PROXY hi") {
                "reached"
            } else if relay_refused {
                "refused"
            } else {
                "other"
            };
            println!("proxied={state}");
        }
        Err(e) => eprintln!("proxied run_sandboxed: {e}"),
    }
    let _ = std::io::stdout().flush();
    runtime.shutdown_background();
    0
}
