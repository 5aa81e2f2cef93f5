//! The `local:` driver: a GGUF model run in-process by llama.cpp, so an
//! agent works with no API key and no network.
//!
//! - [`LocalDriver`] (cargo feature `local`) loads a model once and runs it
//!   on a dedicated thread that owns the llama.cpp context; async callers
//!   only exchange messages with it, so no llama work ever runs on an async
//!   worker thread. The KV cache survives between turns: each turn prefills
//!   only the tokens after the longest common prefix with what the cache
//!   holds.
//! - The prompt is Qwen2.5's ChatML with Hermes-style `<tool_call>` blocks
//!   (see `template.rs` for why it is rendered here and not by llama.cpp).
//! - Every turn is sampled under a GBNF grammar ([`grammar`]): text, or
//!   calls to exactly the offered tools with schema-shaped arguments. With
//!   [`ToolChoice::Required`] (the default) the first turn after the user's
//!   message must be a call; after [`LocalOptions::tool_call_budget`] calls
//!   since the user's last message (failed calls count only beyond
//!   [`FAILED_CALL_ALLOWANCE`]) the grammar is text-only, so a small model
//!   answers from the tool results instead of calling again.
//! - Which models exist and what their files must hash to is not known
//!   here: that is `bulwark-models`' catalogue, the one place a pin is
//!   written down. The driver runs whatever GGUF path it is given.

pub mod grammar;
mod spaced_json;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod steering;
// Without the driver only the catalogue, the grammar and the prompt
// renderer are reachable; the rest is still compiled and unit-tested.
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod absent_name;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod answer_kind;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod append;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod choice_files;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod compare;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod counted;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod dates;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod difference;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod editions;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod enough;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod extremes;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod file_words;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod folder_files;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod lines;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod linked_rows;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod listing;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod mentions;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod month_ranges;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod named_paths;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod output;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod own_content;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod prefix_cache;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod question_words;
mod ranges;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod read_notes;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod read_only;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod repetition;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod search;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod search_first;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod section_totals;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod shape;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod short_forms;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod table;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod template;
#[cfg(test)]
mod test_requests;
#[cfg(test)]
mod test_wrap;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod thresholds;
#[cfg_attr(not(feature = "local"), allow(dead_code))]
mod time_asked;

#[cfg(feature = "local")]
mod driver;
#[cfg(feature = "local")]
mod engine;
#[cfg(feature = "local")]
mod stream;
#[cfg(feature = "local")]
mod token_choice;

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

#[cfg(feature = "local")]
pub use driver::LocalDriver;
pub use prefix_cache::{MAX_CACHE_BYTES, PrefixCacheOutcome, RebuildReason};

use crate::{Block, ChatRequest, Message, Role};

/// The provider name (`local:<model>`).
pub const PROVIDER: &str = "local";

/// The default [`LocalOptions::tool_call_budget`]: two calls, then an
/// answer. Comparing two files, or reading what a listing found, takes two;
/// on the eval (`bulwark eval`) one call left the 0.5B model unable to do
/// either, and with the steering in `steering.rs` a second call no longer
/// turns into a repeat of the first.
pub const DEFAULT_TOOL_CALL_BUDGET: u32 = 2;

/// Whether the first turn after the user's message may answer in text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides: text or calls.
    Auto,
    /// When tools are offered, the first turn after the user's message is
    /// a call; the budget's later turns may answer. The default, because
    /// Qwen2.5-Coder-0.5B judges badly whether it needs a tool: asked
    /// "What is the launch code name in notes.txt?" it answers from
    /// nothing ("launch") instead of reading the file. An agent that holds
    /// tools is there to use them.
    #[default]
    Required,
}

