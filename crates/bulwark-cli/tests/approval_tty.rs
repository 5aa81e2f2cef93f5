//! Interactive approval in `bulwark chat`: the approver only asks when stdin
//! is a terminal, so these tests run the binary under a pseudo-terminal made
//! by util-linux `script`, typing into it through `script`'s stdin.
//!
//! Assertions are on the workspace and the audit log; the terminal output is
//! only checked for the approval prompt itself (proof that the terminal path,
//! not the headless denial, answered).

use crate::common;

use common::{BIN, Bw, field, scripted, with_action};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(20);
const PROMPT: &str = "allow [o]nce, allow for this [s]ession, or [d]eny?";

use crate::common::WRITER;

/// Three writes, one per model turn, then a final text.
const SCRIPT: &str = r#"{"tool_calls": [{"name": "file_write", "input": {"path": "out/a.txt", "content": "A"}}]}
{"tool_calls": [{"name": "file_write", "input": {"path": "out/b.txt", "content": "B"}}]}
{"tool_calls": [{"name": "file_write", "input": {"path": "out/c.txt", "content": "C"}}]}
{"text": "all three handled"}
"#;

/// util-linux `script` on PATH. Its absence is a failure, not a skip: the
/// interactive approval path would otherwise go untested.
fn script_binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("script"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "util-linux `script` is not on PATH; these tests need it to give `bulwark chat` \
                 a terminal. Install it (Debian/Ubuntu: `apt-get install bsdutils`, \
                 Fedora: `util-linux-script`)."
            )
        })
}

/// Single-quoted for `sh -c`.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

struct TtyOut {
    code: Option<i32>,
    /// Everything the terminal showed (stdout and stderr of `bulwark`, and
    /// the echo of what was typed).
    screen: String,
}

/// Kills the child if the test unwinds, so no `script` outlives the suite.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs `bulwark --home H chat <agent>` on a pseudo-terminal and types
/// `lines`. Typed lines wait in the terminal's line buffer and are read one
/// per `read`, so the chat prompt and each approval prompt take them in
/// order. stdin stays open until the child exits; after [`TIMEOUT`] it is
/// killed and the test fails.
fn chat_on_tty(bw: &Bw, agent: &str, lines: &[&str]) -> TtyOut {
    let command = format!(
        "{} --home {} chat {}",
        sh_quote(BIN),
        sh_quote(&bw.home().display().to_string()),
        sh_quote(agent)
    );
    let mut cmd = Command::new(script_binary());
    // -q quiet, -f flush, -e child's exit status, -c command; no typescript.
    cmd.args(["-q", "-f", "-e", "-c", &command, "/dev/null"]);
    for var in common::SCRUBBED {
        cmd.env_remove(var);
    }
    cmd.env("SHELL", "/bin/sh")
        .env("TERM", "dumb")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut guard = Guard(cmd.spawn().expect("`script` starts"));
    let child = &mut guard.0;

    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    });

    let mut stdin = child.stdin.take().expect("stdin is piped");
    let mut typed = String::new();
    for line in lines {
        typed.push_str(line);
        typed.push('\n');
    }
    stdin
        .write_all(typed.as_bytes())
        .expect("type into the terminal");
    stdin.flush().expect("flush the typed lines");

    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll `script`") {
            break Some(status);
        }
        if started.elapsed() > TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        let screen = reader.join().unwrap_or_default();
        panic!(
            "`bulwark chat` on a terminal did not finish within {} s; typed {lines:?}; screen:\n{screen}",
            TIMEOUT.as_secs()
        );
    };
    let screen = reader.join().expect("the stdout reader finishes");
    let script_err = err_reader.join().expect("the stderr reader finishes");
    assert!(
        script_err.trim().is_empty(),
        "`script` complained: {script_err}"
    );
    TtyOut {
        code: status.code(),
        screen,
    }
}

