//! `bulwark mcp serve AGENT`: the built binary driven over its stdin and
//! stdout by a raw JSON-RPC client, as an MCP client's server entry starts
//! it. stdout carries only protocol frames; every call is audited.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use crate::common::{BIN, Bw, SCRUBBED, field, with_action};

struct Served {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Every line stdout carried.
    lines: Vec<String>,
}

impl Served {
    fn start(bw: &Bw, agent: &str) -> Self {
        let mut cmd = Command::new(BIN);
        cmd.arg("--home")
            .arg(bw.home())
            .args(["mcp", "serve", agent]);
        for var in SCRUBBED {
            cmd.env_remove(var);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bulwark starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Self {
            child,
            stdin,
            stdout,
            lines: Vec::new(),
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("open");
        writeln!(stdin, "{message}").expect("write");
        stdin.flush().expect("flush");
    }

    /// The next frame on stdout (a `Value`), or `None` at EOF.
    fn frame(&mut self) -> Option<Value> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line).expect("read") == 0 {
            return None;
        }
        self.lines.push(line.clone());
        Some(serde_json::from_str(&line).expect("stdout carries only JSON-RPC"))
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = self.frame().expect("an answer");
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    fn initialize(&mut self) {
        let init = self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw-test", "version": "0"}}),
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> (bool, String) {
        let answer = self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        );
        let result = &answer["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        (result["isError"] == true, text.to_string())
    }

    /// Closes stdin (EOF) and waits for the exit; its code and stderr.
    fn finish(mut self) -> (Option<i32>, String, Vec<String>) {
        drop(self.stdin.take());
        while self.frame().is_some() {}
        let output = self.child.wait_with_output().expect("exits");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
            self.lines,
        )
    }
}

/// `assistant` names an Anthropic model and no key is set: a tools-only
/// session needs neither.
#[test]
fn an_mcp_client_lists_calls_and_is_refused_through_the_door() {
    let bw = Bw::init();
    let notes = bw.workspace_file("assistant", "notes.txt");
    std::fs::create_dir_all(notes.parent().unwrap()).unwrap();
    std::fs::write(&notes, "from the workspace").unwrap();
    let draft = bw.workspace_file("assistant", "out/draft.txt");
    std::fs::create_dir_all(draft.parent().unwrap()).unwrap();
    std::fs::write(&draft, "from the workspace").unwrap();

    let mut served = Served::start(&bw, "assistant");
    served.initialize();
    let list = served.request(2, "tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"file_read"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("shell")), "{names:?}");

    let (is_error, text) = served.call(3, "file_read", json!({"path": "notes.txt"}));
    assert!(!is_error, "{text}");
    assert!(text.contains("from the workspace"), "{text}");

    let (is_error, text) = served.call(4, "file_read", json!({"path": "../../../../config.toml"}));
    assert!(is_error, "a path outside the workspace: {text}");

    let (is_error, text) = served.call(5, "shell_exec", json!({"argv": ["id"]}));
    assert!(is_error, "an ungranted tool: {text}");

    // `files:edit` needs approval, and this client declared no
    // elicitation: refused, saying why, the file untouched.
    let (is_error, text) = served.call(
        6,
        "file_edit",
        json!({"path": "out/draft.txt", "old": "from", "new": "FROM"}),
    );
    assert!(is_error, "{text}");
    assert!(text.contains("cannot be asked"), "{text}");
    assert_eq!(
        std::fs::read_to_string(&draft).unwrap(),
        "from the workspace"
    );

    let (code, stderr, lines) = served.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("serving agent assistant"), "{stderr}");
    for line in &lines {
        let frame: Value = serde_json::from_str(line).expect("JSON");
        assert_eq!(frame["jsonrpc"], "2.0", "only JSON-RPC on stdout: {line}");
    }

    let records = bw.audit();
    let calls = with_action(&records, "tool_call");
    let decisions: Vec<(&str, &str)> = calls
        .iter()
        .map(|r| (field(r, "tool"), field(r, "decision")))
        .collect();
    assert_eq!(decisions.len(), 4, "{decisions:?}");
    assert_eq!(decisions[0], ("file_read", "allowed"));
    assert!(
        decisions[1..].iter().all(|(_, d)| *d == "denied"),
        "{decisions:?}"
    );
    assert_eq!(with_action(&records, "session_start").len(), 1);
}

#[test]
fn sigterm_ends_the_server_cleanly() {
    let bw = Bw::init();
    let mut served = Served::start(&bw, "assistant");
    served.initialize();
    let status = Command::new("kill")
        .args(["-TERM", &served.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let (code, stderr, _) = served.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn an_unknown_agent_is_the_operators_to_fix() {
    let bw = Bw::init();
    let out = bw.run(&["mcp", "serve", "nobody"]);
    out.expect_code(2);
    assert!(out.stdout.is_empty(), "nothing on stdout: {}", out.stdout);
}
