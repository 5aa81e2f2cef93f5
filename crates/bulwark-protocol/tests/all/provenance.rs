//! The label table's requests on the wire: they survive the trip, and
//! anything but a root kind, a 64-digit lowercase digest and bounded names
//! is refused at decoding.

use bulwark_protocol::frame::{FrameError, decode_all, encode_frame};
use bulwark_protocol::protocol::{Command, Event};
use bulwark_protocol::store_ipc::{
    DigestHex, LabelRootWire, MAX_LABEL_NAME_BYTES, MAX_PROVENANCE_LABELS,
    MAX_PROVENANCE_PATH_BYTES, MAX_PROVENANCE_SOURCE_BYTES, StoreReply, StoreRequest,
};
use proptest::prelude::*;
use serde_json::json;

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

fn record(labels: &[&str]) -> StoreRequest {
    StoreRequest::RecordProvenance {
        root: LabelRootWire::UserMemory,
        path: "notes/ünïcode.md".into(),
        digest: DigestHex([0xab; 32]),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        source: "toolu_01".into(),
    }
}

fn event(request: StoreRequest) -> Event {
    Event::Store {
        request_id: 9,
        request,
    }
}

fn event_round_trip(event: &Event) {
    let bytes = encode_frame(event).unwrap();
    let (decoded, err) = decode_all::<Event>(&bytes);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(decoded, std::slice::from_ref(event));
}

fn refused_event(body: serde_json::Value) -> FrameError {
    let (decoded, err) = decode_all::<Event>(&frame(body.to_string().as_bytes()));
    assert!(decoded.is_empty(), "decoded {decoded:?} from {body}");
    err.unwrap_or_else(|| panic!("no error for {body}"))
}

fn good_request() -> serde_json::Value {
    json!({
        "op": "record_provenance",
        "root": "workspace",
        "path": "a.txt",
        "digest": "ab".repeat(32),
        "labels": ["external"],
        "source": "c1",
    })
}

fn with(field: &str, value: serde_json::Value) -> serde_json::Value {
    let mut request = good_request();
    request[field] = value;
    json!({"type": "store", "request_id": 1, "request": request})
}