fn writer() -> Bw {
    let bw = Bw::empty();
    bw.agent("writer", &scripted("writer", WRITER), Some(SCRIPT));
    bw
}

/// Which of out/a.txt, out/b.txt, out/c.txt exist, with their contents.
fn written(bw: &Bw) -> Vec<(&'static str, String)> {
    ["a", "b", "c"]
        .into_iter()
        .filter_map(|name| {
            let path = bw.workspace_file("writer", &format!("out/{name}.txt"));
            std::fs::read_to_string(path).ok().map(|c| (name, c))
        })
        .collect()
}

/// `(decision, detail)` of each approval record, in order.
fn approvals(records: &[serde_json::Value]) -> Vec<(String, String)> {
    with_action(records, "approval")
        .into_iter()
        .map(|r| {
            assert_eq!(field(r, "tool"), "file_write", "{r}");
            assert_eq!(field(r, "reason"), "approval", "{r}");
            (field(r, "decision").into(), field(r, "detail").into())
        })
        .collect()
}

/// `(decision, reason)` of each tool_call record, in order.
fn tool_calls(records: &[serde_json::Value]) -> Vec<(String, String)> {
    with_action(records, "tool_call")
        .into_iter()
        .map(|r| {
            assert_eq!(field(r, "tool"), "file_write", "{r}");
            (field(r, "decision").into(), field(r, "reason").into())
        })
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[track_caller]
fn assert_prompts(out: &TtyOut, expected: usize) {
    assert_eq!(out.code, Some(0), "exit status; screen:\n{}", out.screen);
    assert!(
        !out.screen.contains("nobody is at a terminal"),
        "the approver did not see a terminal:\n{}",
        out.screen
    );
    assert_eq!(
        out.screen.matches(PROMPT).count(),
        expected,
        "approval prompts shown; screen:\n{}",
        out.screen
    );
}

/// `s` at the first prompt allows every later write in the session without
/// asking again; the one approval is audited as such.
#[test]
fn allow_for_session_covers_later_calls_without_asking() {
    let bw = writer();
    let out = chat_on_tty(&bw, "writer", &["write the three files", "s", "/exit"]);
    assert_prompts(&out, 1);
    assert!(out.screen.contains("all three handled"), "{}", out.screen);
    assert_eq!(
        written(&bw),
        [("a", "A".into()), ("b", "B".into()), ("c", "C".into())]
    );

    let records = bw.audit();
    assert_eq!(
        approvals(&records),
        pairs(&[("approved", "allowed for the session")]),
        "{records:#?}"
    );
    assert_eq!(
        tool_calls(&records),
        pairs(&[("allowed", "ok"), ("allowed", "ok"), ("allowed", "ok")]),
        "{records:#?}"
    );
}

/// `d` denies: nothing is written, every denial is audited with reason
/// `approval`, and a denial is not remembered as a blanket answer (each
/// later write asks again).
#[test]
fn deny_writes_nothing() {
    let bw = writer();
    let out = chat_on_tty(
        &bw,
        "writer",
        &["write the three files", "d", "d", "d", "/exit"],
    );
    assert_prompts(&out, 3);
    assert_eq!(written(&bw), []);
    assert!(
        !bw.workspace_file("writer", "out").exists(),
        "a denied write created its directory"
    );

    let records = bw.audit();
    assert_eq!(
        approvals(&records),
        pairs(&[
            ("denied", "denied by approver"),
            ("denied", "denied by approver"),
            ("denied", "denied by approver"),
        ]),
        "{records:#?}"
    );
    assert_eq!(
        tool_calls(&records),
        pairs(&[
            ("denied", "approval"),
            ("denied", "approval"),
            ("denied", "approval"),
        ]),
        "{records:#?}"
    );
}

/// `o` allows exactly one call: the next write asks again (and is denied
/// here), the one after asks again too.
#[test]
fn allow_once_asks_again_for_the_next_call() {
    let bw = writer();
    let out = chat_on_tty(
        &bw,
        "writer",
        &["write the three files", "o", "d", "o", "/exit"],
    );
    assert_prompts(&out, 3);
    assert_eq!(written(&bw), [("a", "A".into()), ("c", "C".into())]);

    let records = bw.audit();
    assert_eq!(
        approvals(&records),
        pairs(&[
            ("approved", "allowed once"),
            ("denied", "denied by approver"),
            ("approved", "allowed once"),
        ]),
        "{records:#?}"
    );
    assert_eq!(
        tool_calls(&records),
        pairs(&[("allowed", "ok"), ("denied", "approval"), ("allowed", "ok")]),
        "{records:#?}"
    );
}

/// An answer that is not one of the choices is asked again, never taken
/// as a yes.
#[test]
fn unrecognised_answers_are_asked_again() {
    let bw = writer();
    let out = chat_on_tty(
        &bw,
        "writer",
        &["write the three files", "maybe", "", "d", "d", "d", "/exit"],
    );
    // The first approval shows the question three times (two re-asks).
    assert_prompts(&out, 5);
    assert_eq!(written(&bw), []);
    let records = bw.audit();
    assert_eq!(approvals(&records).len(), 3, "{records:#?}");
    assert!(
        approvals(&records).iter().all(|(d, _)| d == "denied"),
        "{records:#?}"
    );
}

/// "Allow for this session" is an answer given by a person at this terminal
/// to this conversation: a later headless run resuming the same session must
/// ask again, and with nobody at a terminal that means it is denied.
#[test]
fn session_approval_does_not_carry_into_a_headless_resume() {
    let bw = Bw::init();
    let script = r#"{"tool_calls": [{"name": "file_write", "input": {"path": "out/a.txt", "content": "A"}}]}
{"text": "first done"}
{"tool_calls": [{"name": "file_write", "input": {"path": "out/d.txt", "content": "D"}}]}
{"text": "second done"}
"#;
    bw.agent("writer", &scripted("writer", WRITER), Some(script));
    let out = chat_on_tty(&bw, "writer", &["write a", "s", "/exit"]);
    assert_prompts(&out, 1);
    assert_eq!(written(&bw), [("a", "A".into())]);
    let sessions = bw.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let id = sessions[0].0.clone();

    let headless = bw.run(&["run", "writer", "write d", "--session", &id]);
    headless.ok();
    assert!(
        !bw.workspace_file("writer", "out/d.txt").exists(),
        "the session approval leaked into a headless run"
    );
    let records = bw.audit();
    let calls = tool_calls(&records);
    assert_eq!(
        calls.last(),
        Some(&("denied".to_string(), "approval".to_string())),
        "{records:#?}"
    );
}

/// Escape sequences in model output (a tool name, arguments, answer text)
/// never reach the terminal raw, so a model cannot paint a fake "allowed"
/// mark or a fake approval prompt.
#[test]
fn model_text_cannot_inject_terminal_escapes() {
    let bw = Bw::init();
    let script = "{\"text\": \"hi\\u001b[2K\\u001b[31m\", \"tool_calls\": [{\"name\": \"evil\\n    \\u2713 allowed\\u001b[2K\", \"input\": {\"x\": \"\\u001b]0;title\\u0007\"}}]}\n{\"text\": \"bye\\u009b31m\"}\n";
    bw.agent("painter", &scripted("painter", WRITER), Some(script));
    let out = bw.run(&["run", "painter", "go"]);
    out.ok();
    for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(!text.contains('\u{1b}'), "ESC on {stream}: {text:?}");
        assert!(!text.contains('\u{9b}'), "CSI on {stream}: {text:?}");
        assert!(!text.contains('\u{7}'), "BEL on {stream}: {text:?}");
    }
    assert!(!out.stderr.contains("\n    ✓ allowed"), "{}", out.stderr);
    let tail = bw.run(&["audit", "tail"]);
    assert!(!tail.stdout.contains('\u{1b}'), "{:?}", tail.stdout);
}
