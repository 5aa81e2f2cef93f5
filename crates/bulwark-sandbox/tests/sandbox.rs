//! Escape attempts from a sandboxed command, each of which must be refused.
//! They run as root in CI, where only the sandbox (not file permissions)
//! stands between the command and the rest of the machine.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::{Duration, Instant};

use bulwark_sandbox::probe;
use common::*;

#[tokio::test]
async fn reading_outside_the_workspace_is_refused() {
    let fx = fixture();
    std::fs::write(fx.ws.join("inside"), "visible").expect("write");
    let secret = fx.outside.join("secret");
    let script = format!("cat inside; echo; cat '{}'", secret.display());
    let out = run(&sh(&fx, &script)).await;
    assert!(out.stdout.contains("visible"), "{out:?}");
    assert!(!out.stdout.contains(SECRET), "secret leaked: {out:?}");
    assert_ne!(out.exit_code, Some(0));
    assert!(out.stderr.contains("Permission denied"), "{out:?}");
    // Listing the outside directory is refused too.
    let out = run(&spec(&fx, &["ls", &fx.outside.display().to_string()])).await;
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    assert!(!out.stdout.contains("secret"));
}

#[tokio::test]
async fn etc_shadow_and_proc_are_unreadable_even_as_root() {
    let fx = fixture();
    for network in [false, true] {
        let mut s = sh(
            &fx,
            "cat /etc/shadow; echo shadow=$?; cat /proc/1/environ; echo environ=$?; \
             ls /root; echo root=$?; head -c 5 /etc/passwd; echo; echo passwd=$?",
        );
        s.network = network;
        let out = run(&s).await;
        assert!(out.stdout.contains("shadow=1"), "{out:?}");
        assert!(out.stdout.contains("environ=1"), "{out:?}");
        assert!(out.stdout.contains("root=2"), "{out:?}");
        assert!(!out.stdout.contains("root:$"), "shadow hash leaked");
        // The needed /etc entries stay readable.
        assert!(out.stdout.contains("passwd=0"), "{out:?}");
    }
}

#[tokio::test]
async fn writing_outside_the_workspace_is_refused() {
    let fx = fixture();
    let new = fx.outside.join("new");
    let secret = fx.outside.join("secret");
    let script = format!(
        "echo pwned > '{new}'; echo a=$?; echo pwned >> '{secret}'; echo b=$?; \
         rm -f '{secret}'; echo c=$?; mkdir /tmp/bulwark-escape-$$; echo d=$?; \
         echo ok > mine; echo e=$?",
        new = new.display(),
        secret = secret.display()
    );
    let out = run(&sh(&fx, &script)).await;
    for refused in ["a=2", "b=2", "c=1", "d=1"] {
        assert!(out.stdout.contains(refused), "{refused}: {out:?}");
    }
    assert!(out.stdout.contains("e=0"), "{out:?}");
    assert!(!new.exists());
    assert_eq!(
        std::fs::read_to_string(&secret).expect("secret kept"),
        SECRET
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("mine")).expect("own file"),
        "ok\n"
    );
}

#[tokio::test]
async fn symlinks_pointing_outside_are_not_followed_out() {
    let fx = fixture();
    symlink(fx.outside.join("secret"), fx.ws.join("link")).expect("symlink file");
    symlink(&fx.outside, fx.ws.join("dirlink")).expect("symlink dir");
    let out = run(&sh(
        &fx,
        "cat link; echo a=$?; echo x > dirlink/planted; echo b=$?; ls dirlink; echo c=$?",
    ))
    .await;
    assert!(!out.stdout.contains(SECRET), "{out:?}");
    assert!(out.stdout.contains("a=1"), "{out:?}");
    assert!(out.stdout.contains("b=2"), "{out:?}");
    assert!(out.stdout.contains("c=2"), "{out:?}");
    assert!(!fx.outside.join("planted").exists());
}

/// Run `bash -c 'echo > /dev/tcp/...'` against a listener in this process
/// and report whether the listener saw a connection.
async fn tcp_attempt(network: bool) -> (bool, bulwark_sandbox::SandboxOutput) {
    let fx = fixture();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let script = format!("echo hello > /dev/tcp/127.0.0.1/{port}");
    let mut s = spec(&fx, &["bash", "-c", &script]);
    s.network = network;
    let out = run(&s).await;
    listener.set_nonblocking(true).expect("nonblocking");
    let seen = match listener.accept() {
        Ok((mut conn, _)) => {
            let mut buf = String::new();
            let _ = conn.read_to_string(&mut buf);
            true
        }
        Err(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
            false
        }
    };
    (seen, out)
}

#[tokio::test]
async fn loopback_tcp_is_unreachable_without_network() {
    if !have("bash") {
        eprintln!("skipped: bash (for /dev/tcp) is not installed");
        return;
    }
    let (seen, out) = tcp_attempt(false).await;
    assert!(!seen, "the server saw a connection: {out:?}");
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    // Control: the same command connects when network is granted, so the
    // refusal above is the sandbox and not a broken test.
    let (seen, out) = tcp_attempt(true).await;
    assert!(seen, "no connection with network granted: {out:?}");
}

