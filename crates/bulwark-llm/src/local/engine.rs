//! The llama.cpp side of the local driver: one model, one context, one KV
//! cache. Everything here runs on the driver's own thread (`driver.rs`);
//! nothing is shared, so there is no locking and no `unsafe`.

use std::io::Read as _;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::{LogOptions, send_logs_to_tracing};

use super::file_words::worded_read_on;
use super::grammar::{
    call_grammar_with_paths, call_grammar_with_prefix, text_grammar, tool_grammar_with_paths,
};
use super::named_paths::{
    pending_write, unreachable_paths, write_turn, write_waits_for_a_read, writer_tools,
};
use super::output::{self, Output};
use super::prefix_cache::{Lookup, PrefixCache, RebuildReason, model_identity};
use super::repetition::degenerate_loop;
use super::search_first::{next_search, offered_tools, searched_read};
use super::steering::{
    model_calls_this_turn, named_file_reads, typed_file_read, uncalled_paths,
    without_repeated_reads,
};
use super::stream::{Utf8Stream, call_blocks, decided_calls, emit};
use super::template::{self, IM_END, IM_START, Segment};
use super::token_choice::{SHORTLIST, argmax, shortlist};
use super::{LocalError, LocalOptions, PrefixCacheOutcome, TurnKind, TurnStats, turn_kind};
use crate::{Block, ChatRequest, ChatResponse, Message, Role, StopReason, StreamEvent, Usage};

/// llama.cpp's process-wide backend. It may be initialised once per
/// process, so every model (and the raw-llama.cpp benchmark) shares this
/// one. llama.cpp's own logs go to `tracing` when debug logging is on at
/// start-up (`BULWARK_LOG=debug`) and nowhere otherwise: at other levels
/// they are model-loading chatter ("control-looking token ...") that a user
/// can do nothing about; every failure reaches the caller as an error.
pub fn backend() -> Result<&'static LlamaBackend, LocalError> {
    static BACKEND: OnceLock<Option<LlamaBackend>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let debug = tracing::enabled!(tracing::Level::DEBUG);
            send_logs_to_tracing(LogOptions::default().with_logs_enabled(debug));
            LlamaBackend::init().ok()
        })
        .as_ref()
        .ok_or_else(|| {
            LocalError::Backend(
                "the backend could not be initialised (another library in this process may have done it)"
                    .into(),
            )
        })
}

/// Loads a GGUF file (memory-mapped: the pages are shared with the page
/// cache and with other processes using the same file).
pub(crate) fn load_model(path: &Path) -> Result<LlamaModel, LocalError> {
    let fail = |detail: String| LocalError::Load {
        path: path.display().to_string(),
        detail,
    };
    // llama.cpp answers a missing or foreign file with a bare null; these
    // checks turn the common mistakes into messages a user can act on.
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| fail(e.to_string()))?;
    if &magic != b"GGUF" {
        return Err(fail("not a GGUF file".into()));
    }
    let started = Instant::now();
    let model = LlamaModel::load_from_file(backend()?, path, &LlamaModelParams::default())
        .map_err(|e| fail(e.to_string()))?;
    tracing::debug!(path = %path.display(), secs = started.elapsed().as_secs_f32(), "local model loaded");
    Ok(model)
}

/// Receives what a turn produces while it runs.
pub(crate) trait Sink {
    fn event(&mut self, event: StreamEvent);
    /// Nobody waits for the answer any more: stop generating.
    fn cancelled(&self) -> bool;
}

/// A loaded model with its context and the tokens its KV cache holds.
pub(crate) struct Engine<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    batch_tokens: usize,
    /// The tokens at positions `0..cached.len()` of sequence 0.
    cached: Vec<LlamaToken>,
    /// Control tokens that do not end a turn (`<|im_start|>`, FIM markers,
    /// ...): the grammar sees them as text, so they are masked here.
    banned: Vec<bool>,
    im_start: LlamaToken,
    im_end: LlamaToken,
    options: LocalOptions,
    /// Sampling chain when `temperature > 0`.
    sampler: Option<LlamaSampler>,
    /// The system turn's KV state on disk (warm starts).
    prefix_cache: Option<PrefixCache>,
}

