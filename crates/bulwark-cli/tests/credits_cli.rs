//! `bulwark credits balance | transfer | mint | history | policy` through
//! the binary: credits are minted and moved under the paying account's
//! policy, refusals exit 2 and change nothing, a repeated key moves once,
//! policy changes are kept field by field and audited, bad amounts are
//! refused by name, and every `--json` output parses.

use crate::common;

use common::{Bw, Out, field, with_action};
use serde_json::Value;

/// The one JSON object a `--json` command printed.
#[track_caller]
fn json(out: &Out) -> Value {
    out.ok();
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.stdout))
}

/// `(spendable, held)` of an account.
#[track_caller]
fn balance(bw: &Bw, account: &str) -> (u64, u64) {
    let v = json(&bw.run(&["credits", "balance", account, "--json"]));
    assert_eq!(v["account"], account);
    (
        v["balance"].as_u64().expect("a balance"),
        v["held"].as_u64().expect("held"),
    )
}

/// The journal rows touching `account`, newest first.
#[track_caller]
fn entries(bw: &Bw, account: &str) -> Vec<Value> {
    let v = json(&bw.run(&["credits", "history", account, "--json", "-n", "1000"]));
    v["entries"].as_array().expect("an entries array").clone()
}

/// A home with `user:alice` holding `amount` and an empty `agent:bot`.
fn funded(amount: &str) -> Bw {
    let bw = Bw::empty();
    bw.run(&["credits", "mint", "user:alice", amount]).ok();
    bw.run(&["credits", "mint", "agent:bot", "1"]).ok();
    bw
}

