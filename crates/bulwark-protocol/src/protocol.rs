//! What the server and a conversation say to each other.
//!
//! These are the only messages that cross between `bulwark serve` and a
//! `bulwark worker` process (inside IPC frames), and the vocabulary the
//! server's WebSocket layer maps to and from client frames. Every type
//! refuses unknown fields and every string and list has a bound, checked by
//! [`Command::validate`] / [`Event::validate`] on *receipt*: the type is the
//! schema, and a peer that sends something else gets an error, not a guess.
//!
//! A worker runs exactly one conversation (one session of one user with one
//! agent). The server never forwards a worker's frame as it came: it
//! rebuilds the event field by field from this type, so a compromised
//! worker cannot smuggle extra fields or frame kinds to a client.

use crate::store_ipc::{StoreReply, StoreRequest};
use serde::{Deserialize, Serialize};

/// Longest user message, in characters (the WebSocket limit too).
pub const MAX_MESSAGE_CHARS: usize = 200_000;
/// Longest streamed text chunk or final answer text an event may carry.
pub const MAX_TEXT_CHARS: usize = 1_000_000;
/// Longest short field: names, ids, summaries, reasons.
pub const MAX_SHORT_CHARS: usize = 4_096;
/// Longest identifier (session, request and call ids).
pub const MAX_ID_CHARS: usize = 128;
/// Longest tool description a tools-only worker may list.
pub const MAX_TOOL_DESCRIPTION_CHARS: usize = 16_384;
/// Most tools one `Tools` event may list.
pub const MAX_TOOLS: usize = 512;
/// Largest JSON value (tool arguments, one tool's input schema), in bytes
/// of its compact serialization.
pub const MAX_JSON_BYTES: usize = 256 * 1024;
/// Most bytes of JSON all of a `Tools` event's schemas may take together.
pub const MAX_TOOLS_JSON_BYTES: usize = 4 * 1024 * 1024;
/// Deepest nesting of arrays and objects a JSON value may have.
pub const MAX_JSON_DEPTH: usize = 64;

/// Server → worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// The first command a worker receives: whose conversation it runs.
    /// `resume` continues a stored session (it must belong to this user
    /// and agent); `None` starts a new one.
    Start {
        user: String,
        agent: String,
        resume: Option<String>,
    },
    /// A user message: starts one turn. `message_id` is chosen by the
    /// server and echoed in the turn's events.
    UserMessage { message_id: u64, text: String },
    /// Stop the running turn as soon as possible (between model calls and
    /// tool calls); the turn ends with [`TurnEnd::Interrupted`].
    Interrupt,
    /// The user's answer to an [`Event::ApprovalRequest`].
    ToolApproval { request_id: String, approve: bool },
    /// The first command of a *tools-only* worker (an MCP client of
    /// `/mcp/{agent}` drives it): the session is opened with
    /// `SessionSpec::tools_only`, no model is resolved and no turn ever
    /// runs; the worker answers `ListTools` and `CallTool` instead of
    /// `UserMessage`. Answered with `Ready` like `Start`.
    StartTools { user: String, agent: String },
    /// Tools-only: which tools does the session grant? Answered with
    /// [`Event::Tools`].
    ListTools,
    /// Tools-only: run one call through the session's door. Answered with
    /// [`Event::ToolCallDone`] carrying the same `call_id`; approvals the
    /// door needs meanwhile come as [`Event::ApprovalRequest`] and are
    /// answered with [`Command::ToolApproval`]. One call at a time.
    CallTool {
        call_id: String,
        tool: String,
        arguments: serde_json::Value,
    },
    /// Finish cleanly: flush the audit records, then exit (the server, not
    /// the worker, signs checkpoints: workers cannot read the signing key).
    Shutdown,
    /// The answer to the worker's [`Event::Store`] with this `request_id`.
    StoreReply { request_id: u64, reply: StoreReply },
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEnd {
    /// The model answered.
    Completed,
    /// The agent used its `max_turns` model calls and still wanted tools.
    MaxTurns,
    /// The session was stopped (loop guard, budget), or the turn failed:
    /// then a non-fatal `Error` (code `Model` or `Internal`) came just
    /// before. Every `UserMessage` ends with exactly one `TurnEnded`.
    Stopped,
    /// `Command::Interrupt` (or the worker shutting down) stopped it.
    Interrupted,
}

