//! A `bulwark worker` confines itself (Landlock, `no_new_privs`) to its
//! user's and agent's data before it serves anything.
//!
//! * Through `bulwark serve`, as a user meets it: alice's worker writes and
//!   reads files in her workspace and runs a sandboxed shell command under
//!   strict enforcement; the server log says what confines the worker;
//!   the live worker process has `no_new_privs` set.
//! * The attack, on the real worker: an agent whose model script lives in
//!   `keys/`, or in another user's directory, cannot be loaded by a
//!   confined worker, while the same agent under `bulwark run` (not
//!   confined) loads it: the worker's confinement is what stops it.
//! * A worker refuses a `Start` for a user or agent it was not started for.
//! * Strict enforcement refuses to serve unconfined; permissive warns.

use crate::common;

use bulwark_protocol::protocol::{Command, ErrorCode, Event};
use bulwark_protocol::store_ipc::StoreRequest;
use bulwark_worker::io::{FrameReader, FrameWriter};
use common::serve::{PATIENCE, connect, send, start, until, workers_of};
use common::{BIN, Bw, scripted};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use tokio::io::AsyncReadExt;

/// Files and a shell, for alice only.
const TOOLS: &str = r#"max_turns = 10
[tools]
allow = ["shell", "files"]
[sandbox]
shell = true
[[capabilities]]
kind = "shell_exec"
argv = ["*", "**"]
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "file_write"
path = "**"
[access]
mode = "users"
users = ["alice"]
"#;

fn tool_call(name: &str, input: Value) -> String {
    json!({"tool_calls": [{"name": name, "input": input}]}).to_string()
}

/// Write a note, read it back, and have a (sandboxed) shell command copy
/// it.
fn tools_script() -> String {
    [
        tool_call(
            "file_write",
            json!({"path": "notes/a.txt", "content": "alice's note"}),
        ),
        tool_call("file_read", json!({"path": "notes/a.txt"})),
        tool_call(
            "shell_exec",
            json!({"argv": ["cp", "notes/a.txt", "shell.txt"]}),
        ),
        json!({"text": "all done"}).to_string(),
    ]
    .join("\n")
}

/// A home with alice's agent `tools`, served sessions allowed a shell,
/// default (strict) enforcement.
fn home() -> Bw {
    let bw = Bw::init();
    bw.write("config.toml", "[remote]\nshell = true\n");
    bw.agent("tools", &scripted("tools", TOOLS), Some(&tools_script()));
    bw
}

