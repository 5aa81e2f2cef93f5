//! Provider-neutral messages, session repair, and the LLM drivers.
#![forbid(unsafe_code)]

mod anthropic;
pub mod local;
mod message;
mod openai;
mod paths;
mod repair;
mod script;
mod sse;
mod transport;

pub use anthropic::AnthropicDriver;
#[cfg(feature = "local")]
pub use local::LocalDriver;
pub use local::{LocalError, LocalOptions, ToolChoice};
pub use message::*;
pub use openai::{OpenAiDriver, TOOL_ERROR_PREFIX};
pub use paths::{AllowedPaths, PathArgumentChoices, PathChoices, PathKind};
pub use repair::{INTERRUPTED_RESULT, Rule, Violation, repair, validate};
pub use script::ScriptDriver;
pub use transport::{MAX_BACKOFF, ProviderConfig};

/// Entry points for the fuzz targets in `fuzz/` (not a stable API): they
/// reach private parsers without making them public.
#[doc(hidden)]
pub mod fuzzing {
    use crate::sse::SseParser;

    /// Feed `bytes` to a fresh SSE parser in chunks ending at `cuts` (byte
    /// offsets, clamped and sorted here), draining events after every chunk.
    /// Returns each dispatched event as `(event, data)`, and whether the
    /// stream was accepted (`false`: a line was not UTF-8; the events
    /// dispatched before it stay in the list).
    pub fn sse_events(bytes: &[u8], cuts: &[usize]) -> (Vec<(String, String)>, bool) {
        let mut points: Vec<usize> = cuts.iter().map(|&c| c.min(bytes.len())).collect();
        points.sort_unstable();
        points.push(bytes.len());
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        let mut start = 0;
        for point in points {
            let fed = parser.feed(&bytes[start..point]);
            while let Some(event) = parser.next_event() {
                events.push((event.event, event.data));
            }
            if fed.is_err() {
                return (events, false);
            }
            start = point;
        }
        (events, true)
    }
}

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
    /// Not a `#[source]`: the message already says it, and error chains
    /// printed it twice ("local: X: X").
    #[error("local: {0}")]
    Local(LocalError),
}

impl From<LocalError> for LlmError {
    fn from(e: LocalError) -> Self {
        Self::Local(e)
    }
}

/// One model endpoint. `chat` streams events through `on_event` while the
/// response arrives and returns the complete assistant message.
#[async_trait::async_trait]
pub trait LlmDriver: Send + Sync {
    /// Short provider name for messages and audit (`anthropic`, `openai`, `local`, `script`).
    fn provider(&self) -> &str;
    /// Called once when a stored session is resumed, with the number of
    /// assistant turns its history holds. Live models ignore it; replaying
    /// drivers use it to continue where the session stopped.
    fn resume_after(&self, _assistant_turns: usize) {}
    async fn chat(
        &self,
        request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, LlmError>;
}
