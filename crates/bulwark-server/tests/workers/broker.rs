//! The brokered store as a compromised worker meets it: every request is
//! performed for the conversation the server started the worker for, and
//! nothing a worker sends can reach another user's session or put another
//! name on an audit record. And the work a worker must do still works.

use bulwark_audit::{AuditSink, Decision};
use bulwark_protocol::frame::{decode_all, encode_frame};
use bulwark_protocol::protocol::{Command, Event};
use bulwark_protocol::store_ipc::{
    AuditEntry, LedgerReceipt, MAX_LEDGER_ACCOUNT_BYTES, MAX_LEDGER_KEY_BYTES,
    MAX_LEDGER_MEMO_BYTES, MAX_STORED_JSON, StoreFailure, StoreReply, StoreRequest, StoredRole,
};
use bulwark_server::workers::{
    BrokerScope, CreditLimits, DatabaseBroker, MAX_OPEN_HOLDS, StoreBroker,
};
use bulwark_store::{AccountKind, Actor, Balance, NewSession, Store};

#[path = "broker/audit_batch.rs"]
mod audit_batch;
#[path = "broker/lease.rs"]
mod lease;
#[path = "broker/provenance.rs"]
mod provenance;

fn scope(user: &str, agent: &str) -> BrokerScope {
    BrokerScope::new(user, agent)
}

fn refused(reply: &StoreReply) -> Option<StoreFailure> {
    match reply {
        StoreReply::Failed { kind, .. } => Some(*kind),
        _ => None,
    }
}

fn entry(action: &str) -> AuditEntry {
    AuditEntry {
        time_ms: 1,
        action: action.into(),
        tool: "file_read".into(),
        operation: "files:read".into(),
        args_digest: String::new(),
        decision: Decision::Allowed,
        reason: "ok".into(),
        detail: String::new(),
        duration_us: 0,
    }
}

