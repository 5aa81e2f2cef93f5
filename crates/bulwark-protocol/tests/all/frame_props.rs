//! Property tests of the frame codec: any bytes decode to values or a
//! typed error (never a panic), and every valid message round-trips.

use bulwark_protocol::frame::{FrameError, decode_all, encode_frame};
use bulwark_protocol::protocol::{
    Command, ErrorCode, Event, MAX_ID_CHARS, MAX_SHORT_CHARS, ToolDecision, TurnEnd, Usage,
};
use proptest::prelude::*;

/// Any characters (newlines and controls included), up to `max`.
fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 0..=max).prop_map(|c| c.into_iter().collect())
}

fn id() -> impl Strategy<Value = String> {
    text(MAX_ID_CHARS)
}

/// Short fields up to their bound would make cases slow; a sample of
/// lengths near the bound is covered by the unit tests.
fn short() -> impl Strategy<Value = String> {
    prop_oneof![
        text(40),
        text(MAX_SHORT_CHARS).prop_map(|s| s.chars().take(300).collect())
    ]
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        (id(), id(), proptest::option::of(id())).prop_map(|(user, agent, resume)| {
            Command::Start {
                user,
                agent,
                resume,
            }
        }),
        (any::<u64>(), text(200))
            .prop_map(|(message_id, text)| Command::UserMessage { message_id, text }),
        Just(Command::Interrupt),
        (id(), any::<bool>()).prop_map(|(request_id, approve)| Command::ToolApproval {
            request_id,
            approve
        }),
        Just(Command::Shutdown),
    ]
}

fn decision() -> impl Strategy<Value = ToolDecision> {
    prop_oneof![
        Just(ToolDecision::Allowed),
        Just(ToolDecision::Denied),
        Just(ToolDecision::Failed)
    ]
}

fn end() -> impl Strategy<Value = TurnEnd> {
    prop_oneof![
        Just(TurnEnd::Completed),
        Just(TurnEnd::MaxTurns),
        Just(TurnEnd::Stopped),
        Just(TurnEnd::Interrupted)
    ]
}

fn code() -> impl Strategy<Value = ErrorCode> {
    prop_oneof![
        Just(ErrorCode::BadCommand),
        Just(ErrorCode::Setup),
        Just(ErrorCode::Forbidden),
        Just(ErrorCode::Model),
        Just(ErrorCode::Busy),
        Just(ErrorCode::Internal),
        Just(ErrorCode::WorkerLost),
        Just(ErrorCode::BudgetExhausted),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (id(), any::<u64>()).prop_map(|(session_id, history_messages)| Event::Ready {
            session_id,
            history_messages
        }),
        (any::<u64>(), text(300))
            .prop_map(|(message_id, text)| Event::TextDelta { message_id, text }),
        (any::<u64>(), id(), id(), short()).prop_map(|(message_id, call_id, tool, summary)| {
            Event::ToolCall {
                message_id,
                call_id,
                tool,
                summary,
            }
        }),
        (any::<u64>(), id(), decision(), short()).prop_map(
            |(message_id, call_id, decision, summary)| Event::ToolResult {
                message_id,
                call_id,
                decision,
                summary,
            }
        ),
        (id(), id(), id(), short(), short()).prop_map(
            |(request_id, tool, operation, summary, why)| Event::ApprovalRequest {
                request_id,
                tool,
                operation,
                summary,
                why,
            }
        ),
        (any::<u64>(), end(), text(300), any::<u64>(), any::<u64>()).prop_map(
            |(message_id, end, text, input_tokens, output_tokens)| Event::TurnEnded {
                message_id,
                end,
                text,
                usage: Usage {
                    input_tokens,
                    output_tokens,
                },
            }
        ),
        (code(), short(), any::<bool>()).prop_map(|(code, message, fatal)| Event::Error {
            code,
            message,
            fatal
        }),
    ]
}

/// Bytes that often look like frames: a plausible header, then a body of
/// JSON-ish fragments or raw bytes.
fn framed_noise() -> impl Strategy<Value = Vec<u8>> {
    let fragment = prop_oneof![
        Just(br#"{"type":"#.to_vec()),
        Just(br#""text_delta""#.to_vec()),
        Just(br#""message_id":"#.to_vec()),
        Just(br#""text":"x""#.to_vec()),
        Just(b"}".to_vec()),
        Just(b",".to_vec()),
        Just(b"\\u0000".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    (proptest::collection::vec(fragment, 0..16), any::<i8>()).prop_map(|(parts, skew)| {
        let body: Vec<u8> = parts.concat();
        let len = (body.len() as i64 + i64::from(skew) % 4).max(0) as u32;
        let mut out = len.to_be_bytes().to_vec();
        out.extend(body);
        out
    })
}

fn typed(err: &FrameError) -> bool {
    matches!(
        err,
        FrameError::TooLarge { .. }
            | FrameError::Truncated { .. }
            | FrameError::Malformed { .. }
            | FrameError::Bound(_)
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes_decode_or_fail_typed(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let (_, err) = decode_all::<Event>(&bytes);
        prop_assert!(err.as_ref().is_none_or(typed), "{err:?}");
        let (_, err) = decode_all::<Command>(&bytes);
        prop_assert!(err.as_ref().is_none_or(typed), "{err:?}");
    }

    #[test]
    fn frame_shaped_noise_decodes_or_fails_typed(bytes in framed_noise()) {
        let (_, err) = decode_all::<Event>(&bytes);
        prop_assert!(err.as_ref().is_none_or(typed), "{err:?}");
    }

    #[test]
    fn every_valid_command_round_trips(command in command()) {
        prop_assert!(command.validate().is_ok());
        let bytes = encode_frame(&command).unwrap();
        let (decoded, err) = decode_all::<Command>(&bytes);
        prop_assert!(err.is_none(), "{err:?}");
        prop_assert_eq!(decoded, vec![command]);
    }

    #[test]
    fn every_valid_event_round_trips(events in proptest::collection::vec(event(), 1..4)) {
        let mut bytes = Vec::new();
        for event in &events {
            prop_assert!(event.validate().is_ok());
            bytes.extend(encode_frame(event).unwrap());
        }
        let (decoded, err) = decode_all::<Event>(&bytes);
        prop_assert!(err.is_none(), "{err:?}");
        prop_assert_eq!(decoded, events);
    }
}
