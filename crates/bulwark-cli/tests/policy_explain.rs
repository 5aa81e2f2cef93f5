//! `bulwark policy explain`: the effective set, and which layer removed what.

use crate::common;

use common::Bw;

const WIDE: &str = r#"[agent]
name = "wide"
model = "script:s.jsonl"

[tools]
allow = ["files", "shell", "web", "time"]

[tools.operations.files]
deny = ["edit"]

[[capabilities]]
kind = "file_read"
path = "**"

[[capabilities]]
kind = "file_write"
path = "out/**"

[[capabilities]]
kind = "shell_exec"
argv = ["ls", "**"]

[sandbox]
shell = false
allowed_domains = ["example.org"]

[access]
mode = "users"
users = ["alice"]
"#;

const CONFIG: &str = r#"[tools]
deny = ["web"]

[remote]
shell = false

[remote.tools]
deny = ["time"]
"#;

const ACCESS: &str = r#"[users.alice]
role = "user"

[users.alice.tools.operations.files]
deny = ["write"]

[users.bob]
role = "user"
"#;

fn home() -> Bw {
    let bw = Bw::empty();
    bw.agent("wide", WIDE, Some("{\"text\": \"hi\"}\n"));
    bw.write("config.toml", CONFIG);
    bw.write("access.toml", ACCESS);
    bw
}

/// The explanation, split into its sections.
struct Explained {
    header: String,
    tools: Vec<String>,
    capabilities: Vec<String>,
    removed: Vec<String>,
}

fn explain(bw: &Bw, args: &[&str]) -> Explained {
    let mut full = vec!["policy", "explain", "wide"];
    full.extend_from_slice(args);
    let out = bw.run(&full);
    out.ok();
    let mut header = String::new();
    let mut section = "";
    let (mut tools, mut capabilities, mut removed) = (Vec::new(), Vec::new(), Vec::new());
    for line in out.stdout.lines() {
        match line {
            "tools:" | "capabilities:" | "removed:" | "egress:" | "credentials:" => section = line,
            l if l.trim().is_empty() => {}
            l => match section {
                "tools:" => tools.push(l.trim().to_string()),
                "capabilities:" => capabilities.push(l.trim().to_string()),
                "removed:" => removed.push(l.to_string()),
                _ if header.is_empty() => header = l.to_string(),
                _ => {}
            },
        }
    }
    Explained {
        header,
        tools,
        capabilities,
        removed,
    }
}

const SHELL_BY_MANIFEST: &str = "- tool shell: removed by agent manifest (sandbox.shell = false)";
const SHELL_CAP_BY_MANIFEST: &str =
    "- capability shell_exec ls **: removed by agent manifest (sandbox.shell = false)";
const WEB_BY_GLOBAL: &str = "- tool web: removed by global config (tools.deny contains \"web\")";
const WRITE_BY_USER: &str = "- operation files:write: removed by user restrictions (users.alice.tools.operations.files.deny contains \"write\")";
const EDIT_BY_OPS: &str = "- operation files:edit: removed by operation allowlist (tools.operations.files.deny contains \"edit\")";

/// Each layer's removal is attributed to that layer, and what remains is
/// exactly the rest.
#[test]
fn each_removal_names_its_layer() {
    let bw = home();
    let e = explain(&bw, &["--user", "alice"]);
    assert_eq!(e.header, "agent wide · user alice · local session");
    assert_eq!(e.tools, ["files: list, read, search", "time: now"]);
    assert_eq!(
        e.capabilities,
        [
            "file_read **",
            "file_write out/**",
            "net_connect example.org"
        ]
    );
    assert_eq!(
        e.removed,
        [
            SHELL_CAP_BY_MANIFEST,
            SHELL_BY_MANIFEST,
            WEB_BY_GLOBAL,
            WRITE_BY_USER,
            EDIT_BY_OPS
        ]
    );
}

