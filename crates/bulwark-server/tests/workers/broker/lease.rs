//! The server holds the session lease for the conversation a worker runs
//! (workers never open the database): a second worker, or a `run` beside
//! it, is refused, and a worker that lost its lease cannot save.

use super::{refused, scope, with_bobs_session};
use bulwark_audit::AuditSink;
use bulwark_protocol::store_ipc::{StoreFailure, StoreReply, StoreRequest, StoredRole};
use bulwark_server::workers::StoreBroker;
use bulwark_store::{LEASE_TTL, LeaseHolder, SessionLease, StoreError};

fn resume(session: &str) -> StoreRequest {
    StoreRequest::Resume {
        session: session.into(),
    }
}

fn message(reply: &StoreReply) -> &str {
    match reply {
        StoreReply::Failed { message, .. } => message,
        other => panic!("not a failure: {other:?}"),
    }
}

#[test]
fn a_second_worker_on_a_served_session_is_refused_until_the_first_ends() {
    let (store, broker) = with_bobs_session();
    let mut first = scope("bob", "helper");
    let reply = broker.handle(&mut first, resume("bobs"));
    assert!(matches!(reply, StoreReply::Resumed { .. }), "{reply:?}");

    let mut second = scope("bob", "helper");
    let reply = broker.handle(&mut second, resume("bobs"));
    assert_eq!(refused(&reply), Some(StoreFailure::Leased), "{reply:?}");
    let pid = std::process::id();
    assert!(
        message(&reply).contains(&format!(
            "session `bobs` is being run by another process (pid {pid} since "
        )),
        "{reply:?}"
    );
    assert_eq!(second.session, None);
    // The refused worker can write nothing.
    let reply = broker.handle(
        &mut second,
        StoreRequest::AppendMessage {
            role: StoredRole::User,
            content_json: "{}".into(),
        },
    );
    assert_eq!(refused(&reply), Some(StoreFailure::Forbidden));
    assert_eq!(store.messages("bobs").unwrap().len(), 1);

    let audited = store.audit_sink().tail(10).unwrap();
    let lease: Vec<_> = audited
        .iter()
        .filter(|r| r.record.action == bulwark_audit::Action::SessionLease)
        .collect();
    assert_eq!(lease.len(), 1, "{audited:#?}");
    let record = &lease[0].record;
    assert_eq!(
        (
            record.operation.as_str(),
            record.user.as_str(),
            record.agent.as_str()
        ),
        ("refused", "bob", "helper")
    );
    assert_eq!(record.session, "");

    // A `run` of the same session beside the worker is refused too.
    let err = SessionLease::acquire(&store, "bobs").unwrap_err();
    assert!(matches!(err, StoreError::LeaseHeld(_)), "{err:?}");

    // The work that must go on: the first worker writes, a different
    // session opens meanwhile, and once the first ends the session can
    // be resumed again.
    let reply = broker.handle(
        &mut first,
        StoreRequest::SaveState {
            state_json: r#"{"guard":1}"#.into(),
        },
    );
    assert_eq!(reply, StoreReply::Done);
    let mut other = scope("bob", "helper");
    let reply = broker.handle(
        &mut other,
        StoreRequest::Create {
            session: "b2".into(),
        },
    );
    assert_eq!(reply, StoreReply::Done);
    assert!(
        store.lease("b2").unwrap().is_some(),
        "a new session is leased"
    );
    broker.end(&first);
    broker.end(&other);
    assert_eq!(store.lease("bobs").unwrap(), None);
    assert_eq!(store.lease("b2").unwrap(), None);
    let mut third = scope("bob", "helper");
    let reply = broker.handle(&mut third, resume("bobs"));
    assert_eq!(
        reply,
        StoreReply::Resumed {
            state_json: Some(r#"{"guard":1}"#.into())
        }
    );
}

#[test]
fn a_run_holding_the_session_refuses_the_worker() {
    let (store, broker) = with_bobs_session();
    let run = SessionLease::acquire(&store, "bobs").unwrap();
    let mut worker = scope("bob", "helper");
    let reply = broker.handle(&mut worker, resume("bobs"));
    assert_eq!(refused(&reply), Some(StoreFailure::Leased), "{reply:?}");
    drop(run);
    let reply = broker.handle(&mut worker, resume("bobs"));
    assert!(matches!(reply, StoreReply::Resumed { .. }), "{reply:?}");
}

/// A worker whose lease lapsed (the server paused) and was taken over by
/// another process must not overwrite that process's state.
#[test]
fn a_worker_whose_lease_was_taken_over_cannot_save() {
    let (store, broker) = with_bobs_session();
    let mut worker = scope("bob", "helper");
    let reply = broker.handle(&mut worker, resume("bobs"));
    assert!(matches!(reply, StoreReply::Resumed { .. }), "{reply:?}");
    let later = store.lease("bobs").unwrap().unwrap().expires_ms;
    let taker = LeaseHolder::new();
    store
        .acquire_lease("bobs", &taker, later, LEASE_TTL)
        .unwrap();
    store
        .save_state_leased("bobs", &taker, r#"{"by":"taker"}"#)
        .unwrap();
    for request in [
        StoreRequest::SaveState {
            state_json: r#"{"by":"worker"}"#.into(),
        },
        StoreRequest::AppendMessage {
            role: StoredRole::Assistant,
            content_json: "{}".into(),
        },
    ] {
        let reply = broker.handle(&mut worker, request);
        assert_eq!(refused(&reply), Some(StoreFailure::Leased), "{reply:?}");
        assert!(
            message(&reply).contains("no longer holds the lease"),
            "{reply:?}"
        );
    }
    let row = store.session("bobs").unwrap().unwrap();
    assert_eq!(row.state_json.as_deref(), Some(r#"{"by":"taker"}"#));
    assert_eq!(row.message_count, 1);
    // Ending the worker leaves the taker's lease alone.
    broker.end(&worker);
    assert_eq!(store.lease("bobs").unwrap().unwrap().holder, taker.id);
}