#[test]
fn mint_balance_and_a_transfer_within_half() {
    let bw = Bw::empty();
    let out = bw.run(&[
        "credits",
        "mint",
        "user:alice",
        "1000",
        "--memo",
        "allowance",
    ]);
    out.ok();
    assert!(
        out.stdout.contains("opened account user:alice"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("minted 1000"), "{}", out.stdout);
    assert_eq!(balance(&bw, "user:alice"), (1000, 0));

    // Half of 1000 is allowed; --open opens the new agent account.
    let out = bw.run(&[
        "credits",
        "transfer",
        "user:alice",
        "agent:bot",
        "500",
        "--open",
        "--memo",
        "work",
    ]);
    out.ok();
    assert!(
        out.stdout.contains("opened account agent:bot"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("moved 500"), "{}", out.stdout);
    assert_eq!(balance(&bw, "user:alice"), (500, 0));
    assert_eq!(balance(&bw, "agent:bot"), (500, 0));

    // Every account, with kinds and the conservation check.
    let v = json(&bw.run(&["credits", "balance", "--json"]));
    assert_eq!(v["conserved"], true, "{v}");
    assert_eq!(v["total"], 1000);
    assert_eq!(v["minted"], 1000);
    let kinds: Vec<(String, String)> = v["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (field(a, "account").into(), field(a, "kind").into()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("agent:bot".into(), "agent".into()),
            ("system:usage".into(), "system".into()),
            ("user:alice".into(), "user".into()),
        ]
    );
    let out = bw.run(&["credits", "balance"]);
    out.ok();
    assert!(out.stdout.contains("ACCOUNT"), "{}", out.stdout);
    assert!(
        out.stdout.contains("every credit is accounted for"),
        "{}",
        out.stdout
    );

    // The store audited both, as the local operator from the CLI.
    let ledger: Vec<_> = bw.audit();
    let ledger = with_action(&ledger, "ledger");
    let ops: Vec<&str> = ledger.iter().map(|r| field(r, "operation")).collect();
    assert_eq!(ops, ["mint", "transfer"], "{ledger:?}");
    for r in ledger {
        assert_eq!(field(r, "user"), "local");
        assert_eq!(field(r, "session"), "cli");
    }
}

#[test]
fn a_transfer_above_half_is_refused_and_changes_nothing() {
    let bw = funded("1000");
    let before = entries(&bw, "user:alice").len();
    let out = bw.run(&["credits", "transfer", "user:alice", "agent:bot", "501"]);
    out.expect_code(2);
    assert!(out.stderr.contains("at most 1/2"), "{}", out.stderr);
    assert!(
        out.stderr.contains("bulwark credits policy user:alice"),
        "the refusal points at the rules: {}",
        out.stderr
    );
    assert_eq!(balance(&bw, "user:alice"), (1000, 0));
    assert_eq!(balance(&bw, "agent:bot"), (1, 0));
    assert_eq!(entries(&bw, "user:alice").len(), before);
    // The refusal is audited as denied.
    let records = bw.audit();
    let denied: Vec<_> = with_action(&records, "ledger")
        .into_iter()
        .filter(|r| field(r, "decision") == "denied")
        .collect();
    assert_eq!(denied.len(), 1, "{denied:?}");

    // Unknown accounts are named, and not opened without --open.
    let out = bw.run(&["credits", "transfer", "user:alice", "agent:nobody", "1"]);
    out.expect_code(2);
    assert!(out.stderr.contains("--open"), "{}", out.stderr);
    let out = bw.run(&["credits", "transfer", "user:ghost", "agent:bot", "1"]);
    out.expect_code(2);
    assert!(out.stderr.contains("user:ghost"), "{}", out.stderr);
    bw.run(&["credits", "balance", "agent:nobody"])
        .expect_code(2);
}

#[test]
fn a_repeated_key_moves_once() {
    let bw = Bw::empty();
    for _ in 0..2 {
        bw.run(&["credits", "mint", "user:alice", "1000", "--key", "m-1"])
            .ok();
    }
    assert_eq!(balance(&bw, "user:alice"), (1000, 0));

    let args = [
        "credits",
        "transfer",
        "user:alice",
        "agent:bot",
        "100",
        "--key",
        "t-1",
        "--open",
    ];
    let first = bw.run(&args);
    first.ok();
    assert!(first.stdout.contains("moved 100"), "{}", first.stdout);
    let again = bw.run(&args);
    again.ok();
    assert!(again.stdout.contains("already done"), "{}", again.stdout);
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let receipt = json(&bw.run(&with_json));
    assert_eq!(receipt["replayed"], true, "{receipt}");
    assert_eq!(receipt["key"], "t-1");
    assert_eq!(receipt["amount"], 100);
    assert_eq!(balance(&bw, "user:alice"), (900, 0));
    assert_eq!(balance(&bw, "agent:bot"), (100, 0));
    assert_eq!(entries(&bw, "agent:bot").len(), 1);

    // The same key for a different request is refused.
    let out = bw.run(&[
        "credits",
        "transfer",
        "user:alice",
        "agent:bot",
        "200",
        "--key",
        "t-1",
    ]);
    out.expect_code(2);
    assert!(out.stderr.contains("already used"), "{}", out.stderr);
    assert_eq!(balance(&bw, "user:alice"), (900, 0));

    bw.run(&["credits", "mint", "user:alice", "5", "--key", ""])
        .expect_code(2);
    assert_eq!(balance(&bw, "user:alice"), (900, 0));

    // Without --key a key is made, printed, and works as one.
    let out = bw.run(&["credits", "transfer", "user:alice", "agent:bot", "50"]);
    out.ok();
    let key = out
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("the key line comes first")
        .to_string();
    assert!(key.starts_with("cli-"), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!("`--key {key}` is safe")),
        "{}",
        out.stdout
    );
    let out = bw.run(&[
        "credits",
        "transfer",
        "user:alice",
        "agent:bot",
        "50",
        "--key",
        &key,
    ]);
    out.ok();
    assert!(out.stdout.contains("already done"), "{}", out.stdout);
    assert_eq!(balance(&bw, "user:alice"), (850, 0));
    assert_eq!(balance(&bw, "agent:bot"), (150, 0));
}

