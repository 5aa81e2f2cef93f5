//! `bulwark worker` through the real binary, driven by the supervisor the
//! server uses: a scripted turn streams its events; a worker killed with
//! SIGKILL mid-turn is reported lost, its session resumes in a new worker,
//! and the stored history up to the kill is intact.

use crate::common;

mod audit_order;
mod provenance;

use bulwark_protocol::protocol::{Command, ErrorCode, Event, ToolDecision, TurnEnd};
use bulwark_server::workers::{
    Broker, Conversation, DatabaseBroker, EndReason, OpenRequest, Supervisor, SupervisorConfig,
    SupervisorError,
};
use bulwark_store::Store;
use common::{APPROVED_WRITES, BIN, Bw, scripted};
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(60);

const GATE_SCRIPT: &str = r#"{"text": "first answer"}
{"tool_calls": [{"name": "file_write", "input": {"path": "out/a.txt", "content": "written"}}]}
{"text": "after the crash"}
"#;

/// A supervisor as `bulwark serve` sets one up: the server's database
/// brokered to the workers (they never open it).
fn supervisor(bw: &Bw) -> Supervisor {
    let mut config = SupervisorConfig::new(BIN, ["worker"], bw.home());
    let store = Store::open(&bw.path("bulwark.db")).expect("the database opens");
    config.broker = Some(Broker::new(DatabaseBroker::new(store)));
    Supervisor::new(config)
}

fn open(user: &str, agent: &str, resume: Option<&str>) -> OpenRequest {
    OpenRequest {
        user: user.into(),
        agent: agent.into(),
        resume: resume.map(str::to_string),
        keys: Vec::new(),
    }
}

async fn next(c: &mut Conversation) -> Option<Event> {
    tokio::time::timeout(PATIENCE, c.events.recv())
        .await
        .expect("an event in time")
}

async fn say(c: &Conversation, message_id: u64, text: &str) {
    let command = Command::UserMessage {
        message_id,
        text: text.into(),
    };
    c.commands.send(command).await.expect("the worker is open");
}

async fn turn(c: &mut Conversation, message_id: u64) -> Vec<Event> {
    let mut events = Vec::new();
    loop {
        let event = next(c)
            .await
            .unwrap_or_else(|| panic!("closed: {events:?}"));
        let done = matches!(&event, Event::TurnEnded { message_id: id, .. } if *id == message_id);
        events.push(event);
        if done {
            return events;
        }
    }
}

