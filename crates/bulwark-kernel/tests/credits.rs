//! Credits through the door and the loop: transfers by tool, holds around
//! model calls (no reservation, no call), tool costs, idempotent retries,
//! and spends that untrusted content cannot authorize.

use crate::common;

use bulwark_audit::{AuditSink, Decision, MemorySink};
use bulwark_kernel::{AgentRuntime, Kernel, Silent, ToolCall, TurnEnd};
use bulwark_llm::ScriptDriver;
use bulwark_policy::TaintLabel;
use bulwark_store::{Actor, Store, USAGE};
use common::FaultySink;
use common::family::*;
use serde_json::json;
use std::sync::Arc;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    sink: Arc<MemorySink>,
    session: bulwark_kernel::Session,
}

fn fixture(funds: u64) -> Fixture {
    fixture_with(funds, "")
}

/// [`fixture`] with `caps` (capability tables) added to the agent's manifest.
fn fixture_with(funds: u64, caps: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    add_agent(dir.path(), "boss", &format!("{BOSS}\n{caps}"), "");
    let store = Store::open(&dir.path().join("bulwark.db")).unwrap();
    let sink = Arc::new(MemorySink::default());
    let session = paying_session(dir.path(), &store, sink.clone(), "boss", "s1");
    store
        .ensure_account("agent:other", bulwark_store::AccountKind::Agent)
        .unwrap();
    if funds > 0 {
        store
            .mint(&Actor::default(), "seed", "agent:boss", funds, "")
            .unwrap();
    }
    Fixture {
        _dir: dir,
        store,
        sink,
        session,
    }
}

async fn call(
    f: &mut Fixture,
    id: &str,
    name: &str,
    input: serde_json::Value,
) -> bulwark_kernel::DispatchResult {
    let door = door(f.sink.clone());
    door.dispatch(
        &mut f.session,
        ToolCall {
            id,
            name,
            input: &input,
        },
    )
    .await
}

fn balance(store: &Store, id: &str) -> u64 {
    store.balance(id).unwrap().balance
}

#[tokio::test]
async fn transfer_tool_moves_within_the_policy_and_the_capability() {
    let mut f = fixture(1_000);
    let ok = call(
        &mut f,
        "c1",
        "transfer_credits",
        json!({"to": "agent:other", "amount": 500}),
    )
    .await;
    assert!(!ok.is_error, "{}", ok.content);
    assert_eq!(
        (
            balance(&f.store, "agent:boss"),
            balance(&f.store, "agent:other")
        ),
        (500, 500)
    );

    // More than half of what is left: the ledger refuses, nothing moves.
    let over = call(
        &mut f,
        "c2",
        "transfer_credits",
        json!({"to": "agent:other", "amount": 251}),
    )
    .await;
    assert!(over.is_error);
    assert_eq!(over.decision, Decision::Denied);
    assert_eq!(over.reason, bulwark_audit::Reason::Credits);
    assert!(over.content.contains("at most 1/2"), "{}", over.content);
    assert_eq!(balance(&f.store, "agent:boss"), 500);

    // Beyond the econ_transfer capability (1,000,000): refused at the door.
    let cap = call(
        &mut f,
        "c3",
        "transfer_credits",
        json!({"to": "agent:other", "amount": 1_000_001}),
    )
    .await;
    assert_eq!(cap.reason, bulwark_audit::Reason::Capability);
    // To an account that does not exist: refused, nothing moves.
    let nobody = call(
        &mut f,
        "c4",
        "transfer_credits",
        json!({"to": "agent:nobody", "amount": 1}),
    )
    .await;
    assert!(
        nobody.is_error && nobody.content.contains("does not exist"),
        "{}",
        nobody.content
    );
    // Malformed amounts never reach the ledger.
    for bad in [json!(0), json!(-5), json!(1.5), json!("10")] {
        let r = call(
            &mut f,
            "c5",
            "transfer_credits",
            json!({"to": "agent:other", "amount": bad}),
        )
        .await;
        assert_eq!(r.reason, bulwark_audit::Reason::InvalidArgs, "{bad}");
    }
    assert_eq!(balance(&f.store, "agent:boss"), 500);
}

