//! Provider-neutral messages, session repair, and the LLM drivers.
#![forbid(unsafe_code)]

mod anthropic;
mod message;
mod openai;
mod repair;
mod script;
mod sse;
mod transport;

pub use anthropic::AnthropicDriver;
pub use message::*;
pub use openai::{OpenAiDriver, TOOL_ERROR_PREFIX};
pub use repair::{INTERRUPTED_RESULT, Rule, Violation, repair, validate};
pub use script::ScriptDriver;
pub use transport::{MAX_BACKOFF, ProviderConfig};

/// Why a provider call failed. Messages never include API keys or request
/// bodies; they name the provider, URL and status so the user can act.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("{provider}: request to {url} failed: {detail}")]
    Transport {
        provider: String,
        url: String,
        detail: String,
    },
    #[error("{provider}: {url} answered HTTP {status}: {detail}")]
    Status {
        provider: String,
        url: String,
        status: u16,
        detail: String,
    },
    #[error("{provider}: malformed response: {detail}")]
    Protocol { provider: String, detail: String },
    #[error("{provider}: response larger than the {limit}-byte cap")]
    TooLarge { provider: String, limit: usize },
    #[error("{provider}: timed out after {secs} s")]
    Timeout { provider: String, secs: u64 },
    #[error("script: {0}")]
    Script(String),
    #[error("{0}")]
    Config(String),
}

/// One model endpoint. `chat` streams events through `on_event` while the
/// response arrives and returns the complete assistant message.
#[async_trait::async_trait]
pub trait LlmDriver: Send + Sync {
    /// Short provider name for messages and audit (`anthropic`, `openai`, `script`).
    fn provider(&self) -> &str;
    async fn chat(
        &self,
        request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, LlmError>;
}
