//! Anthropic Messages API driver (`POST {base_url}/v1/messages`, streamed).
//!
//! Wire reference: the Messages API and its streaming events
//! (`message_start`, `content_block_start/delta/stop`, `message_delta`,
//! `message_stop`, `ping`, `error`). Unknown event, block and delta types
//! are ignored, as Anthropic's versioning policy asks of clients; anything
//! malformed in a known event is a protocol error, never a guess.

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::transport::{Endpoint, ProviderConfig, ended_early, protocol, repaired_history};
use crate::{
    Block, ChatRequest, ChatResponse, LlmDriver, LlmError, Message, Role, StopReason, StreamEvent,
    Usage,
};

const PROVIDER: &str = "anthropic";
const API_VERSION: &str = "2023-06-01";

/// Talks to the Anthropic Messages API (or anything speaking it).
#[derive(Debug, Clone)]
pub struct AnthropicDriver {
    endpoint: Endpoint,
}

impl AnthropicDriver {
    /// `config.base_url` is the API root, e.g. `https://api.anthropic.com`.
    pub fn new(config: ProviderConfig) -> Result<Self, LlmError> {
        Ok(Self {
            endpoint: Endpoint::new(PROVIDER, config, "/v1/messages")?,
        })
    }

    fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = self.endpoint.key_header("")? {
            headers.insert(HeaderName::from_static("x-api-key"), key);
        }
        Ok(headers)
    }
}

#[async_trait::async_trait]
impl LlmDriver for AnthropicDriver {
    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let messages = repaired_history(PROVIDER, request)?;
        let body = wire_request(request, &messages);
        let mut stream = self.endpoint.post_stream(self.headers()?, &body).await?;
        let mut turn = Turn::default();
        while let Some(event) = stream.next().await? {
            if turn.apply(&event.data, on_event)? {
                return turn.finish();
            }
        }
        Err(ended_early(PROVIDER, "message_stop"))
    }
}

/// The request body. The system prompt is the top-level `system` field;
/// tool results are `tool_result` blocks in user messages (repair has put
/// them first, as the API requires).
pub(crate) fn wire_request(request: &ChatRequest, messages: &[Message]) -> Value {
    let messages: Vec<Value> = messages
        .iter()
        .map(|message| {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            let content: Vec<Value> = message.blocks.iter().filter_map(wire_block).collect();
            json!({ "role": role, "content": content })
        })
        .collect();
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": true,
        "messages": messages,
    });
    if !request.system.is_empty() {
        body["system"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        body["tools"] = json!(tools);
    }
    body
}

/// One block on the wire. Thinking without a signature (from another
/// provider, or cut off before the signature arrived) is left out: the API
/// rejects unsigned thinking, and it is only the model's scratch work.
fn wire_block(block: &Block) -> Option<Value> {
    Some(match block {
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } => json!({
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": content,
            "is_error": is_error,
        }),
        Block::Thinking {
            text,
            signature: Some(signature),
        } => json!({"type": "thinking", "thinking": text, "signature": signature}),
        Block::Thinking {
            signature: None, ..
        } => return None,
    })
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Token counts. Cache reads and writes are input the account pays for,
/// so they are counted as input.
#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    fn input(&self) -> Option<u64> {
        let parts = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        parts
            .iter()
            .any(Option::is_some)
            .then(|| parts.iter().flatten().sum())
    }
}

#[derive(Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// A content block while it streams in.
enum Partial {
    Text(String),
    Thinking {
        text: String,
        signature: Option<String>,
    },
    ToolUse {
        id: String,
        name: String,
        start_input: Option<Value>,
        json: String,
        done: Option<Value>,
    },
    /// A block type this driver does not model (e.g. redacted thinking,
    /// server tool results): its deltas are skipped.
    Ignored,
}

/// The assistant turn being assembled from events.
#[derive(Default)]
struct Turn {
    blocks: BTreeMap<usize, Partial>,
    stop: Option<StopReason>,
    usage: Usage,
}

