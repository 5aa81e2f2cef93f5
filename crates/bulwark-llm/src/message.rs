//! Provider-neutral conversation types. Drivers translate these at the edge;
//! everything inside Bulwark (the loop, the store, session repair) speaks only
//! these.

use bulwark_policy::TaintLabel;
use serde::{Deserialize, Serialize};

/// Who said a message. The system prompt is not a message: it travels beside
/// the history in [`ChatRequest::system`], as both provider APIs expect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: serde_json::Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        is_error: bool,
        /// Where the content came from; lets the taint check decide what it
        /// may flow into.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        taint: Vec<TaintLabel>,
    },
    Thinking {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub role: Role,
    pub blocks: Vec<Block>,
}

impl Message {
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            blocks: vec![Block::Text { text: text.into() }],
        }
    }
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            blocks: vec![Block::Text { text: text.into() }],
        }
    }
    /// All text blocks joined, for display.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.blocks {
            if let Block::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }
    /// The tool uses in this message, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = (&str, &str, &serde_json::Value)> {
        self.blocks.iter().filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }
    /// The successful tool results in this message, in order: the id of
    /// the call each answers and its content.
    pub fn ok_results(&self) -> impl Iterator<Item = (&str, &str)> {
        self.blocks.iter().filter_map(|b| match b {
            Block::ToolResult {
                tool_use_id,
                content,
                is_error: false,
                ..
            } => Some((tool_use_id.as_str(), content.as_str())),
            _ => None,
        })
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// JSON Schema of the `input` object.
    pub input_schema: serde_json::Value,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    /// The provider's model name (after `provider:` was stripped).
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    pub max_tokens: u32,
    /// Where the offered tools take workspace paths, what exists and may
    /// be named this turn (see [`crate::PathChoices`]); empty: no hint.
    pub paths: crate::PathChoices,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    Other,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// Always `Role::Assistant`.
    pub message: Message,
    pub stop: StopReason,
    pub usage: Usage,
}

/// Incremental output, delivered while a response streams in.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ThinkingDelta(String),
    /// The model started a tool call; its input arrives with the final response.
    ToolUseStart {
        id: String,
        name: String,
    },
}