/// The door's verdict on one tool call, as a client may see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolDecision {
    Allowed,
    Denied,
    Failed,
}

/// Tokens used by a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Worker → server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// The session is set up (policy computed, model loaded); commands
    /// other than `Start` may now be sent. `history_messages` is how many
    /// stored messages a resumed session already has.
    Ready {
        session_id: String,
        history_messages: u64,
    },
    /// A piece of the model's answer, as it streams.
    TextDelta { message_id: u64, text: String },
    /// The model asked for a tool. `summary` is a short, truncated preview
    /// of the arguments: full tool input never leaves the worker.
    ToolCall {
        message_id: u64,
        call_id: String,
        tool: String,
        summary: String,
    },
    /// The door's decision and a short outcome line (never the full output).
    ToolResult {
        message_id: u64,
        call_id: String,
        decision: ToolDecision,
        summary: String,
    },
    /// Policy wants a person to approve this call; answer with
    /// [`Command::ToolApproval`]. Unanswered requests are denied when the
    /// worker stops or the approval times out.
    ApprovalRequest {
        request_id: String,
        tool: String,
        operation: String,
        summary: String,
        why: String,
    },
    /// The turn for `message_id` is over; `text` is the final answer.
    TurnEnded {
        message_id: u64,
        end: TurnEnd,
        text: String,
        usage: Usage,
    },
    /// Something went wrong. `fatal` means the worker is exiting.
    Error {
        code: ErrorCode,
        message: String,
        fatal: bool,
    },
    /// A store operation for the server to perform on this conversation
    /// (see [`crate::store_ipc`]); answered with [`Command::StoreReply`].
    /// Consumed by the supervisor: never relayed to a client.
    Store {
        request_id: u64,
        request: StoreRequest,
    },
    /// Tools-only: the answer to [`Command::ListTools`].
    Tools { tools: Vec<ToolInfo> },
    /// Tools-only: the answer to [`Command::CallTool`] with this `call_id`:
    /// what the door returned (boundary-wrapped when it carries outside
    /// content), and whether it was an error or a refusal.
    ToolCallDone {
        call_id: String,
        content: String,
        is_error: bool,
    },
}

/// One tool a tools-only session grants, as an MCP client is shown it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// Machine-readable error classes (the message is for people).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A command that is not valid now (a message before `Start`, a second
    /// `Start`, an approval for an unknown request).
    BadCommand,
    /// The session could not be set up (agent, model, policy, signature).
    Setup,
    /// Not allowed for this user.
    Forbidden,
    /// The model provider failed.
    Model,
    /// A turn is already running; messages are serialized.
    Busy,
    /// The user's token budget (access.toml `tokens_per_day`) is spent.
    BudgetExhausted,
    /// Anything else inside the worker.
    Internal,
    /// The worker process died or broke the protocol (set by the server).
    WorkerLost,
}

/// A field that breaks a bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}` is too long ({len} characters; at most {max})")]
pub struct TooLong {
    pub field: &'static str,
    pub len: usize,
    pub max: usize,
}

fn bound(field: &'static str, value: &str, max: usize) -> Result<(), TooLong> {
    // Bytes bound characters from above, so most values skip the count.
    if value.len() <= max {
        return Ok(());
    }
    let len = value.chars().count();
    if len > max {
        return Err(TooLong { field, len, max });
    }
    Ok(())
}

impl Command {
    /// Checks every bound; call on receipt.
    pub fn validate(&self) -> Result<(), TooLong> {
        match self {
            Command::Start {
                user,
                agent,
                resume,
            } => {
                bound("user", user, MAX_ID_CHARS)?;
                bound("agent", agent, MAX_ID_CHARS)?;
                if let Some(id) = resume {
                    bound("resume", id, MAX_ID_CHARS)?;
                }
                Ok(())
            }
            Command::StartTools { user, agent } => {
                bound("user", user, MAX_ID_CHARS)?;
                bound("agent", agent, MAX_ID_CHARS)
            }
            Command::ListTools => Ok(()),
            Command::CallTool {
                call_id,
                tool,
                arguments,
            } => {
                bound("call_id", call_id, MAX_ID_CHARS)?;
                bound("tool", tool, MAX_ID_CHARS)?;
                json_bound("arguments", arguments, MAX_JSON_BYTES)
            }
            Command::UserMessage { text, .. } => bound("text", text, MAX_MESSAGE_CHARS),
            Command::ToolApproval { request_id, .. } => {
                bound("request_id", request_id, MAX_ID_CHARS)
            }
            Command::Interrupt | Command::Shutdown => Ok(()),
            Command::StoreReply { reply, .. } => reply.validate(),
        }
    }
}

