//! The local driver against raw llama.cpp (`llama-cpp-2`) on the same
//! prompt and the same model: prefill tokens/s, generation tokens/s and
//! time to first token. Target: Bulwark at >= 90% of raw.
//!
//! Needs the model (see `tests/local_model.rs`):
//! `BULWARK_TEST_MODEL=/path/to/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
//!  cargo bench -p bulwark-llm --features local --bench local`
//!
//! Both sides prefill from an empty KV cache every iteration and decode
//! greedily. Bulwark's side includes everything a turn does: rendering,
//! tokenizing, compiling the grammar, the grammar check of every token,
//! detokenizing, streaming over the channel and parsing the output.
//!
//! Warm starts (`local_first_token`): the time to the first token of a
//! one-line question with an agent's system prompt and tools, from an
//! empty KV cache, without and with the on-disk prefix cache (then the
//! system turn is loaded from disk, as a new `run` or served worker does).

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bulwark_llm::local::PrefixCacheOutcome;
use bulwark_llm::local::raw::{backend, llama_cpp_2};
use bulwark_llm::local::rendered_prompt;
use bulwark_llm::{ChatRequest, LocalDriver, LocalOptions, Message, StreamEvent, ToolDef};
use criterion::Criterion;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;

fn model_path() -> PathBuf {
    let path = bulwark_models::test_model_path()
        .expect("set BULWARK_TEST_MODEL to a GGUF (or HOME, for the fetch-test-model cache)");
    assert!(
        path.is_file(),
        "no model at {}: run scripts/fetch-test-model, or set BULWARK_TEST_MODEL",
        path.display()
    );
    path
}

/// One measured turn.
#[derive(Clone, Copy, Default)]
struct Sample {
    prefill_tokens: usize,
    prefill: Duration,
    first_token: Duration,
    generated: usize,
    generation: Duration,
    /// Bulwark only: time spent choosing tokens (grammar included).
    sampling: Duration,
}

/// Medians over several turns.
#[derive(Default)]
struct Tally(Vec<Sample>);

impl Tally {
    fn median(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        let mut values: Vec<f64> = self.0.iter().map(f).collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
    }

    /// (prefill tok/s, generation tok/s, time to first token ms)
    fn report(&self, label: &str) -> (f64, f64, f64) {
        let prefill = self.median(|s| s.prefill_tokens as f64 / s.prefill.as_secs_f64().max(1e-9));
        let rate = |s: &Sample| s.generated as f64 / s.generation.as_secs_f64().max(1e-9);
        let generation = self.median(rate);
        let low = self.0.iter().map(rate).fold(f64::INFINITY, f64::min);
        let high = self.0.iter().map(rate).fold(0.0, f64::max);
        let ttft = self.median(|s| s.first_token.as_secs_f64() * 1000.0);
        let tokens = self.median(|s| s.prefill_tokens as f64);
        let generated = self.median(|s| s.generated as f64);
        println!(
            "{label:<8} prefill {prefill:7.1} tok/s ({tokens:.0} tokens)   generation {generation:6.1} tok/s ({generated:.0} tokens, {low:.1}..{high:.1})   time to first token {ttft:7.1} ms   (median of {})",
            self.0.len()
        );
        (prefill, generation, ttft)
    }
}

fn threads() -> i32 {
    std::thread::available_parallelism()
        .map(|n| i32::try_from(n.get()).unwrap_or(1))
        .unwrap_or(1)
}

/// Raw llama.cpp: tokenize the rendered prompt (special tokens parsed),
/// prefill it in 512-token batches, then greedy-decode until end of turn.
fn raw_turn(
    model: &LlamaModel,
    ctx: &mut LlamaContext<'_>,
    prompt: &str,
    max_new: usize,
) -> Sample {
    let started = Instant::now();
    ctx.clear_kv_cache();
    let vocab = model.vocab();
    let tokens = vocab.tokenize(prompt.as_bytes(), false, true);
    let mut batch = LlamaBatch::new(512, 1);
    for (chunk_index, chunk) in tokens.chunks(512).enumerate() {
        batch.clear();
        for (i, token) in chunk.iter().enumerate() {
            let pos = chunk_index * 512 + i;
            batch
                .add(*token, pos as i32, &[0], pos + 1 == tokens.len())
                .expect("batch");
        }
        ctx.decode(&mut batch).expect("prefill");
    }
    let prefill = started.elapsed();
    let mut sampler = LlamaSampler::greedy();
    let mut token = sampler.sample(ctx, -1);
    let first_token = started.elapsed();
    let mut generated = 0;
    let mut pos = tokens.len();
    while !vocab.is_eog(token) && generated < max_new {
        generated += 1;
        let _piece = vocab.token_to_piece(token, false, None);
        if generated == max_new {
            break;
        }
        batch.clear();
        batch.add(token, pos as i32, &[0], true).expect("batch");
        ctx.decode(&mut batch).expect("decode");
        pos += 1;
        token = sampler.sample(ctx, -1);
    }
    Sample {
        prefill_tokens: tokens.len(),
        prefill,
        first_token,
        generated,
        generation: started.elapsed().saturating_sub(first_token),
        sampling: Duration::ZERO,
    }
}

