//! The credits API: a user moves credits out of their own account only,
//! under the ledger's policy, with keys nobody else can replay; and reads
//! their own account and journal.

use crate::common;

use axum::body::Body;
use bulwark_server::{AppState, Limits};
use bulwark_store::{AccountKind, Actor, Store};
use common::{Fixture, body_json, call, get_json, local, post, rate, with_limits};
use serde_json::{Value, json};

const TRANSFER: &str = "/api/v1/credits/transfer";

/// Gives `user:<user>` `amount` credits.
fn fund(store: &Store, user: &str, amount: u64) {
    let account = format!("user:{user}");
    store.ensure_account(&account, AccountKind::User).unwrap();
    store
        .mint(
            &Actor::default(),
            &format!("fund {user}"),
            &account,
            amount,
            "",
        )
        .unwrap();
}

/// A transfer's status and JSON body.
async fn send(state: &AppState, token: &str, body: Value) -> (u16, Value) {
    let r = post(state, TRANSFER, Some(token), &body.to_string()).await;
    let status = r.status().as_u16();
    (status, body_json(r).await)
}

/// A state whose rate limits stay out of the way: a transfer costs a
/// read and a message (22 units by default; the default burst is 200).
fn state(f: &Fixture) -> AppState {
    f.state(with_limits(Limits {
        user_rate: rate(100_000, 100_000),
        ..Limits::default()
    }))
}

fn balance(store: &Store, account: &str) -> u64 {
    store.balance(account).map(|b| b.balance).unwrap_or(0)
}