#[test]
fn a_policy_change_lets_a_refused_transfer_through() {
    let bw = funded("1000");
    let big = ["credits", "transfer", "user:alice", "agent:bot", "800"];
    bw.run(&big).expect_code(2);

    let shown = json(&bw.run(&["credits", "policy", "user:alice", "--json"]));
    assert_eq!(shown["account"], "user:alice");
    assert_eq!(shown["policy"]["max_fraction_num"], 1);
    assert_eq!(shown["policy"]["max_fraction_den"], 2);
    assert_eq!(shown["policy"]["daily_cap"], Value::Null);

    let out = bw.run(&[
        "credits",
        "policy",
        "user:alice",
        "--max-fraction",
        "1/1",
        "--reserve",
        "100",
    ]);
    out.ok();
    assert!(out.stdout.contains("changed the policy"), "{}", out.stdout);
    // Only the given fields changed.
    bw.run(&["credits", "policy", "user:alice", "--daily-cap", "5000"])
        .ok();
    let p = json(&bw.run(&["credits", "policy", "user:alice", "--json"]))["policy"].clone();
    assert_eq!(p["max_fraction_num"], 1);
    assert_eq!(p["max_fraction_den"], 1);
    assert_eq!(p["reserve_floor"], 100);
    assert_eq!(p["daily_cap"], 5000);
    assert_eq!(p["counterparties"], serde_json::json!([]));

    bw.run(&big).ok();
    assert_eq!(balance(&bw, "user:alice"), (200, 0));
    assert_eq!(balance(&bw, "agent:bot"), (801, 0));

    // The reserve floor and the counterparty list bind the next transfers.
    let out = bw.run(&["credits", "transfer", "user:alice", "agent:bot", "150"]);
    out.expect_code(2);
    assert!(out.stderr.contains("reserve of 100"), "{}", out.stderr);
    bw.run(&[
        "credits",
        "policy",
        "user:alice",
        "--counterparty",
        "user:x",
    ])
    .ok();
    let out = bw.run(&["credits", "transfer", "user:alice", "agent:bot", "50"]);
    out.expect_code(2);
    assert!(out.stderr.contains("may not pay"), "{}", out.stderr);
    bw.run(&["credits", "policy", "user:alice", "--any-counterparty"])
        .ok();
    bw.run(&["credits", "policy", "user:alice", "--daily-cap", "none"])
        .ok();
    bw.run(&["credits", "transfer", "user:alice", "agent:bot", "50"])
        .ok();
    assert_eq!(balance(&bw, "user:alice"), (150, 0));

    // Every change was audited by set_policy.
    let records = bw.audit();
    let changes = with_action(&records, "ledger")
        .into_iter()
        .filter(|r| field(r, "operation") == "policy")
        .count();
    assert_eq!(changes, 5);

    // Bad values are refused by name, and nothing changes.
    for (flag, value, says) in [
        ("--max-fraction", "3/2", "more than the whole balance"),
        ("--max-fraction", "0/0", "denominator"),
        ("--max-fraction", "abc", "not a fraction"),
        ("--reserve", "-1", "negative"),
        ("--reserve", "1.5", "whole minor units"),
        ("--daily-cap", "lots", "none"),
    ] {
        let out = bw.run(&["credits", "policy", "user:alice", flag, value]);
        out.expect_code(2);
        assert!(out.stderr.contains(flag), "{flag} {value}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{flag} {value}: {}", out.stderr);
    }
    bw.run(&[
        "credits",
        "policy",
        "user:alice",
        "--counterparty",
        "a",
        "--any-counterparty",
    ])
    .expect_code(2);
    bw.run(&["credits", "policy", "user:ghost", "--reserve", "1"])
        .expect_code(2);
    let after = json(&bw.run(&["credits", "policy", "user:alice", "--json"]))["policy"].clone();
    assert_eq!(after["max_fraction_den"], 1);
    assert_eq!(after["daily_cap"], Value::Null);
}

#[test]
fn bad_amounts_are_usage_errors_naming_the_argument() {
    let bw = Bw::empty();
    for amount in [
        "0",
        "-5",
        "2.5",
        "1,000",
        "abc",
        "",
        "9223372036854775808",
        "99999999999999999999999",
    ] {
        let out = bw.run(&["credits", "mint", "user:alice", amount]);
        out.expect_code(2);
        assert!(
            out.stderr.contains("<AMOUNT>"),
            "{amount:?}: {}",
            out.stderr
        );
        let out = bw.run(&["credits", "transfer", "user:alice", "agent:bot", amount]);
        out.expect_code(2);
        assert!(
            out.stderr.contains("<AMOUNT>"),
            "{amount:?}: {}",
            out.stderr
        );
    }
    assert!(
        !bw.path("bulwark.db").exists(),
        "nothing was opened, let alone changed"
    );
    let out = bw.run(&["credits", "mint", "user:alice", "0"]);
    assert!(out.stderr.contains("at least 1"), "{}", out.stderr);

    // Only user: and agent: accounts are minted into.
    for (to, says) in [
        ("child:bot.00ff", "parent"),
        ("system:usage", "system accounts"),
        ("alice", "user:<name>"),
        ("user:", "missing"),
    ] {
        let out = bw.run(&["credits", "mint", to, "10"]);
        out.expect_code(2);
        assert!(out.stderr.contains(says), "{to}: {}", out.stderr);
    }
    // Reading before anything exists says how to start.
    let out = bw.run(&["credits", "balance"]);
    out.expect_code(2);
    assert!(out.stderr.contains("credits mint"), "{}", out.stderr);
}

