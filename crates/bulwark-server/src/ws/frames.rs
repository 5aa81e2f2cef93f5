//! The WebSocket vocabulary: what a client may send, what the server sends.
//!
//! Client frames are parsed into [`ClientFrame`] (unknown types and fields
//! refused) and then bounded; anything else becomes a [`FrameError`] that
//! the connection answers with an `error` frame. Server frames are built
//! field by field from the worker protocol's [`Event`]s, never forwarded.

use bulwark_protocol::protocol::{
    ErrorCode, Event, MAX_ID_CHARS, MAX_MESSAGE_CHARS, ToolDecision, TurnEnd, Usage,
};
use serde::{Deserialize, Serialize};

/// The subprotocol the server speaks (and echoes).
pub const SUBPROTOCOL: &str = "bulwark.v1";
/// Longest ping nonce.
pub const MAX_NONCE_CHARS: usize = 128;
/// Longest error message echoed to a client.
const MAX_ERROR_CHARS: usize = 300;

/// A frame from the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientFrame {
    /// Open a conversation with `agent`, or continue stored `session`;
    /// `last_message_id` replays the frames after it that are still buffered.
    Subscribe {
        agent: String,
        #[serde(default)]
        session: Option<String>,
        #[serde(default)]
        last_message_id: Option<u64>,
    },
    /// A user message (at most 200,000 characters).
    Message { text: String },
    /// Stop the running turn.
    Interrupt {},
    /// Answer an `approval_request`.
    ToolApproval { request_id: String, approve: bool },
    Ping {
        #[serde(default)]
        nonce: Option<String>,
    },
}

/// Machine-readable error classes of `error` frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WsErrorCode {
    /// Not JSON, or not a JSON object of the right shape.
    BadJson,
    UnknownType,
    UnknownField,
    MissingField,
    /// A field of the wrong type or an invalid value.
    InvalidFrame,
    /// A field longer than its bound.
    TooLong,
    /// The frame is larger than the server parses.
    TooLarge,
    BinaryFrame,
    /// `message`, `interrupt` or `tool_approval` before `subscribe`.
    NotSubscribed,
    Forbidden,
    NotFound,
    AtCapacity,
    RateLimited,
    /// Another connection subscribed to this session.
    Moved,
    /// The subscription ended (the client fell behind or the conversation
    /// stopped); subscribe again with `last_message_id`.
    SubscriptionEnded,
    /// The token stopped being valid; the connection closes.
    Unauthorized,
    Setup,
    Model,
    Busy,
    BadCommand,
    /// The user's daily token budget is spent; the turn did not start.
    BudgetExhausted,
    Internal,
    WorkerLost,
}

/// Why a client frame was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    pub code: WsErrorCode,
    pub message: String,
}

impl FrameError {
    pub fn new(code: WsErrorCode, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        if message.len() > MAX_ERROR_CHARS {
            let mut end = MAX_ERROR_CHARS;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        Self { code, message }
    }
}

fn too_long(field: &str, len: usize, max: usize) -> FrameError {
    FrameError::new(
        WsErrorCode::TooLong,
        format!("`{field}` is {len} characters; at most {max}"),
    )
}

fn bounded(field: &str, value: &str, max: usize) -> Result<(), FrameError> {
    if value.len() > max {
        let len = value.chars().count();
        if len > max {
            return Err(too_long(field, len, max));
        }
    }
    Ok(())
}

/// Session and request ids: what the runtime issues (UUIDs and the like).
fn id_like(field: &str, value: &str) -> Result<(), FrameError> {
    bounded(field, value, MAX_ID_CHARS)?;
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(FrameError::new(
            WsErrorCode::InvalidFrame,
            format!("`{field}` must be 1-{MAX_ID_CHARS} letters, digits, `-`, `_` or `.`"),
        ))
    }
}

impl ClientFrame {
    /// Parses and bounds one text frame of at most `max_bytes`.
    pub fn parse(text: &str, max_bytes: usize) -> Result<Self, FrameError> {
        if text.len() > max_bytes {
            return Err(FrameError::new(
                WsErrorCode::TooLarge,
                format!("frame is {} bytes; at most {max_bytes}", text.len()),
            ));
        }
        let frame: ClientFrame = serde_json::from_str(text).map_err(classify)?;
        frame.check()?;
        Ok(frame)
    }

    fn check(&self) -> Result<(), FrameError> {
        match self {
            ClientFrame::Subscribe { agent, session, .. } => {
                if bulwark_policy::AgentName::new(agent.as_str()).is_err() {
                    return Err(FrameError::new(
                        WsErrorCode::InvalidFrame,
                        "`agent` must be an agent name: 1-64 lowercase letters, digits, `-` or `_`",
                    ));
                }
                if let Some(s) = session {
                    id_like("session", s)?;
                }
                Ok(())
            }
            ClientFrame::Message { text } => bounded("text", text, MAX_MESSAGE_CHARS),
            ClientFrame::ToolApproval { request_id, .. } => id_like("request_id", request_id),
            ClientFrame::Ping { nonce: Some(n) } => bounded("nonce", n, MAX_NONCE_CHARS),
            ClientFrame::Ping { nonce: None } | ClientFrame::Interrupt {} => Ok(()),
        }
    }
}

