//! Attacks on the process runner: leaked environment, surviving background
//! jobs, output floods; and the plain work it must still do.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use bulwark_sandbox::{ProcessSpec, SpawnError, minimal_env, run_process};

fn spec(argv: &[&str], cwd: &Path) -> ProcessSpec {
    ProcessSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: cwd.to_path_buf(),
        env: minimal_env(cwd),
        timeout: Duration::from_secs(30),
        max_output: 64 * 1024,
    }
}

fn env_keys(stdout: &str) -> BTreeSet<String> {
    stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
        .collect()
}

/// True once `pid` no longer exists or is a zombie (it has died and only
/// waits for its new parent to reap it).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            matches!(state, Some('Z') | Some('X'))
        }
    }
}

fn wait_dead(pid: u32) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if is_dead(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid")
}

#[tokio::test]
async fn env_contains_only_given_vars() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Cargo sets this in the test process; it must not reach the child.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let mut s = spec(&["env"], dir.path());
    s.env = vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("ONLY_THIS".into(), "yes".into()),
    ];
    let out = run_process(&s).await.expect("run env");
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let keys = env_keys(&out.stdout);
    let want: BTreeSet<String> = ["PATH", "ONLY_THIS"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(keys, want, "child env: {}", out.stdout);
    assert!(!out.stdout.contains("CARGO"));
}

#[tokio::test]
async fn minimal_env_is_exactly_five_vars() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_process(&spec(&["env"], dir.path())).await.expect("run");
    let keys = env_keys(&out.stdout);
    let want: BTreeSet<String> = ["PATH", "HOME", "LANG", "TERM", "TZ"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(keys, want);
    assert!(out.stdout.contains("PATH=/usr/local/bin:/usr/bin:/bin\n"));
    assert!(
        out.stdout
            .contains(&format!("HOME={}\n", dir.path().display()))
    );
}

#[tokio::test]
async fn timeout_kills_whole_group_including_background_and_term_ignoring() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = "sleep 100 & echo $! > bg.pid; \
                  (trap '' TERM; echo $$ > /dev/null; exec sleep 100) & echo $! > bg2.pid; \
                  trap '' TERM; sleep 100";
    let mut s = spec(&["sh", "-c", script], dir.path());
    s.timeout = Duration::from_secs(2);
    let started = Instant::now();
    let out = run_process(&s).await.expect("run");
    assert!(out.timed_out, "{out:?}");
    assert_eq!(out.signal, Some(9), "{out:?}");
    assert_eq!(out.exit_code, None);
    assert!(started.elapsed() < Duration::from_secs(20));
    for f in ["bg.pid", "bg2.pid"] {
        let pid = read_pid(&dir.path().join(f));
        assert!(wait_dead(pid), "background process {pid} from {f} survived");
    }
}

#[tokio::test]
async fn term_ignoring_leader_is_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(
        &[
            "sh",
            "-c",
            "trap '' TERM INT HUP; while :; do sleep 1; done",
        ],
        dir.path(),
    );
    s.timeout = Duration::from_millis(300);
    let out = run_process(&s).await.expect("run");
    assert!(out.timed_out);
    assert_eq!(out.signal, Some(9));
}

#[tokio::test]
async fn background_job_does_not_outlive_normal_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = spec(
        &["sh", "-c", "sleep 100 & echo $! > bg.pid; echo done"],
        dir.path(),
    );
    let started = Instant::now();
    let out = run_process(&s).await.expect("run");
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.timed_out);
    assert_eq!(out.stdout, "done\n");
    // The background sleep holds stdout open; returning promptly shows the
    // group was killed rather than waited for.
    assert!(started.elapsed() < Duration::from_secs(20));
    let pid = read_pid(&dir.path().join("bg.pid"));
    assert!(wait_dead(pid), "background process {pid} survived");
}

#[tokio::test]
async fn output_is_capped_and_child_not_blocked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(
        &[
            "sh",
            "-c",
            "yes | head -c 10000000; yes err | head -c 100000 >&2",
        ],
        dir.path(),
    );
    s.max_output = 1000;
    let out = run_process(&s).await.expect("run");
    assert!(!out.timed_out, "child blocked on a full pipe: {out:?}");
    assert_eq!(out.exit_code, Some(0));
    assert!(out.truncated);
    assert_eq!(out.stdout.len(), 1000);
    assert_eq!(out.stderr.len(), 1000);
}

#[tokio::test]
async fn exit_codes_signals_and_streams() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_process(&spec(
        &["sh", "-c", "echo out; echo err >&2; exit 3"],
        dir.path(),
    ))
    .await
    .expect("run");
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.signal, None);
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert!(!out.truncated);

    let out = run_process(&spec(&["sh", "-c", "kill -9 $$"], dir.path()))
        .await
        .expect("run");
    assert_eq!((out.exit_code, out.signal), (None, Some(9)));

    let out = run_process(&spec(&["true"], dir.path()))
        .await
        .expect("run");
    assert_eq!(out.exit_code, Some(0));
}

#[tokio::test]
async fn argv_is_not_interpreted_by_a_shell_and_stdin_is_null() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_process(&spec(&["echo", "$HOME; rm -rf / `id`"], dir.path()))
        .await
        .expect("run");
    assert_eq!(out.stdout, "$HOME; rm -rf / `id`\n");
    let mut s = spec(&["cat"], dir.path());
    s.timeout = Duration::from_secs(10);
    let out = run_process(&s).await.expect("run");
    assert!(!out.timed_out && out.stdout.is_empty());
    let out = run_process(&spec(&["pwd"], dir.path())).await.expect("run");
    let cwd = std::fs::canonicalize(dir.path()).expect("canon");
    assert_eq!(out.stdout.trim_end(), cwd.display().to_string());
}

#[tokio::test]
async fn spawn_errors_are_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    for prog in ["bulwark-definitely-not-a-program", "/nonexistent/bin/prog"] {
        match run_process(&spec(&[prog], dir.path())).await {
            Err(e @ SpawnError::NotFound { .. }) => {
                assert!(e.to_string().contains(prog), "{e}");
            }
            other => panic!("{prog}: expected NotFound, got {other:?}"),
        }
    }
    assert!(matches!(
        run_process(&spec(&[], dir.path())).await,
        Err(SpawnError::EmptyArgv)
    ));
    let missing = dir.path().join("missing");
    assert!(matches!(
        run_process(&spec(&["true"], &missing)).await,
        Err(SpawnError::InvalidSpec { .. })
    ));
    let mut s = spec(&["true"], dir.path());
    s.env.push(("A=B".into(), "x".into()));
    assert!(matches!(
        run_process(&s).await,
        Err(SpawnError::InvalidSpec { .. })
    ));
}

#[tokio::test]
async fn private_home_is_fresh_outside_the_workspace_and_removed() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join(".gitconfig"), "[core]\n").unwrap();
    let home = bulwark_sandbox::PrivateHome::create().expect("private home");
    let path = home.path().to_path_buf();
    assert!(!path.starts_with(ws.path()));
    let mut env = bulwark_sandbox::minimal_env(ws.path());
    env.push(("XDG_CONFIG_HOME".into(), ws.path().display().to_string()));
    let mut s = spec(
        &[
            "sh",
            "-c",
            "echo $HOME; ls -A $HOME; echo x=$XDG_CONFIG_HOME",
        ],
        ws.path(),
    );
    s.env = home.apply(&env);
    let out = run_process(&s).await.unwrap();
    assert_eq!(out.stdout, format!("{}\nx=\n", path.display()), "{out:?}");
    drop(home);
    assert!(!path.exists(), "the private HOME was left behind");
}
