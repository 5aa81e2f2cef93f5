//! Work a sandboxed command must still be able to do, and the mechanics of
//! the runner and helper (exit codes, caps, strict vs permissive).

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bulwark_sandbox::{Enforcement, SPEC_ENV, SandboxError, probe, run_sandboxed};
use common::*;

#[tokio::test]
async fn compiles_and_runs_a_c_program() {
    if !have("cc") {
        eprintln!("skipped: cc is not installed (scripts/test installs build-essential)");
        return;
    }
    let fx = fixture();
    let out = run(&sh(
        &fx,
        "printf 'int main(){return 7;}' > a.c && cc a.c -o a && ./a",
    ))
    .await;
    assert_eq!(out.exit_code, Some(7), "{out:?}");
}

#[tokio::test]
async fn git_init_commit_and_log() {
    let fx = fixture();
    let out = run(&sh(
        &fx,
        "git init -q && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x \
         && git log --format=%s",
    ))
    .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "x\n", "{out:?}");
}

#[tokio::test]
async fn system_libraries_and_binaries_are_usable() {
    let fx = fixture();
    let out = run(&spec(&fx, &["ls", "/usr/lib"])).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(!out.stdout.is_empty());
    let out = run(&spec(&fx, &["/bin/true"])).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(out.warnings.is_empty(), "strict run with warnings: {out:?}");
}

#[tokio::test]
async fn created_files_keep_the_callers_owner() {
    let fx = fixture();
    let out = run(&sh(&fx, "mkdir d && echo hi > d/f && id -u")).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let me = std::fs::metadata("/proc/self").expect("self").uid();
    let meta = std::fs::metadata(fx.ws.join("d/f")).expect("created");
    assert_eq!(meta.uid(), me);
    assert_eq!(out.stdout.trim(), me.to_string(), "uid inside differs");
}

#[tokio::test]
async fn exit_codes_streams_and_caps() {
    let fx = fixture();
    let out = run(&sh(&fx, "echo out; echo err >&2; exit 3")).await;
    assert_eq!((out.exit_code, out.signal), (Some(3), None));
    assert_eq!(
        (out.stdout.as_str(), out.stderr.as_str()),
        ("out\n", "err\n")
    );
    assert!(!out.stdout_truncated && !out.stderr_truncated && !out.timed_out);

    let s = sh(&fx, "yes | head -c 1000000; yes e | head -c 100000 >&2");
    let out = run_sandboxed(Path::new(HELPER), &s, Duration::from_secs(60), 1000)
        .await
        .expect("run");
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(out.stdout_truncated && out.stderr_truncated);
    assert_eq!((out.stdout.len(), out.stderr.len()), (1000, 1000));
}

#[tokio::test]
async fn background_jobs_do_not_outlive_a_normal_exit() {
    let fx = fixture();
    let started = Instant::now();
    let out = run(&sh(&fx, "sleep 100 & echo $! > bg.pid; echo done")).await;
    assert_eq!((out.exit_code, out.stdout.as_str()), (Some(0), "done\n"));
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(wait_dead(read_pid(&fx.ws.join("bg.pid"))));
}

#[tokio::test]
async fn missing_command_exits_127_with_a_clear_line() {
    let fx = fixture();
    let out = run(&spec(&fx, &["bulwark-definitely-not-a-program"])).await;
    assert_eq!(out.exit_code, Some(127), "{out:?}");
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("command not found") && w.contains("bulwark-definitely")),
        "{out:?}"
    );
}

#[tokio::test]
async fn extra_directories_are_granted_as_asked() {
    let fx = fixture();
    let ro = tempfile::tempdir().expect("ro");
    let rw = tempfile::tempdir().expect("rw");
    std::fs::write(ro.path().join("tool"), "readable").expect("write");
    let mut s = sh(
        &fx,
        &format!(
            "cat {ro}/tool; echo > {ro}/new; echo ro=$?; echo w > {rw}/new; echo rw=$?",
            ro = ro.path().display(),
            rw = rw.path().display()
        ),
    );
    s.read_only.push(ro.path().to_path_buf());
    s.read_write.push(rw.path().to_path_buf());
    let out = run(&s).await;
    assert!(out.stdout.starts_with("readable"), "{out:?}");
    assert!(
        out.stdout.contains("ro=2") && out.stdout.contains("rw=0"),
        "{out:?}"
    );
    assert!(!ro.path().join("new").exists());
    assert!(rw.path().join("new").exists());
}