fn classify(e: serde_json::Error) -> FrameError {
    use serde_json::error::Category;
    let text = e.to_string();
    let code = match e.classify() {
        Category::Io | Category::Syntax | Category::Eof => WsErrorCode::BadJson,
        Category::Data if text.contains("unknown variant") => WsErrorCode::UnknownType,
        Category::Data if text.contains("unknown field") => WsErrorCode::UnknownField,
        Category::Data if text.contains("missing field") => WsErrorCode::MissingField,
        Category::Data => WsErrorCode::InvalidFrame,
    };
    let hint = "frames are JSON objects with a `type` of subscribe, message, interrupt, tool_approval or ping";
    FrameError::new(code, format!("{text}; {hint}"))
}

/// The door's verdict, as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allowed,
    Denied,
    Failed,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum End {
    Completed,
    MaxTurns,
    Stopped,
    Interrupted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// A frame from the server. Frames of a session's stream are sent with a
/// per-session increasing `id` beside `type` (see [`Numbered`]); `pong`
/// and errors about the connection's own frames carry none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// The subscription is live. Its `id` is the newest id of the stream
    /// (frames replayed after it have ids above `last_message_id`);
    /// `missed` says frames after `last_message_id` were no longer
    /// buffered: reload the history over REST.
    Subscribed {
        session_id: String,
        agent: String,
        history_messages: u64,
        replayed: u64,
        missed: bool,
    },
    /// The user's `message` was handed to the conversation under this id:
    /// every frame of its turn carries it. Sent to the sender only, before
    /// any of the turn's frames.
    Accepted {
        message_id: u64,
    },
    TextDelta {
        message_id: u64,
        text: String,
    },
    ToolCall {
        message_id: u64,
        call_id: String,
        tool: String,
        summary: String,
    },
    ToolResult {
        message_id: u64,
        call_id: String,
        decision: Decision,
        summary: String,
    },
    ApprovalRequest {
        request_id: String,
        tool: String,
        operation: String,
        summary: String,
        why: String,
    },
    TurnEnded {
        message_id: u64,
        end: End,
        text: String,
        usage: TokenUsage,
    },
    Error {
        code: WsErrorCode,
        message: String,
        /// The conversation (not the connection) is over.
        fatal: bool,
    },
    Pong {
        #[serde(skip_serializing_if = "Option::is_none")]
        nonce: Option<String>,
    },
}

/// A frame with its stream id.
#[derive(Debug, Serialize)]
pub struct Numbered<'a> {
    pub id: u64,
    #[serde(flatten)]
    pub frame: &'a ServerFrame,
}

impl ServerFrame {
    pub fn error(e: &FrameError) -> Self {
        ServerFrame::Error {
            code: e.code,
            message: e.message.clone(),
            fatal: false,
        }
    }

