//! OpenAI Chat Completions driver (`POST {base_url}/chat/completions`,
//! streamed), which also serves the compatible servers: Ollama, vLLM,
//! llama.cpp, LM Studio.
//!
//! Compatible servers differ in small ways, so the response side is lenient
//! where the meaning is unambiguous (a missing `index` on a tool call
//! fragment, a repeated `id`, an `error` that is a bare string) and strict
//! where a guess could change what a tool does: arguments that are not a
//! JSON object are a protocol error, never an empty `{}`.

use std::collections::BTreeMap;

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::transport::{
    Endpoint, ProviderConfig, ended_early, protocol, repaired_history, truncate_chars,
};
use crate::{
    Block, ChatRequest, ChatResponse, LlmDriver, LlmError, Message, Role, StopReason, StreamEvent,
    Usage,
};

const PROVIDER: &str = "openai";

/// Prefix on the content of a failed tool result: the wire has no error
/// flag for `tool` messages, and the model must know the call failed.
pub const TOOL_ERROR_PREFIX: &str = "error: ";

/// Talks to an OpenAI-compatible Chat Completions endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiDriver {
    endpoint: Endpoint,
}

impl OpenAiDriver {
    /// `config.base_url` includes the version prefix, e.g.
    /// `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`.
    pub fn new(config: ProviderConfig) -> Result<Self, LlmError> {
        Ok(Self {
            endpoint: Endpoint::new(PROVIDER, config, "/chat/completions")?,
        })
    }

    /// No key, no header: local servers need none, and an empty
    /// `Bearer ` header confuses some of them.
    fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = self.endpoint.key_header("Bearer ")? {
            headers.insert(AUTHORIZATION, key);
        }
        Ok(headers)
    }
}

#[async_trait::async_trait]
impl LlmDriver for OpenAiDriver {
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
            if event.data.trim() == "[DONE]" {
                return turn.finish();
            }
            turn.apply(&event.data, on_event)?;
        }
        if turn.finish_reason.is_some() {
            // Some compatible servers close right after the final chunk.
            return turn.finish();
        }
        Err(ended_early(PROVIDER, "[DONE] or finish_reason"))
    }
}

/// The request body: the system prompt as the first message, assistant tool
/// uses as `tool_calls`, each tool result as a `tool` message placed right
/// after the assistant message that asked (before any user text).
/// Thinking is dropped: the wire has no place for it.
pub(crate) fn wire_request(request: &ChatRequest, messages: &[Message]) -> Value {
    let mut wire: Vec<Value> = Vec::with_capacity(messages.len() + 1);
    if !request.system.is_empty() {
        wire.push(json!({"role": "system", "content": request.system}));
    }
    for message in messages {
        let text = joined_text(message);
        match message.role {
            Role::User => {
                for block in &message.blocks {
                    if let Block::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                        ..
                    } = block
                    {
                        let content = if *is_error {
                            format!("{TOOL_ERROR_PREFIX}{content}")
                        } else {
                            content.clone()
                        };
                        wire.push(
                            json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}),
                        );
                    }
                }
                if let Some(text) = text {
                    wire.push(json!({"role": "user", "content": text}));
                }
            }
            Role::Assistant => {
                let calls: Vec<Value> = message
                    .tool_uses()
                    .map(|(id, name, input)| {
                        json!({
                            "id": id,
                            "type": "function",
                            "function": {"name": name, "arguments": input.to_string()},
                        })
                    })
                    .collect();
                let mut out = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    out["tool_calls"] = json!(calls);
                }
                wire.push(out);
            }
        }
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": wire,
    });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                })
            })
            .collect();
        body["tools"] = json!(tools);
    }
    body
}

/// Text blocks joined by blank lines; `None` when there are none.
fn joined_text(message: &Message) -> Option<String> {
    let parts: Vec<&str> = message
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    /// Reasoning text as DeepSeek, vLLM (`reasoning_content`) and Ollama
    /// (`reasoning`) stream it.
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// A tool call while its fragments arrive.
#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
    announced: bool,
}

#[derive(Default)]
struct Turn {
    text: String,
    reasoning: String,
    calls: BTreeMap<usize, PartialCall>,
    finish_reason: Option<String>,
    usage: Usage,
}