fn bulwark_turn(
    driver: &LocalDriver,
    runtime: &tokio::runtime::Runtime,
    request: &ChatRequest,
) -> Sample {
    runtime.block_on(driver.reset_cache()).expect("reset");
    let mut first_delta = None;
    let started = Instant::now();
    let (_, stats) = runtime
        .block_on(driver.chat_with_stats(request, &mut |event| {
            // A call is announced whole at the end: only text is a token.
            if matches!(event, StreamEvent::TextDelta(_)) {
                first_delta.get_or_insert_with(|| started.elapsed());
            }
        }))
        .expect("chat");
    Sample {
        prefill_tokens: stats.prefilled_tokens,
        prefill: stats.prefill_time,
        // What a user sees: the first streamed text, from the caller's side.
        first_token: first_delta.unwrap_or(stats.first_token_time),
        generated: stats.generated_tokens,
        generation: stats.generation_time,
        sampling: stats.sampling_time,
    }
}

fn requests() -> (ChatRequest, ChatRequest) {
    let document: String = (1..=16)
        .map(|i| {
            format!("Line {i}: the quick brown fox jumps over the lazy dog near river bend {i}.\n")
        })
        .collect();
    let long = ChatRequest {
        model: "bench".into(),
        system: "You are a helpful assistant.".into(),
        messages: vec![Message::user_text(format!(
            "Here is a file:\n{document}\nWhat animal jumps?"
        ))],
        tools: vec![],
        max_tokens: 8,
        paths: Default::default(),
    };
    let generate = ChatRequest {
        model: "bench".into(),
        system: "You are a helpful assistant.".into(),
        messages: vec![Message::user_text(
            "Count from 1 to 300, separated by commas. Print only the numbers.",
        )],
        tools: vec![],
        max_tokens: 128,
        paths: Default::default(),
    };
    (long, generate)
}

/// A one-line question to an agent with a system prompt and file tools,
/// about the size of the offline agent's system turn.
fn one_line_question() -> ChatRequest {
    let tool = |name: &str, description: &str, properties: serde_json::Value| ToolDef {
        name: name.into(),
        description: description.into(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": ["path"],
        }),
    };
    let path =
        serde_json::json!({"type": "string", "description": "A path relative to the workspace."});
    ChatRequest {
        model: "bench".into(),
        system: "You are a helpful assistant working offline. You answer questions about the \
                 files in the user's workspace. Use the tools to read files before answering, \
                 answer briefly, and say so when something is not in the files."
            .into(),
        messages: vec![Message::user_text("What is in notes.txt?")],
        tools: vec![
            tool(
                "file_read",
                "Read a text file from the workspace.",
                serde_json::json!({"path": path}),
            ),
            tool(
                "file_list",
                "List the entries of a directory of the workspace (\"\" for its root).",
                serde_json::json!({"path": path}),
            ),
            tool(
                "file_write",
                "Write a text file in the workspace, replacing it if it exists.",
                serde_json::json!({"path": path, "content": {"type": "string"}}),
            ),
            tool(
                "file_search",
                "Find the lines of the workspace's files that contain a text.",
                serde_json::json!({"path": path, "pattern": {"type": "string"}}),
            ),
        ],
        max_tokens: 48,
        paths: Default::default(),
    }
}