#[tokio::test]
async fn a_user_pays_an_agent_from_their_own_account() {
    let f = Fixture::new();
    fund(&f.store, "bob", 1000);
    let state = state(&f);
    let (status, receipt) = send(
        &state,
        &f.bob,
        json!({"to": "agent:helper", "amount": 100, "key": "k1", "memo": "for lunch"}),
    )
    .await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!(receipt["from"], "user:bob");
    assert_eq!(receipt["to"], "agent:helper");
    assert_eq!(receipt["key"], "k1", "the key as sent");
    assert_eq!(
        (
            receipt["amount"].as_u64(),
            receipt["balance_before"].as_u64()
        ),
        (Some(100), Some(1000))
    );
    assert_eq!(balance(&f.store, "agent:helper"), 100);
    // Stored under the server's prefix, audited as bob.
    let row = f.store.history("user:bob", 1).unwrap().remove(0);
    assert_eq!(row.key, "user:bob:k1");
    let audit = f.store.audit_sink();
    let last = bulwark_audit::AuditSink::tail(&audit, 1)
        .unwrap()
        .pop()
        .unwrap()
        .record;
    assert_eq!(
        (last.user.as_str(), last.action.as_str()),
        ("bob", "ledger")
    );

    // His account, and the agents he may use.
    let credits = get_json(&state, "/api/v1/credits", Some(&f.bob)).await;
    assert_eq!(credits["account"], "user:bob");
    assert_eq!(credits["balance"], 900);
    assert_eq!(credits["policy"]["max_fraction_den"], 2);
    let agents: Vec<(&str, u64)> = credits["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["agent"].as_str().unwrap(), a["balance"].as_u64().unwrap()))
        .collect();
    assert_eq!(agents, [("helper", 100), ("other", 0)]);
    // His journal: the mint and the transfer; his key without the prefix.
    let history = get_json(&state, "/api/v1/credits/history?limit=10", Some(&f.bob)).await;
    let entries = history["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{history}");
    assert_eq!(
        (entries[0]["kind"].as_str(), entries[0]["key"].as_str()),
        (Some("transfer"), Some("k1"))
    );
    assert_eq!(entries[1]["kind"], "mint");
    assert!(entries[1]["key"].is_null(), "the operator's key is not his");
    // A user's journal is theirs: alice sees an empty one.
    let hers = get_json(&state, "/api/v1/credits/history", Some(&f.alice)).await;
    assert_eq!(hers["account"], "user:alice");
    assert_eq!(hers["entries"].as_array().unwrap().len(), 0);
    for bad in ["?limit=0", "?limit=501", "?account=user:bob"] {
        let path = format!("/api/v1/credits/history{bad}");
        assert_eq!(common::status(&state, &path, Some(&f.bob)).await, 400);
    }

    // Users are paid too; a user listed in access.toml gets an account.
    let (status, body) = send(
        &state,
        &f.bob,
        json!({"to": "user:alice", "amount": 10, "key": "k2"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(balance(&f.store, "user:alice"), 10);
    let credits = get_json(&state, "/api/v1/credits", Some(&f.alice)).await;
    assert_eq!(credits["balance"], 10);
    // Alice may use only `helper`: that is the only agent listed for her.
    assert_eq!(credits["agents"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn there_is_no_paying_account_to_name_and_bad_bodies_are_400() {
    let f = Fixture::new();
    fund(&f.store, "alice", 1000);
    fund(&f.store, "bob", 10);
    let state = state(&f);
    // Bob cannot make alice pay: the body has no `from` (or any other
    // field to name an account), and unknown fields are refused.
    for body in [
        json!({"from": "user:alice", "to": "agent:helper", "amount": 5, "key": "x"}),
        json!({"account": "user:alice", "to": "agent:helper", "amount": 5, "key": "x"}),
        json!({"to": "agent:helper", "amount": 5}),
        json!({"to": "agent:helper", "amount": -5, "key": "x"}),
        json!({"to": "agent:helper", "amount": "5", "key": "x"}),
        json!({"to": "agent:helper", "amount": 5, "key": ""}),
        json!({"to": "agent:helper", "amount": 5, "key": "k".repeat(201)}),
        json!({"to": "agent:helper", "amount": 5, "key": "x", "memo": "m".repeat(1025)}),
        json!({"to": "system:usage", "amount": 5, "key": "x"}),
        json!({"to": "helper", "amount": 5, "key": "x"}),
        json!({"to": "agent:../x", "amount": 5, "key": "x"}),
        json!(["to", "agent:helper"]),
    ] {
        let (status, err) = send(&state, &f.bob, body.clone()).await;
        assert_eq!(status, 400, "{body} -> {err}");
        assert_eq!(err["error"]["code"], "bad_request");
    }
    let r = post(&state, TRANSFER, Some(&f.bob), "not json").await;
    assert_eq!(r.status(), 400);
    // Not JSON by its content type either.
    let r = call(
        &state,
        local("POST", TRANSFER)
            .header("authorization", common::bearer(&f.bob))
            .body(Body::from(
                json!({"to": "agent:helper", "amount": 1, "key": "x"}).to_string(),
            ))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status(), 400);
    // Agents the caller may not use are refused: alice has only `helper`;
    // `secret` is private.
    let (status, _) = send(
        &state,
        &f.alice,
        json!({"to": "agent:other", "amount": 1, "key": "x"}),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = send(
        &state,
        &f.bob,
        json!({"to": "agent:secret", "amount": 1, "key": "x"}),
    )
    .await;
    assert_eq!(status, 403);
    // Requests that cannot be done at all: 422 with the ledger's words.
    for (body, says) in [
        (
            json!({"to": "user:bob", "amount": 1, "key": "self"}),
            "cannot transfer to itself",
        ),
        (
            json!({"to": "user:nobody", "amount": 1, "key": "ghost"}),
            "does not exist",
        ),
        (
            json!({"to": "agent:helper", "amount": 0, "key": "zero"}),
            "must be positive",
        ),
    ] {
        let (status, err) = send(&state, &f.bob, body.clone()).await;
        assert_eq!(status, 422, "{body} -> {err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    assert_eq!(balance(&f.store, "user:alice"), 1000);
    assert_eq!(balance(&f.store, "user:bob"), 10);
    assert_eq!(balance(&f.store, "agent:helper"), 0);
}

#[tokio::test]
async fn more_than_half_is_refused_with_the_ledgers_message_and_moves_nothing() {
    let f = Fixture::new();
    fund(&f.store, "bob", 1000);
    let state = state(&f);
    let (status, err) = send(
        &state,
        &f.bob,
        json!({"to": "agent:helper", "amount": 501, "key": "big"}),
    )
    .await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "conflict");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("at most 1/2") && message.contains("501"),
        "{message}"
    );
    assert_eq!(balance(&f.store, "user:bob"), 1000);
    assert_eq!(balance(&f.store, "agent:helper"), 0);
    // Only the mint is in his journal: refusals move nothing.
    assert_eq!(f.store.history("user:bob", 10).unwrap().len(), 1);
    // Exactly half is fine.
    let (status, _) = send(
        &state,
        &f.bob,
        json!({"to": "agent:helper", "amount": 500, "key": "half"}),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_repeated_key_returns_the_same_receipt_and_moves_once() {
    let f = Fixture::new();
    fund(&f.store, "bob", 1000);
    fund(&f.store, "alice", 1000);
    let state = state(&f);
    let body = json!({"to": "agent:helper", "amount": 100, "key": "once", "memo": "m"});
    let (s1, first) = send(&state, &f.bob, body.clone()).await;
    let (s2, second) = send(&state, &f.bob, body.clone()).await;
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(first, second);
    assert_eq!(balance(&f.store, "user:bob"), 900);
    assert_eq!(balance(&f.store, "agent:helper"), 100);
    // The same key for another transfer is a conflict, not a second move.
    let (status, err) = send(
        &state,
        &f.bob,
        json!({"to": "agent:helper", "amount": 5, "key": "once"}),
    )
    .await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(balance(&f.store, "user:bob"), 900);
    // Keys are per user: alice's "once" is her own transfer, and cannot
    // replay (or read) bob's receipt.
    let (status, hers) = send(&state, &f.alice, body).await;
    assert_eq!(status, 200, "{hers}");
    assert_ne!(hers["id"], first["id"]);
    assert_eq!(hers["from"], "user:alice");
    assert_eq!(balance(&f.store, "agent:helper"), 200);
}