fn with_bobs_session() -> (Store, DatabaseBroker) {
    let store = Store::open_in_memory().unwrap();
    store
        .create_session(&NewSession {
            id: "bobs".into(),
            agent: "helper".into(),
            user: "bob".into(),
        })
        .unwrap();
    store
        .append_message("bobs", "user", r#"{"secret":"bob's words"}"#)
        .unwrap();
    let broker = DatabaseBroker::new(store.clone());
    (store, broker)
}

#[test]
fn another_users_session_cannot_be_opened_read_or_written() {
    let (store, broker) = with_bobs_session();
    let mut alice = scope("alice", "helper");
    // Resume bob's session: refused like a session that does not exist.
    let reply = broker.handle(
        &mut alice,
        StoreRequest::Resume {
            session: "bobs".into(),
        },
    );
    assert_eq!(refused(&reply), Some(StoreFailure::NotFound), "{reply:?}");
    assert_eq!(alice.session, None);
    // Nothing is readable or writable without an open session of hers.
    for request in [
        StoreRequest::Messages { from: 0 },
        StoreRequest::AppendMessage {
            role: StoredRole::User,
            content_json: "{}".into(),
        },
        StoreRequest::SaveState {
            state_json: "{}".into(),
        },
        StoreRequest::Audit {
            entry: entry("tool_call"),
        },
    ] {
        let reply = broker.handle(&mut alice, request.clone());
        assert_eq!(
            refused(&reply),
            Some(StoreFailure::Forbidden),
            "{request:?}"
        );
    }
    // Creating a session under bob's id does not take it over.
    let reply = broker.handle(
        &mut alice,
        StoreRequest::Create {
            session: "bobs".into(),
        },
    );
    assert!(refused(&reply).is_some(), "{reply:?}");
    assert_eq!(alice.session, None);
    // Same user, other agent: not hers either.
    let mut bob_other = scope("bob", "other");
    let reply = broker.handle(
        &mut bob_other,
        StoreRequest::Resume {
            session: "bobs".into(),
        },
    );
    assert_eq!(refused(&reply), Some(StoreFailure::NotFound));
    assert_eq!(store.messages("bobs").unwrap().len(), 1);
}

#[test]
fn a_worker_opens_one_session_and_its_records_carry_the_servers_names() {
    let (store, broker) = with_bobs_session();
    let mut alice = scope("alice", "helper");
    let created = broker.handle(
        &mut alice,
        StoreRequest::Create {
            session: "a1".into(),
        },
    );
    assert_eq!(created, StoreReply::Done);
    // A second open, of anything, is refused: the session stays `a1`.
    for request in [
        StoreRequest::Create {
            session: "a2".into(),
        },
        StoreRequest::Resume {
            session: "bobs".into(),
        },
    ] {
        let reply = broker.handle(&mut alice, request);
        assert_eq!(refused(&reply), Some(StoreFailure::Forbidden));
    }
    assert_eq!(alice.session.as_deref(), Some("a1"));

    // The work a worker does: messages, state, tokens, audit.
    let message = r#"{"role":"user","blocks":[]}"#;
    for request in [
        StoreRequest::AppendMessage {
            role: StoredRole::User,
            content_json: message.into(),
        },
        StoreRequest::SaveState {
            state_json: r#"{"k":1}"#.into(),
        },
        StoreRequest::RecordTokens { tokens: 42 },
        StoreRequest::Audit {
            entry: entry("tool_call"),
        },
        StoreRequest::AuditFlush {},
    ] {
        assert_eq!(broker.handle(&mut alice, request), StoreReply::Done);
    }
    assert_eq!(
        broker.handle(&mut alice, StoreRequest::Messages { from: 0 }),
        StoreReply::Messages {
            items: vec![message.to_string()],
            more: false
        }
    );
    assert_eq!(
        broker.handle(&mut alice, StoreRequest::TokensSince { since_ms: 0 }),
        StoreReply::Tokens { tokens: 42 }
    );
    let row = store.session("a1").unwrap().unwrap();
    assert_eq!((row.user.as_str(), row.agent.as_str()), ("alice", "helper"));
    assert_eq!(row.state_json.as_deref(), Some(r#"{"k":1}"#));
    // The audit record is alice's, in a1, whatever the worker would claim.
    let audit = store.audit_sink();
    let last = audit.tail(1).unwrap().pop().unwrap().record;
    assert_eq!(
        (
            last.user.as_str(),
            last.agent.as_str(),
            last.session.as_str()
        ),
        ("alice", "helper", "a1")
    );
    // Bob's usage is his: alice's tokens do not count for him.
    let mut bob = scope("bob", "helper");
    assert_eq!(
        broker.handle(&mut bob, StoreRequest::TokensSince { since_ms: 0 }),
        StoreReply::Tokens { tokens: 0 }
    );
}

#[test]
fn what_is_stored_must_be_json_and_within_bounds() {
    let (store, broker) = with_bobs_session();
    let mut alice = scope("alice", "helper");
    broker.handle(
        &mut alice,
        StoreRequest::Create {
            session: "a1".into(),
        },
    );
    for request in [
        StoreRequest::AppendMessage {
            role: StoredRole::Assistant,
            content_json: "not json".into(),
        },
        StoreRequest::SaveState {
            state_json: "{".into(),
        },
        StoreRequest::AppendMessage {
            role: StoredRole::User,
            content_json: format!("\"{}\"", "a".repeat(MAX_STORED_JSON)),
        },
    ] {
        let reply = broker.handle(&mut alice, request);
        assert_eq!(refused(&reply), Some(StoreFailure::Forbidden), "{reply:?}");
    }
    assert!(store.messages("a1").unwrap().is_empty());
    // A resumed session of her own is hers to continue, once the worker
    // that ran it has ended (it held the session's lease).
    broker.end(&alice);
    let mut again = scope("alice", "helper");
    let reply = broker.handle(
        &mut again,
        StoreRequest::Resume {
            session: "a1".into(),
        },
    );
    assert_eq!(reply, StoreReply::Resumed { state_json: None });
    assert_eq!(again.session.as_deref(), Some("a1"));
}

// ---- Credits -------------------------------------------------------------

/// A store where `agent:helper` has 1000 credits and `agent:other` 5000,
/// and `user:alice` exists (with nothing).
fn funded() -> Store {
    let store = Store::open_in_memory().unwrap();
    let admin = Actor::default();
    for (account, amount) in [("agent:helper", 1000), ("agent:other", 5000)] {
        store.ensure_account(account, AccountKind::Agent).unwrap();
        store
            .mint(&admin, &format!("fund {account}"), account, amount, "")
            .unwrap();
    }
    store
        .ensure_account("user:alice", AccountKind::User)
        .unwrap();
    store
}

/// A worker of `user` with `agent`, its session `session` created.
fn opened(broker: &DatabaseBroker, user: &str, agent: &str, session: &str) -> BrokerScope {
    let mut s = scope(user, agent);
    let created = broker.handle(
        &mut s,
        StoreRequest::Create {
            session: session.into(),
        },
    );
    assert_eq!(created, StoreReply::Done);
    s
}

fn hold(broker: &DatabaseBroker, s: &mut BrokerScope, key: &str, amount: u64) -> StoreReply {
    broker.handle(
        s,
        StoreRequest::LedgerHold {
            key: key.into(),
            amount,
        },
    )
}

fn hold_id(reply: &StoreReply) -> i64 {
    match reply {
        StoreReply::LedgerHold { hold } => *hold,
        other => panic!("not a hold: {other:?}"),
    }
}

fn transfer(to: &str, amount: u64, key: &str) -> StoreRequest {
    StoreRequest::LedgerTransfer {
        key: key.into(),
        to: to.into(),
        amount,
        memo: "thanks".into(),
    }
}

#[test]
fn a_worker_pays_from_its_agents_account_with_keys_scoped_to_its_session() {
    let store = funded();
    let broker = DatabaseBroker::new(store.clone());
    let mut alice = opened(&broker, "alice", "helper", "a1");
    let reply = broker.handle(&mut alice, transfer("user:alice", 100, "t1"));
    let StoreReply::LedgerTransfer(receipt) = reply.clone() else {
        panic!("a receipt: {reply:?}");
    };
    let LedgerReceipt {
        id,
        key,
        from,
        to,
        amount,
        balance_before,
        ..
    } = *receipt;
    // The account is the agent's whatever the worker would like; the key
    // comes back as the worker sent it.
    assert_eq!(
        (key.as_str(), from.as_str(), to.as_str()),
        ("t1", "agent:helper", "user:alice")
    );
    assert_eq!((amount, balance_before), (100, 1000));
    // Stored under the server's prefix, audited as alice's session a1.
    let row = store.history("agent:helper", 1).unwrap().remove(0);
    assert_eq!(row.key, "session:a1:t1");
    let audit = store.audit_sink().tail(1).unwrap().pop().unwrap().record;
    assert_eq!(
        (
            audit.user.as_str(),
            audit.agent.as_str(),
            audit.session.as_str(),
            audit.action.as_str()
        ),
        ("alice", "helper", "a1", "ledger")
    );
    // A retry in the session replays; it moves nothing more.
    assert_eq!(
        broker.handle(&mut alice, transfer("user:alice", 100, "t1")),
        reply
    );
    assert_eq!(store.balance("user:alice").unwrap().balance, 100);
    // The same key in another session (same agent) is another transfer:
    // one session can never replay, or read, another's receipt.
    let mut bob = opened(&broker, "bob", "helper", "b1");
    let again = broker.handle(&mut bob, transfer("user:alice", 100, "t1"));
    match again {
        StoreReply::LedgerTransfer(other) => assert_ne!(other.id, id),
        other => panic!("a receipt: {other:?}"),
    }
    assert_eq!(store.balance("user:alice").unwrap().balance, 200);
    // The ledger's policy still decides: more than half is refused, as a
    // reply (not a violation), and nothing moves.
    let too_much = broker.handle(&mut alice, transfer("user:alice", 500, "t2"));
    match too_much {
        StoreReply::LedgerRefused { message, denial } => {
            assert!(denial, "{message}");
            assert!(message.contains("at most 1/2"), "{message}");
        }
        other => panic!("a refusal: {other:?}"),
    }
    assert_eq!(
        store.balance("agent:helper").unwrap(),
        Balance {
            balance: 800,
            held: 0
        }
    );
    // Nothing of the ledger before a session is open.
    let mut early = scope("alice", "helper");
    for request in [
        StoreRequest::LedgerBalance {},
        transfer("user:alice", 1, "t3"),
    ] {
        let reply = broker.handle(&mut early, request);
        assert_eq!(refused(&reply), Some(StoreFailure::Forbidden));
    }
}

#[test]
fn a_worker_settles_only_holds_made_for_it() {
    let store = funded();
    let broker = DatabaseBroker::new(store.clone());
    let mut alice = opened(&broker, "alice", "helper", "a1");
    let mut bob = opened(&broker, "bob", "helper", "b1");
    let alices = hold_id(&hold(&broker, &mut alice, "h1", 100));
    assert_eq!(alice.open_holds().collect::<Vec<_>>(), [(alices, 100)]);
    // Bob's worker names alice's hold, or one it made up: a violation,
    // refused, and the hold stays open.
    for request in [
        StoreRequest::LedgerSettle {
            key: "s".into(),
            hold: alices,
            actual: 0,
        },
        StoreRequest::LedgerRelease {
            key: "r".into(),
            hold: alices,
        },
        StoreRequest::LedgerSettle {
            key: "s".into(),
            hold: 424_242,
            actual: 1,
        },
        StoreRequest::LedgerRelease {
            key: "r".into(),
            hold: -1,
        },
    ] {
        assert!(bob.violation(&request).is_some(), "{request:?}");
        let reply = broker.handle(&mut bob, request);
        assert_eq!(refused(&reply), Some(StoreFailure::Forbidden), "{reply:?}");
    }
    assert_eq!(store.balance("agent:helper").unwrap().held, 100);
    // Alice's worker settles its own: charged 30, 70 back.
    let settled = broker.handle(
        &mut alice,
        StoreRequest::LedgerSettle {
            key: "s1".into(),
            hold: alices,
            actual: 30,
        },
    );
    assert_eq!(
        settled,
        StoreReply::LedgerClosed {
            id: match settled {
                StoreReply::LedgerClosed { id, .. } => id,
                _ => panic!("closed: {settled:?}"),
            },
            hold: alices,
            charged: 30,
            released: 70,
        }
    );
    assert_eq!(
        store.balance("agent:helper").unwrap(),
        Balance {
            balance: 970,
            held: 0
        }
    );
    // Closed, it is no longer hers to name.
    let again = StoreRequest::LedgerRelease {
        key: "r1".into(),
        hold: alices,
    };
    assert!(alice.violation(&again).is_some());
    assert_eq!(alice.open_holds().count(), 0);
    // A release of her own hold gives it all back.
    let h2 = hold_id(&hold(&broker, &mut alice, "h2", 50));
    let released = broker.handle(
        &mut alice,
        StoreRequest::LedgerRelease {
            key: "r2".into(),
            hold: h2,
        },
    );
    assert!(
        matches!(
            released,
            StoreReply::LedgerClosed {
                charged: 0,
                released: 50,
                ..
            }
        ),
        "{released:?}"
    );
}

#[test]
fn a_hold_is_refused_by_the_users_session_budget() {
    let store = funded();
    let broker = DatabaseBroker::new(store.clone()).with_limits(|user| match user {
        "alice" => Ok(CreditLimits {
            per_session: Some(100),
            per_day: Some(150),
            per_month: None,
        }),
        "carol" => Err("access.toml does not parse".into()),
        _ => Ok(CreditLimits::default()),
    });
    let mut a1 = opened(&broker, "alice", "helper", "a1");
    hold_id(&hold(&broker, &mut a1, "h1", 60));
    match hold(&broker, &mut a1, "h2", 50) {
        StoreReply::LedgerRefused { message, denial } => {
            assert!(denial, "{message}");
            assert!(message.contains("session budget of 100"), "{message}");
        }
        other => panic!("a refusal: {other:?}"),
    }
    // Her other session has its own session budget, but shares the day's.
    let mut a2 = opened(&broker, "alice", "helper", "a2");
    hold_id(&hold(&broker, &mut a2, "h1", 50));
    match hold(&broker, &mut a2, "h2", 50) {
        StoreReply::LedgerRefused { message, .. } => {
            assert!(message.contains("day budget of 150"), "{message}")
        }
        other => panic!("a refusal: {other:?}"),
    }
    // Bob has no limits; limits that cannot be read refuse (fail closed).
    let mut bob = opened(&broker, "bob", "helper", "b1");
    hold_id(&hold(&broker, &mut bob, "h1", 400));
    let mut carol = opened(&broker, "carol", "helper", "c1");
    assert!(matches!(
        hold(&broker, &mut carol, "h1", 1),
        StoreReply::LedgerRefused { denial: true, .. }
    ));
    assert_eq!(store.balance("agent:helper").unwrap().held, 510);
    assert_eq!(store.budget_use("alice", "a1").unwrap().session, 60);
}

#[test]
fn a_workers_balance_is_its_own_agents_account() {
    let store = funded();
    let broker = DatabaseBroker::new(store.clone());
    let mut helper = opened(&broker, "alice", "helper", "a1");
    let mut other = opened(&broker, "alice", "other", "a2");
    assert_eq!(
        broker.handle(&mut helper, StoreRequest::LedgerBalance {}),
        StoreReply::LedgerBalance {
            balance: 1000,
            held: 0
        }
    );
    hold_id(&hold(&broker, &mut other, "h", 300));
    assert_eq!(
        broker.handle(&mut other, StoreRequest::LedgerBalance {}),
        StoreReply::LedgerBalance {
            balance: 4700,
            held: 300
        }
    );
    // An agent without an account gets an empty one.
    let mut fresh = opened(&broker, "alice", "newcomer", "a3");
    assert_eq!(
        broker.handle(&mut fresh, StoreRequest::LedgerBalance {}),
        StoreReply::LedgerBalance {
            balance: 0,
            held: 0
        }
    );
    assert_eq!(
        store.account_kind("agent:newcomer").unwrap(),
        AccountKind::Agent
    );
}

#[test]
fn oversized_ledger_fields_are_violations() {
    let store = funded();
    let broker = DatabaseBroker::new(store.clone());
    let mut alice = opened(&broker, "alice", "helper", "a1");
    let long = |n: usize| "k".repeat(n + 1);
    for request in [
        transfer("user:alice", 1, &long(MAX_LEDGER_KEY_BYTES)),
        transfer(&long(MAX_LEDGER_ACCOUNT_BYTES), 1, "k"),
        StoreRequest::LedgerTransfer {
            key: "k".into(),
            to: "user:alice".into(),
            amount: 1,
            memo: long(MAX_LEDGER_MEMO_BYTES),
        },
        StoreRequest::LedgerHold {
            key: long(MAX_LEDGER_KEY_BYTES),
            amount: 1,
        },
    ] {
        assert!(alice.violation(&request).is_some(), "{request:?}");
        let reply = broker.handle(&mut alice, request);
        assert_eq!(refused(&reply), Some(StoreFailure::Forbidden), "{reply:?}");
    }
    // At the limit, it is fine.
    let ok = broker.handle(
        &mut alice,
        transfer("user:alice", 1, &"k".repeat(MAX_LEDGER_KEY_BYTES)),
    );
    assert!(matches!(ok, StoreReply::LedgerTransfer(_)), "{ok:?}");
    assert_eq!(store.balance("agent:helper").unwrap().balance, 999);
    // Amounts the ledger cannot store are its refusal, not a violation.
    let huge = broker.handle(&mut alice, transfer("user:alice", u64::MAX, "big"));
    assert!(
        matches!(huge, StoreReply::LedgerRefused { denial: false, .. }),
        "{huge:?}"
    );
}

#[test]
fn session_ids_cannot_be_shaped_like_another_sessions_key_prefix() {
    let store = funded();
    let broker = DatabaseBroker::new(store.clone());
    let mut alice = scope("alice", "helper");
    for id in ["a1:t1", "session:a1", "", "a b"] {
        let reply = broker.handle(&mut alice, StoreRequest::Create { session: id.into() });
        assert_eq!(refused(&reply), Some(StoreFailure::Forbidden), "{id:?}");
    }
    assert_eq!(alice.session, None);
}

#[test]
fn holds_a_worker_leaves_open_are_charged_in_full_when_it_ends() {
    let store = funded();
    let broker = DatabaseBroker::new(store.clone());
    let mut alice = opened(&broker, "alice", "helper", "a1");
    let h1 = hold_id(&hold(&broker, &mut alice, "h1", 100));
    hold_id(&hold(&broker, &mut alice, "h2", 40));
    broker.handle(
        &mut alice,
        StoreRequest::LedgerRelease {
            key: "r1".into(),
            hold: h1,
        },
    );
    broker.end(&alice);
    assert_eq!(
        store.balance("agent:helper").unwrap(),
        Balance {
            balance: 960,
            held: 0
        }
    );
    assert_eq!(store.balance("system:usage").unwrap().balance, 40);
}

#[test]
fn a_worker_has_a_bounded_number_of_open_holds() {
    let store = funded();
    let broker = DatabaseBroker::new(store.clone());
    let mut alice = opened(&broker, "alice", "helper", "a1");
    for i in 0..MAX_OPEN_HOLDS {
        hold_id(&hold(&broker, &mut alice, &format!("h{i}"), 1));
    }
    assert!(matches!(
        hold(&broker, &mut alice, "one more", 1),
        StoreReply::LedgerRefused { denial: true, .. }
    ));
    assert_eq!(alice.open_holds().count(), MAX_OPEN_HOLDS);
}

#[test]
fn ledger_frames_survive_the_trip() {
    let requests = [
        StoreRequest::LedgerBalance {},
        transfer("user:alice", 7, "k1"),
        StoreRequest::LedgerHold {
            key: "k2".into(),
            amount: u64::MAX,
        },
        StoreRequest::LedgerSettle {
            key: "k3".into(),
            hold: i64::MIN,
            actual: 3,
        },
        StoreRequest::LedgerRelease {
            key: "k4".into(),
            hold: 9,
        },
    ];
    for (i, request) in requests.into_iter().enumerate() {
        let event = Event::Store {
            request_id: i as u64,
            request,
        };
        let bytes = encode_frame(&event).unwrap();
        let (decoded, err) = decode_all::<Event>(&bytes);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(decoded, vec![event]);
    }
    let replies = [
        StoreReply::LedgerBalance {
            balance: 1,
            held: 2,
        },
        StoreReply::LedgerTransfer(Box::new(LedgerReceipt {
            id: 1,
            time_ms: 2,
            key: "k".into(),
            from: "agent:a".into(),
            to: "user:b".into(),
            amount: 3,
            balance_before: 4,
            memo: "m\u{e9}\n".into(),
        })),
        StoreReply::LedgerHold { hold: 5 },
        StoreReply::LedgerClosed {
            id: 6,
            hold: 5,
            charged: 1,
            released: 2,
        },
        StoreReply::LedgerRefused {
            message: "no".into(),
            denial: true,
        },
    ];
    for (i, reply) in replies.into_iter().enumerate() {
        let command = Command::StoreReply {
            request_id: i as u64,
            reply,
        };
        let bytes = encode_frame(&command).unwrap();
        let (decoded, err) = decode_all::<Command>(&bytes);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(decoded, vec![command]);
    }
    // Unknown fields are refused: a worker cannot name an account.
    let sneaky = serde_json::json!({"type": "store", "request_id": 1,
        "request": {"op": "ledger_balance", "account": "agent:other"}});
    let (decoded, err) = decode_all::<Event>(&framed_json(&sneaky));
    assert!(decoded.is_empty() && err.is_some(), "{decoded:?}");
    let flush = framed_json(&serde_json::json!({"type": "store", "request_id": 1,
        "request": {"op": "audit_flush", "session": "bobs"}}));
    assert!(decode_all::<Event>(&flush).0.is_empty());
    // Nor can the server's receipt carry more than a receipt.
    let receipt = framed_json(&serde_json::json!({"type": "store_reply", "request_id": 1,
        "reply": {"result": "ledger_transfer", "id": 1, "time_ms": 2, "key": "k",
            "from": "agent:a", "to": "user:b", "amount": 3, "balance_before": 4,
            "memo": "", "extra": true}}));
    assert!(decode_all::<Command>(&receipt).0.is_empty());
}

fn framed_json(value: &serde_json::Value) -> Vec<u8> {
    let body = serde_json::to_vec(value).unwrap();
    let mut framed = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&body);
    framed
}