/// How a model is run. The defaults suit the catalogue's small models on
/// a laptop-class CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalOptions {
    /// Context window in tokens (prompt plus answer); the KV cache holds
    /// this many. 4096 fits a system prompt, tool schemas and a few turns
    /// of a small model in well under 100 MB.
    pub context_tokens: u32,
    /// CPU threads for prefill and generation; `None`: every core the
    /// process may use.
    pub threads: Option<NonZeroU32>,
    /// Prompt tokens per llama.cpp batch while prefilling.
    pub batch_tokens: u32,
    /// 0 samples greedily (the default: deterministic, and tool calls want
    /// the most likely tokens); above 0, top-k 40 / top-p 0.95 at this
    /// temperature.
    pub temperature: f32,
    /// Seed for sampling when `temperature > 0`.
    pub seed: u32,
    /// Tool calls allowed after the user's last message; once spent, every
    /// turn is constrained to text. Per turn at most
    /// [`grammar::MAX_CALLS_PER_TURN`].
    pub tool_call_budget: u32,
    /// May the first turn after the user's message answer without a call?
    pub tool_choice: ToolChoice,
    /// An experiment, off by default: list the workspace's files (from the
    /// request's path choices) before the latest user message (never in
    /// the system turn; `template.rs` says what it costs the KV cache).
    pub workspace_listing: bool,
    /// Directory of the on-disk cache of the system turn's KV state (warm
    /// starts; see `prefix_cache.rs`), created owner-only. `None`: every
    /// new driver prefills the system turn.
    pub prefix_cache: Option<PathBuf>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            context_tokens: 4096,
            threads: None,
            batch_tokens: 512,
            temperature: 0.0,
            seed: 0x5eed,
            tool_call_budget: DEFAULT_TOOL_CALL_BUDGET,
            tool_choice: ToolChoice::default(),
            workspace_listing: false,
            prefix_cache: None,
        }
    }
}

/// Why the local model could not load or answer.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot load the model {path}: {detail}")]
    Load { path: String, detail: String },
    #[error(
        "the model {path} does not use the ChatML chat template (<|im_start|>); the local driver supports ChatML models such as Qwen2.5"
    )]
    NotChatMl { path: String },
    #[error("llama.cpp: {0}")]
    Backend(String),
    #[error("invalid options: {0}")]
    Options(String),
    #[error("cannot build the tool-call grammar: {0}")]
    Grammar(#[from] grammar::GrammarError),
    #[error(
        "the prompt is {prompt} tokens but the context holds {context}; start a new session or raise the context size"
    )]
    PromptTooLong { prompt: usize, context: u32 },
    #[error("{0}")]
    Output(String),
    #[error("the local model thread stopped")]
    WorkerGone,
}

/// Numbers from one turn, for logs, tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TurnStats {
    /// Tokens in the rendered prompt.
    pub prompt_tokens: usize,
    /// Of those, tokens whose KV entries were reused from earlier turns.
    pub reused_tokens: usize,
    /// Tokens decoded to prefill this turn (`prompt_tokens - reused_tokens`).
    pub prefilled_tokens: usize,
    /// Tokens the model generated (not counting end-of-turn).
    pub generated_tokens: usize,
    /// Rendering, tokenizing and prefilling.
    pub prefill_time: Duration,
    /// From the start of the turn to the first sampled token.
    pub first_token_time: Duration,
    /// From the first sampled token to the end of generation.
    pub generation_time: Duration,
    /// Of the generation, time spent choosing tokens (grammar included),
    /// as opposed to running the model: the driver's own per-token cost.
    pub sampling_time: Duration,
    /// Whether the system turn's KV state came from the disk cache.
    pub prefix_cache: PrefixCacheOutcome,
}

/// What the grammar allows in one turn.
#[cfg_attr(not(feature = "local"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TurnKind {
    Text,
    /// `text`: the turn may answer instead of calling.
    Tools {
        max_calls: usize,
        text: bool,
    },
}

/// Whether `message` is the user asking something (it has text), not only
/// carrying tool results back. Every "since the user's latest question"
/// rule of the driver (the budget, the steering, the notes) counts from
/// such a message.
pub(crate) fn asks(message: &Message) -> bool {
    message.role == Role::User
        && message
            .blocks
            .iter()
            .any(|b| matches!(b, Block::Text { text } if !text.is_empty()))
}

