//! A worker's audit records arrive in batches: each is stored in order with
//! the server's identity stamped on it, exactly like a single record, and a
//! batch past its bounds is a protocol violation.

use super::{entry, refused, scope, with_bobs_session};
use bulwark_audit::AuditSink;
use bulwark_protocol::frame::{decode_all, encode_frame};
use bulwark_protocol::protocol::Event;
use bulwark_protocol::store_ipc::{
    MAX_AUDIT_BATCH_CHARS, MAX_AUDIT_BATCH_ENTRIES, MAX_AUDIT_DETAIL_CHARS, StoreFailure,
    StoreReply, StoreRequest,
};
use bulwark_server::workers::StoreBroker;

fn batch(actions: &[&str], flush: bool) -> StoreRequest {
    StoreRequest::AuditBatch {
        entries: actions.iter().map(|a| entry(a)).collect(),
        flush,
    }
}

#[test]
fn a_batch_is_stored_in_order_with_the_servers_names() {
    let (store, broker) = with_bobs_session();
    let mut alice = scope("alice", "helper");
    let created = broker.handle(
        &mut alice,
        StoreRequest::Create {
            session: "a1".into(),
        },
    );
    assert_eq!(created, StoreReply::Done);
    let first = broker.handle(&mut alice, batch(&["one", "two"], false));
    assert_eq!(first, StoreReply::Done);
    let second = broker.handle(&mut alice, batch(&["three"], true));
    assert_eq!(second, StoreReply::Done);
    let records: Vec<_> = store
        .audit_sink()
        .tail(3)
        .unwrap()
        .into_iter()
        .map(|stored| stored.record)
        .collect();
    let actions: Vec<&str> = records.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["one", "two", "three"]);
    for record in &records {
        assert_eq!(
            (
                record.user.as_str(),
                record.agent.as_str(),
                record.session.as_str()
            ),
            ("alice", "helper", "a1")
        );
    }
}

#[test]
fn a_batch_before_the_session_is_open_is_refused() {
    let (store, broker) = with_bobs_session();
    let before = store.audit_sink().tail(100).unwrap().len();
    let mut alice = scope("alice", "helper");
    let reply = broker.handle(&mut alice, batch(&["early"], true));
    assert_eq!(refused(&reply), Some(StoreFailure::Forbidden), "{reply:?}");
    assert_eq!(store.audit_sink().tail(100).unwrap().len(), before);
}

#[test]
fn a_batch_past_its_bounds_is_a_violation() {
    let alice = scope("alice", "helper");
    let names: Vec<String> = (0..=MAX_AUDIT_BATCH_ENTRIES)
        .map(|i| i.to_string())
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert!(alice.violation(&batch(&names, false)).is_some(), "too many");
    assert!(
        alice
            .violation(&batch(&names[..MAX_AUDIT_BATCH_ENTRIES], false))
            .is_none()
    );

    let mut big = entry("big");
    big.detail = "x".repeat(MAX_AUDIT_DETAIL_CHARS);
    let over = MAX_AUDIT_BATCH_CHARS / MAX_AUDIT_DETAIL_CHARS + 1;
    let too_much = StoreRequest::AuditBatch {
        entries: vec![big.clone(); over],
        flush: false,
    };
    assert!(alice.violation(&too_much).is_some(), "too many characters");

    let mut long = entry("long");
    long.detail = "x".repeat(MAX_AUDIT_DETAIL_CHARS + 1);
    let one_too_long = StoreRequest::AuditBatch {
        entries: vec![long],
        flush: true,
    };
    assert!(alice.violation(&one_too_long).is_some(), "an entry's bound");
}

#[test]
fn the_largest_valid_batch_fits_in_one_frame() {
    // Every character escaped (`\u0001` is 6 bytes of JSON), as many full
    // entries as the character bound allows.
    let mut worst = entry("w");
    worst.detail = "\u{1}".repeat(MAX_AUDIT_DETAIL_CHARS);
    worst.reason = "\u{1}".repeat(4096);
    let fit = MAX_AUDIT_BATCH_CHARS / worst.chars();
    let request = StoreRequest::AuditBatch {
        entries: vec![worst; fit],
        flush: true,
    };
    assert!(scope("a", "b").violation(&request).is_none());
    let event = Event::Store {
        request_id: 1,
        request,
    };
    let bytes = encode_frame(&event).expect("a valid batch encodes");
    let (decoded, err) = decode_all::<Event>(&bytes);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(decoded, [event]);
}