/// Without alice's restrictions, write survives; the other layers still
/// remove what they removed.
#[test]
fn user_restrictions_apply_only_to_that_user() {
    let bw = home();
    let e = explain(&bw, &[]);
    assert_eq!(e.header, "agent wide · user local · local session");
    assert_eq!(e.tools, ["files: list, read, search, write", "time: now"]);
    assert!(!e.removed.iter().any(|l| l.contains("user restrictions")));
    assert!(e.removed.iter().any(|l| l == WEB_BY_GLOBAL));
    assert!(e.removed.iter().any(|l| l == EDIT_BY_OPS));
}

/// `--remote` adds the remote sandbox layer on top of everything else.
#[test]
fn remote_removes_more() {
    let bw = home();
    let e = explain(&bw, &["--user", "alice", "--remote"]);
    assert_eq!(e.header, "agent wide · user alice · remote session");
    assert_eq!(e.tools, ["files: list, read, search"]);
    assert_eq!(
        e.removed,
        [
            SHELL_CAP_BY_MANIFEST,
            SHELL_BY_MANIFEST,
            WEB_BY_GLOBAL,
            "- tool time: removed by remote sandbox policy (remote.tools.deny contains \"time\")",
            WRITE_BY_USER,
            EDIT_BY_OPS
        ]
    );
}

/// A user in access.toml who is not listed by a `users`-mode agent gets
/// nothing at all, and the reason says so.
#[test]
fn unlisted_user_gets_nothing() {
    let bw = home();
    for args in [&["--user", "bob"][..], &["--user", "bob", "--remote"]] {
        let e = explain(&bw, args);
        assert_eq!(e.tools, ["(none)"], "{args:?}");
        assert_eq!(e.capabilities, ["(none)"], "{args:?}");
        // (Under --remote, time is already gone by the remote layer.)
        for item in [
            "tool files",
            "capability file_read **",
            "capability file_write out/**",
        ] {
            assert!(
                e.removed.iter().any(|l| l
                    == &format!("- {item}: removed by user restrictions (agent \"wide\" admits only the users listed in its access.users)")),
                "{args:?}: {item} not removed for bob:\n{:#?}",
                e.removed
            );
        }
    }
}

/// A remote session for a user access.toml does not know is refused.
#[test]
fn remote_unknown_user_is_refused() {
    let bw = home();
    let out = bw.run(&["policy", "explain", "wide", "--user", "mallory", "--remote"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("`mallory` is not in access.toml"),
        "{}",
        out.stderr
    );
}

/// `run` computes the same policy: what explain lists as removed is refused
/// at the door with the same attribution.
#[test]
fn run_enforces_what_explain_says() {
    let bw = home();
    bw.write(
        "agents/wide/s.jsonl",
        concat!(
            r#"{"tool_calls": [{"name": "file_write", "input": {"path": "out/a.txt", "content": "x"}}]}"#,
            "\n",
            r#"{"tool_calls": [{"name": "shell_exec", "input": {"argv": ["ls", "-l"]}}]}"#,
            "\n",
            r#"{"tool_calls": [{"name": "time_now"}]}"#,
            "\n",
            r#"{"text": "done"}"#,
            "\n",
        ),
    );
    bw.run(&["run", "wide", "go", "--user", "alice"]).ok();
    let records = bw.audit();
    let calls: Vec<(&str, &str)> = common::with_action(&records, "tool_call")
        .into_iter()
        .map(|r| (common::field(r, "tool"), common::field(r, "decision")))
        .collect();
    assert_eq!(
        calls,
        [
            ("file_write", "denied"),
            ("shell_exec", "denied"),
            ("time_now", "allowed")
        ]
    );
    let write = common::with_action(&records, "tool_call")[0];
    assert!(
        common::field(write, "detail").contains("user restrictions"),
        "{write}"
    );
    assert!(
        !bw.path("users/alice/agents/wide/workspace/out/a.txt")
            .exists()
    );
}
