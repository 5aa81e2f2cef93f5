//! Credits and child agents through `bulwark run`: with `[credits]` in
//! config.toml a model call is reserved before it is made (an unfunded
//! agent's call is not made and the operator is told why), and a spawn the
//! model asks for is checked against the parent's grant and audited.

use crate::common;

use common::{Bw, field, scripted, with_action};

const PRICES: &str = "[credits]\ninput_per_mtok = 1000\noutput_per_mtok = 1000\n";

fn balance(bw: &Bw, account: &str) -> u64 {
    let out = bw.run(&["credits", "balance", account, "--json"]);
    out.ok();
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    v["balance"].as_u64().unwrap()
}

#[test]
fn an_unfunded_agent_makes_no_model_call_until_it_is_funded() {
    let bw = Bw::empty();
    bw.write("config.toml", PRICES);
    bw.agent(
        "payer",
        &scripted("payer", "[tools]\nallow = [\"time\"]\n"),
        Some(r#"{"text": "paid answer", "usage": {"input_tokens": 100, "output_tokens": 2000}}"#),
    );
    let out = bw.run(&["run", "payer", "hello"]);
    out.expect_code(5);
    assert!(out.stderr.contains("was not made"), "{}", out.stderr);
    assert!(out.stderr.contains("agent:payer"), "{}", out.stderr);
    assert!(
        out.stderr.contains("bulwark credits"),
        "says what to do: {}",
        out.stderr
    );
    assert!(!out.stdout.contains("paid answer"));
    // The refusal is in the audit log, as the ledger saw it.
    let records = bw.audit();
    let ledger = with_action(&records, "ledger");
    assert!(
        ledger
            .iter()
            .any(|r| field(r, "operation") == "hold" && field(r, "decision") == "denied"),
        "{ledger:?}"
    );

    bw.run(&["credits", "mint", "agent:payer", "1000"]).ok();
    let out = bw.run(&["run", "payer", "hello"]);
    out.ok();
    assert!(out.stdout.contains("paid answer"), "{}", out.stdout);
    // 100 in + 2000 out at 1000 per million: ceil(2.1) = 3 credits.
    assert_eq!(balance(&bw, "system:usage"), 3);
    assert_eq!(balance(&bw, "agent:payer"), 997);
}

const BOSS: &str = r#"
[tools]
allow = ["agents", "credits", "time"]
[[capabilities]]
kind = "agent_spawn"
agent = "kid*"
"#;

const KID_WITH_SHELL: &str = r#"
[tools]
allow = ["shell"]
[sandbox]
shell = true
[[capabilities]]
kind = "shell_exec"
argv = ["ls", "**"]
"#;

#[test]
fn a_spawn_the_model_asks_for_is_checked_and_audited() {
    let bw = Bw::empty();
    bw.agent(
        "boss",
        &scripted("boss", BOSS),
        Some(
            r#"{"tool_calls": [{"name": "spawn_agent", "input": {"agent": "kidshell"}}]}
{"tool_calls": [{"name": "spawn_agent", "input": {"agent": "kid"}}]}
{"text": "done"}"#,
        ),
    );
    bw.agent("kidshell", &scripted("kidshell", KID_WITH_SHELL), Some(""));
    bw.agent(
        "kid",
        &scripted("kid", "[tools]\nallow = [\"time\"]\n"),
        Some(""),
    );
    let out = bw.run(&["run", "boss", "delegate"]);
    out.ok();
    let records = bw.audit();
    let checks = with_action(&records, "spawn_check");
    assert_eq!(checks.len(), 2, "{checks:?}");
    assert_eq!(field(checks[0], "decision"), "denied");
    assert!(
        field(checks[0], "detail").contains("shell"),
        "{}",
        field(checks[0], "detail")
    );
    assert_eq!(field(checks[1], "decision"), "allowed");
    let calls: Vec<_> = with_action(&records, "tool_call")
        .into_iter()
        .filter(|r| field(r, "tool") == "spawn_agent")
        .map(|r| {
            (
                field(r, "decision").to_owned(),
                field(r, "reason").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("denied".to_owned(), "spawn_check".to_owned()),
            ("allowed".to_owned(), "ok".to_owned())
        ]
    );
    // The allowed child has its own (empty) account; the refused one none.
    let out = bw.run(&["credits", "balance", "--json"]);
    out.ok();
    assert!(out.stdout.contains("child:kid."), "{}", out.stdout);
    assert!(!out.stdout.contains("kidshell"), "{}", out.stdout);
}