impl Turn {
    fn apply(
        &mut self,
        data: &str,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), LlmError> {
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|e| protocol(PROVIDER, format!("bad stream chunk: {e}")))?;
        if let Some(error) = chunk.error {
            let message = match &error {
                Value::String(message) => message.clone(),
                other => other
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| other.to_string(), str::to_owned),
            };
            return Err(protocol(
                PROVIDER,
                format!(
                    "provider reported an error mid-stream: {}",
                    truncate_chars(&message, 300)
                ),
            ));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
            };
        }
        // One completion was asked for (no `n`), so only choice 0 counts.
        let Some(choice) = chunk.choices.into_iter().find(|c| c.index == 0) else {
            return Ok(());
        };
        if let Some(delta) = choice.delta {
            for piece in [delta.reasoning_content, delta.reasoning]
                .into_iter()
                .flatten()
            {
                if !piece.is_empty() {
                    self.reasoning.push_str(&piece);
                    on_event(StreamEvent::ThinkingDelta(piece));
                }
            }
            if let Some(piece) = delta.content.filter(|p| !p.is_empty()) {
                self.text.push_str(&piece);
                on_event(StreamEvent::TextDelta(piece));
            }
            for (position, fragment) in delta.tool_calls.into_iter().flatten().enumerate() {
                self.apply_call_fragment(position, fragment, on_event);
            }
        }
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason);
        }
        Ok(())
    }

    /// Fragments are keyed by `index` (by position in the array when a
    /// server omits it). The first non-empty `id` and `name` win, so servers
    /// that repeat them on every fragment do not produce `readread`.
    fn apply_call_fragment(
        &mut self,
        position: usize,
        fragment: ToolCallDelta,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) {
        let index = fragment.index.unwrap_or(position);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = fragment.id.filter(|id| !id.is_empty())
            && call.id.is_none()
        {
            call.id = Some(id);
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty())
                && call.name.is_empty()
            {
                call.name = name;
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            let id = call.id.get_or_insert_with(|| generated_id(index)).clone();
            on_event(StreamEvent::ToolUseStart {
                id,
                name: call.name.clone(),
            });
        }
    }

    fn finish(self) -> Result<ChatResponse, LlmError> {
        let mut blocks = Vec::with_capacity(self.calls.len() + 2);
        if !self.reasoning.is_empty() {
            blocks.push(Block::Thinking {
                text: self.reasoning,
                signature: None,
            });
        }
        if !self.text.is_empty() {
            blocks.push(Block::Text { text: self.text });
        }
        let has_calls = !self.calls.is_empty();
        for (index, call) in self.calls {
            if call.name.is_empty() {
                return Err(protocol(
                    PROVIDER,
                    format!("tool call {index} has no function name"),
                ));
            }
            blocks.push(Block::ToolUse {
                input: parse_arguments(index, &call.name, &call.arguments)?,
                id: call.id.unwrap_or_else(|| generated_id(index)),
                name: call.name,
            });
        }
        let stop = match self.finish_reason.as_deref() {
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            // Some compatible servers say `stop` after tool calls.
            Some("stop") if has_calls => StopReason::ToolUse,
            Some("stop") => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            _ => StopReason::Other,
        };
        Ok(ChatResponse {
            message: Message {
                role: Role::Assistant,
                blocks,
            },
            stop,
            usage: self.usage,
        })
    }
}

fn generated_id(index: usize) -> String {
    format!("call_{index}")
}

/// Arguments must be a JSON object. An entirely empty string means "no
/// arguments" (some servers send it for parameterless functions) and is the
/// one case read as `{}`; anything else that does not parse is an error, so
/// a truncated call can never run with defaults.
fn parse_arguments(index: usize, name: &str, arguments: &str) -> Result<Value, LlmError> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    let value: Value = serde_json::from_str(arguments).map_err(|e| {
        protocol(
            PROVIDER,
            format!("arguments of tool call {index} ({name:?}) are not valid JSON: {e}"),
        )
    })?;
    if !value.is_object() {
        return Err(protocol(
            PROVIDER,
            format!("arguments of tool call {index} ({name:?}) are not a JSON object"),
        ));
    }
    Ok(value)
}