#[test]
fn history_lists_the_rows_newest_first() {
    let bw = funded("1000");
    bw.run(&[
        "credits",
        "transfer",
        "user:alice",
        "agent:bot",
        "300",
        "--memo",
        "research",
    ])
    .ok();
    let rows = entries(&bw, "user:alice");
    let kinds: Vec<&str> = rows.iter().map(|e| field(e, "kind")).collect();
    assert_eq!(kinds, ["transfer", "mint"]);
    assert_eq!(rows[0]["amount"], 300);
    assert_eq!(rows[0]["memo"], "research");
    assert_eq!(rows[0]["balance_before"], 1000);
    assert!(rows[0]["id"].as_i64() > rows[1]["id"].as_i64());

    let out = bw.run(&["credits", "history", "user:alice"]);
    out.ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two rows:\n{}", out.stdout);
    assert!(lines[0].contains("KIND"));
    assert!(lines[1].contains("transfer") && lines[1].contains("research"));
    assert!(lines[2].contains("mint") && lines[2].contains("system:issuer"));

    let one = json(&bw.run(&["credits", "history", "user:alice", "--limit", "1", "--json"]));
    assert_eq!(one["entries"].as_array().unwrap().len(), 1);
    let mints = entries(&bw, "system:issuer");
    assert_eq!(mints.len(), 2);

    bw.run(&["credits", "history", "user:ghost"]).expect_code(2);
    bw.run(&["credits", "history", "user:alice", "--limit", "0"])
        .expect_code(2);
}

#[test]
fn a_ledger_that_does_not_add_up_fails_the_balance() {
    let bw = funded("1000");
    {
        let db = rusqlite::Connection::open(bw.path("bulwark.db")).unwrap();
        db.execute(
            "UPDATE ledger_accounts SET balance = balance + 5 WHERE id = 'user:alice'",
            [],
        )
        .unwrap();
    }
    let out = bw.run(&["credits", "balance"]);
    out.expect_code(1);
    assert!(out.stderr.contains("does not add up"), "{}", out.stderr);
    assert!(
        out.stderr.contains("1006") && out.stderr.contains("1001"),
        "{}",
        out.stderr
    );
    let out = bw.run(&["credits", "balance", "--json"]);
    out.expect_code(1);
    let v: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["conserved"], false);
}

#[test]
fn every_subcommand_teaches() {
    let bw = Bw::empty();
    for sub in ["balance", "transfer", "mint", "history", "policy"] {
        let out = bw.run(&["credits", sub, "--help"]);
        out.ok();
        assert!(out.stdout.contains("Examples:"), "{sub}: {}", out.stdout);
        assert!(
            out.stdout.contains("bulwark credits"),
            "{sub}: {}",
            out.stdout
        );
    }
    let out = bw.run(&["credits", "--help"]);
    out.ok();
    for sub in ["balance", "transfer", "mint", "history", "policy"] {
        assert!(out.stdout.contains(sub), "{}", out.stdout);
    }
}

/// Issue 17 item 12: a second mint past 2^63 - 1 in total was accepted, and
/// from then on `credits balance` failed with "integer overflow".
#[test]
fn a_mint_past_the_supply_limit_is_refused_and_the_balance_still_adds_up() {
    const MAX: &str = "9223372036854775807";
    let bw = Bw::empty();
    bw.run(&["credits", "mint", "user:alice", MAX]).ok();
    let before = bw.audit().len();
    for to in ["agent:bot", "user:alice"] {
        let out = bw.run(&["credits", "mint", to, "1"]);
        out.expect_code(2);
        assert!(
            out.stderr.contains(MAX) && out.stderr.contains("mint at most 0"),
            "the refusal names the limit and what to do: {}",
            out.stderr
        );
    }
    // Nothing changed: no account opened, no audit record, same balances.
    bw.run(&["credits", "balance", "agent:bot"]).expect_code(2);
    assert_eq!(bw.audit().len(), before);
    assert_eq!(balance(&bw, "user:alice"), (i64::MAX as u64, 0));
    let out = bw.run(&["credits", "balance"]);
    out.ok();
    assert!(
        out.stdout.contains("every credit is accounted for"),
        "{}",
        out.stdout
    );
    let v = json(&bw.run(&["credits", "balance", "--json"]));
    assert_eq!(v["conserved"], true);
    assert_eq!(v["total"].as_u64(), Some(i64::MAX as u64));
    assert_eq!(v["minted"].as_u64(), Some(i64::MAX as u64));
}