/// The index of the user's latest question ([`asks`]).
pub(crate) fn latest_question(messages: &[Message]) -> Option<usize> {
    messages.iter().rposition(asks)
}

/// Failed calls allowed on top of the budget: a call that failed (wrong
/// tool, bad path) told the model nothing about the task, so it may try
/// again, but not forever.
pub const FAILED_CALL_ALLOWANCE: u32 = 1;

/// Tool calls since the user's last message, as the budget counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Spent {
    calls: usize,
    failed: usize,
    /// Calls earned on top of the budget by reads that searched the
    /// workspace and missed (`search.rs`).
    earned: usize,
    /// A search found what the question asks about: no call is left.
    found: bool,
}

#[cfg_attr(not(feature = "local"), allow(dead_code))]
impl Spent {
    /// Account for one more message of the conversation.
    /// Calls to `searcher` are the driver's own searches
    /// (`search_first.rs`) and do not count.
    pub(crate) fn observe(&mut self, message: &Message, searcher: Option<&str>) {
        match message.role {
            Role::Assistant => {
                self.calls += message
                    .tool_uses()
                    .filter(|(_, name, _)| Some(*name) != searcher)
                    .count();
            }
            Role::User => {
                if asks(message) {
                    *self = Self::default();
                    return;
                }
                self.failed += message
                    .blocks
                    .iter()
                    .filter(|b| matches!(b, Block::ToolResult { is_error: true, .. }))
                    .count();
            }
        }
    }

    /// What a message's searching reads earned (`ReadNotes::searched_in`):
    /// more calls on top of the budget, or, once one found what it
    /// looked for, none.
    pub(crate) fn searched(&mut self, (earned, found): (usize, bool)) {
        self.earned += earned;
        self.found |= found;
    }

    /// Calls still allowed: `budget` (and what was earned) that succeed,
    /// and [`FAILED_CALL_ALLOWANCE`] failed ones on top.
    pub(crate) fn left(&self, budget: u32) -> usize {
        if self.found {
            return 0;
        }
        let budget = budget as usize + self.earned;
        let succeeded = self.calls.saturating_sub(self.failed);
        let cap = budget + FAILED_CALL_ALLOWANCE as usize;
        budget
            .saturating_sub(succeeded)
            .min(cap.saturating_sub(self.calls))
    }

    pub(crate) fn calls(&self) -> usize {
        self.calls
    }
}

/// Text-only when no tools are offered or the budget is spent; else up to
/// the rest of the budget, and a call is required on the first turn when
/// `choice` says so. Calls count from the last user message that has text
/// (tool results do not reset the count).
#[cfg_attr(not(feature = "local"), allow(dead_code))]
pub(crate) fn turn_kind(request: &ChatRequest, budget: u32, choice: ToolChoice) -> TurnKind {
    if request.tools.is_empty() {
        return TurnKind::Text;
    }
    if !named_paths::pending_write(request).is_empty() {
        return TurnKind::Tools {
            max_calls: 1,
            text: false,
        };
    }
    // A name or code the question asks about is in no file, or a change
    // was asked of tools that only read: answer now.
    if absent_name::absent_name(request).is_some()
        || read_only::refused_change(request)
        || named_paths::outside_tried(request)
        || listing::listing_answered(request)
    {
        return TurnKind::Text;
    }
    let notes = read_notes::ReadNotes::new(request);
    let mut spent = Spent::default();
    // The latest results were a search that missed with files left: the
    // next turn reads on. Why: told "the question's words "call" and
    // "engineer" are not in this file; 2 files are not read yet", the
    // 1.5B model answered "who is the on-call engineer?" from the one
    // file it had read, with a definition of the job.
    let mut missed = false;
    let searcher = search_first::searcher(request);
    for message in &request.messages {
        spent.observe(message, searcher);
        let (earned, found) = notes.searched_in(message);
        spent.searched((earned, found));
        if message.role == Role::User {
            missed = earned > 0 && !found;
        }
    }
    match spent.left(budget).min(grammar::MAX_CALLS_PER_TURN) {
        0 => TurnKind::Text,
        max_calls => TurnKind::Tools {
            max_calls,
            text: !missed && (spent.calls() > 0 || choice == ToolChoice::Auto),
        },
    }
}