async fn shut_down(mut c: Conversation) {
    c.commands.send(Command::Shutdown).await.unwrap();
    while let Some(event) = next(&mut c).await {
        assert!(
            !matches!(event, Event::Error { .. }),
            "clean shutdown: {event:?}"
        );
    }
    assert_eq!(c.worker.wait().await, EndReason::Shutdown);
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_turn_streams_text_tool_calls_and_results() {
    let bw = Bw::init();
    let supervisor = supervisor(&bw);
    let started = Instant::now();
    let mut c = supervisor.open(open("local", "demo", None)).await.unwrap();
    let ready_after = started.elapsed();
    let pid = c.worker.pid().unwrap();
    eprintln!(
        "spawn to Ready: {ready_after:?}; idle worker VmRSS: {:?} KiB",
        rss_kib(pid)
    );
    assert_eq!(c.history_messages, 0);

    say(&c, 1, "show me").await;
    let events = turn(&mut c, 1).await;
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            Event::TextDelta {
                message_id: 1,
                text,
            } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(text.contains("Reading the notes file"), "{text}");
    let calls: Vec<(&str, &str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall {
                call_id,
                tool,
                summary,
                ..
            } => Some((call_id.as_str(), tool.as_str(), summary.as_str())),
            _ => None,
        })
        .collect();
    let results: Vec<(&str, ToolDecision, &str)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult {
                call_id,
                decision,
                summary,
                ..
            } => Some((call_id.as_str(), *decision, summary.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 5, "{events:#?}");
    assert_eq!(calls[0].1, "file_read");
    assert_eq!(calls[0].2, r#"file_read {"path":"notes.txt"}"#);
    assert_eq!(calls[1].1, "shell_exec");
    assert_eq!(results.len(), 5);
    for (call, result) in calls.iter().zip(&results) {
        assert_eq!(call.0, result.0, "each result follows its call");
    }
    assert_eq!(results[0].1, ToolDecision::Allowed);
    assert_eq!(results[1].1, ToolDecision::Denied);
    // Results say what the door decided, never what the tool returned.
    assert!(results.iter().all(|r| r.2.len() < 80), "{results:?}");
    match events.last() {
        Some(Event::TurnEnded { end, text, .. }) => {
            assert_eq!(*end, TurnEnd::Completed);
            assert!(text.starts_with("Done: one read allowed"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    shut_down(c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_turn_is_lost_and_its_session_resumes_intact() {
    let bw = Bw::init();
    bw.agent(
        "gate",
        &scripted("gate", APPROVED_WRITES),
        Some(GATE_SCRIPT),
    );
    let supervisor = supervisor(&bw);
    let mut c = supervisor.open(open("local", "gate", None)).await.unwrap();
    let session = c.session_id.clone();
    say(&c, 1, "hello").await;
    let events = turn(&mut c, 1).await;
    assert!(
        matches!(events.last(), Some(Event::TurnEnded { end: TurnEnd::Completed, text, .. }) if text == "first answer")
    );

    // The second turn stops at an approval: the worker is mid-turn.
    say(&c, 2, "write it").await;
    loop {
        match next(&mut c).await {
            Some(Event::ApprovalRequest { tool, .. }) => {
                assert_eq!(tool, "file_write");
                break;
            }
            Some(Event::ToolCall { .. } | Event::TextDelta { .. }) => {}
            other => panic!("{other:?}"),
        }
    }
    let pid = c.worker.pid().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    match next(&mut c).await {
        Some(Event::Error {
            code: ErrorCode::WorkerLost,
            fatal: true,
            message,
        }) => assert!(message.contains("killed by signal 9"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        next(&mut c).await,
        None,
        "the channel closes after the error"
    );
    assert!(matches!(c.worker.wait().await, EndReason::Lost(_)));
    assert_eq!(supervisor.stats().crashed, 1);

    // Everything stored before the kill is there, in order.
    let store = Store::open(&bw.path("bulwark.db")).unwrap();
    let stored: Vec<(String, serde_json::Value)> = store
        .messages(&session)
        .unwrap()
        .into_iter()
        .map(|m| (m.role, serde_json::from_str(&m.content_json).unwrap()))
        .collect();
    let roles: Vec<&str> = stored.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user", "assistant"],
        "{stored:#?}"
    );
    let all = serde_json::to_string(&stored).unwrap();
    for expected in ["hello", "first answer", "write it", "file_write"] {
        assert!(all.contains(expected), "{expected} in {all}");
    }
    assert!(
        !bw.workspace_file("gate", "out/a.txt").exists(),
        "never approved"
    );

    // A new worker resumes the session where the stored history stops.
    let mut c = supervisor
        .open(open("local", "gate", Some(&session)))
        .await
        .unwrap();
    assert_eq!(c.session_id, session);
    assert_eq!(c.history_messages, 4);
    say(&c, 3, "again").await;
    let events = turn(&mut c, 3).await;
    assert!(
        matches!(events.last(), Some(Event::TurnEnded { end: TurnEnd::Completed, text, .. }) if text == "after the crash"),
        "{events:?}"
    );
    shut_down(c).await;
    assert_eq!(store.messages(&session).unwrap().len(), 6);
}

const WRITER_SCRIPT: &str = r#"{"tool_calls": [{"name": "file_write", "input": {"path": "out/a.txt", "content": "written"}}]}
{"text": "finished"}
{"tool_calls": [{"name": "file_write", "input": {"path": "out/b.txt", "content": "never"}}]}
{"text": "carry on"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_asked_of_the_server_and_interrupt_stops_a_turn() {
    let bw = Bw::init();
    bw.agent(
        "writer",
        &scripted("writer", APPROVED_WRITES),
        Some(WRITER_SCRIPT),
    );
    let supervisor = supervisor(&bw);
    let mut c = supervisor
        .open(open("local", "writer", None))
        .await
        .unwrap();

    say(&c, 1, "write a").await;
    let request_id = loop {
        match next(&mut c).await {
            Some(Event::ApprovalRequest {
                request_id,
                operation,
                summary,
                ..
            }) => {
                assert_eq!(operation, "write");
                assert!(summary.contains("out/a.txt"), "{summary}");
                break request_id;
            }
            Some(_) => {}
            None => panic!("closed"),
        }
    };
    let approve = Command::ToolApproval {
        request_id,
        approve: true,
    };
    c.commands.send(approve).await.unwrap();
    let events = turn(&mut c, 1).await;
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::ToolResult {
                decision: ToolDecision::Allowed,
                summary,
                ..
            } if summary == "allowed"
        )),
        "{events:?}"
    );
    assert!(bw.workspace_file("writer", "out/a.txt").exists());

    // An unknown approval id is answered, not acted on.
    let stray = Command::ToolApproval {
        request_id: "r999".into(),
        approve: true,
    };
    c.commands.send(stray).await.unwrap();
    assert!(matches!(
        next(&mut c).await,
        Some(Event::Error {
            code: ErrorCode::BadCommand,
            fatal: false,
            ..
        })
    ));

    say(&c, 2, "write b").await;
    loop {
        match next(&mut c).await {
            Some(Event::ApprovalRequest { .. }) => break,
            Some(_) => {}
            None => panic!("closed"),
        }
    }
    c.commands.send(Command::Interrupt).await.unwrap();
    let events = turn(&mut c, 2).await;
    assert!(
        matches!(
            events.last(),
            Some(Event::TurnEnded {
                end: TurnEnd::Interrupted,
                ..
            })
        ),
        "{events:?}"
    );
    assert!(!bw.workspace_file("writer", "out/b.txt").exists());

    say(&c, 3, "go on").await;
    let events = turn(&mut c, 3).await;
    assert!(
        matches!(events.last(), Some(Event::TurnEnded { end: TurnEnd::Completed, text, .. }) if text == "carry on"),
        "{events:?}"
    );
    shut_down(c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_others_and_unknown_agents_are_refused_at_start() {
    let bw = Bw::init();
    bw.agent(
        "gate",
        &scripted("gate", APPROVED_WRITES),
        Some(GATE_SCRIPT),
    );
    bw.write("access.toml", "[users.bob]\n");
    let supervisor = supervisor(&bw);
    let c = supervisor.open(open("local", "gate", None)).await.unwrap();
    let session = c.session_id.clone();
    shut_down(c).await;

    match supervisor
        .open(open("bob", "gate", Some(&session)))
        .await
        .err()
        .unwrap()
    {
        SupervisorError::Refused { code, message } => {
            assert_eq!(code, ErrorCode::Forbidden);
            assert!(
                !message.contains("`local`"),
                "the owner is not named: {message}"
            );
        }
        other => panic!("{other:?}"),
    }
    match supervisor
        .open(open("local", "no-such-agent", None))
        .await
        .err()
        .unwrap()
    {
        SupervisorError::Refused { code, message } => {
            assert_eq!(code, ErrorCode::Setup);
            assert!(message.contains("no-such-agent"), "{message}");
            assert!(message.contains("reference"), "{message}");
            let home = bw.home().display().to_string();
            assert!(!message.contains(&home), "no server paths: {message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(supervisor.stats().workers, 0);
}

/// A setup failure is the operator's to fix: the remote user learns that
/// the agent could not start and a reference, never the server's files or
/// settings (here: where the agent's script was supposed to be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_failures_reach_the_client_as_a_reference_only() {
    let bw = Bw::init();
    let manifest =
        "[agent]\nname = \"broken\"\nmodel = \"script:/srv/secret-layout/missing.jsonl\"\n";
    bw.agent("broken", manifest, None);
    let supervisor = supervisor(&bw);
    match supervisor.open(open("local", "broken", None)).await.err() {
        Some(SupervisorError::Refused { code, message }) => {
            assert_eq!(code, ErrorCode::Setup);
            assert!(message.contains("`broken`"), "{message}");
            assert!(message.contains("reference"), "{message}");
            for leak in ["secret-layout", "missing.jsonl", "script", "/"] {
                assert!(!message.contains(leak), "`{leak}` leaked: {message}");
            }
        }
        other => panic!("{other:?}"),
    }
    // The same agent under `run` (the operator at the terminal) says why.
    let out = bw.run(&["run", "broken", "hello"]);
    assert!(
        out.stderr.contains("missing.jsonl"),
        "the operator sees the cause: {}",
        out.stderr
    );
}

const SHELL_AGENT: &str = r#"max_turns = 4
[tools]
allow = ["shell"]
[[capabilities]]
kind = "shell_exec"
argv = ["echo", "hi"]
[sandbox]
shell = true
"#;

const SHELL_SCRIPT: &str = r#"{"tool_calls": [{"name": "shell_exec", "input": {"argv": ["echo", "hi"]}}]}
{"text": "done"}
"#;

/// A served session is a remote one: config.toml's `[remote]` policy
/// applies, so an agent granted a shell gets none unless the operator set
/// `remote.shell = true`. The same agent under `run` keeps its shell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_sessions_get_the_remote_policy() {
    let bw = Bw::init();
    bw.agent("sh", &scripted("sh", SHELL_AGENT), Some(SHELL_SCRIPT));
    let supervisor = supervisor(&bw);
    let mut c = supervisor.open(open("local", "sh", None)).await.unwrap();
    say(&c, 1, "echo").await;
    let events = turn(&mut c, 1).await;
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::ToolResult {
                decision: ToolDecision::Denied,
                ..
            }
        )),
        "the remote session has no shell: {events:?}"
    );
    shut_down(c).await;
    let records = bw.audit();
    let shell: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["action"] == "tool_call" && r["tool"] == "shell_exec")
        .collect();
    assert_eq!(shell.len(), 1, "{records:?}");
    assert_eq!(shell[0]["decision"], "denied", "{shell:?}");
    let why = shell[0]["detail"].as_str().unwrap_or_default();
    assert!(why.contains("remote.shell = false"), "{why}");

    let out = bw.run(&["run", "sh", "echo"]);
    assert_eq!(out.code, Some(0), "run keeps the shell: {}", out.stderr);
    let records = bw.audit();
    let allowed = records
        .iter()
        .filter(|r| r["action"] == "tool_call" && r["tool"] == "shell_exec")
        .filter(|r| r["decision"] == "allowed")
        .count();
    assert_eq!(allowed, 1, "{records:?}");
}

const SPENDER_SCRIPT: &str = r#"{"text": "one", "usage": {"input_tokens": 60, "output_tokens": 40}}
{"text": "two", "usage": {"input_tokens": 60, "output_tokens": 40}}
{"text": "three", "usage": {"input_tokens": 1, "output_tokens": 1}}
"#;

/// access.toml's `tokens_per_day` stops a user's next turn once the last
/// 24 hours' model tokens reach it, in every session of theirs; raising it
/// applies to the next turn; other users are not affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_daily_token_budget_refuses_the_next_turn() {
    let bw = Bw::init();
    bw.agent("spender", &scripted("spender", ""), Some(SPENDER_SCRIPT));
    bw.write(
        "access.toml",
        "[users.local.limits]\ntokens_per_day = 150\n[users.bob]\n",
    );
    let supervisor = supervisor(&bw);
    let mut c = supervisor
        .open(open("local", "spender", None))
        .await
        .unwrap();
    say(&c, 1, "first").await;
    let events = turn(&mut c, 1).await;
    assert!(
        matches!(events.last(), Some(Event::TurnEnded { end: TurnEnd::Completed, text, .. }) if text == "one"),
        "{events:?}"
    );
    say(&c, 2, "second").await;
    let events = turn(&mut c, 2).await;
    assert!(
        matches!(events.last(), Some(Event::TurnEnded { end: TurnEnd::Completed, text, .. }) if text == "two"),
        "100 of 150 used, so this one runs: {events:?}"
    );
    say(&c, 3, "third").await;
    let events = turn(&mut c, 3).await;
    let refusal = events.iter().find_map(|e| match e {
        Event::Error { code, message, .. } => Some((*code, message.clone())),
        _ => None,
    });
    let (code, message) = refusal.unwrap_or_else(|| panic!("refused: {events:?}"));
    assert_eq!(code, ErrorCode::BudgetExhausted);
    assert!(message.contains("200 of 150"), "{message}");
    assert!(
        matches!(
            events.last(),
            Some(Event::TurnEnded {
                end: TurnEnd::Stopped,
                ..
            })
        ),
        "{events:?}"
    );

    // Raised: the same conversation goes on (the model was not called for
    // the refused turn, so the script's third reply is next).
    bw.write(
        "access.toml",
        "[users.local.limits]\ntokens_per_day = 1000\n[users.bob]\n",
    );
    say(&c, 4, "again").await;
    let events = turn(&mut c, 4).await;
    assert!(
        matches!(events.last(), Some(Event::TurnEnded { end: TurnEnd::Completed, text, .. }) if text == "three"),
        "{events:?}"
    );
    shut_down(c).await;

    // Bob has no budget set: his use is not limited by local's.
    let mut b = supervisor.open(open("bob", "spender", None)).await.unwrap();
    say(&b, 1, "hi").await;
    let events = turn(&mut b, 1).await;
    assert!(
        matches!(
            events.last(),
            Some(Event::TurnEnded {
                end: TurnEnd::Completed,
                ..
            })
        ),
        "{events:?}"
    );
    shut_down(b).await;
}

/// A served conversation holds its session's lease in the server (the
/// worker never opens the database): a `bulwark run --session` beside it,
/// and another server's conversation on the session, are refused, saying
/// why; once the conversation ends, both work. (Within one server, a
/// second open of the session replaces the first worker, which ends
/// before the new one starts.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_session_runs_in_one_place_at_a_time() {
    // An initialized home (with its audit key), as `serve` requires before
    // it starts workers: the test's supervisor writes records as it would.
    let bw = Bw::init();
    bw.agent(
        "talker",
        &scripted("talker", ""),
        Some("{\"text\": \"one\"}\n{\"text\": \"two\"}\n{\"text\": \"three\"}\n"),
    );
    let (server, other_server) = (supervisor(&bw), supervisor(&bw));
    let mut c = server.open(open("local", "talker", None)).await.unwrap();
    let session = c.session_id.clone();
    say(&c, 1, "hello").await;
    turn(&mut c, 1).await;

    let out = bw.run(&["run", "talker", "beside", "--session", &session]);
    out.expect_code(1);
    let expected = format!("session `{session}` is being run by another process");
    assert!(out.stderr.contains(&expected), "{}", out.stderr);
    match other_server
        .open(open("local", "talker", Some(&session)))
        .await
        .err()
        .unwrap()
    {
        SupervisorError::Refused { code, message } => {
            assert_eq!(code, ErrorCode::Busy);
            assert!(message.contains(&expected), "{message}");
        }
        other => panic!("{other:?}"),
    }

    shut_down(c).await;
    bw.run(&["run", "talker", "after", "--session", &session])
        .ok();
    let c = other_server
        .open(open("local", "talker", Some(&session)))
        .await
        .unwrap();
    assert_eq!(c.history_messages, 4);
    shut_down(c).await;
}