#[tokio::test]
async fn fork_bomb_is_contained_and_leaves_nothing_behind() {
    if !have("bash") {
        eprintln!("skipped: bash is not installed");
        return;
    }
    let fx = fixture();
    // bash (unlike dash) retries a failed fork and keeps looping, so the
    // bomb runs until the timeout ends it.
    let mut s = spec(
        &fx,
        &[
            "bash",
            "-c",
            "echo $$ > pgid; while true; do sleep 10 & done",
        ],
    );
    s.limits.max_processes = 24;
    let started = Instant::now();
    let out = run_for(&s, Duration::from_secs(2)).await;
    assert!(out.timed_out, "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // The cap was hit: the shell reports failed forks.
    assert!(
        out.stderr.to_lowercase().contains("fork"),
        "no fork failure reported: {out:?}"
    );
    let pgid = read_pid(&fx.ws.join("pgid"));
    let start = Instant::now();
    while !live_in_group(pgid).is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(live_in_group(pgid), Vec::<u32>::new(), "survivors");
    if is_root() && probe().pids_cgroup.is_available() {
        let cg = out
            .pids_cgroup
            .as_ref()
            .expect("root run uses a pids cgroup");
        assert!(!cg.exists(), "cgroup {} left behind", cg.display());
    }
}

#[tokio::test]
async fn memory_bomb_fails_under_the_address_space_limit() {
    let fx = fixture();
    let mut s = if Path::new("/usr/bin/python3").exists() {
        spec(
            &fx,
            &[
                "/usr/bin/python3",
                "-c",
                "x = bytearray(1024 * 1024 * 1024)",
            ],
        )
    } else {
        sh(&fx, "head -c 1073741824 /dev/zero | tail")
    };
    s.limits.address_space_bytes = 256 * 1024 * 1024;
    let out = run(&s).await;
    assert!(!out.timed_out);
    assert_ne!(out.exit_code, Some(0), "allocation succeeded: {out:?}");
    assert!(
        out.stderr.contains("MemoryError") || out.stderr.contains("memory exhausted"),
        "{out:?}"
    );
}

#[tokio::test]
async fn sleeping_past_the_timeout_is_ended() {
    let fx = fixture();
    let started = Instant::now();
    let out = run_for(
        &sh(&fx, "echo $$ > pid; exec sleep 100"),
        Duration::from_millis(500),
    )
    .await;
    assert!(out.timed_out, "{out:?}");
    assert_eq!(out.signal, Some(15), "SIGTERM should end sleep: {out:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(wait_dead(read_pid(&fx.ws.join("pid"))));
}

#[tokio::test]
async fn ignoring_sigterm_does_not_survive_the_timeout() {
    let fx = fixture();
    let started = Instant::now();
    let out = run_for(
        &sh(
            &fx,
            "echo $$ > pid; trap '' TERM; sleep 100 & echo $! > bg.pid; sleep 100",
        ),
        Duration::from_millis(500),
    )
    .await;
    assert!(out.timed_out, "{out:?}");
    assert_eq!(out.signal, Some(9), "{out:?}");
    // Timeout, then the SIGTERM grace, then SIGKILL.
    assert!(started.elapsed() >= bulwark_sandbox::TERM_GRACE);
    assert!(started.elapsed() < Duration::from_secs(20));
    for f in ["pid", "bg.pid"] {
        let pid = read_pid(&fx.ws.join(f));
        assert!(wait_dead(pid), "{f}: {pid} survived");
    }
}

#[tokio::test]
async fn environment_is_exactly_the_given_one() {
    let fx = fixture();
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let mut s = spec(&fx, &["env"]);
    s.env = vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("ONLY_THIS".into(), "yes".into()),
    ];
    let out = run(&s).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["ONLY_THIS=yes", "PATH=/usr/bin:/bin"]);
    assert!(!out.stdout.contains("BULWARK_SANDBOX_SPEC"));
}

#[tokio::test]
async fn namespaces_mounts_and_tracing_are_refused() {
    let fx = fixture();
    let mut script = String::from(
        "mkdir m; mount -t tmpfs none m; echo mount=$?; chroot / true; echo chroot=$?; ",
    );
    if have("unshare") {
        script.push_str("unshare -r true; echo unshare=$?; unshare -n true; echo unsharen=$?; ");
    }
    if have("setsid") {
        script.push_str("setsid -w true; echo setsid=$?; ");
    }
    script.push_str("mknod blk b 8 0; echo mknod=$?; ");
    for network in [false, true] {
        let mut s = sh(&fx, &script);
        s.network = network;
        let out = run(&s).await;
        for key in ["mount", "chroot", "unshare", "unsharen", "setsid", "mknod"] {
            if !script.contains(&format!("{key}=")) {
                continue;
            }
            let line = out
                .stdout
                .lines()
                .find(|l| l.starts_with(&format!("{key}=")))
                .unwrap_or_else(|| panic!("{key} not reported: {out:?}"));
            assert_ne!(line, format!("{key}=0"), "{key} succeeded: {out:?}");
        }
        assert!(!fx.ws.join("blk").exists());
    }
    if Path::new("/usr/bin/python3").exists() {
        let out = run(&spec(
            &fx,
            &[
                "/usr/bin/python3",
                "-c",
                "import ctypes, sys; sys.exit(3 if ctypes.CDLL(None).ptrace(0, 0, 0, 0) == 0 else 0)",
            ],
        ))
        .await;
        // PTRACE_TRACEME returns 0 unconfined; seccomp makes it fail.
        assert_eq!(out.exit_code, Some(0), "ptrace succeeded: {out:?}");
    }
}

#[tokio::test]
async fn signals_cannot_leave_the_sandbox() {
    if probe().landlock_abi.unwrap_or(0) < 6 {
        eprintln!("skipped: Landlock signal scoping needs ABI 6");
        return;
    }
    let fx = fixture();
    // Signal 0 only checks permission: the test process is not harmed.
    let script = format!("kill -0 {}; echo kill=$?", std::process::id());
    for network in [false, true] {
        let mut s = sh(&fx, &script);
        s.network = network;
        let out = run(&s).await;
        assert!(out.stdout.contains("kill=1"), "{out:?}");
    }
}