#[test]
fn minting_up_to_the_supply_limit_works() {
    let bw = Bw::empty();
    bw.run(&["credits", "mint", "user:alice", "9223372036854775806"])
        .ok();
    let out = bw.run(&["credits", "mint", "agent:bot", "2"]);
    out.expect_code(2);
    assert!(out.stderr.contains("mint at most 1"), "{}", out.stderr);
    bw.run(&["credits", "mint", "agent:bot", "1"]).ok();
    assert_eq!(balance(&bw, "agent:bot"), (1, 0));
    let v = json(&bw.run(&["credits", "balance", "--json"]));
    assert_eq!(v["conserved"], true);
    assert_eq!(v["total"].as_u64(), Some(i64::MAX as u64));
}

/// Issue 17 item 13: `--open` opened `user:../x` and `agent:X`.
#[test]
fn account_names_outside_the_name_rule_are_refused() {
    let bw = funded("1000");
    let accounts = json(&bw.run(&["credits", "balance", "--json"]))["accounts"].clone();
    let long = format!("agent:{}", "a".repeat(65));
    for bad in [
        "user:../x",
        "agent:X",
        "user:",
        long.as_str(),
        "user:a\u{7}b",
        "agent:\u{1b}[31mred",
        "user:-x",
    ] {
        for args in [
            &["credits", "transfer", "user:alice", bad, "1", "--open"][..],
            &["credits", "mint", bad, "1"][..],
        ] {
            let out = bw.run(args);
            out.expect_code(2);
            assert!(
                out.stderr.contains(
                    "must be 1-64 lowercase letters, digits, `-` or `_`, starting with a letter or digit"
                ),
                "{args:?}: the refusal names the rule: {}",
                out.stderr
            );
        }
    }
    // Nothing was opened or moved.
    assert_eq!(
        json(&bw.run(&["credits", "balance", "--json"]))["accounts"],
        accounts
    );
    // Names within the rule still open.
    for good in ["agent:new-bot_2", "user:0day"] {
        let out = bw.run(&["credits", "transfer", "user:alice", good, "1", "--open"]);
        out.ok();
        assert!(out.stdout.contains("opened account"), "{}", out.stdout);
        assert_eq!(balance(&bw, good), (1, 0));
    }
    let long_ok = format!("user:{}", "b".repeat(64));
    bw.run(&["credits", "mint", &long_ok, "1"]).ok();
    assert_eq!(balance(&bw, &long_ok), (1, 0));
}

/// `credits policy` was already audited by the ledger, in the transaction
/// that changes the policy (action `ledger`, operation `policy`): one record
/// per change under the local operator, and a change whose record cannot
/// be written is not made.
#[test]
fn each_policy_change_is_one_record_and_none_without_it() {
    let bw = funded("1000");
    bw.run(&["credits", "policy", "user:alice", "--daily-cap", "500"])
        .ok();
    let records = bw.audit();
    let changes: Vec<_> = with_action(&records, "ledger")
        .into_iter()
        .filter(|r| field(r, "operation") == "policy")
        .collect();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(field(changes[0], "user"), "local");
    assert!(field(changes[0], "detail").contains("user:alice"));

    let db = rusqlite::Connection::open(bw.path("bulwark.db")).unwrap();
    db.execute_batch(
        "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit \
         BEGIN SELECT RAISE(ABORT, 'the test refuses audit writes'); END;",
    )
    .unwrap();
    drop(db);
    let out = bw.run(&["credits", "policy", "user:alice", "--daily-cap", "9"]);
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    let p = json(&bw.run(&["credits", "policy", "user:alice", "--json"]))["policy"].clone();
    assert_eq!(p["daily_cap"], 500, "the policy changed without its record");
}