#[tokio::test]
async fn a_retried_key_moves_credits_once() {
    let mut f = fixture(1_000);
    let args = json!({"to": "agent:other", "amount": 100, "key": "pay-invoice-7"});
    let first = call(&mut f, "c1", "transfer_credits", args.clone()).await;
    let again = call(&mut f, "c2", "transfer_credits", args.clone()).await;
    assert_eq!(first.content, again.content);
    assert_eq!(balance(&f.store, "agent:other"), 100);
    // The same key for a different request is a conflict, not a transfer.
    let other = call(
        &mut f,
        "c3",
        "transfer_credits",
        json!({"to": "agent:other", "amount": 101, "key": "pay-invoice-7"}),
    )
    .await;
    assert!(
        other.is_error && other.content.contains("already used"),
        "{}",
        other.content
    );
    // Without a key, the call id is the key: the same id is the same call.
    let by_id = json!({"to": "agent:other", "amount": 10});
    call(&mut f, "same-id", "transfer_credits", by_id.clone()).await;
    call(&mut f, "same-id", "transfer_credits", by_id).await;
    assert_eq!(balance(&f.store, "agent:other"), 110);
}

#[tokio::test]
async fn untrusted_content_cannot_authorize_a_spend() {
    let mut f = fixture(1_000);
    // A child's or a web page's text is in the conversation.
    f.session.add_taint([TaintLabel::Peer]);
    let r = call(
        &mut f,
        "c1",
        "transfer_credits",
        json!({"to": "agent:other", "amount": 10}),
    )
    .await;
    assert_eq!(r.reason, bulwark_audit::Reason::Approval, "{}", r.content);
    assert_eq!(balance(&f.store, "agent:other"), 0);
    // Reading the balance is not a spend.
    let read = call(&mut f, "c2", "credits_balance", json!({})).await;
    assert!(!read.is_error, "{}", read.content);
    assert!(
        read.content.contains("1000 credits spendable"),
        "{}",
        read.content
    );
}

#[tokio::test]
async fn a_tool_with_a_cost_runs_only_when_it_can_be_paid() {
    let mut f = fixture(0);
    // `time` costs 3 credits; the account has none.
    let r = call(&mut f, "c1", "time_now", json!({})).await;
    assert_eq!(
        (r.decision, &r.reason),
        (Decision::Denied, &bulwark_audit::Reason::Credits),
        "{}",
        r.content
    );
    f.store
        .mint(&Actor::default(), "m", "agent:boss", 10, "")
        .unwrap();
    let r = call(&mut f, "c2", "time_now", json!({})).await;
    assert!(!r.is_error, "{}", r.content);
    assert_eq!(balance(&f.store, "agent:boss"), 7);
    assert_eq!(balance(&f.store, USAGE), 3);
    // A free tool needs no credits.
    let files = call(&mut f, "c3", "file_list", json!({"path": "."})).await;
    assert_ne!(files.reason, bulwark_audit::Reason::Credits);
}

/// A kernel over the fixture's store, with the fixture's audit sink.
fn kernel(f: &Fixture) -> Kernel {
    let audit: Arc<dyn AuditSink> = f.sink.clone();
    Kernel::new(door(audit), f.store.clone())
}

fn agent(script: &str) -> AgentRuntime {
    AgentRuntime {
        name: "boss".into(),
        system_prompt: "test".into(),
        model: "script".into(),
        driver: Arc::new(ScriptDriver::from_jsonl(script, "inline").unwrap()),
        max_turns: 4,
        max_tokens: 100,
    }
}