// ---- through `bulwark serve` ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_agent_works_inside_its_confined_worker() {
    let bw = home();
    let token = common::serve::token_for(&bw, "alice", "tools");
    let server = start(&bw);
    let mut ws = connect(&server.addr, &token).await;
    send(&mut ws, json!({"type": "subscribe", "agent": "tools"})).await;
    until(&mut ws, "subscribed").await;

    // The live worker: no_new_privs is set (it cannot gain privileges
    // through a setuid program), which Landlock requires.
    let pids = workers_of(server.pid(), Some("alice"));
    assert_eq!(pids.len(), 1, "one worker for alice: {pids:?}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", pids[0])).expect("status");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");

    send(&mut ws, json!({"type": "message", "text": "go"})).await;
    let (ended, during) = until(&mut ws, "turn_ended").await;
    assert_eq!(ended["end"], "completed", "{ended}\n{during:#?}");
    assert!(during.iter().all(|f| f["type"] != "error"), "{during:#?}");
    let decisions: Vec<(&str, &str)> = during
        .iter()
        .filter(|f| f["type"] == "tool_result")
        .map(|f| {
            (
                f["decision"].as_str().unwrap_or_default(),
                f["summary"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        decisions.iter().map(|d| d.0).collect::<Vec<_>>(),
        ["allowed", "allowed", "allowed"],
        "{decisions:?}"
    );
    let workspace = bw.path("users/alice/agents/tools/workspace");
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes/a.txt")).expect("written"),
        "alice's note"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("shell.txt")).expect("the shell ran"),
        "alice's note",
        "the sandboxed shell command ran inside the confined worker"
    );
    // The shell ran sandboxed under strict enforcement, without warnings.
    let records = bw.audit();
    let shell = records
        .iter()
        .find(|r| r["action"] == "tool_call" && r["tool"] == "shell_exec")
        .expect("an audit record of the shell call");
    assert_eq!(shell["decision"], "allowed", "{shell}");
    assert!(
        shell["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("exit code 0"),
        "{shell}"
    );
    drop(ws);

    // The server log carries the worker's own line on what confines it,
    // and it names no path.
    let log = server.log();
    let line = log
        .iter()
        .find(|l| l.contains("confinement in force for user `alice`, agent `tools`"))
        .unwrap_or_else(|| panic!("no confinement line in the server log:\n{}", log.join("\n")));
    assert!(line.contains("landlock ABI"), "{line}");
    assert!(line.contains("no_new_privs"), "{line}");
    assert!(line.contains("namespaces prepared"), "{line}");
    let home = bw.home().display().to_string();
    assert!(!line.contains(&home), "a path in the log: {line}");
    assert!(!line.contains("keys"), "{line}");

    // The worker cannot read the audit signing key: the server signs the
    // checkpoint of what its workers recorded, at the latest when it stops.
    let mut server = server;
    server.terminate();
    let out = bw.run(&["audit", "verify"]);
    out.ok();
    let signed: u64 = out
        .stdout
        .split(" stored checkpoint")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no checkpoint count in: {}", out.stdout));
    assert!(signed >= 1, "no checkpoint was signed: {}", out.stdout);
}

// ---- one worker, driven directly ----

/// A worker process for `user` and `agent`, as the supervisor starts one.
struct Worker {
    child: tokio::process::Child,
    commands: FrameWriter<tokio::process::ChildStdin, Command>,
    events: FrameReader<tokio::process::ChildStdout, Event>,
}

fn worker(home: &Path, user: &str, agent: &str) -> Worker {
    let mut child = tokio::process::Command::new(BIN)
        .args([
            "worker",
            &format!("--user={user}"),
            &format!("--agent={agent}"),
        ])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("BULWARK_HOME", home)
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker starts");
    let commands = FrameWriter::new(child.stdin.take().expect("piped"));
    let events = FrameReader::new(child.stdout.take().expect("piped"));
    Worker {
        child,
        commands,
        events,
    }
}

impl Worker {
    /// Sends `Start` and returns the first event, the exit status and
    /// stderr (the worker ends: after a refusal by itself, otherwise on
    /// `Shutdown`).
    async fn start(mut self, user: &str, agent: &str) -> (Event, String) {
        let start = Command::Start {
            user: user.into(),
            agent: agent.into(),
            resume: None,
        };
        self.commands.send(start).await.expect("Start is sent");
        let first = tokio::time::timeout(PATIENCE, self.events.next())
            .await
            .expect("an answer in time")
            .expect("an event")
            .expect("a valid frame");
        let _ = self.commands.send(Command::Shutdown).await;
        drop(self.commands);
        let mut stderr = String::new();
        let mut pipe = self.child.stderr.take().expect("piped");
        let _ = tokio::time::timeout(PATIENCE, pipe.read_to_string(&mut stderr)).await;
        let _ = tokio::time::timeout(PATIENCE, self.child.wait()).await;
        (first, stderr)
    }
}

/// A scripted agent whose script is at `script` (relative to its
/// directory, as `script:` paths are).
fn leaky_agent(bw: &Bw, name: &str, script: &str) {
    let manifest = format!(
        "[agent]\nname = \"{name}\"\nmodel = \"script:{script}\"\n[access]\nmode = \"users\"\nusers = [\"alice\"]\n"
    );
    bw.write(&format!("agents/{name}/agent.toml"), &manifest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_worker_cannot_read_keys_or_other_users_files() {
    let bw = home();
    bw.write("access.toml", "[users.alice]\n[users.bob]\n");
    let stolen = r#"{"text": "STOLEN-7c41"}"#;
    bw.write("keys/planted.jsonl", stolen);
    bw.write("users/bob/agents/tools/workspace/planted.jsonl", stolen);
    leaky_agent(&bw, "keyreader", "../../keys/planted.jsonl");
    leaky_agent(
        &bw,
        "bobreader",
        "../../users/bob/agents/tools/workspace/planted.jsonl",
    );

    // Unconfined, the same agents load those files: the paths are right.
    for agent in ["keyreader", "bobreader"] {
        let out = bw.run(&["run", agent, "hi", "--user", "alice"]);
        assert!(
            out.stdout.contains("STOLEN-7c41"),
            "{agent} unconfined: {}\n{}",
            out.stdout,
            out.stderr
        );
    }

    // Nor the database, which holds every user's conversations (the
    // server performs a worker's store operations for it).
    bw.run(&["audit", "verify"]).ok();
    assert!(bw.path("bulwark.db").is_file());
    leaky_agent(&bw, "dbreader", "../../bulwark.db");

    // A confined worker cannot read them: the session is refused at setup
    // and the worker's stderr (the server log) says why.
    for agent in ["keyreader", "bobreader", "dbreader"] {
        let (first, stderr) = worker(bw.home(), "alice", agent)
            .start("alice", agent)
            .await;
        match &first {
            Event::Error {
                code: ErrorCode::Setup,
                fatal: true,
                ..
            } => {}
            other => panic!("{agent}: expected a setup error, got {other:?}\n{stderr}"),
        }
        assert!(stderr.contains("confinement in force"), "{stderr}");
        assert!(stderr.contains("Permission denied"), "{agent}: {stderr}");
        assert!(!stderr.contains("STOLEN"), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_serves_only_the_user_and_agent_it_was_started_for() {
    let bw = home();
    bw.write("access.toml", "[users.alice]\n[users.bob]\n");
    bw.write(
        "agents/tools/agent.toml",
        &scripted(
            "tools",
            &TOOLS.replace("users = [\"alice\"]", "users = [\"alice\", \"bob\"]"),
        ),
    );
    for (user, agent) in [("bob", "tools"), ("alice", "demo")] {
        let (first, stderr) = worker(bw.home(), "alice", "tools").start(user, agent).await;
        match &first {
            Event::Error {
                code: ErrorCode::Forbidden,
                fatal: true,
                ..
            } => {}
            other => panic!("{user}/{agent}: expected Forbidden, got {other:?}\n{stderr}"),
        }
    }
    // The user and agent it was started for are served: the worker goes on
    // to create the session, through the server (it never opens the
    // database; nobody answers here, so that is as far as it gets).
    let (first, stderr) = worker(bw.home(), "alice", "tools")
        .start("alice", "tools")
        .await;
    assert!(
        matches!(
            first,
            Event::Store {
                request: StoreRequest::Create { .. },
                ..
            }
        ),
        "{first:?}\n{stderr}"
    );
    // Bob's directories were never made by alice's worker.
    assert!(!bw.path("users/bob").exists());
}

/// A grant that cannot be made (here `access.toml` is a link to itself)
/// means no confinement. Under strict enforcement (the default) the worker
/// then refuses to serve, and the client gets a setup error; permissive,
/// it warns in the server log and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_enforcement_refuses_to_serve_unconfined_and_permissive_warns() {
    let bw = home();
    std::os::unix::fs::symlink("access.toml", bw.path("access.toml")).expect("a link loop");
    let (first, stderr) = worker(bw.home(), "alice", "tools")
        .start("alice", "tools")
        .await;
    assert!(
        matches!(
            first,
            Event::Error {
                code: ErrorCode::Setup,
                fatal: true,
                ..
            }
        ),
        "{first:?}\n{stderr}"
    );
    assert!(stderr.contains("refusing to serve"), "{stderr}");
    assert!(stderr.contains("enforcement is \"strict\""), "{stderr}");
    assert!(!stderr.contains("confinement in force"), "{stderr}");

    bw.write(
        "config.toml",
        "[remote]\nshell = true\n[sandbox]\nenforcement = \"permissive\"\n",
    );
    let (_, stderr) = worker(bw.home(), "alice", "tools")
        .start("alice", "tools")
        .await;
    assert!(
        stderr.contains("WARNING: running unconfined"),
        "permissive warns: {stderr}"
    );
    assert!(!stderr.contains("refusing to serve"), "{stderr}");
}