impl<'m> Engine<'m> {
    pub(crate) fn new(
        model: &'m LlamaModel,
        options: &LocalOptions,
        path: &Path,
    ) -> Result<Self, LocalError> {
        let not_chatml = || LocalError::NotChatMl {
            path: path.display().to_string(),
        };
        let chat_template = model.chat_template(None).map_err(|_| not_chatml())?;
        if !chat_template.to_str().is_ok_and(|t| t.contains(IM_START)) {
            return Err(not_chatml());
        }
        let im_start = control_token(model, IM_START).ok_or_else(not_chatml)?;
        let im_end = control_token(model, IM_END).ok_or_else(not_chatml)?;

        let threads = match options.threads {
            Some(n) => n.get(),
            None => std::thread::available_parallelism()
                .map(|n| u32::try_from(n.get()).unwrap_or(1))
                .unwrap_or(1),
        };
        let threads = i32::try_from(threads).unwrap_or(1);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(options.context_tokens))
            .with_n_batch(options.batch_tokens)
            .with_n_ubatch(options.batch_tokens)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let ctx = model
            .new_context(backend()?, params)
            .map_err(|e| LocalError::Backend(format!("cannot create a context: {e}")))?;

        let vocab = model.vocab();
        let banned = (0..vocab.n_tokens())
            .map(|id| {
                let token = LlamaToken::new(id);
                vocab.is_control(token) && !vocab.is_eog(token)
            })
            .collect();
        let batch_tokens = usize::try_from(options.batch_tokens).unwrap_or(512);
        let sampler = (options.temperature > 0.0).then(|| {
            LlamaSampler::chain_simple([
                LlamaSampler::top_k(40),
                LlamaSampler::top_p(0.95, 1),
                LlamaSampler::temp(options.temperature),
                LlamaSampler::dist(options.seed),
            ])
        });
        let prefix_cache = options
            .prefix_cache
            .as_deref()
            .and_then(|dir| open_prefix_cache(model, options, path, dir));
        tracing::debug!(
            threads,
            context = options.context_tokens,
            prefix_cache = prefix_cache.is_some(),
            "local model context ready"
        );
        Ok(Self {
            model,
            ctx,
            batch: LlamaBatch::new(batch_tokens, 1),
            batch_tokens,
            cached: Vec::new(),
            banned,
            im_start,
            im_end,
            options: options.clone(),
            sampler,
            prefix_cache,
        })
    }

    /// Forget the KV cache (the next turn prefills its whole prompt).
    pub(crate) fn reset(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.clear();
    }

    /// Run one turn: render, prefill what the cache lacks, generate under
    /// the turn's grammar, read the output back.
    pub(crate) fn chat(
        &mut self,
        request: &ChatRequest,
        sink: &mut dyn Sink,
    ) -> Result<(ChatResponse, TurnStats), LocalError> {
        let started = Instant::now();
        let kind = turn_kind(
            request,
            self.options.tool_call_budget,
            self.options.tool_choice,
        );
        let uncalled = uncalled_paths(request);
        // A request to add to a file read since: the one write, keeping
        // what the file held (`append.rs`).
        let append = match kind {
            TurnKind::Tools { .. } => super::append::append_turn(request),
            TurnKind::Text => None,
        };
        let decided = match kind {
            TurnKind::Tools { .. } if append.is_some() => None,
            TurnKind::Tools {
                max_calls,
                text: false,
            } => super::linked_rows::code_read(request, &uncalled, max_calls)
                .or_else(|| super::named_paths::outside_reads(request, &uncalled, max_calls))
                .or_else(|| super::listing::asked_listing(request, max_calls))
                .or_else(|| super::listing::which_file_listing(request, &uncalled, max_calls))
                .or_else(|| {
                    super::folder_files::compared_folder_reads(request, &uncalled, max_calls)
                })
                .or_else(|| named_file_reads(request, &uncalled, max_calls))
                .or_else(|| super::choice_files::weighed_file_reads(request, &uncalled, max_calls))
                .or_else(|| searched_read(request, &uncalled, max_calls))
                .or_else(|| next_search(request, &uncalled))
                .or_else(|| worded_read_on(request, &uncalled, max_calls)),
            TurnKind::Tools {
                max_calls,
                text: true,
            } => super::linked_rows::code_read(request, &uncalled, max_calls)
                .or_else(|| searched_read(request, &uncalled, max_calls))
                .or_else(|| next_search(request, &uncalled))
                .or_else(|| typed_file_read(request, &uncalled, max_calls)),
            TurnKind::Text => None,
        };
        if let Some(calls) = decided {
            return Ok(decided_calls(request, calls, sink, started));
        }
        // The search tool is the driver's own (`search_first.rs`).
        // Nothing read yet for a file to write: not a write yet.
        let mut held_back = if write_waits_for_a_read(request) {
            writer_tools(request)
        } else {
            Vec::new()
        };
        held_back.extend(super::listing::spent_listers(request));
        held_back.extend(super::named_paths::forbidden_changers(request));
        let model_tools: Vec<crate::ToolDef> = offered_tools(request)
            .into_iter()
            .filter(|t| !held_back.contains(&t.name.as_str()))
            .cloned()
            .collect();
        let grammar_text = match (kind, &append) {
            (TurnKind::Tools { .. }, Some(append)) => call_grammar_with_prefix(
                std::slice::from_ref(&append.tool),
                &append.paths,
                1,
                &append.prefix,
            )?,
            (TurnKind::Text, _) => text_grammar(),
            (
                TurnKind::Tools {
                    max_calls,
                    text: true,
                },
                None,
            ) => tool_grammar_with_paths(
                &model_tools,
                &uncalled,
                model_calls_this_turn(request, &uncalled, max_calls),
            )?,
            (
                TurnKind::Tools {
                    max_calls,
                    text: false,
                },
                None,
            ) => {
                let targets = pending_write(request);
                if !targets.is_empty() {
                    let (tools, paths) = write_turn(request, &targets);
                    call_grammar_with_paths(&tools, &paths, 1)?
                } else if unreachable_paths(request).is_empty() {
                    call_grammar_with_paths(
                        &model_tools,
                        &uncalled,
                        model_calls_this_turn(request, &uncalled, max_calls),
                    )?
                } else {
                    // Only paths it cannot read were named: the answer
                    // says so (see `unreachable_note`) instead of reading
                    // another file.
                    text_grammar()
                }
            }
        };
        let mut grammar = LlamaSampler::grammar(self.model, &grammar_text, "root")
            .map_err(|e| LocalError::Backend(format!("llama.cpp rejected the grammar: {e}")))?;

        let segments = template::render_with(
            request,
            self.options.tool_call_budget,
            self.options.workspace_listing,
        );
        let system = system_turn_len(&segments);
        let mut prompt = self.tokenize(&segments[..system]);
        let prefix = prompt.len();
        prompt.extend(self.tokenize(&segments[system..]));
        let context = self.ctx.n_ctx();
        if prompt.len() >= context as usize {
            return Err(LocalError::PromptTooLong {
                prompt: prompt.len(),
                context,
            });
        }
        let (reused, prefix_cache) = self.prefill_turn(&prompt, prefix)?;
        let prefill_time = started.elapsed();
        tracing::debug!(
            prompt = prompt.len(),
            reused,
            prefilled = prompt.len() - reused,
            ms = prefill_time.as_millis() as u64,
            ?kind,
            ?prefix_cache,
            "local prefill"
        );

        let limit = (request.max_tokens as usize).min(context as usize - prompt.len());
        let mut text = String::new();
        let mut utf8 = Utf8Stream::default();
        let mut is_call: Option<bool> = None;
        let mut generated = 0usize;
        let mut first_token_time = None;
        let mut stop = StopReason::MaxTokens;
        let mut sampling_time = std::time::Duration::ZERO;
        let mut tokens = Vec::new();
        while generated < limit {
            if sink.cancelled() {
                return Err(LocalError::Output("the request was cancelled".into()));
            }
            let sampling = Instant::now();
            let token = self.pick(&mut grammar)?;
            first_token_time.get_or_insert_with(|| started.elapsed());
            if self.model.vocab().is_eog(token) {
                stop = StopReason::EndTurn;
                break;
            }
            grammar.try_accept(token).map_err(|e| {
                LocalError::Backend(format!("the grammar refused a token it allowed: {e}"))
            })?;
            sampling_time += sampling.elapsed();
            generated += 1;
            let piece = self.model.vocab().token_to_piece(token, false, None);
            let chunk = utf8.push(&piece);
            emit(&mut text, &chunk, &mut is_call, sink);
            tokens.push(token);
            if let Some(period) = degenerate_loop(&tokens) {
                return Err(self.loop_error(&tokens[tokens.len() - period..], generated));
            }
            if generated < limit {
                self.decode_one(token)?;
            }
        }
        let rest = utf8.finish();
        emit(&mut text, &rest, &mut is_call, sink);
        let first_token_time = first_token_time.unwrap_or_else(|| started.elapsed());
        let stats = TurnStats {
            prompt_tokens: prompt.len(),
            reused_tokens: reused,
            prefilled_tokens: prompt.len() - reused,
            generated_tokens: generated,
            prefill_time,
            first_token_time,
            generation_time: started.elapsed().saturating_sub(first_token_time),
            sampling_time,
            prefix_cache,
        };
        tracing::debug!(
            generated,
            ms = stats.generation_time.as_millis() as u64,
            "local generation"
        );

        let truncated = (stop == StopReason::MaxTokens).then_some(request.max_tokens);
        let output = output::parse(&text, &request.tools, truncated).map_err(|e| {
            // What the model wrote, for whoever runs with debug logs: a
            // call cut off by max_tokens is often a loop in its content.
            let from = text.floor_char_boundary(text.len().saturating_sub(300));
            tracing::debug!(
                chars = text.len(),
                tail = &text[from..],
                "local output refused"
            );
            LocalError::Output(e.to_string())
        })?;
        let (blocks, stop) = match output {
            Output::Text(text) => (vec![Block::Text { text }], stop),
            Output::Calls(calls) => (
                call_blocks(request, without_repeated_reads(request, calls), sink),
                StopReason::ToolUse,
            ),
        };
        let response = ChatResponse {
            message: Message {
                role: Role::Assistant,
                blocks,
            },
            stop,
            usage: Usage {
                input_tokens: prompt.len() as u64,
                output_tokens: generated as u64,
            },
        };
        Ok((response, stats))
    }

    /// The error for a generation stopped in a degenerate loop (see
    /// [`super::repetition`]), naming the repeated text.
    fn loop_error(&self, cycle: &[LlamaToken], generated: usize) -> LocalError {
        let repeated: String = cycle
            .iter()
            .map(|t| self.model.vocab().token_to_piece(*t, false, None))
            .map(|piece| String::from_utf8_lossy(&piece).into_owned())
            .collect();
        tracing::debug!(generated, ?repeated, "local generation stopped in a loop");
        LocalError::Output(format!(
            "the model fell into a loop, writing {repeated:?} over and over, and was stopped after {generated} tokens; ask again in other words, or try a larger model (`bulwark model list`, then --model local:NAME)"
        ))
    }

    /// Control segments become their single token; text is tokenized with
    /// special-token parsing off, so text can never forge a control token.
    fn tokenize(&self, segments: &[Segment]) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        let mut tokens = Vec::new();
        for segment in segments {
            match segment {
                Segment::Control(IM_START) => tokens.push(self.im_start),
                Segment::Control(_) => tokens.push(self.im_end),
                Segment::Text(text) => {
                    tokens.extend(vocab.tokenize(text.as_bytes(), false, false));
                }
            }
        }
        tokens
    }

    /// Make the KV cache hold `prompt` whose first `prefix` tokens are the
    /// system turn. Returns the tokens reused (from memory or disk) and
    /// what the disk cache did.
    ///
    /// With a disk cache, from an empty KV cache the system turn is decoded
    /// on its own (loaded from disk, or prefilled and saved) and the rest
    /// after it, so the rest's KV entries are computed the same way on a
    /// hit and a miss. Without one the prompt is one prefill: a second
    /// decode call costs ~20% of a short prompt's time to first token
    /// (measured against raw llama.cpp), and llama.cpp's CPU kernels
    /// compute each token's row alike however the batch is split (the
    /// warm-start test checks the answers are identical).
    fn prefill_turn(
        &mut self,
        prompt: &[LlamaToken],
        prefix: usize,
    ) -> Result<(usize, PrefixCacheOutcome), LocalError> {
        if !self.cached.is_empty() || prefix == 0 || prefix >= prompt.len() {
            let outcome = match self.prefix_cache {
                Some(_) => PrefixCacheOutcome::InMemory,
                None => PrefixCacheOutcome::Disabled,
            };
            return Ok((self.prefill(prompt)?, outcome));
        }
        let system = &prompt[..prefix];
        let Some(cache) = self.prefix_cache.take() else {
            return Ok((self.prefill(prompt)?, PrefixCacheOutcome::Disabled));
        };
        let result = self.warm_start(&cache, system);
        self.prefix_cache = Some(cache);
        let outcome = result?;
        let reused = match outcome {
            PrefixCacheOutcome::Hit => prefix,
            _ => 0,
        };
        self.prefill(prompt)?;
        tracing::debug!(?outcome, tokens = prefix, "local prefix cache");
        Ok((reused, outcome))
    }

    /// Load the system turn's state from `cache`, or prefill it and save it.
    fn warm_start(
        &mut self,
        cache: &PrefixCache,
        system: &[LlamaToken],
    ) -> Result<PrefixCacheOutcome, LocalError> {
        let ids: Vec<i32> = system.iter().map(|t| t.0).collect();
        let key = cache.key(&ids);
        let outcome = match cache.lookup(&key, &ids) {
            Lookup::Miss => PrefixCacheOutcome::Miss,
            Lookup::Refused(reason) => PrefixCacheOutcome::Rebuilt(reason),
            Lookup::Verified(state) => {
                let refused = match self.ctx.state_seq_load_file(&state, 0, system.len()) {
                    Ok((tokens, _)) if tokens == system => None,
                    Ok(_) => Some(RebuildReason::Tokens),
                    Err(e) => {
                        tracing::debug!(error = %e, "llama.cpp refused a verified prefix state");
                        Some(RebuildReason::StateLoad)
                    }
                };
                drop(state);
                match refused {
                    None => {
                        self.cached = system.to_vec();
                        return Ok(PrefixCacheOutcome::Hit);
                    }
                    Some(reason) => {
                        tracing::warn!(
                            ?reason,
                            key,
                            "local prefix cache: entry refused; it is deleted and rebuilt"
                        );
                        self.reset();
                        cache.remove(&key);
                        PrefixCacheOutcome::Rebuilt(reason)
                    }
                }
            }
        };
        self.prefill(system)?;
        let saved = cache.store(&key, &ids, |path| {
            self.ctx
                .state_seq_save_file(path, 0, system)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        if let Err(e) = saved {
            tracing::warn!(error = %e, "local prefix cache: cannot save the system turn's state");
            cache.remove(&key);
        }
        Ok(outcome)
    }

    /// Make the KV cache hold `prompt`, decoding only what follows the
    /// longest common prefix with what it holds. Returns the reused count.
    fn prefill(&mut self, prompt: &[LlamaToken]) -> Result<usize, LocalError> {
        let mut keep = self
            .cached
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        // The last prompt token is always decoded: its logits start the turn.
        keep = keep.min(prompt.len().saturating_sub(1));
        if keep < self.cached.len() {
            let removed = u32::try_from(keep)
                .ok()
                .and_then(|p0| self.ctx.clear_kv_cache_seq(Some(0), Some(p0), None).ok())
                .unwrap_or(false);
            if !removed {
                self.reset();
                keep = 0;
            }
            self.cached.truncate(keep);
        }
        let mut start = keep;
        while start < prompt.len() {
            let end = (start + self.batch_tokens).min(prompt.len());
            self.batch.clear();
            for (pos, token) in (start..end).zip(&prompt[start..end]) {
                let last = pos + 1 == prompt.len();
                self.add(*token, pos, last)?;
            }
            self.decode()?;
            self.cached.extend_from_slice(&prompt[start..end]);
            start = end;
        }
        Ok(keep)
    }

    fn decode_one(&mut self, token: LlamaToken) -> Result<(), LocalError> {
        self.batch.clear();
        self.add(token, self.cached.len(), true)?;
        self.decode()?;
        self.cached.push(token);
        Ok(())
    }

    fn add(&mut self, token: LlamaToken, pos: usize, logits: bool) -> Result<(), LocalError> {
        let pos =
            i32::try_from(pos).map_err(|_| LocalError::Backend("position overflow".into()))?;
        self.batch
            .add(token, pos, &[0], logits)
            .map_err(|e| LocalError::Backend(e.to_string()))
    }

    /// A failed decode leaves the cache in an unknown state: forget it.
    fn decode(&mut self) -> Result<(), LocalError> {
        if let Err(e) = self.ctx.decode(&mut self.batch) {
            self.reset();
            return Err(LocalError::Backend(format!("decode failed: {e}")));
        }
        Ok(())
    }

    /// The next token under `grammar`. Greedy decoding first tries the
    /// unconstrained favourite and asks the grammar about that one token
    /// (cheap); when it is refused, the grammar filters the
    /// [`SHORTLIST`] most likely tokens, and the whole vocabulary (~150k
    /// tokens, tens of milliseconds) only if it allows none of them. The
    /// result is the same: the best allowed token of the shortlist beats
    /// every token outside it. Sampling at a temperature always filters
    /// the whole vocabulary first.
    fn pick(&mut self, grammar: &mut LlamaSampler) -> Result<LlamaToken, LocalError> {
        let logits = self.ctx.get_logits_ith(-1);
        if self.sampler.is_none()
            && let Some(best) = argmax(logits.iter().copied().enumerate(), &self.banned)
        {
            let mut one =
                LlamaTokenDataArray::new(vec![LlamaTokenData::new(best, 0.0, 0.0)], false);
            grammar.apply(&mut one);
            if one.data.first().is_some_and(|d| d.logit().is_finite()) {
                return Ok(best);
            }
            let (shortlist, floor) = shortlist(logits, &self.banned, SHORTLIST);
            let mut candidates = LlamaTokenDataArray::new(
                shortlist
                    .iter()
                    .map(|&(id, logit)| LlamaTokenData::new(LlamaToken::new(id as i32), logit, 0.0))
                    .collect(),
                false,
            );
            grammar.apply(&mut candidates);
            let allowed = candidates
                .data
                .iter()
                .map(|d| (d.id().0 as usize, d.logit()));
            // Above the floor: no token outside the shortlist ties with it.
            if let Some(best) = argmax(allowed, &self.banned)
                && logits.get(best.0 as usize).is_some_and(|&l| l > floor)
            {
                return Ok(best);
            }
        }
        let mut candidates = LlamaTokenDataArray::new(
            logits
                .iter()
                .enumerate()
                .map(|(id, &logit)| {
                    let logit = if self.banned.get(id).copied().unwrap_or(true) {
                        f32::NEG_INFINITY
                    } else {
                        logit
                    };
                    LlamaTokenData::new(LlamaToken::new(id as i32), logit, 0.0)
                })
                .collect(),
            false,
        );
        grammar.apply(&mut candidates);
        let picked = match &mut self.sampler {
            None => argmax(
                candidates
                    .data
                    .iter()
                    .map(|d| (d.id().0 as usize, d.logit())),
                &self.banned,
            ),
            Some(sampler) => {
                if candidates.data.iter().all(|d| !d.logit().is_finite()) {
                    None
                } else {
                    candidates.apply_sampler(sampler);
                    candidates.selected_token()
                }
            }
        };
        picked.ok_or_else(|| LocalError::Backend("the grammar allows no next token".into()))
    }
}

/// The number of leading segments that render the system turn
/// (`<|im_start|>`, `system\n...`, `<|im_end|>`, `\n`); 0 if the prompt
/// does not start with one.
fn system_turn_len(segments: &[Segment]) -> usize {
    match segments {
        [
            Segment::Control(IM_START),
            Segment::Text(body),
            Segment::Control(IM_END),
            Segment::Text(newline),
            Segment::Control(IM_START),
            ..,
        ] if body.starts_with("system\n") && newline == "\n" => 4,
        _ => 0,
    }
}

/// The disk cache for this model and context, when its identity can be
/// read (a warning, and no cache, otherwise).
fn open_prefix_cache(
    model: &LlamaModel,
    options: &LocalOptions,
    path: &Path,
    dir: &Path,
) -> Option<PrefixCache> {
    let started = Instant::now();
    let arch = model
        .meta_val_str("general.architecture")
        .unwrap_or_default();
    let facts = format!(
        "arch={arch};n_params={};n_vocab={};n_layer={};n_embd={};n_head_kv={};n_ctx_train={}",
        model.n_params(),
        model.n_vocab(),
        model.n_layer(),
        model.n_embd(),
        model.n_head_kv(),
        model.n_ctx_train(),
    );
    let identity = match model_identity(path, &facts) {
        Ok(identity) => identity,
        Err(e) => {
            tracing::warn!(error = %e, "local prefix cache disabled: cannot read the model file");
            return None;
        }
    };
    // What shapes the saved state: the KV cache's size and the batch
    // sizes the system turn was decoded with (llama.cpp's defaults for the
    // rest: f16 K and V, one sequence).
    let context = format!(
        "n_ctx={};n_batch={};n_ubatch={};kv=f16;seq=0",
        options.context_tokens, options.batch_tokens, options.batch_tokens
    );
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "local model identity computed"
    );
    PrefixCache::open(dir, identity, context)
}

/// The single control token spelled `text`, if the vocabulary has one.
fn control_token(model: &LlamaModel, text: &str) -> Option<LlamaToken> {
    let vocab = model.vocab();
    match vocab.tokenize(text.as_bytes(), false, true).as_slice() {
        [token] if vocab.is_control(*token) => Some(*token),
        _ => None,
    }
}
