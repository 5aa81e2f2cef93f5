//! Runs the `bulwark` binary against a fresh, private home directory.
#![allow(dead_code)]

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub mod serve;

pub const BIN: &str = env!("CARGO_BIN_EXE_bulwark");

/// Variables that would make a run depend on the machine it runs on.
pub const SCRUBBED: &[&str] = &[
    // cargo sets LD_LIBRARY_PATH for test binaries; bulwark refuses to start
    // under loader injection (tested in hardening.rs).
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "BULWARK_HOME",
    "BULWARK_LOG",
    "XDG_DATA_HOME",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// The result of one invocation.
pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    fn from(output: Output) -> Self {
        Out {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Panics with both streams unless the exit code is `code`.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "expected exit {code}\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn ok(&self) -> &Self {
        self.expect_code(0)
    }
}

/// One invocation being built: extra environment, stdin.
pub struct Invocation<'a> {
    bw: &'a Bw,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Option<String>,
}

impl Invocation<'_> {
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn stdin(mut self, text: &str) -> Self {
        self.stdin = Some(text.into());
        self
    }

    pub fn run(self) -> Out {
        let mut cmd = Command::new(BIN);
        cmd.arg("--home").arg(self.bw.home()).args(&self.args);
        for var in SCRUBBED {
            cmd.env_remove(var);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        match self.stdin {
            None => {
                cmd.stdin(Stdio::null());
                Out::from(cmd.output().expect("the bulwark binary starts"))
            }
            Some(text) => {
                cmd.stdin(Stdio::piped());
                let mut child = cmd.spawn().expect("the bulwark binary starts");
                {
                    let mut stdin = child.stdin.take().expect("stdin is piped");
                    stdin
                        .write_all(text.as_bytes())
                        .expect("write to the child's stdin");
                }
                Out::from(child.wait_with_output().expect("the child finishes"))
            }
        }
    }
}

/// A Bulwark home in a fresh temporary directory.
pub struct Bw {
    dir: tempfile::TempDir,
}

impl Bw {
    /// An empty home (not even `init`).
    pub fn empty() -> Self {
        Bw {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// A home after `bulwark init`.
    pub fn init() -> Self {
        let bw = Self::empty();
        bw.run(&["init"]).ok();
        bw
    }

    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.home().join(rel)
    }

    pub fn cmd(&self, args: &[&str]) -> Invocation<'_> {
        Invocation {
            bw: self,
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            stdin: None,
        }
    }

    /// Runs with no stdin (not a terminal) and a scrubbed environment.
    pub fn run(&self, args: &[&str]) -> Out {
        self.cmd(args).run()
    }

    /// Writes `contents` to `rel` under the home, creating directories.
    pub fn write(&self, rel: &str, contents: &str) {
        bulwark_test_support::home::write_file(self.home(), rel, contents);
    }

    /// `agents/<name>/agent.toml` and, when given, its `s.jsonl` script.
    pub fn agent(&self, name: &str, manifest: &str, script: Option<&str>) {
        let files: Vec<(&str, &str)> = script.map(|s| ("s.jsonl", s)).into_iter().collect();
        bulwark_test_support::home::write_agent(self.home(), name, manifest, &files);
    }

    /// `users/local/agents/<agent>/workspace/<rel>`.
    pub fn workspace_file(&self, agent: &str, rel: &str) -> PathBuf {
        self.path(&format!("users/local/agents/{agent}/workspace/{rel}"))
    }

    /// Every audit record (`audit tail --json`), oldest first.
    pub fn audit(&self) -> Vec<Value> {
        let out = self.run(&["audit", "tail", "--json", "-n", "1000"]);
        out.ok();
        parse_json_lines(&out.stdout)
    }

    /// `(id, agent, messages)` for every stored session.
    pub fn sessions(&self) -> Vec<(String, String, u64)> {
        let out = self.run(&["sessions", "list", "-n", "1000"]);
        out.ok();
        out.stdout
            .lines()
            .filter(|l| *l != "no sessions")
            .map(|line| {
                let cols: Vec<&str> = line.split_whitespace().collect();
                assert_eq!(cols.len(), 5, "unexpected sessions line: {line:?}");
                assert_eq!(cols[4], "messages", "unexpected sessions line: {line:?}");
                (
                    cols[0].to_string(),
                    cols[1].to_string(),
                    cols[3].parse().expect("a message count"),
                )
            })
            .collect()
    }
}

/// One JSON object per non-empty line; panics on anything else.
pub fn parse_json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}"));
            assert!(v.is_object(), "not a JSON object: {l:?}");
            v
        })
        .collect()
}

/// The string field `key` of an audit record.
pub fn field<'a>(record: &'a Value, key: &str) -> &'a str {
    record[key]
        .as_str()
        .unwrap_or_else(|| panic!("audit record without string `{key}`: {record}"))
}

/// Records whose `action` is `action`.
pub fn with_action<'a>(records: &'a [Value], action: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| field(r, "action") == action)
        .collect()
}

/// Agent manifest body: writes under `out/` only, each approved by a
/// person, so a turn can be held at its approval for as long as a test
/// wants (append `[access]` for served agents, e.g. [`FOR_ALICE`]).
pub const APPROVED_WRITES: &str = r#"max_turns = 10
[tools]
allow = ["files"]
[[capabilities]]
kind = "file_write"
path = "out/**"
[approval]
operations = ["files:write"]
"#;

/// Admits alice to a served agent (agents are private by default).
pub const FOR_ALICE: &str = "[access]\nmode = \"users\"\nusers = [\"alice\"]\n";

/// A manifest for a scripted agent: `[agent]` with `name` and
/// `model = "script:s.jsonl"`, followed by `rest`.
pub fn scripted(name: &str, rest: &str) -> String {
    format!("[agent]\nname = \"{name}\"\nmodel = \"script:s.jsonl\"\n{rest}")
}

/// Every path under `root` (relative), sorted.
pub fn tree(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            out.push(path.strip_prefix(root).expect("under root").to_path_buf());
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                walk(root, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// An agent that may write under `out/`, each write asked of the operator.
pub const WRITER: &str = r#"
[tools]
allow = ["files"]

[[capabilities]]
kind = "file_write"
path = "out/**"

[approval]
operations = ["files:write"]
"#;
