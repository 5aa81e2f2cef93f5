//! `bulwark chat` with stdin not a terminal, and resuming sessions.

use crate::common;

use common::{Bw, scripted};

const SCRIPT: &str =
    "{\"text\": \"first reply\"}\n{\"text\": \"second reply\"}\n{\"text\": \"third reply\"}\n";

fn home() -> Bw {
    let bw = Bw::empty();
    bw.agent("talker", &scripted("talker", ""), Some(SCRIPT));
    bw.agent("other", &scripted("other", ""), Some(SCRIPT));
    bw
}

/// The session id announced on stderr: `chatting with A (session ID; ...`.
#[track_caller]
fn announced_id(stderr: &str) -> String {
    let start = stderr
        .find("(session ")
        .unwrap_or_else(|| panic!("no session id on stderr:\n{stderr}"))
        + "(session ".len();
    let id: String = stderr[start..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect();
    assert!(
        id.len() >= 16,
        "implausible session id {id:?} in:\n{stderr}"
    );
    id
}

/// A conversation started from a pipe, then resumed: one stored session
/// holding both exchanges.
#[test]
fn chat_resume_continues_one_session() {
    let bw = home();
    let first = bw.cmd(&["chat", "talker"]).stdin("hello\n").run();
    first.ok();
    assert!(first.stdout.contains("first reply"), "{}", first.stdout);
    let id = announced_id(&first.stderr);
    assert_eq!(bw.sessions(), [(id.clone(), "talker".to_string(), 2)]);

    let second = bw
        .cmd(&["chat", "talker", "--resume", &id])
        .stdin("again\n")
        .run();
    second.ok();
    assert_eq!(announced_id(&second.stderr), id, "resume kept the id");
    assert!(
        second.stderr.contains("resumed: 2 earlier message(s)"),
        "{}",
        second.stderr
    );
    // The scripted model continues where the stored history stopped.
    assert!(second.stdout.contains("second reply"), "{}", second.stdout);
    assert_eq!(bw.sessions(), [(id.clone(), "talker".to_string(), 4)]);

    // Each start (new or resumed) is audited against the same session.
    let records = bw.audit();
    let starts = common::with_action(&records, "session_start");
    assert_eq!(starts.len(), 2, "{records:#?}");
    assert!(starts.iter().all(|r| common::field(r, "session") == id));

    // `run --session` continues the same conversation too.
    bw.run(&["run", "talker", "third", "--session", &id]).ok();
    assert_eq!(bw.sessions(), [(id, "talker".to_string(), 6)]);
}

/// A session can be resumed only by its own agent and user; refusals
/// change nothing.
#[test]
fn resume_with_another_agent_or_user_is_refused() {
    let bw = home();
    let first = bw.cmd(&["chat", "talker"]).stdin("hello\n").run();
    first.ok();
    let id = announced_id(&first.stderr);
    let sessions = bw.sessions();
    let records = bw.audit();

    let out = bw
        .cmd(&["chat", "other", "--resume", &id])
        .stdin("again\n")
        .run();
    out.expect_code(2);
    assert!(
        out.stderr
            .contains(&format!("session `{id}` belongs to agent `talker`")),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("reply"), "{}", out.stdout);

    // A user without an access.toml entry is refused outright...
    let out = bw
        .cmd(&["chat", "talker", "--resume", &id, "--user", "bob"])
        .stdin("again\n")
        .run();
    out.expect_code(2);
    assert!(
        out.stderr.contains("user `bob` is not in access.toml"),
        "{}",
        out.stderr
    );
    // ...and one with an entry still cannot take over another user's session.
    bw.write("access.toml", "[users.bob]\n");
    let out = bw
        .cmd(&["chat", "talker", "--resume", &id, "--user", "bob"])
        .stdin("again\n")
        .run();
    out.expect_code(2);
    assert!(out.stderr.contains("user `local`"), "{}", out.stderr);

    let out = bw.run(&["run", "other", "x", "--session", &id]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("belongs to agent `talker`"),
        "{}",
        out.stderr
    );

    assert_eq!(bw.sessions(), sessions);
    assert_eq!(bw.audit(), records);
}

#[test]
fn resume_of_an_unknown_session_is_refused() {
    let bw = home();
    bw.cmd(&["chat", "talker"]).stdin("hello\n").run().ok();
    let sessions = bw.sessions();
    for id in ["0123456789abcdef0123456789abcdef", "x' OR '1'='1", ""] {
        let out = bw
            .cmd(&["chat", "talker", "--resume", id])
            .stdin("again\n")
            .run();
        out.expect_code(2);
        assert!(
            out.stderr.contains(&format!("no session `{id}`")),
            "{id:?}: {}",
            out.stderr
        );
    }
    assert_eq!(bw.sessions(), sessions);
}

/// `/exit` ends the conversation before the model is asked anything; an
/// empty stdin ends it too.
#[test]
fn chat_ends_on_exit_or_eof() {
    let bw = home();
    let out = bw.cmd(&["chat", "talker"]).stdin("/exit\nhello\n").run();
    out.ok();
    assert!(!out.stdout.contains("reply"), "{}", out.stdout);
    let out = bw.cmd(&["chat", "talker"]).stdin("").run();
    out.ok();
    assert!(bw.sessions().iter().all(|(_, _, n)| *n == 0));
}
