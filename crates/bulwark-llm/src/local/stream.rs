//! What a turn produces, on its way out: the text streamed as it is
//! generated, and the tool-use blocks of calls (the model's, or the ones
//! the driver decided), each with an id unique in the conversation.

use std::time::Instant;

use super::TurnStats;
use super::engine::Sink;
use super::output::{self, Call};
use crate::{Block, ChatRequest, ChatResponse, Message, Role, StopReason, StreamEvent, Usage};

/// Append `chunk` to the turn's text and stream it once the turn is known
/// to be an answer (its first character says so; calls are announced
/// whole, after parsing).
pub(super) fn emit(
    text: &mut String,
    chunk: &str,
    is_call: &mut Option<bool>,
    sink: &mut dyn Sink,
) {
    if chunk.is_empty() {
        return;
    }
    text.push_str(chunk);
    match *is_call {
        None => {
            let call = output::is_call(text);
            *is_call = Some(call);
            if !call {
                sink.event(StreamEvent::TextDelta(text.clone()));
            }
        }
        Some(false) => sink.event(StreamEvent::TextDelta(chunk.to_owned())),
        Some(true) => {}
    }
}

/// Token pieces are bytes; a character may span two tokens.
#[derive(Default)]
pub(super) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// The complete characters so far; an incomplete tail waits for more.
    pub(super) fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(text) => {
                    out.push_str(text);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // Incomplete sequence at the end: keep it.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    pub(super) fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }
}

/// The blocks of calls `calls`, each with a fresh id, announced to `sink`.
pub(super) fn call_blocks(
    request: &ChatRequest,
    calls: Vec<Call>,
    sink: &mut dyn Sink,
) -> Vec<Block> {
    let mut ids = CallIds::new(request);
    calls
        .into_iter()
        .map(|(name, arguments)| {
            let id = ids.next();
            sink.event(StreamEvent::ToolUseStart {
                id: id.clone(),
                name: name.clone(),
            });
            Block::ToolUse {
                id,
                name,
                input: serde_json::Value::Object(arguments),
            }
        })
        .collect()
}

/// A turn whose calls the driver decided (see
/// [`super::steering::named_file_reads`]): nothing is prefilled or
/// generated, so the stats and usage are zero, and the next turn prefills
/// the question together with these calls and their results.
pub(super) fn decided_calls(
    request: &ChatRequest,
    calls: Vec<Call>,
    sink: &mut dyn Sink,
    started: Instant,
) -> (ChatResponse, TurnStats) {
    tracing::debug!(calls = calls.len(), "local turn: the named files are read");
    let response = ChatResponse {
        message: Message {
            role: Role::Assistant,
            blocks: call_blocks(request, calls, sink),
        },
        stop: StopReason::ToolUse,
        usage: Usage::default(),
    };
    let stats = TurnStats {
        first_token_time: started.elapsed(),
        ..TurnStats::default()
    };
    (response, stats)
}

/// Tool-use ids `call_N`, unique within the conversation.
struct CallIds {
    used: std::collections::HashSet<String>,
    next: usize,
}

impl CallIds {
    fn new(request: &ChatRequest) -> Self {
        let used = request
            .messages
            .iter()
            .flat_map(|m| m.tool_uses().map(|(id, _, _)| id.to_owned()))
            .collect();
        Self { used, next: 1 }
    }

    fn next(&mut self) -> String {
        loop {
            let id = format!("call_{}", self.next);
            self.next += 1;
            if self.used.insert(id.clone()) {
                return id;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_stream_joins_split_characters() {
        let mut s = Utf8Stream::default();
        let heron = "héron 🐦".as_bytes();
        let mut out = String::new();
        for byte in heron {
            out.push_str(&s.push(&[*byte]));
        }
        out.push_str(&s.finish());
        assert_eq!(out, "héron 🐦");
        assert_eq!(s.push(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(s.push(b"\xf0\x9f"), "");
        assert_eq!(s.finish(), "\u{fffd}");
    }
}
