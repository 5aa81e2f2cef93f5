//! A grant with `tools = ["shell"]` puts its keys into the environment of
//! sandboxed commands (and nothing else does); output that prints them is
//! redacted before the model sees it; the use is audited by names.

use crate::common;

use common::{Bw, field, scripted, with_action};
use serde_json::json;

const GRANTED: &str = "shell-granted-token-5521x";
const OTHER: &str = "not-for-the-shell-8812y";

#[test]
fn shell_grants_pass_exactly_their_keys() {
    let bw = Bw::empty();
    bw.write("config.toml", "[secrets]\nenv = [\"BW_OTHER_SECRET\"]\n");
    let manifest = scripted(
        "builder",
        r#"[tools]
allow = ["shell"]
[sandbox]
shell = true
[[capabilities]]
kind = "shell_exec"
argv = ["printenv", "*"]
[credentials.grants.build]
keys = ["BW_SHELL_TOKEN"]
tools = ["shell"]
"#,
    );
    let call = |var: &str| {
        json!({"tool_calls": [{"name": "shell_exec", "input": {"argv": ["printenv", var]}}]})
            .to_string()
    };
    let script = [
        call("BW_SHELL_TOKEN"),
        call("BW_OTHER_SECRET"),
        json!({"text": "ok"}).to_string(),
    ];
    bw.agent("builder", &manifest, Some(&(script.join("\n") + "\n")));
    let out = bw
        .cmd(&["run", "builder", "print them"])
        .env("BW_SHELL_TOKEN", GRANTED)
        .env("BW_OTHER_SECRET", OTHER)
        .run();
    out.ok();
    let records = bw.audit();
    let notes: Vec<&str> = with_action(&records, "tool_call")
        .iter()
        .map(|r| field(r, "detail"))
        .collect();
    // Granted: printed (exit 0); not granted: not in the environment (exit 1).
    assert_eq!(notes, ["exit code 0", "exit code 1"], "{records:#?}");
    let creds = with_action(&records, "credential");
    assert_eq!(creds.len(), 2, "one per command: {records:#?}");
    assert_eq!(
        field(creds[0], "detail"),
        "grant build: keys BW_SHELL_TOKEN to the shell environment: injected"
    );
    let mut transcript = Vec::new();
    for entry in std::fs::read_dir(bw.home()).unwrap().flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("bulwark.db")
        {
            transcript.extend(std::fs::read(entry.path()).unwrap());
        }
    }
    let has = |n: &str| transcript.windows(n.len()).any(|w| w == n.as_bytes());
    assert!(
        has("[secret BW_SHELL_TOKEN redacted]"),
        "the printed token was not redacted"
    );
    assert!(!has(GRANTED) && !has(OTHER));
    assert!(!format!("{records:?}").contains(GRANTED));
}
