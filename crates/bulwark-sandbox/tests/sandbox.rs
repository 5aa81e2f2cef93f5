//! Escape attempts from a sandboxed command, each of which must be refused.
//! They run as root in CI, where only the sandbox (not file permissions)
//! stands between the command and the rest of the machine.

use crate::common;

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
    // Not in the private root at all (or, without it, denied by Landlock).
    assert!(
        out.stderr.contains("No such file or directory")
            || out.stderr.contains("Permission denied"),
        "{out:?}"
    );
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
    // The command's /tmp is its own: what it makes there is not the host's.
    let host_tmp = std::env::temp_dir().join(format!("bulwark-escape-{}", std::process::id()));
    let script = format!(
        "echo pwned > '{new}'; echo a=$?; echo pwned >> '{secret}'; echo b=$?; \
         rm '{secret}'; echo c=$?; mkdir '{tmp}'; echo d=$?; \
         echo ok > mine; echo e=$?",
        new = new.display(),
        secret = secret.display(),
        tmp = host_tmp.display(),
    );
    let out = run(&sh(&fx, &script)).await;
    for refused in ["a=2", "b=2", "c=1"] {
        assert!(out.stdout.contains(refused), "{refused}: {out:?}");
    }
    assert!(out.stdout.contains("e=0"), "{out:?}");
    assert!(!new.exists());
    assert!(
        !host_tmp.exists(),
        "the command wrote the host's /tmp: {out:?}"
    );
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
    // `ls` of the link lists at most the (dangling) link itself.
    assert!(!out.stdout.contains("secret"), "{out:?}");
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
    // Plus the sandbox's own HOME, XDG directories and private TMPDIR.
    let home = bulwark_sandbox::SANDBOX_HOME;
    let expected = [
        format!("HOME={home}"),
        "ONLY_THIS=yes".into(),
        "PATH=/usr/bin:/bin".into(),
        "TMPDIR=/tmp".into(),
        format!("XDG_CACHE_HOME={home}/.cache"),
        format!("XDG_CONFIG_HOME={home}/.config"),
        format!("XDG_DATA_HOME={home}/.local/share"),
        format!("XDG_STATE_HOME={home}/.local/state"),
    ];
    assert_eq!(lines, expected);
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

const PYTHON: &str = "/usr/bin/python3";

/// Connect to each path (`@name` = abstract) and print `OPEN <path>` or
/// `refused <path> <errno>`.
const CONNECT_PY: &str = r"import socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect('\0' + p[1:] if p.startswith('@') else p)
        print('OPEN', p)
    except OSError as e:
        print('refused', p, e.errno)
";

#[tokio::test]
async fn host_unix_sockets_are_unreachable() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    assert!(
        Path::new(PYTHON).exists(),
        "this test needs {PYTHON} to connect to sockets from inside the sandbox"
    );
    assert!(
        probe().mount_namespaces.is_available(),
        "no mount namespaces here, so host sockets are reachable: {}",
        probe().mount_namespaces.detail()
    );
    let fx = fixture();
    let mut listeners = Vec::new();
    let mut targets = Vec::new();
    // A socket outside the workspace, in a temporary directory.
    let outside = fx.outside.join("agent.sock");
    listeners.push(UnixListener::bind(&outside).expect("bind outside socket"));
    targets.push(outside.display().to_string());
    // One under the host's /run, like a root-only daemon socket.
    let run_dir = Path::new("/run").join(format!("bulwark-test-{}", std::process::id()));
    match std::fs::create_dir_all(&run_dir) {
        Ok(()) => {
            let sock = run_dir.join("daemon.sock");
            listeners.push(UnixListener::bind(&sock).expect("bind /run socket"));
            targets.push(sock.display().to_string());
        }
        Err(e) => eprintln!("not testing a socket under /run ({e}): only root can create one"),
    }
    // An abstract socket: scoped by the network namespace (no network)
    // and Landlock scoping (network).
    let name = format!("bulwark-test-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name");
    listeners.push(UnixListener::bind_addr(&addr).expect("bind abstract socket"));
    targets.push(format!("@{name}"));
    for l in &listeners {
        l.set_nonblocking(true).expect("nonblocking");
    }
    // A control inside the workspace shows the probe itself works.
    let inside = fx.ws.join("own.sock");
    let own = UnixListener::bind(&inside).expect("bind workspace socket");
    own.set_nonblocking(true).expect("nonblocking");
    for network in [false, true] {
        let mut argv = vec![PYTHON, "-c", CONNECT_PY, "own.sock"];
        argv.extend(targets.iter().map(String::as_str));
        let mut s = spec(&fx, &argv);
        s.network = network;
        let out = run(&s).await;
        assert_eq!(out.exit_code, Some(0), "{out:?}");
        assert!(out.stdout.contains("OPEN own.sock"), "{out:?}");
        for t in &targets {
            assert!(
                out.stdout.contains(&format!("refused {t} ")),
                "network={network}: {t} was reachable: {out:?}"
            );
        }
        for l in &listeners {
            assert!(l.accept().is_err(), "a host listener was reached: {out:?}");
        }
        let _ = own.accept();
    }
    let _ = std::fs::remove_dir_all(&run_dir);
}