#[tokio::test]
async fn a_model_call_is_not_made_when_its_maximum_cost_cannot_be_reserved() {
    let mut f = fixture(1);
    let kernel = kernel(&f);
    // The script would fail the test if it were asked (its only line is an
    // error); the call must not be made at all.
    let a = agent(r#"{"error": "the model must not be called"}"#);
    let mut history = Vec::new();
    let out = kernel
        .run_turn(&mut f.session, &mut history, &a, "hello", &mut Silent)
        .await
        .unwrap();
    let TurnEnd::Unfunded(why) = &out.end else {
        panic!("{:?}", out.end)
    };
    assert!(
        why.contains("not made") && why.contains("agent:boss"),
        "{why}"
    );
    assert!(
        out.text.contains("not made"),
        "the agent is told why: {}",
        out.text
    );
    assert_eq!(balance(&f.store, "agent:boss"), 1);
    assert_eq!(f.store.balance("agent:boss").unwrap().held, 0);
}

#[tokio::test]
async fn a_model_call_reserves_its_maximum_and_pays_what_it_used() {
    let mut f = fixture(100_000);
    let kernel = kernel(&f);
    let a = agent(r#"{"text": "done", "usage": {"input_tokens": 1000, "output_tokens": 500}}"#);
    let mut history = Vec::new();
    let out = kernel
        .run_turn(&mut f.session, &mut history, &a, "hello", &mut Silent)
        .await
        .unwrap();
    assert_eq!(out.end, TurnEnd::Completed);
    // 1000 input at 1000/M + 500 output at 2000/M = 1 + 1 = 2 credits.
    assert_eq!(balance(&f.store, USAGE), 2);
    assert_eq!(balance(&f.store, "agent:boss"), 99_998);
    let journal = f.store.history("agent:boss", 10).unwrap();
    let kinds: Vec<&str> = journal.iter().rev().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["mint", "hold", "settle"]);
    // The hold reserved more than was charged (the estimate is a maximum).
    let hold = journal.iter().find(|e| e.kind == "hold").unwrap();
    assert!(hold.amount > 2, "{}", hold.amount);
}

#[tokio::test]
async fn a_failed_model_call_gives_its_reservation_back() {
    let mut f = fixture(100_000);
    let kernel = kernel(&f);
    let a = agent(r#"{"error": "overloaded"}"#);
    let mut history = Vec::new();
    assert!(
        kernel
            .run_turn(&mut f.session, &mut history, &a, "hello", &mut Silent)
            .await
            .is_err()
    );
    let b = f.store.balance("agent:boss").unwrap();
    assert_eq!((b.balance, b.held), (100_000, 0));
    assert_eq!(balance(&f.store, USAGE), 0);
}

#[tokio::test]
async fn a_provider_reporting_more_than_the_reservation_cannot_overdraw() {
    let mut f = fixture(100_000);
    let kernel = kernel(&f);
    // Far more tokens than the request has bytes, and than max_tokens.
    let a =
        agent(r#"{"text": "done", "usage": {"input_tokens": 400000, "output_tokens": 400000}}"#);
    let mut history = Vec::new();
    let out = kernel
        .run_turn(&mut f.session, &mut history, &a, "hello", &mut Silent)
        .await
        .unwrap();
    assert_eq!(out.end, TurnEnd::Completed);
    let journal = f.store.history("agent:boss", 10).unwrap();
    let reserved = journal.iter().find(|e| e.kind == "hold").unwrap().amount;
    assert_eq!(
        balance(&f.store, USAGE),
        reserved,
        "charged the reservation, no more"
    );
    assert_eq!(balance(&f.store, "agent:boss"), 100_000 - reserved);
    assert!(
        f.sink
            .records()
            .iter()
            .any(|r| r.operation == "model_overrun" && r.decision == Decision::Warned)
    );
}

#[tokio::test]
async fn an_overrun_warning_the_audit_log_refuses_stops_the_session() {
    let mut f = fixture(100_000);
    let audit: Arc<dyn AuditSink> =
        Arc::new(FaultySink::refusing(|r| r.operation == "model_overrun"));
    let kernel = Kernel::new(door(audit), f.store.clone());
    let a =
        agent(r#"{"text": "done", "usage": {"input_tokens": 400000, "output_tokens": 400000}}"#);
    let mut history = Vec::new();
    let err = kernel
        .run_turn(&mut f.session, &mut history, &a, "hello", &mut Silent)
        .await
        .unwrap_err();
    assert!(
        matches!(err, bulwark_kernel::KernelError::Audit(_)),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("model overrun") && text.contains("disk full") && text.contains("stopped"),
        "{text}"
    );
    assert_eq!(
        f.session.state().stopped.as_deref(),
        Some("audit sink failed")
    );
    // Still never an overdraft: the reservation was settled first.
    let journal = f.store.history("agent:boss", 10).unwrap();
    let reserved = journal.iter().find(|e| e.kind == "hold").unwrap().amount;
    assert_eq!(balance(&f.store, USAGE), reserved);
}

fn spend_limit(max: u64) -> String {
    format!("[[capabilities]]\nkind = \"econ_spend\"\nmax = {max}\n")
}

#[tokio::test]
async fn econ_spend_refuses_a_priced_tool_above_it_and_audits() {
    // `time` costs 3; the agent may reserve at most 2 per call.
    let mut f = fixture_with(100, &spend_limit(2));
    let r = call(&mut f, "c1", "time_now", json!({})).await;
    assert_eq!(
        (r.decision, &r.reason),
        (Decision::Denied, &bulwark_audit::Reason::Capability),
        "{}",
        r.content
    );
    assert!(r.content.contains("econ_spend"), "{}", r.content);
    assert_eq!(balance(&f.store, "agent:boss"), 100, "nothing was reserved");
    let audited = f
        .sink
        .records()
        .into_iter()
        .filter(|r| r.tool == "time_now" && r.decision == Decision::Denied)
        .count();
    assert_eq!(audited, 1);
    // Within the limit the tool runs and is paid.
    let mut f = fixture_with(100, &spend_limit(3));
    let r = call(&mut f, "c2", "time_now", json!({})).await;
    assert!(!r.is_error, "{}", r.content);
    assert_eq!(balance(&f.store, "agent:boss"), 97);
}

#[tokio::test]
async fn econ_spend_refuses_a_model_call_whose_maximum_is_above_it() {
    let mut f = fixture_with(100_000, &spend_limit(0));
    let kernel = kernel(&f);
    let a = agent(r#"{"error": "the model must not be called"}"#);
    let out = kernel
        .run_turn(&mut f.session, &mut Vec::new(), &a, "hello", &mut Silent)
        .await
        .unwrap();
    let TurnEnd::Stopped(why) = &out.end else {
        panic!("{:?}", out.end)
    };
    assert!(
        why.contains("econ_spend") && why.contains("not made"),
        "{why}"
    );
    assert_eq!(f.store.balance("agent:boss").unwrap().held, 0);
    assert_eq!(balance(&f.store, "agent:boss"), 100_000);
    let refused: Vec<_> = f
        .sink
        .records()
        .into_iter()
        .filter(|r| r.action == bulwark_audit::Action::ModelCall && r.operation == "econ_spend")
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].decision, Decision::Denied);

    // Within the limit, the call is made and paid.
    let mut f = fixture_with(100_000, &spend_limit(1_000));
    let within = self::kernel(&f);
    let a = agent(r#"{"text": "done", "usage": {"input_tokens": 10, "output_tokens": 5}}"#);
    let out = within
        .run_turn(&mut f.session, &mut Vec::new(), &a, "hello", &mut Silent)
        .await
        .unwrap();
    assert_eq!(out.end, TurnEnd::Completed, "{}", out.text);
    assert!(balance(&f.store, "agent:boss") < 100_000);
}
