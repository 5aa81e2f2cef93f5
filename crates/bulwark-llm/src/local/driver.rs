//! [`LocalDriver`]: the async face of the model thread.
//!
//! llama.cpp calls block for seconds (prefill) and the context borrows the
//! model, so both live on one dedicated OS thread for the driver's whole
//! life. Requests go to it over a channel and replies (stream events, then
//! the result) come back over a per-request channel, so `chat` only awaits
//! and never blocks an async worker. Requests are served one at a time,
//! which is also what a single KV cache wants.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use tokio::sync::{mpsc as async_mpsc, oneshot};

use super::engine::{self, Engine, Sink};
use super::{LocalError, LocalOptions, PROVIDER, TurnStats};
use crate::transport::repaired_history;
use crate::{ChatRequest, ChatResponse, LlmDriver, LlmError, StreamEvent};

enum Job {
    Chat {
        request: ChatRequest,
        replies: async_mpsc::UnboundedSender<Reply>,
    },
    Reset(oneshot::Sender<()>),
}

enum Reply {
    Event(StreamEvent),
    Done(Result<(ChatResponse, TurnStats), LocalError>),
}

struct ReplySink<'a>(&'a async_mpsc::UnboundedSender<Reply>);

impl Sink for ReplySink<'_> {
    fn event(&mut self, event: StreamEvent) {
        let _ = self.0.send(Reply::Event(event));
    }
    fn cancelled(&self) -> bool {
        self.0.is_closed()
    }
}

/// A GGUF model run in-process by llama.cpp (`local:<model>`).
///
/// Loading maps the file and creates the context once; every `chat` then
/// reuses the KV cache for the prompt prefix it shares with the previous
/// turn. Dropping the driver stops its thread and frees the model.
pub struct LocalDriver {
    jobs: mpsc::Sender<Job>,
    path: PathBuf,
}

impl fmt::Debug for LocalDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalDriver")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LocalDriver {
    /// Load the GGUF at `path` and start its thread. Blocks until the model
    /// is loaded (under a second for the catalogue's small models, the file
    /// is memory-mapped), so a bad file fails here with a clear error
    /// rather than on the first turn.
    pub fn load(path: impl AsRef<Path>, options: LocalOptions) -> Result<Self, LocalError> {
        validate(&options)?;
        let path = path.as_ref().to_path_buf();
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready_tx, ready) = mpsc::sync_channel::<Result<(), LocalError>>(1);
        let thread_path = path.clone();
        std::thread::Builder::new()
            .name("bulwark-local-model".into())
            .spawn(move || serve(&thread_path, &options, &ready_tx, &queue))
            .map_err(|e| LocalError::Backend(format!("cannot start the model thread: {e}")))?;
        ready.recv().map_err(|_| LocalError::WorkerGone)??;
        Ok(Self { jobs, path })
    }

    /// The GGUF file this driver runs.
    pub fn model_path(&self) -> &Path {
        &self.path
    }

    /// [`LlmDriver::chat`], also returning the turn's token counts and
    /// timings (how much of the prompt came from the KV cache).
    pub async fn chat_with_stats(
        &self,
        request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(ChatResponse, TurnStats), LlmError> {
        let request = ChatRequest {
            model: request.model.clone(),
            system: request.system.clone(),
            messages: super::short_forms::in_files_terms(repaired_history(PROVIDER, request)?),
            tools: request.tools.clone(),
            max_tokens: request.max_tokens,
            paths: request.paths.clone(),
        };
        let (replies, mut incoming) = async_mpsc::unbounded_channel();
        self.jobs
            .send(Job::Chat { request, replies })
            .map_err(|_| LocalError::WorkerGone)?;
        while let Some(reply) = incoming.recv().await {
            match reply {
                Reply::Event(event) => on_event(event),
                Reply::Done(result) => return Ok(result?),
            }
        }
        Err(LocalError::WorkerGone.into())
    }

    /// Empty the KV cache, so the next turn prefills its whole prompt (for
    /// benchmarks; a conversation never needs it).
    pub async fn reset_cache(&self) -> Result<(), LocalError> {
        let (done, wait) = oneshot::channel();
        self.jobs
            .send(Job::Reset(done))
            .map_err(|_| LocalError::WorkerGone)?;
        wait.await.map_err(|_| LocalError::WorkerGone)
    }
}

#[async_trait::async_trait]
impl LlmDriver for LocalDriver {
    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, LlmError> {
        Ok(self.chat_with_stats(request, on_event).await?.0)
    }
}

fn validate(options: &LocalOptions) -> Result<(), LocalError> {
    let bad = |what: &str| Err(LocalError::Options(what.to_owned()));
    if options.context_tokens < 256 {
        return bad("context_tokens must be at least 256");
    }
    if options.batch_tokens == 0 || options.batch_tokens > options.context_tokens {
        return bad("batch_tokens must be between 1 and context_tokens");
    }
    if !options.temperature.is_finite() || options.temperature < 0.0 {
        return bad("temperature must be a finite number >= 0");
    }
    Ok(())
}

/// The model thread: load, report, then serve jobs until the driver (the
/// only sender) is dropped.
fn serve(
    path: &Path,
    options: &LocalOptions,
    ready: &mpsc::SyncSender<Result<(), LocalError>>,
    queue: &mpsc::Receiver<Job>,
) {
    let model = match engine::load_model(path) {
        Ok(model) => model,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let mut engine = match Engine::new(&model, options, path) {
        Ok(engine) => engine,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    if ready.send(Ok(())).is_err() {
        return;
    }
    while let Ok(job) = queue.recv() {
        match job {
            Job::Chat { request, replies } => {
                let result = engine.chat(&request, &mut ReplySink(&replies));
                let _ = replies.send(Reply::Done(result));
            }
            Job::Reset(done) => {
                engine.reset();
                let _ = done.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<LocalDriver>();
    }

    #[test]
    fn bad_options_and_files_are_refused_before_llama() {
        let mut options = LocalOptions {
            context_tokens: 10,
            ..LocalOptions::default()
        };
        assert!(matches!(
            LocalDriver::load("/nonexistent.gguf", options.clone()),
            Err(LocalError::Options(_))
        ));
        options.context_tokens = 4096;
        options.temperature = f32::NAN;
        assert!(matches!(
            LocalDriver::load("/nonexistent.gguf", options),
            Err(LocalError::Options(_))
        ));
        let err = LocalDriver::load("/nonexistent.gguf", LocalOptions::default()).unwrap_err();
        assert!(err.to_string().contains("/nonexistent.gguf"), "{err}");
        let dir = std::env::temp_dir().join(format!("bulwark-local-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("fake.gguf");
        std::fs::write(&fake, b"not a model").unwrap();
        let err = LocalDriver::load(&fake, LocalOptions::default()).unwrap_err();
        assert!(err.to_string().contains("not a GGUF file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
