//! A scripted "model" for tests, demos and reproducible incident replays:
//! each JSON line is one assistant turn, returned in order.
//!
//! A script is a test fixture, so it is strict: unknown fields, empty turns,
//! non-object tool inputs and duplicate ids are errors naming `origin:line`,
//! and running past the end is an error rather than a loop or invented
//! output, so a test can never pass by accident.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::Value;

use crate::{
    Block, ChatRequest, ChatResponse, LlmDriver, LlmError, Message, Role, StopReason, StreamEvent,
    Usage,
};

const PROVIDER: &str = "script";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_calls: Vec<LineCall>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    usage: Option<LineUsage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LineCall {
    name: String,
    #[serde(default = "empty_object")]
    input: Value,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LineUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// One scripted assistant turn.
#[derive(Debug, Clone, PartialEq)]
enum Turn {
    Reply {
        text: String,
        /// `(id, name, input)`; ids are final (generated ones filled in).
        calls: Vec<(String, String, Value)>,
        usage: Usage,
    },
    /// Simulated provider failure.
    Fail(String),
}

/// Replays a JSONL script; see the module docs for the line format.
#[derive(Debug)]
pub struct ScriptDriver {
    origin: String,
    turns: Vec<Turn>,
    /// Index of the next turn. A mutex because the driver is shared by `&self`.
    next: Mutex<usize>,
}

impl ScriptDriver {
    /// Parse a script. `origin` names it in errors (a path, or `inline`).
    pub fn from_jsonl(src: &str, origin: &str) -> Result<Self, LlmError> {
        let err =
            |line: usize, message: String| LlmError::Script(format!("{origin}:{line}: {message}"));
        let mut parsed: Vec<(usize, Line)> = Vec::new();
        for (number, raw) in src.lines().enumerate() {
            let number = number + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let line: Line =
                serde_json::from_str(trimmed).map_err(|e| err(number, e.to_string()))?;
            let has_text = line.text.as_deref().is_some_and(|t| !t.trim().is_empty());
            match &line.error {
                Some(_) if has_text || !line.tool_calls.is_empty() || line.usage.is_some() => {
                    return Err(err(
                        number,
                        "`error` stands alone: no text, tool_calls or usage".into(),
                    ));
                }
                None if !has_text && line.tool_calls.is_empty() => {
                    return Err(err(
                        number,
                        "a turn needs non-empty `text`, `tool_calls` or `error`".into(),
                    ));
                }
                _ => {}
            }
            for call in &line.tool_calls {
                if call.name.trim().is_empty() {
                    return Err(err(number, "tool call without a name".into()));
                }
                if !call.input.is_object() {
                    return Err(err(
                        number,
                        format!("input of tool call {:?} is not a JSON object", call.name),
                    ));
                }
            }
            parsed.push((number, line));
        }

        // Explicit ids must be unique; generated ones skip any explicit id.
        let mut taken: HashSet<String> = HashSet::new();
        for (number, line) in &parsed {
            for id in line.tool_calls.iter().filter_map(|c| c.id.as_ref()) {
                if id.is_empty() || !taken.insert(id.clone()) {
                    return Err(err(
                        *number,
                        format!("tool call id {id:?} is empty or used twice"),
                    ));
                }
            }
        }
        let mut counter = 0usize;
        let mut turns = Vec::with_capacity(parsed.len());
        for (_, line) in parsed {
            if let Some(message) = line.error {
                turns.push(Turn::Fail(message));
                continue;
            }
            let mut calls = Vec::with_capacity(line.tool_calls.len());
            for call in line.tool_calls {
                let id = match call.id {
                    Some(id) => id,
                    None => loop {
                        counter += 1;
                        let candidate = format!("call_{counter}");
                        if taken.insert(candidate.clone()) {
                            break candidate;
                        }
                    },
                };
                calls.push((id, call.name, call.input));
            }
            let usage = line.usage.map_or_else(Usage::default, |u| Usage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
            });
            turns.push(Turn::Reply {
                // Whitespace-only text beside tool calls is no text at all.
                text: line
                    .text
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or_default(),
                calls,
                usage,
            });
        }
        Ok(Self {
            origin: origin.to_owned(),
            turns,
            next: Mutex::new(0),
        })
    }

    /// Read and parse a script file; errors name the path.
    pub fn from_file(path: &Path) -> Result<Self, LlmError> {
        let origin = path.display().to_string();
        let src = std::fs::read_to_string(path)
            .map_err(|e| LlmError::Script(format!("{origin}: cannot read: {e}")))?;
        Self::from_jsonl(&src, &origin)
    }

    /// Number of turns in the script.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// How many turns have been played.
    pub fn played(&self) -> usize {
        self.next.lock().map_or_else(|p| *p.into_inner(), |n| *n)
    }

    fn take_turn(&self) -> Result<Turn, LlmError> {
        // A poisoned lock only means another caller panicked mid-increment;
        // the counter itself is still a valid index.
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let turn = self.turns.get(*next).cloned().ok_or_else(|| {
            LlmError::Script(format!(
                "{}: script exhausted after {} turns",
                self.origin,
                self.turns.len()
            ))
        })?;
        *next += 1;
        Ok(turn)
    }
}

#[async_trait::async_trait]
impl LlmDriver for ScriptDriver {
    fn provider(&self) -> &str {
        PROVIDER
    }

    /// A script is a fixed sequence of turns: a resumed session continues at
    /// the turn after the last one its history holds, instead of replaying
    /// the script from the top.
    fn resume_after(&self, assistant_turns: usize) {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        *next = assistant_turns.min(self.turns.len());
    }

    async fn chat(
        &self,
        _request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let (text, calls, usage) = match self.take_turn()? {
            Turn::Fail(detail) => {
                return Err(LlmError::Transport {
                    provider: PROVIDER.to_owned(),
                    url: format!("script:{}", self.origin),
                    detail,
                });
            }
            Turn::Reply { text, calls, usage } => (text, calls, usage),
        };
        // Word-sized deltas, so consumers see a real stream of several events.
        for piece in text.split_inclusive(' ') {
            on_event(StreamEvent::TextDelta(piece.to_owned()));
        }
        let mut blocks = Vec::with_capacity(calls.len() + 1);
        if !text.is_empty() {
            blocks.push(Block::Text { text });
        }
        let stop = if calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        for (id, name, input) in calls {
            on_event(StreamEvent::ToolUseStart {
                id: id.clone(),
                name: name.clone(),
            });
            blocks.push(Block::ToolUse { id, name, input });
        }
        Ok(ChatResponse {
            message: Message {
                role: Role::Assistant,
                blocks,
            },
            stop,
            usage,
        })
    }
}