fn main() {
    let path = model_path();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let driver = LocalDriver::load(&path, LocalOptions::default()).expect("load for Bulwark");
    let model = LlamaModel::load_from_file(
        backend().expect("backend"),
        &path,
        &LlamaModelParams::default(),
    )
    .expect("load for raw");
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(4096))
        .with_n_batch(512)
        .with_n_ubatch(512)
        .with_n_threads(threads())
        .with_n_threads_batch(threads());
    let mut ctx = model
        .new_context(backend().expect("backend"), params)
        .expect("context");

    let (long, generate) = requests();
    let long_prompt = rendered_prompt(&long, 1);
    let generate_prompt = rendered_prompt(&generate, 1);

    // Criterion: the time of a whole turn, each side on its own.
    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(15))
        .configure_from_args();
    {
        let mut group = criterion.benchmark_group("local_prefill");
        group.bench_function("raw", |b| {
            b.iter(|| raw_turn(&model, &mut ctx, &long_prompt, 8))
        });
        group.bench_function("bulwark", |b| {
            b.iter(|| bulwark_turn(&driver, &runtime, &long))
        });
        group.finish();
    }
    {
        let mut group = criterion.benchmark_group("local_generate");
        group.bench_function("raw", |b| {
            b.iter(|| raw_turn(&model, &mut ctx, &generate_prompt, 128))
        });
        group.bench_function("bulwark", |b| {
            b.iter(|| bulwark_turn(&driver, &runtime, &generate))
        });
        group.finish();
    }
    // Warm starts: the same question from an empty KV cache, the system
    // turn prefilled (no cache) or loaded from disk (cache).
    let cache_dir = tempfile::tempdir().expect("temp dir");
    let cached = |dir: &std::path::Path| LocalOptions {
        prefix_cache: Some(dir.to_path_buf()),
        ..LocalOptions::default()
    };
    let warm = LocalDriver::load(&path, cached(cache_dir.path())).expect("load with cache");
    let question = one_line_question();
    let first_token = |driver: &LocalDriver, iters: u64| {
        (0..iters)
            .map(|_| bulwark_turn(driver, &runtime, &question).first_token)
            .sum::<Duration>()
    };
    // Fill the cache.
    let _ = first_token(&warm, 1);
    {
        let mut group = criterion.benchmark_group("local_first_token");
        group.bench_function("no_prefix_cache", |b| {
            b.iter_custom(|iters| first_token(&driver, iters))
        });
        group.bench_function("prefix_cache", |b| {
            b.iter_custom(|iters| first_token(&warm, iters))
        });
        group.finish();
    }
    criterion.final_summary();

    // A new process: load the model, then the first token (the load is
    // the same with or without the cache; the cache's entry exists).
    println!(
        "\nfresh driver, one-line question with 4 tools (time to first token, after the load):"
    );
    for (label, options) in [
        ("no cache", LocalOptions::default()),
        ("cache", cached(cache_dir.path())),
    ] {
        let mut loads = Vec::new();
        let mut firsts = Vec::new();
        let mut outcome = PrefixCacheOutcome::Disabled;
        let mut tokens = (0, 0);
        for _ in 0..3 {
            let started = Instant::now();
            let fresh = LocalDriver::load(&path, options.clone()).expect("load");
            loads.push(started.elapsed().as_secs_f64() * 1000.0);
            let turn = Instant::now();
            let mut first = None;
            let (_, stats) = runtime
                .block_on(fresh.chat_with_stats(&question, &mut |event| {
                    if matches!(event, StreamEvent::TextDelta(_)) {
                        first.get_or_insert_with(|| turn.elapsed());
                    }
                }))
                .expect("chat");
            // A call streams nothing: its first token is the stats'.
            firsts.push(first.unwrap_or(stats.first_token_time).as_secs_f64() * 1000.0);
            outcome = stats.prefix_cache;
            tokens = (stats.prompt_tokens, stats.prefilled_tokens);
        }
        loads.sort_by(f64::total_cmp);
        firsts.sort_by(f64::total_cmp);
        println!(
            "{label:<9} load {:6.0} ms   first token {:6.0} ms   ({outcome:?}, {} of {} prompt tokens prefilled; medians of 3)",
            loads[1], firsts[1], tokens.1, tokens.0
        );
    }

    // The rates: raw and Bulwark turns interleaved, so that drift in the
    // machine's speed (a shared VM) hits both sides alike; medians.
    let rounds = 7;
    let mut tallies: [Tally; 4] = Default::default();
    for _ in 0..rounds {
        tallies[0]
            .0
            .push(raw_turn(&model, &mut ctx, &long_prompt, 8));
        tallies[1].0.push(bulwark_turn(&driver, &runtime, &long));
        tallies[2]
            .0
            .push(raw_turn(&model, &mut ctx, &generate_prompt, 128));
        tallies[3]
            .0
            .push(bulwark_turn(&driver, &runtime, &generate));
    }
    println!("\nlong prompt (prefill):");
    let (raw_prefill, _, raw_ttft) = tallies[0].report("raw");
    let (our_prefill, _, our_ttft) = tallies[1].report("bulwark");
    println!("short prompt (generation):");
    let (_, raw_gen, raw_short_ttft) = tallies[2].report("raw");
    let (_, our_gen, our_short_ttft) = tallies[3].report("bulwark");
    let per_token =
        tallies[3].median(|s| s.sampling.as_secs_f64() * 1e6 / s.generated.max(1) as f64);
    println!("bulwark  sampling + grammar per generated token: {per_token:.0} µs");
    println!(
        "\nbulwark / raw: prefill {:.1}%, generation {:.1}%; time to first token {:.0} ms vs {:.0} ms (long prompt), {:.0} ms vs {:.0} ms (short)",
        100.0 * our_prefill / raw_prefill,
        100.0 * our_gen / raw_gen,
        our_ttft,
        raw_ttft,
        our_short_ttft,
        raw_short_ttft,
    );
}
