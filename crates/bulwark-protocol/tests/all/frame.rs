//! The IPC frame codec: what it refuses (each a typed error, never a
//! panic), and that every valid message survives the trip.

use bulwark_protocol::frame::{
    CommandCodec, EventCodec, FrameError, JsonCategory, MAX_FRAME_BYTES, decode_all, encode_frame,
};
use bulwark_protocol::protocol::{
    Command, ErrorCode, Event, MAX_ID_CHARS, MAX_MESSAGE_CHARS, MAX_SHORT_CHARS, MAX_TEXT_CHARS,
    ToolDecision, TurnEnd, Usage,
};
use bytes::BytesMut;
use tokio_util::codec::Decoder;

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

fn event_error(bytes: &[u8]) -> FrameError {
    let (events, err) = decode_all::<Event>(bytes);
    assert!(events.is_empty(), "decoded {events:?}");
    err.expect("an error")
}

fn command_error(bytes: &[u8]) -> FrameError {
    let (commands, err) = decode_all::<Command>(bytes);
    assert!(commands.is_empty(), "decoded {commands:?}");
    err.expect("an error")
}

#[test]
fn an_oversized_length_is_refused_from_the_header_alone() {
    // Only the 4 header bytes exist: refusing must not wait for (or
    // allocate) the 4 GiB body the header announces.
    let mut codec = EventCodec::new();
    let mut buf = BytesMut::from(&u32::MAX.to_be_bytes()[..]);
    let capacity_before = buf.capacity();
    match codec.decode(&mut buf) {
        Err(FrameError::TooLarge { declared, max }) => {
            assert_eq!(declared, u64::from(u32::MAX));
            assert_eq!(max, MAX_FRAME_BYTES);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(
        buf.capacity() <= capacity_before.max(64),
        "no body buffer was reserved"
    );

    let just_over = u32::try_from(MAX_FRAME_BYTES + 1).unwrap().to_be_bytes();
    assert!(matches!(
        command_error(&just_over),
        FrameError::TooLarge { .. }
    ));
}

#[test]
fn a_frame_at_the_limit_is_read() {
    // The largest valid text: MAX_TEXT_CHARS characters, each escaped to
    // six bytes in JSON (the worst case), still fits in one frame.
    let text: String = "\u{1}".repeat(MAX_TEXT_CHARS);
    let event = Event::TextDelta {
        message_id: u64::MAX,
        text,
    };
    let bytes = encode_frame(&event).unwrap();
    assert!(bytes.len() > 6 * MAX_TEXT_CHARS, "{}", bytes.len());
    let (events, err) = decode_all::<Event>(&bytes);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(events, vec![event]);
}

#[test]
fn truncated_frames_are_errors_not_a_clean_end() {
    let whole = encode_frame(&Command::Interrupt).unwrap();
    for cut in 1..whole.len() {
        match command_error(&whole[..cut]) {
            FrameError::Truncated { buffered } => assert_eq!(buffered, cut),
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    // Exactly the header and nothing after it is truncated too.
    assert!(matches!(
        command_error(&10u32.to_be_bytes()),
        FrameError::Truncated { .. }
    ));
    // An empty stream is a clean end.
    assert!(decode_all::<Command>(&[]).1.is_none());
}

fn category(err: FrameError) -> JsonCategory {
    match err {
        FrameError::Malformed { category, .. } => category,
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn bodies_that_are_not_protocol_messages_are_refused() {
    assert_eq!(
        category(event_error(&frame(b"not json"))),
        JsonCategory::Syntax
    );
    assert_eq!(category(event_error(&frame(b""))), JsonCategory::Eof);
    assert_eq!(
        category(event_error(&frame(br#"{"type":"#))),
        JsonCategory::Eof
    );
    let data = [
        // Unknown field.
        &br#"{"type":"text_delta","message_id":1,"text":"x","extra":true}"#[..],
        // Unknown type.
        br#"{"type":"debug_dump","data":"x"}"#,
        // No type.
        br#"{"message_id":1,"text":"x"}"#,
        // Wrong-typed field.
        br#"{"type":"text_delta","message_id":"1","text":"x"}"#,
        br#"{"type":"text_delta","message_id":-1,"text":"x"}"#,
        br#"{"type":"tool_result","message_id":1,"call_id":"c","decision":"maybe","summary":""}"#,
        // Missing field.
        br#"{"type":"text_delta","message_id":1}"#,
        // A command where an event belongs.
        br#"{"type":"interrupt"}"#,
        // Not an object.
        br#"[1,2,3]"#,
    ];
    for body in data {
        assert_eq!(
            category(event_error(&frame(body))),
            JsonCategory::Data,
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    assert_eq!(
        category(command_error(&frame(
            br#"{"type":"start","user":"a","agent":"b","resume":null,"admin":true}"#
        ))),
        JsonCategory::Data
    );
}

#[test]
fn errors_carry_no_text_from_the_peer() {
    let body = br#"{"type":"text_delta","message_id":1,"text":"x","SECRET_FIELD_NAME":1}"#;
    let shown = event_error(&frame(body)).to_string();
    assert!(!shown.contains("SECRET_FIELD_NAME"), "{shown}");
}

#[test]
fn bound_violations_are_refused_on_receipt() {
    let long_id = "i".repeat(MAX_ID_CHARS + 1);
    let body = serde_json::json!({"type": "ready", "session_id": long_id, "history_messages": 0});
    match event_error(&frame(body.to_string().as_bytes())) {
        FrameError::Bound(too_long) => assert_eq!(too_long.field, "session_id"),
        other => panic!("{other:?}"),
    }
    let long_message = "m".repeat(MAX_MESSAGE_CHARS + 1);
    let body = serde_json::json!({"type": "user_message", "message_id": 1, "text": long_message});
    assert!(matches!(
        command_error(&frame(body.to_string().as_bytes())),
        FrameError::Bound(_)
    ));
    // The sender refuses them too, so a worker cannot be made to send one.
    let event = Event::Error {
        code: ErrorCode::Internal,
        message: "e".repeat(MAX_SHORT_CHARS + 1),
        fatal: false,
    };
    assert!(matches!(encode_frame(&event), Err(FrameError::Bound(_))));
}

#[test]
fn frames_after_an_error_are_not_read() {
    let mut bytes = frame(b"garbage");
    bytes.extend(encode_frame(&Command::Interrupt).unwrap());
    let (commands, err) = decode_all::<Command>(&bytes);
    assert!(commands.is_empty());
    assert!(matches!(err, Some(FrameError::Malformed { .. })));
}

#[test]
fn several_frames_in_one_read_all_decode_in_order() {
    let events = vec![
        Event::Ready {
            session_id: "s".into(),
            history_messages: 2,
        },
        Event::ToolResult {
            message_id: 7,
            call_id: "c1".into(),
            decision: ToolDecision::Failed,
            summary: "failed (io)".into(),
        },
        Event::TurnEnded {
            message_id: 7,
            end: TurnEnd::MaxTurns,
            text: "ünïcödé ✓ \u{0}".into(),
            usage: Usage {
                input_tokens: 1,
                output_tokens: u64::MAX,
            },
        },
    ];
    let mut bytes = Vec::new();
    for event in &events {
        bytes.extend(encode_frame(event).unwrap());
    }
    let (decoded, err) = decode_all::<Event>(&bytes);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(decoded, events);
    // Byte by byte, as a slow pipe would deliver them.
    let mut codec = EventCodec::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for byte in bytes {
        buf.extend_from_slice(&[byte]);
        while let Some(event) = codec.decode(&mut buf).unwrap() {
            out.push(event);
        }
    }
    assert_eq!(out, events);
    let _ = CommandCodec::new();
}