#[test]
fn provenance_requests_and_replies_survive_the_trip() {
    for request in [
        record(&["external", "peer"]),
        record(&[]),
        StoreRequest::Provenance {
            root: LabelRootWire::Workspace,
            path: "src/main.rs".into(),
            digest: DigestHex([0; 32]),
        },
        StoreRequest::Provenance {
            root: LabelRootWire::AgentMemory,
            path: "p".repeat(MAX_PROVENANCE_PATH_BYTES),
            digest: DigestHex([0xff; 32]),
        },
    ] {
        event_round_trip(&event(request));
    }
    for reply in [
        StoreReply::Provenance { labels: None },
        StoreReply::Provenance {
            labels: Some(Vec::new()),
        },
        StoreReply::Provenance {
            labels: Some(vec!["external".into(), "memory".into()]),
        },
    ] {
        let command = Command::StoreReply {
            request_id: 3,
            reply,
        };
        let bytes = encode_frame(&command).unwrap();
        let (decoded, err) = decode_all::<Command>(&bytes);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(decoded, [command]);
    }
    // The wire form: names, not numbers or paths.
    let text = serde_json::to_string(&record(&["external"])).unwrap();
    assert!(text.contains(r#""root":"user_memory""#), "{text}");
    assert!(
        text.contains(&format!(r#""digest":"{}""#, "ab".repeat(32))),
        "{text}"
    );
    // The good request of the refusal tests below is itself accepted.
    let (decoded, err) = decode_all::<Event>(&frame(
        json!({"type": "store", "request_id": 1, "request": good_request()})
            .to_string()
            .as_bytes(),
    ));
    assert!(err.is_none() && decoded.len() == 1, "{err:?}");
}

#[test]
fn a_digest_that_is_not_64_lowercase_hex_digits_is_malformed() {
    for digest in [
        json!("ab".repeat(31)),
        json!("ab".repeat(33)),
        json!("AB".repeat(32)),
        json!(format!("{}g", "a".repeat(63))),
        json!(format!("{}é", "a".repeat(62))),
        json!(""),
        json!(12),
        json!(vec![0; 32]),
        json!(null),
    ] {
        let err = refused_event(with("digest", digest.clone()));
        assert!(
            matches!(err, FrameError::Malformed { .. }),
            "{digest}: {err:?}"
        );
    }
}

#[test]
fn a_root_is_one_of_the_three_kinds_never_a_path_or_a_name() {
    for root in [
        json!("/home/bob/.bulwark/agents/helper/workspace"),
        json!("workspace:bob/helper"),
        json!("Workspace"),
        json!({"user": "bob"}),
        json!(0),
    ] {
        let err = refused_event(with("root", root.clone()));
        assert!(
            matches!(err, FrameError::Malformed { .. }),
            "{root}: {err:?}"
        );
    }
    // And no request may name a user, an agent or a session next to it.
    for (field, value) in [("user", "bob"), ("agent", "other"), ("session", "s")] {
        let err = refused_event(with(field, json!(value)));
        assert!(
            matches!(err, FrameError::Malformed { .. }),
            "{field}: {err:?}"
        );
    }
    let mut missing = good_request();
    missing.as_object_mut().unwrap().remove("source");
    let err = refused_event(json!({"type": "store", "request_id": 1, "request": missing}));
    assert!(matches!(err, FrameError::Malformed { .. }), "{err:?}");
}

#[test]
fn provenance_bounds_are_checked_on_receipt() {
    let long_label = "a".repeat(MAX_LABEL_NAME_BYTES + 1);
    let many: Vec<String> = (0..=MAX_PROVENANCE_LABELS)
        .map(|i| format!("l{i}"))
        .collect();
    for (field, value) in [
        ("path", json!("p".repeat(MAX_PROVENANCE_PATH_BYTES + 1))),
        ("labels", json!([long_label])),
        ("labels", json!(many)),
        ("source", json!("s".repeat(MAX_PROVENANCE_SOURCE_BYTES + 1))),
    ] {
        match refused_event(with(field, value)) {
            FrameError::Bound(too_long) => assert!(field.starts_with(too_long.field), "{field}"),
            other => panic!("{field}: {other:?}"),
        }
    }
    let lookup = json!({"type": "store", "request_id": 1, "request": {
        "op": "provenance", "root": "workspace",
        "path": "p".repeat(MAX_PROVENANCE_PATH_BYTES + 1), "digest": "00".repeat(32)}});
    assert!(matches!(refused_event(lookup), FrameError::Bound(_)));
    // A reply with too many labels is refused by the worker too.
    let reply = StoreReply::Provenance {
        labels: Some(many.clone()),
    };
    assert!(reply.validate().is_err());
    let command = Command::StoreReply {
        request_id: 1,
        reply,
    };
    assert!(matches!(encode_frame(&command), Err(FrameError::Bound(_))));
}

proptest! {
    #[test]
    fn every_digest_round_trips_as_its_hex(bytes in any::<[u8; 32]>()) {
        let digest = DigestHex(bytes);
        let text = digest.to_string();
        prop_assert_eq!(text.len(), 64);
        prop_assert_eq!(text.parse::<DigestHex>(), Ok(digest));
        let json = serde_json::to_string(&digest).unwrap();
        prop_assert_eq!(serde_json::from_str::<DigestHex>(&json).unwrap(), digest);
    }

    /// Any text parses to the digest whose hex it is, or is refused.
    #[test]
    fn any_text_is_a_canonical_digest_or_refused(text in prop_oneof![
        "[0-9a-fA-F]{62,66}",
        "\\PC{0,70}",
    ]) {
        match text.parse::<DigestHex>() {
            Ok(digest) => prop_assert_eq!(digest.to_string(), text),
            Err(_) => {
                let json = serde_json::to_string(&text).unwrap();
                prop_assert!(serde_json::from_str::<DigestHex>(&json).is_err());
            }
        }
    }
}