#[tokio::test]
async fn setid_bits_are_refused() {
    let fx = fixture();
    let script = "cp /bin/sh suid; chmod 4755 suid; echo a=$?; chmod g+s suid; echo b=$?; \
                  chmod u+s suid; echo c=$?; \
                  python3 -c \"import os; os.open('made', os.O_CREAT | os.O_WRONLY, 0o6755)\"; \
                  echo d=$?; touch plain; chmod 755 plain; echo e=$?; chmod +x plain; echo f=$?; \
                  mkdir dir; chmod 2775 dir; echo g=$?";
    for network in [false, true] {
        let mut s = sh(&fx, script);
        s.network = network;
        let out = run(&s).await;
        for refused in ["a=1", "b=1", "c=1", "d=1", "g=1"] {
            assert!(out.stdout.contains(refused), "{refused}: {out:?}");
        }
        for allowed in ["e=0", "f=0"] {
            assert!(out.stdout.contains(allowed), "{allowed}: {out:?}");
        }
        for entry in std::fs::read_dir(&fx.ws).expect("read ws") {
            use std::os::unix::fs::PermissionsExt;
            let entry = entry.expect("entry");
            let mode = entry.metadata().expect("metadata").permissions().mode();
            assert_eq!(
                mode & 0o6000,
                0,
                "{} has set-id bits ({mode:o}): {out:?}",
                entry.path().display()
            );
        }
        for name in ["suid", "made", "plain", "dir"] {
            let _ = std::fs::remove_file(fx.ws.join(name));
            let _ = std::fs::remove_dir(fx.ws.join(name));
        }
    }
}

#[tokio::test]
async fn memory_limit_bounds_the_whole_process_tree() {
    assert!(Path::new(PYTHON).exists(), "this test needs {PYTHON}");
    let support = probe();
    if !support.memory_cgroup.is_available() {
        // Not a pass: the limit is per process here, which is the hole.
        eprintln!(
            "MEMORY CGROUP UNAVAILABLE: only RLIMIT_AS bounds memory on this machine ({}); \
             checking that the runner reports it",
            support.memory_cgroup.detail()
        );
        assert!(support.to_string().contains("memory cgroup"));
        assert!(support.memory_cgroup.detail().contains("RLIMIT_AS"));
        return;
    }
    let fx = fixture();
    const MIB: u64 = 1024 * 1024;
    // Each child touches 64 MiB and holds it for a while; the command's
    // limit is 128 MiB in total (and per process, under RLIMIT_AS).
    let child = "import time; b = b'x' * (64 << 20); time.sleep(3); print('survived')";
    let three = format!("for i in 1 2 3; do {PYTHON} -c \"{child}\" & done; wait; echo done");
    let mut s = sh(&fx, &three);
    s.limits.address_space_bytes = 128 * MIB;
    let out = run(&s).await;
    assert!(out.stdout.contains("done"), "{out:?}");
    let survivors = out.stdout.matches("survived").count();
    assert!(
        survivors < 3,
        "three 64 MiB children ran side by side under a 128 MiB limit: {out:?}"
    );
    let mut s = spec(&fx, &[PYTHON, "-c", child]);
    s.limits.address_space_bytes = 128 * MIB;
    let out = run(&s).await;
    assert_eq!(out.exit_code, Some(0), "one child under the limit: {out:?}");
    assert!(out.stdout.contains("survived"), "{out:?}");
}

#[tokio::test]
async fn home_and_repository_config_cannot_steer_git() {
    assert!(have("git"), "this test needs git");
    let fx = fixture();
    let marker = fx.ws.join("pwned-marker");
    let payload = format!(
        "[core]\n\tfsmonitor = \"touch {}; false\"\n",
        marker.display()
    );
    // What an agent's file tools could write: a ~/.gitconfig in the
    // workspace (HOME used to be the workspace) and an XDG git config.
    std::fs::write(fx.ws.join(".gitconfig"), &payload).expect("write .gitconfig");
    std::fs::create_dir_all(fx.ws.join(".config/git")).expect("mkdir");
    std::fs::write(fx.ws.join(".config/git/config"), &payload).expect("write xdg config");
    let init = run(&sh(
        &fx,
        "git init -q && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x",
    ))
    .await;
    assert_eq!(init.exit_code, Some(0), "{init:?}");
    let mut s = spec(&fx, &["git", "status", "--short"]);
    // Even when the caller passes the workspace as HOME.
    s.env.retain(|(k, _)| k != "HOME");
    s.env.push(("HOME".into(), fx.ws.display().to_string()));
    s.env.push((
        "XDG_CONFIG_HOME".into(),
        fx.ws.join(".config").display().to_string(),
    ));
    let out = run(&s).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(!marker.exists(), "git ran the planted fsmonitor: {out:?}");
    // The repository's config and hooks are read-only to commands.
    let hooks = fx.ws.join(".git/hooks");
    std::fs::create_dir_all(&hooks).expect("hooks dir");
    let out = run(&sh(
        &fx,
        "echo x >> .git/config; echo a=$?; echo '#!/bin/sh' > .git/hooks/pre-commit; echo b=$?; \
         git config core.fsmonitor 'touch pwned'; echo c=$?; echo ok > file; echo d=$?; \
         git add file && git -c user.name=t -c user.email=t@t commit -q -m y; echo e=$?; \
         echo x > $HOME/.gitconfig; echo f=$?",
    ))
    .await;
    for expected in ["a=2", "b=2", "c=", "d=0", "e=0", "f=0"] {
        assert!(out.stdout.contains(expected), "{expected}: {out:?}");
    }
    assert!(
        !out.stdout.contains("c=0"),
        "git config wrote .git/config: {out:?}"
    );
    let config = std::fs::read_to_string(fx.ws.join(".git/config")).expect("config");
    assert!(
        !config.contains("fsmonitor") && !config.ends_with("x\n"),
        "{config}"
    );
    assert!(!hooks.join("pre-commit").exists());
    // HOME is per command: what one wrote there is gone for the next.
    let out = run(&sh(&fx, "cat $HOME/.gitconfig; echo g=$?")).await;
    assert!(out.stdout.contains("g=1"), "{out:?}");
}