impl Event {
    /// Checks every bound; call on receipt.
    pub fn validate(&self) -> Result<(), TooLong> {
        match self {
            Event::Ready { session_id, .. } => bound("session_id", session_id, MAX_ID_CHARS),
            Event::TextDelta { text, .. } => bound("text", text, MAX_TEXT_CHARS),
            Event::ToolCall {
                call_id,
                tool,
                summary,
                ..
            } => {
                bound("call_id", call_id, MAX_ID_CHARS)?;
                bound("tool", tool, MAX_ID_CHARS)?;
                bound("summary", summary, MAX_SHORT_CHARS)
            }
            Event::ToolResult {
                call_id, summary, ..
            } => {
                bound("call_id", call_id, MAX_ID_CHARS)?;
                bound("summary", summary, MAX_SHORT_CHARS)
            }
            Event::ApprovalRequest {
                request_id,
                tool,
                operation,
                summary,
                why,
            } => {
                bound("request_id", request_id, MAX_ID_CHARS)?;
                bound("tool", tool, MAX_ID_CHARS)?;
                bound("operation", operation, MAX_ID_CHARS)?;
                bound("summary", summary, MAX_SHORT_CHARS)?;
                bound("why", why, MAX_SHORT_CHARS)
            }
            Event::TurnEnded { text, .. } => bound("text", text, MAX_TEXT_CHARS),
            Event::Error { message, .. } => bound("message", message, MAX_SHORT_CHARS),
            Event::Store { request, .. } => request.validate(),
            Event::Tools { tools } => {
                if tools.len() > MAX_TOOLS {
                    return Err(TooLong {
                        field: "tools",
                        len: tools.len(),
                        max: MAX_TOOLS,
                    });
                }
                let mut total = 0usize;
                for tool in tools {
                    bound("name", &tool.name, MAX_ID_CHARS)?;
                    bound("description", &tool.description, MAX_TOOL_DESCRIPTION_CHARS)?;
                    total = total.saturating_add(json_size("input_schema", &tool.input_schema)?);
                    if total > MAX_TOOLS_JSON_BYTES {
                        return Err(TooLong {
                            field: "tools",
                            len: total,
                            max: MAX_TOOLS_JSON_BYTES,
                        });
                    }
                }
                Ok(())
            }
            Event::ToolCallDone {
                call_id, content, ..
            } => {
                bound("call_id", call_id, MAX_ID_CHARS)?;
                bound("content", content, MAX_TEXT_CHARS)
            }
        }
    }
}

/// The size of `value`'s compact JSON, refused past [`MAX_JSON_BYTES`] or
/// [`MAX_JSON_DEPTH`] (a frame is bounded already; this keeps one value
/// from taking all of it, and a deep one from exhausting a stack later).
fn json_size(field: &'static str, value: &serde_json::Value) -> Result<usize, TooLong> {
    let depth = json_depth(value);
    if depth > MAX_JSON_DEPTH {
        return Err(TooLong {
            field,
            len: depth,
            max: MAX_JSON_DEPTH,
        });
    }
    let len = serde_json::to_vec(value).map_or(usize::MAX, |v| v.len());
    if len > MAX_JSON_BYTES {
        return Err(TooLong {
            field,
            len,
            max: MAX_JSON_BYTES,
        });
    }
    Ok(len)
}

fn json_bound(field: &'static str, value: &serde_json::Value, max: usize) -> Result<(), TooLong> {
    let len = json_size(field, value)?;
    if len > max {
        return Err(TooLong { field, len, max });
    }
    Ok(())
}

/// Nesting depth, counted without recursion.
fn json_depth(value: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match v {
            serde_json::Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            serde_json::Value::Object(map) => stack.extend(map.values().map(|i| (i, depth + 1))),
            _ => {}
        }
    }
    deepest
}