#[tokio::test]
async fn invalid_specs_are_typed_errors() {
    let fx = fixture();
    let helper = Path::new(HELPER);
    let t = Duration::from_secs(5);
    let mut s = spec(&fx, &["true"]);
    s.pids_cgroup = Some("/sys/fs/cgroup/pids".into());
    let e = run_sandboxed(helper, &s, t, 10).await.expect_err("cgroup");
    assert!(matches!(e, SandboxError::InvalidSpec(_)), "{e}");
    let mut s = spec(&fx, &["true"]);
    s.workspace = fx.ws.join("missing");
    let e = run_sandboxed(helper, &s, t, 10)
        .await
        .expect_err("workspace");
    assert!(e.to_string().contains("workspace"), "{e}");
    let s = spec(&fx, &[]);
    assert!(run_sandboxed(helper, &s, t, 10).await.is_err());
    let s = spec(&fx, &["true"]);
    let e = run_sandboxed(Path::new("/nonexistent/helper"), &s, t, 10)
        .await
        .expect_err("helper");
    assert!(matches!(e, SandboxError::Helper { .. }), "{e}");
}

#[test]
fn helper_refuses_to_run_without_a_spec() {
    let out = Command::new(HELPER)
        .arg("__sandbox-exec")
        .env_clear()
        .output()
        .expect("helper runs");
    assert_eq!(out.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("bulwark-sandbox: invalid spec:"),
        "{stderr}"
    );
    let out = Command::new(HELPER).output().expect("helper runs");
    assert_eq!(out.status.code(), Some(125));
}

/// Drive the helper directly with a pids cgroup that cannot be joined: the
/// one feature failure that can be staged on any machine.
fn helper_with_unjoinable_cgroup(enforcement: Enforcement) -> std::process::Output {
    let fx = fixture();
    let mut s = spec(&fx, &["echo", "ran"]);
    s.enforcement = enforcement;
    s.pids_cgroup = Some(fx.ws.join("not-a-cgroup"));
    let json = serde_json::to_string(&s).expect("json");
    Command::new(HELPER)
        .arg("__sandbox-exec")
        .env_clear()
        .env(SPEC_ENV, json)
        .output()
        .expect("helper runs")
}

#[test]
fn strict_mode_refuses_when_a_feature_is_missing() {
    let out = helper_with_unjoinable_cgroup(Enforcement::Strict);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.starts_with("bulwark-sandbox: pids cgroup unavailable: "),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(out.stdout.is_empty(), "the command ran");
}

#[test]
fn permissive_mode_warns_and_runs() {
    let out = helper_with_unjoinable_cgroup(Enforcement::Permissive);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("bulwark-sandbox: WARNING: running without pids cgroup: ")),
        "{stderr}"
    );
}

#[test]
fn probe_reports_a_table() {
    let support = probe();
    let table = support.to_string();
    eprintln!("{table}");
    assert_eq!(table.lines().count(), 9);
    for l in table.lines() {
        assert!(l.contains(" ok ") || l.contains(" MISSING "), "{l}");
    }
    assert_eq!(
        support.landlock.is_available(),
        support.landlock_abi.is_some()
    );
    // Cached, and probing did not move us into a namespace.
    assert_eq!(probe(), support);
    let ns = |n: &str| std::fs::read_link(format!("/proc/self/ns/{n}")).expect("ns");
    let before = (ns("user"), ns("net"));
    let _ = probe();
    assert_eq!((ns("user"), ns("net")), before);
    if is_root() {
        assert!(!support.rlimit_nproc.is_available());
    }
}

#[tokio::test]
async fn private_tmp_home_and_tools_work() {
    let fx = fixture();
    let python = if have("python3") {
        "python3 -c 'print(6*7)'"
    } else {
        "echo 42"
    };
    let script = format!(
        "echo t > /tmp/t && cat /tmp/t && echo h > $HOME/h && cat $HOME/h && \
         test \"$TMPDIR\" = /tmp && ls /etc/ssl >/dev/null && {python} && \
         git init -q repo && cd repo && git status --short && echo done"
    );
    let out = run(&sh(&fx, &script)).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "t\nh\n42\ndone\n", "{out:?}");
    // Nothing was created in the workspace but what the command made.
    let names: Vec<String> = std::fs::read_dir(&fx.ws)
        .expect("ws")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["repo"]);
}
