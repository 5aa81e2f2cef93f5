//! Self-hardening at start, and the `sandbox` commands.

use crate::common;

use common::{BIN, Bw};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn refuses_to_start_under_loader_injection() {
    let bw = Bw::empty();
    for var in ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"] {
        let out = bw.cmd(&["agents", "list"]).env(var, "/tmp/evil.so").run();
        out.expect_code(2);
        assert!(
            out.stderr.contains(var) && out.stderr.contains("refuses"),
            "{var}: {}",
            out.stderr
        );
    }
}

/// A running `bulwark chat` holds its secrets in memory only: they are gone
/// from its environment, and it may not dump core.
#[test]
fn secrets_leave_the_process_environment() {
    let bw = Bw::init();
    let mut child = Command::new(BIN)
        .args(["--home", &bw.home().display().to_string(), "chat", "demo"])
        .env_remove("LD_LIBRARY_PATH")
        .env("BW_HARDENING_SECRET", "hardening-secret-value-77")
        .env("ANTHROPIC_API_KEY", "sk-ant-hardening-test-key")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bulwark chat starts");
    let environ = format!("/proc/{}/environ", child.id());
    let limits = format!("/proc/{}/limits", child.id());
    // Wait until it is past start-up (the chat prompt reads stdin).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut env_text = String::new();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        env_text = std::fs::read(&environ)
            .map(|b| String::from_utf8_lossy(&b).to_string())
            .unwrap_or_default();
        if !env_text.contains("BW_HARDENING_SECRET") {
            break;
        }
    }
    let limits_text = std::fs::read_to_string(&limits).unwrap_or_default();
    drop(child.stdin.take());
    let _ = child.kill();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let _ = child.wait();
    assert!(
        !env_text.is_empty(),
        "could not read {environ}; stderr: {stderr}"
    );
    assert!(
        !env_text.contains("hardening-secret-value-77"),
        "{env_text}"
    );
    assert!(
        !env_text.contains("sk-ant-hardening-test-key"),
        "{env_text}"
    );
    let core = limits_text
        .lines()
        .find(|l| l.starts_with("Max core file size"))
        .unwrap_or_default()
        .split_whitespace()
        .skip(4)
        .take(2)
        .collect::<Vec<_>>();
    assert_eq!(core, ["0", "0"], "{limits_text}");
}

#[test]
fn sandbox_check_and_exec() {
    let bw = Bw::empty();
    let out = bw.run(&["sandbox", "check"]);
    out.ok();
    for layer in [
        "landlock",
        "seccomp",
        "user namespaces",
        "network namespaces",
    ] {
        assert!(out.stdout.contains(layer), "{}", out.stdout);
    }
    let ws = tempfile::tempdir().unwrap();
    let ws_path = ws.path().display().to_string();
    let run = |args: &[&str]| {
        let mut all = vec![
            "sandbox",
            "exec",
            "--workspace",
            &ws_path,
            "--timeout",
            "5",
            "--",
        ];
        all.extend_from_slice(args);
        bw.run(&all)
    };
    let out = run(&["sh", "-c", "echo made > made.txt && cat made.txt"]);
    out.ok();
    assert_eq!(out.stdout.trim(), "made");
    let out = run(&["cat", "/etc/shadow"]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    // Not in the command's private root at all (or, without a mount
    // namespace, refused by Landlock).
    assert!(
        out.stderr.contains("No such file or directory")
            || out.stderr.contains("Permission denied"),
        "{}",
        out.stderr
    );
    let out = run(&["sleep", "30"]);
    assert_eq!(out.code, Some(124), "{}", out.stderr);
    let out = run(&["no-such-program-xyz"]);
    assert_eq!(out.code, Some(127), "{}", out.stderr);
}