impl Turn {
    /// Apply one event; `true` once `message_stop` arrived.
    fn apply(
        &mut self,
        data: &str,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<bool, LlmError> {
        let event: WireEvent = serde_json::from_str(data)
            .map_err(|e| protocol(PROVIDER, format!("bad stream event: {e}")))?;
        match event {
            WireEvent::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.add_usage(&usage);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let partial = match content_block {
                    WireBlock::Text { text } => {
                        if !text.is_empty() {
                            on_event(StreamEvent::TextDelta(text.clone()));
                        }
                        Partial::Text(text)
                    }
                    WireBlock::Thinking {
                        thinking,
                        signature,
                    } => {
                        if !thinking.is_empty() {
                            on_event(StreamEvent::ThinkingDelta(thinking.clone()));
                        }
                        Partial::Thinking {
                            text: thinking,
                            signature,
                        }
                    }
                    WireBlock::ToolUse { id, name, input } => {
                        on_event(StreamEvent::ToolUseStart {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        Partial::ToolUse {
                            id,
                            name,
                            start_input: input,
                            json: String::new(),
                            done: None,
                        }
                    }
                    WireBlock::Unknown => Partial::Ignored,
                };
                if self.blocks.insert(index, partial).is_some() {
                    return Err(protocol(
                        PROVIDER,
                        format!("content block {index} started twice"),
                    ));
                }
            }
            WireEvent::ContentBlockDelta { index, delta } => {
                let Some(block) = self.blocks.get_mut(&index) else {
                    return Err(protocol(
                        PROVIDER,
                        format!("delta for content block {index}, which never started"),
                    ));
                };
                match (block, delta) {
                    (Partial::Ignored, _) | (_, WireDelta::Unknown) => {}
                    (Partial::Text(text), WireDelta::TextDelta { text: piece }) => {
                        text.push_str(&piece);
                        on_event(StreamEvent::TextDelta(piece));
                    }
                    (Partial::Thinking { text, .. }, WireDelta::ThinkingDelta { thinking }) => {
                        text.push_str(&thinking);
                        on_event(StreamEvent::ThinkingDelta(thinking));
                    }
                    (
                        Partial::Thinking { signature, .. },
                        WireDelta::SignatureDelta { signature: s },
                    ) => {
                        signature.get_or_insert_with(String::new).push_str(&s);
                    }
                    (
                        Partial::ToolUse {
                            json, done: None, ..
                        },
                        WireDelta::InputJsonDelta { partial_json },
                    ) => {
                        json.push_str(&partial_json);
                    }
                    _ => {
                        return Err(protocol(
                            PROVIDER,
                            format!("delta does not fit content block {index}"),
                        ));
                    }
                }
            }
            WireEvent::ContentBlockStop { index } => match self.blocks.get_mut(&index) {
                Some(block) => close_block(block)?,
                None => {
                    return Err(protocol(
                        PROVIDER,
                        format!("stop for content block {index}, which never started"),
                    ));
                }
            },
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop = Some(stop_reason(&reason));
                }
                if let Some(usage) = usage {
                    self.add_usage(&usage);
                }
            }
            WireEvent::MessageStop => return Ok(true),
            WireEvent::Ping | WireEvent::Unknown => {}
            WireEvent::Error { error } => {
                return Err(protocol(
                    PROVIDER,
                    format!(
                        "provider reported an error mid-stream: {}: {}",
                        error.kind,
                        crate::transport::truncate_chars(&error.message, 300)
                    ),
                ));
            }
        }
        Ok(false)
    }

    /// `message_delta` counts are cumulative, so later values replace earlier.
    fn add_usage(&mut self, usage: &WireUsage) {
        if let Some(input) = usage.input() {
            self.usage.input_tokens = input;
        }
        if let Some(output) = usage.output_tokens {
            self.usage.output_tokens = output;
        }
    }

    fn finish(mut self) -> Result<ChatResponse, LlmError> {
        let mut blocks = Vec::with_capacity(self.blocks.len());
        for (_, mut partial) in std::mem::take(&mut self.blocks) {
            close_block(&mut partial)?;
            match partial {
                Partial::Text(text) if !text.is_empty() => blocks.push(Block::Text { text }),
                Partial::Thinking { text, signature } => {
                    blocks.push(Block::Thinking { text, signature })
                }
                Partial::ToolUse {
                    id,
                    name,
                    done: Some(input),
                    ..
                } => blocks.push(Block::ToolUse { id, name, input }),
                _ => {}
            }
        }
        Ok(ChatResponse {
            message: Message {
                role: Role::Assistant,
                blocks,
            },
            stop: self.stop.unwrap_or(StopReason::Other),
            usage: self.usage,
        })
    }
}

/// Parse a tool use's accumulated input JSON (once). Empty means the input
/// given at block start (`{}` for a call without arguments).
fn close_block(block: &mut Partial) -> Result<(), LlmError> {
    let Partial::ToolUse {
        name,
        start_input,
        json,
        done: done @ None,
        ..
    } = block
    else {
        return Ok(());
    };
    let input = if json.trim().is_empty() {
        start_input.take().unwrap_or_else(|| json!({}))
    } else {
        serde_json::from_str(json).map_err(|e| {
            protocol(
                PROVIDER,
                format!("input of tool call {name:?} is not valid JSON: {e}"),
            )
        })?
    };
    if !input.is_object() {
        return Err(protocol(
            PROVIDER,
            format!("input of tool call {name:?} is not a JSON object"),
        ));
    }
    *done = Some(input);
    Ok(())
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        _ => StopReason::Other,
    }
}