/// The prompt the driver renders for `request`, as one string with the
/// control tokens spelled out: for the benchmark against raw llama.cpp,
/// which must feed the very same prompt. Not a stable API.
#[doc(hidden)]
pub fn rendered_prompt(request: &ChatRequest, tool_call_budget: u32) -> String {
    template::flatten(&template::render(request, tool_call_budget))
}

/// The llama.cpp bindings and the process-wide backend, for the benchmark
/// that compares this driver with raw llama.cpp (llama.cpp's backend may
/// be initialised only once per process). Not a stable API.
#[cfg(feature = "local")]
#[doc(hidden)]
pub mod raw {
    pub use super::engine::backend;
    pub use llama_cpp_2;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolDef;
    use serde_json::json;

    fn request(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system: String::new(),
            messages,
            tools: vec![ToolDef {
                name: "t".into(),
                description: String::new(),
                input_schema: json!({}),
            }],
            max_tokens: 10,
            paths: Default::default(),
        }
    }

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            blocks: vec![Block::ToolUse {
                id: id.into(),
                name: "t".into(),
                input: json!({}),
            }],
        }
    }

    fn result(id: &str) -> Message {
        Message {
            role: Role::User,
            blocks: vec![Block::ToolResult {
                tool_use_id: id.into(),
                content: "ok".into(),
                is_error: false,
                taint: vec![],
            }],
        }
    }

    #[test]
    fn a_local_error_is_said_once() {
        let e = crate::LlmError::from(LocalError::Output("the model fell into a loop".into()));
        assert_eq!(e.to_string(), "local: the model fell into a loop");
        // No source: a printed chain would repeat the message.
        assert!(std::error::Error::source(&e).is_none());
    }

    #[test]
    fn budget_counts_calls_since_the_last_user_text() {
        let auto = ToolChoice::Auto;
        let required = ToolChoice::Required;
        let tools = |max_calls, text| TurnKind::Tools { max_calls, text };
        let first = request(vec![Message::user_text("go")]);
        assert_eq!(turn_kind(&first, 1, auto), tools(1, true));
        assert_eq!(turn_kind(&first, 1, required), tools(1, false));
        assert_eq!(turn_kind(&first, 0, required), TurnKind::Text);
        assert_eq!(turn_kind(&first, 99, auto), tools(16, true));

        let after = request(vec![Message::user_text("go"), call("1"), result("1")]);
        assert_eq!(turn_kind(&after, 1, required), TurnKind::Text);
        assert_eq!(turn_kind(&after, 3, required), tools(2, true));

        let next_question = request(vec![
            Message::user_text("go"),
            call("1"),
            result("1"),
            Message::assistant_text("done"),
            Message::user_text("again"),
        ]);
        assert_eq!(turn_kind(&next_question, 1, required), tools(1, false));

        // A failed call does not spend the budget, within the allowance.
        let failed = |id: &str| {
            let mut m = result(id);
            if let Some(Block::ToolResult { is_error, .. }) = m.blocks.first_mut() {
                *is_error = true;
            }
            m
        };
        let retry = request(vec![Message::user_text("go"), call("1"), failed("1")]);
        assert_eq!(turn_kind(&retry, 1, required), tools(1, true));
        let twice = request(vec![
            Message::user_text("go"),
            call("1"),
            failed("1"),
            call("2"),
            failed("2"),
        ]);
        assert_eq!(turn_kind(&twice, 1, required), TurnKind::Text);
        assert_eq!(turn_kind(&twice, 3, required), tools(2, true));

        let mut no_tools = request(vec![Message::user_text("go")]);
        no_tools.tools.clear();
        assert_eq!(turn_kind(&no_tools, 5, required), TurnKind::Text);
    }
}
