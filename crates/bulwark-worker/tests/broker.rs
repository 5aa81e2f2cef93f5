//! The brokered store as a compromised worker meets it: every request is
//! performed for the conversation the server started the worker for, and
//! nothing a worker sends can reach another user's session or put another
//! name on an audit record. And the work a worker must do still works.

use bulwark_audit::{AuditSink, Decision};
use bulwark_store::{NewSession, Store};
use bulwark_worker::store_ipc::{
    AuditEntry, MAX_STORED_JSON, StoreFailure, StoreReply, StoreRequest, StoredRole,
};
use bulwark_worker::{BrokerScope, DatabaseBroker, StoreBroker};

fn scope(user: &str, agent: &str) -> BrokerScope {
    BrokerScope {
        user: user.into(),
        agent: agent.into(),
        session: None,
    }
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
        StoreRequest::AuditFlush,
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
    // A resumed session of her own is hers to continue.
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