    /// Serialized without an id.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            r#"{"type":"error","code":"internal","message":"frame encoding failed","fatal":false}"#
                .into()
        })
    }

    /// Serialized with stream id `id`.
    pub fn to_json_numbered(&self, id: u64) -> String {
        serde_json::to_string(&Numbered { id, frame: self }).unwrap_or_else(|_| self.to_json())
    }

    /// The client's view of a worker event, rebuilt field by field.
    /// `Ready` is consumed by the backend and `Store` by the supervisor:
    /// they yield nothing here; nor do the tools-only answers (`Tools`,
    /// `ToolCallDone`), which a conversation never gets.
    pub fn from_event(event: Event) -> Option<Self> {
        Some(match event {
            Event::Ready { .. }
            | Event::Store { .. }
            | Event::Tools { .. }
            | Event::ToolCallDone { .. } => return None,
            Event::TextDelta { message_id, text } => ServerFrame::TextDelta { message_id, text },
            Event::ToolCall {
                message_id,
                call_id,
                tool,
                summary,
            } => ServerFrame::ToolCall {
                message_id,
                call_id,
                tool,
                summary,
            },
            Event::ToolResult {
                message_id,
                call_id,
                decision,
                summary,
            } => ServerFrame::ToolResult {
                message_id,
                call_id,
                decision: match decision {
                    ToolDecision::Allowed => Decision::Allowed,
                    ToolDecision::Denied => Decision::Denied,
                    ToolDecision::Failed => Decision::Failed,
                },
                summary,
            },
            Event::ApprovalRequest {
                request_id,
                tool,
                operation,
                summary,
                why,
            } => ServerFrame::ApprovalRequest {
                request_id,
                tool,
                operation,
                summary,
                why,
            },
            Event::TurnEnded {
                message_id,
                end,
                text,
                usage:
                    Usage {
                        input_tokens,
                        output_tokens,
                    },
            } => ServerFrame::TurnEnded {
                message_id,
                end: match end {
                    TurnEnd::Completed => End::Completed,
                    TurnEnd::MaxTurns => End::MaxTurns,
                    TurnEnd::Stopped => End::Stopped,
                    TurnEnd::Interrupted => End::Interrupted,
                },
                text,
                usage: TokenUsage {
                    input_tokens,
                    output_tokens,
                },
            },
            Event::Error {
                code,
                message,
                fatal,
            } => ServerFrame::Error {
                code: match code {
                    ErrorCode::BadCommand => WsErrorCode::BadCommand,
                    ErrorCode::Setup => WsErrorCode::Setup,
                    ErrorCode::Forbidden => WsErrorCode::Forbidden,
                    ErrorCode::Model => WsErrorCode::Model,
                    ErrorCode::Busy => WsErrorCode::Busy,
                    ErrorCode::BudgetExhausted => WsErrorCode::BudgetExhausted,
                    ErrorCode::Internal => WsErrorCode::Internal,
                    ErrorCode::WorkerLost => WsErrorCode::WorkerLost,
                },
                message,
                fatal,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;

    #[test]
    fn valid_frames_parse() {
        let ok = [
            r#"{"type":"subscribe","agent":"assistant"}"#,
            r#"{"type":"subscribe","agent":"a","session":"3f2a-b","last_message_id":7}"#,
            r#"{"type":"message","text":"hi"}"#,
            r#"{"type":"interrupt"}"#,
            r#"{"type":"tool_approval","request_id":"r1","approve":true}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"ping","nonce":"n"}"#,
        ];
        for f in ok {
            ClientFrame::parse(f, MAX).unwrap_or_else(|e| panic!("{f}: {e:?}"));
        }
    }

    #[test]
    fn each_kind_of_bad_frame_has_its_code() {
        let cases = [
            ("", WsErrorCode::BadJson),
            ("{", WsErrorCode::BadJson),
            ("[]", WsErrorCode::MissingField),
            ("null", WsErrorCode::InvalidFrame),
            (r#"{"agent":"a"}"#, WsErrorCode::MissingField),
            (r#"{"type":"shell"}"#, WsErrorCode::UnknownType),
            (
                r#"{"type":"interrupt","now":true}"#,
                WsErrorCode::UnknownField,
            ),
            (
                r#"{"type":"ping","nonce":"n","x":1}"#,
                WsErrorCode::UnknownField,
            ),
            (r#"{"type":"message"}"#, WsErrorCode::MissingField),
            (r#"{"type":"message","text":7}"#, WsErrorCode::InvalidFrame),
            (
                r#"{"type":"tool_approval","request_id":"r","approve":"yes"}"#,
                WsErrorCode::InvalidFrame,
            ),
            (
                r#"{"type":"subscribe","agent":"../etc"}"#,
                WsErrorCode::InvalidFrame,
            ),
            (
                r#"{"type":"subscribe","agent":"a","session":"a/b"}"#,
                WsErrorCode::InvalidFrame,
            ),
            (
                r#"{"type":"subscribe","agent":"a","last_message_id":-1}"#,
                WsErrorCode::InvalidFrame,
            ),
        ];
        for (text, code) in cases {
            let e = ClientFrame::parse(text, MAX).unwrap_err();
            assert_eq!(e.code, code, "{text}: {}", e.message);
        }
        let long = format!(
            r#"{{"type":"message","text":"{}"}}"#,
            "é".repeat(MAX_MESSAGE_CHARS + 1)
        );
        assert_eq!(
            ClientFrame::parse(&long, 10 << 20).unwrap_err().code,
            WsErrorCode::TooLong
        );
        let exact = format!(
            r#"{{"type":"message","text":"{}"}}"#,
            "é".repeat(MAX_MESSAGE_CHARS)
        );
        assert!(ClientFrame::parse(&exact, 10 << 20).is_ok());
        assert_eq!(
            ClientFrame::parse(&exact, 1000).unwrap_err().code,
            WsErrorCode::TooLarge
        );
    }

    #[test]
    fn server_frames_serialize_with_ids_beside_the_type() {
        let f = ServerFrame::from_event(Event::TextDelta {
            message_id: 3,
            text: "x".into(),
        })
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&f.to_json_numbered(9)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"id": 9, "type": "text_delta", "message_id": 3, "text": "x"})
        );
        assert!(
            ServerFrame::from_event(Event::Ready {
                session_id: "s".into(),
                history_messages: 0
            })
            .is_none()
        );
        let pong = ServerFrame::Pong { nonce: None }.to_json();
        assert_eq!(pong, r#"{"type":"pong"}"#);
    }
}
