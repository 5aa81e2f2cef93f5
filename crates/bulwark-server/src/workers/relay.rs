//! The relay allowlist: what a worker may say to the server.
//!
//! A worker's event has already been parsed into [`Event`] (unknown kinds
//! and fields refused by serde). [`relay`] then checks its bounds and
//! builds a *new* value from the allowlisted fields one by one, rather than
//! passing the parsed value on, so that adding a field or kind to the
//! protocol later does not silently widen what reaches clients: it does
//! not compile until this function says what happens to it.

use bulwark_protocol::protocol::{ErrorCode, Event, ToolInfo, Usage};

/// Returns the event the server may act on, or `None` when a worker must
/// never send it (a bound violation, or an error class only the server
/// sets). `None` is a protocol violation: the caller kills the worker.
pub fn relay(event: &Event) -> Option<Event> {
    event.validate().ok()?;
    let rebuilt = match event {
        Event::Ready {
            session_id,
            history_messages,
        } => Event::Ready {
            session_id: text(session_id),
            history_messages: *history_messages,
        },
        Event::TextDelta {
            message_id,
            text: t,
        } => Event::TextDelta {
            message_id: *message_id,
            text: text(t),
        },
        Event::ToolCall {
            message_id,
            call_id,
            tool,
            summary,
        } => Event::ToolCall {
            message_id: *message_id,
            call_id: text(call_id),
            tool: text(tool),
            summary: text(summary),
        },
        Event::ToolResult {
            message_id,
            call_id,
            decision,
            summary,
        } => Event::ToolResult {
            message_id: *message_id,
            call_id: text(call_id),
            // A fieldless `Copy` enum: the value is all there is to copy.
            decision: *decision,
            summary: text(summary),
        },
        Event::ApprovalRequest {
            request_id,
            tool,
            operation,
            summary,
            why,
        } => Event::ApprovalRequest {
            request_id: text(request_id),
            tool: text(tool),
            operation: text(operation),
            summary: text(summary),
            why: text(why),
        },
        Event::TurnEnded {
            message_id,
            end,
            text: t,
            usage,
        } => Event::TurnEnded {
            message_id: *message_id,
            end: *end,
            text: text(t),
            usage: Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
            },
        },
        Event::Error {
            code,
            message,
            fatal,
        } => Event::Error {
            code: worker_code(*code)?,
            message: text(message),
            fatal: *fatal,
        },
        // The supervisor answers store requests itself; one that got this
        // far was sent where it cannot be (relay is for what clients see).
        Event::Store { .. } => return None,
        Event::Tools { tools } => Event::Tools {
            tools: tools
                .iter()
                .map(|t| ToolInfo {
                    name: text(&t.name),
                    description: text(&t.description),
                    input_schema: t.input_schema.clone(),
                })
                .collect(),
        },
        Event::ToolCallDone {
            call_id,
            content,
            is_error,
        } => Event::ToolCallDone {
            call_id: text(call_id),
            content: text(content),
            is_error: *is_error,
        },
    };
    Some(rebuilt)
}

fn text(value: &str) -> String {
    String::from(value)
}

/// Error classes a worker may report. `WorkerLost` is the server's verdict
/// on a worker; a worker claiming it is lying about itself.
fn worker_code(code: ErrorCode) -> Option<ErrorCode> {
    Some(match code {
        ErrorCode::BadCommand => ErrorCode::BadCommand,
        ErrorCode::Setup => ErrorCode::Setup,
        ErrorCode::Forbidden => ErrorCode::Forbidden,
        ErrorCode::Model => ErrorCode::Model,
        ErrorCode::Busy => ErrorCode::Busy,
        ErrorCode::BudgetExhausted => ErrorCode::BudgetExhausted,
        ErrorCode::Internal => ErrorCode::Internal,
        ErrorCode::WorkerLost => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulwark_protocol::protocol::{MAX_SHORT_CHARS, ToolDecision, TurnEnd};

    #[test]
    fn rebuilt_events_equal_their_source() {
        let events = [
            Event::Ready {
                session_id: "s1".into(),
                history_messages: 4,
            },
            Event::ToolResult {
                message_id: 1,
                call_id: "c1".into(),
                decision: ToolDecision::Denied,
                summary: "denied (capability)".into(),
            },
            Event::TurnEnded {
                message_id: 1,
                end: TurnEnd::Interrupted,
                text: String::new(),
                usage: Usage {
                    input_tokens: 3,
                    output_tokens: 5,
                },
            },
        ];
        for event in events {
            assert_eq!(relay(&event), Some(event));
        }
    }

    #[test]
    fn worker_lost_and_bound_violations_are_refused() {
        let lying = Event::Error {
            code: ErrorCode::WorkerLost,
            message: "the other worker died".into(),
            fatal: true,
        };
        assert_eq!(relay(&lying), None);
        let long = Event::Error {
            code: ErrorCode::Internal,
            message: "x".repeat(MAX_SHORT_CHARS + 1),
            fatal: false,
        };
        assert_eq!(relay(&long), None);
    }
}
