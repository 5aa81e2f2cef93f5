//! One process runs a session at a time (issue 17 item 15): a second
//! `run --session X` or `chat --resume X` beside a running one is refused
//! before anything runs, and audited.

use crate::common::{BIN, Bw, SCRUBBED, field, scripted, with_action};
use bulwark_store::{LeaseHolder, Store};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const SCRIPT: &str = "{\"text\": \"reply one\"}\n{\"text\": \"reply two\"}\n{\"text\": \"reply three\"}\n{\"text\": \"reply four\"}\n{\"text\": \"reply five\"}\n";

fn home() -> Bw {
    let bw = Bw::empty();
    bw.agent("talker", &scripted("talker", ""), Some(SCRIPT));
    bw
}

/// The id a `run` announces: `session ID · agent ...`.
#[track_caller]
fn run_session(bw: &Bw) -> String {
    let out = bw.run(&["run", "talker", "first"]);
    out.ok();
    let id: String = out
        .stderr
        .strip_prefix("session ")
        .unwrap_or_else(|| panic!("no session line:\n{}", out.stderr))
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect();
    assert!(id.len() >= 16, "{}", out.stderr);
    id
}

fn messages(bw: &Bw, id: &str) -> u64 {
    bw.sessions()
        .into_iter()
        .find(|(s, _, _)| s == id)
        .map(|(_, _, n)| n)
        .expect("the session is listed")
}

/// `chat --resume id`, left waiting for input: a session that runs for as
/// long as the test keeps its stdin open. Returns once it holds the
/// session (it announced it).
fn chat_holding(bw: &Bw, id: &str) -> Child {
    let mut cmd = Command::new(BIN);
    cmd.arg("--home")
        .arg(bw.home())
        .args(["chat", "talker", "--resume", id]);
    for var in SCRUBBED {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the bulwark binary starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    loop {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(line) if line.starts_with("chatting with") => return child,
            Ok(_) => {}
            Err(err) => {
                let _ = child.kill();
                panic!("the holding chat never announced its session: {err}");
            }
        }
    }
}

/// Ends the holding chat the way a user would (end of input); it exits 0.
fn finish(mut chat: Child) {
    drop(chat.stdin.take());
    let status = chat.wait().expect("the chat ends");
    assert!(status.success(), "the holding chat failed: {status}");
}

/// While one process runs a session, a second `run --session` and a second
/// `chat --resume` of it are refused, say who runs it, run nothing, and are
/// audited; a different session runs meanwhile; once the first ends, the
/// session resumes normally.
#[test]
fn a_second_process_on_a_running_session_is_refused() {
    let bw = home();
    let id = run_session(&bw);
    assert_eq!(messages(&bw, &id), 2);
    let chat = chat_holding(&bw, &id);
    let pid = chat.id();

    let out = bw.run(&["run", "talker", "again", "--session", &id]);
    out.expect_code(1);
    let expected = format!("session `{id}` is being run by another process (pid {pid} since ");
    assert!(out.stderr.contains(&expected), "{}", out.stderr);
    assert!(
        out.stderr.contains("wait for it to finish"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("reply"), "nothing ran: {}", out.stdout);

    let out = bw
        .cmd(&["chat", "talker", "--resume", &id])
        .stdin("hello\n")
        .run();
    out.expect_code(1);
    assert!(out.stderr.contains(&expected), "{}", out.stderr);
    assert_eq!(
        messages(&bw, &id),
        2,
        "the refused processes stored nothing"
    );

    // Another session is not held up.
    bw.run(&["run", "talker", "elsewhere"]).ok();

    finish(chat);
    let out = bw.run(&["run", "talker", "again", "--session", &id]);
    out.ok();
    assert_eq!(messages(&bw, &id), 4);

    let records = bw.audit();
    let refused = with_action(&records, "session_lease");
    assert_eq!(refused.len(), 2, "{records:#?}");
    for record in refused {
        assert_eq!(field(record, "operation"), "refused");
        assert_eq!(field(record, "decision"), "denied");
        assert_eq!(field(record, "session"), "");
        assert_eq!(field(record, "user"), "local");
        assert!(field(record, "detail").contains(&id), "{record:#?}");
    }
    // Neither refused process started a session.
    let starts = with_action(&records, "session_start");
    assert_eq!(
        starts.len(),
        4,
        "the first run, the chat, the other session, the last resume: {records:#?}"
    );
}

/// A lease held by some other process (the server, for a served
/// conversation) refuses `run`; one whose holder died (it stopped renewing
/// and it expired) is taken over without any cleanup.
#[test]
fn a_dead_holders_lease_expires_and_the_session_runs() {
    let bw = home();
    let id = run_session(&bw);
    let store = Store::open(&bw.path("bulwark.db")).expect("the database opens");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as i64;
    let ttl = bulwark_store::LEASE_TTL;
    let live = LeaseHolder::new();
    store
        .acquire_lease(&id, &live, now, ttl)
        .expect("a free lease");
    let out = bw.run(&["run", "talker", "again", "--session", &id]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("is being run by another process"),
        "{}",
        out.stderr
    );

    // The same holder, as if it had crashed a TTL ago.
    let dead = LeaseHolder::new();
    assert!(store.release_lease(&id, &live).expect("released"));
    store
        .acquire_lease(&id, &dead, now - ttl.as_millis() as i64 - 1, ttl)
        .expect("a free lease");
    bw.run(&["run", "talker", "again", "--session", &id]).ok();
    assert_eq!(messages(&bw, &id), 4);
    assert_eq!(
        store.lease(&id).expect("readable"),
        None,
        "released at the end"
    );
}
