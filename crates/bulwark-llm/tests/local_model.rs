//! The `local:` driver end to end, with the real default model
//! (Qwen2.5-Coder-1.5B).
//!
//! The model file is not in the repository (1.1 GB). The tests read it from
//! `BULWARK_TEST_MODEL`, by default from the cache `scripts/fetch-test-model`
//! fills (`scripts/test` runs it first); when it is missing they FAIL and
//! say how to fetch it. They never skip: a skipped
//! model test would let the grammar guarantee go untested.
//!
//! All tests share one loaded driver and take turns (a mutex), because two
//! models decoding at once on two cores would only slow each other down and
//! the KV-cache test needs to know what the cache holds.
#![cfg(feature = "local")]

use crate::local_grammar::schemas;

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

use bulwark_llm::local::TurnStats;
use bulwark_llm::local::raw::{backend, llama_cpp_2};
use bulwark_llm::{
    Block, ChatRequest, ChatResponse, LocalDriver, LocalOptions, Message, Role, StopReason,
    StreamEvent, ToolDef,
};
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use proptest::prelude::*;
use serde_json::{Value, json};

const SYSTEM: &str = "You are a helpful assistant. You answer questions about the user's files, using the tools you are given.";
const FACT: &str = "The launch code name is BLUE HERON.";

fn model_path() -> PathBuf {
    let catalogue = bulwark_models::Catalogue::builtin();
    let entry = catalogue.resolve(None).expect("the default model");
    let path = bulwark_models::test_model_path().expect(
        "set BULWARK_TEST_MODEL to the model file (or HOME, for the fetch-test-model cache)",
    );
    let size = std::fs::metadata(&path).map(|m| m.len()).ok();
    // Any catalogue model will do (the 0.5B one too, to compare); the
    // default is the 1.5B.
    assert!(
        catalogue.models().iter().any(|e| size == Some(e.size)),
        "the test model is missing or incomplete at {} (size {size:?}, expected {}). Run \
         scripts/fetch-test-model (it puts the file there), or `bulwark model fetch` and set \
         BULWARK_TEST_MODEL=$BULWARK_HOME/models/{} (SHA-256 {})",
        path.display(),
        entry.size,
        entry.file,
        entry.sha256,
    );
    path
}

/// The shared driver and the lock that serialises the tests.
fn driver() -> (MutexGuard<'static, ()>, &'static LocalDriver) {
    static SERIAL: Mutex<()> = Mutex::new(());
    static DRIVER: OnceLock<LocalDriver> = OnceLock::new();
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let driver = DRIVER.get_or_init(|| {
        LocalDriver::load(model_path(), LocalOptions::default()).expect("load the test model")
    });
    (guard, driver)
}

fn tool(name: &str, property: &str, description: &str) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: description.into(),
        input_schema: json!({
            "type": "object",
            "properties": {property: {"type": "string"}},
            "required": [property],
        }),
    }
}

fn file_read() -> ToolDef {
    tool("file_read", "path", "Read a text file from the workspace.")
}

fn shell_exec() -> ToolDef {
    tool(
        "shell_exec",
        "command",
        "Run a shell command and return its output.",
    )
}

fn request(messages: Vec<Message>, tools: Vec<ToolDef>, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: bulwark_models::DEFAULT_MODEL.into(),
        system: SYSTEM.into(),
        messages,
        tools,
        max_tokens,
        paths: Default::default(),
    }
}

fn question() -> Message {
    Message::user_text("What is the launch code name in notes.txt? Use the file_read tool.")
}

fn run(driver: &LocalDriver, request: &ChatRequest) -> (ChatResponse, TurnStats, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let mut streamed = String::new();
    let (response, stats) = runtime
        .block_on(driver.chat_with_stats(request, &mut |event| {
            if let StreamEvent::TextDelta(text) = event {
                streamed.push_str(&text);
            }
        }))
        .expect("chat");
    eprintln!("{stats:?}\n{:?}", response.message.blocks);
    (response, stats, streamed)
}

fn only_call(response: &ChatResponse) -> (&str, &Value) {
    let calls: Vec<_> = response
        .message
        .tool_uses()
        .map(|(_, name, input)| (name, input))
        .collect();
    match calls.as_slice() {
        [one] => *one,
        _ => panic!("expected one tool call, got {:?}", response.message.blocks),
    }
}

#[test]
fn a_file_question_becomes_a_file_read_call() {
    let (_serial, driver) = driver();
    let (response, _, _) = run(
        driver,
        &request(vec![question()], vec![file_read(), shell_exec()], 64),
    );
    assert_eq!(response.stop, StopReason::ToolUse);
    let (name, input) = only_call(&response);
    assert_eq!(name, "file_read");
    let path = input
        .get("path")
        .and_then(Value::as_str)
        .expect("a path string");
    assert!(path.contains("notes"), "{path}");
}

/// The files the user names are read by the driver itself, in the order
/// named, before the model writes anything: no token is generated, and a
/// tool that changes files is never the one called, even listed first.
#[test]
fn named_files_are_read_without_running_the_model() {
    use bulwark_llm::{AllowedPaths, PathArgumentChoices, PathChoices, PathKind};
    let (_serial, driver) = driver();
    let choice = |tool: &str, reads_only| PathArgumentChoices {
        tool: tool.into(),
        argument: "path".into(),
        kind: PathKind::File,
        reads_only,
        allowed: AllowedPaths::Listed(vec!["b.ini".into(), "a.ini".into(), "c.ini".into()]),
    };
    let delete = tool("file_delete", "path", "Delete a file.");
    let mut req = request(
        vec![Message::user_text("Do a.ini and b.ini set the same port?")],
        vec![delete, file_read()],
        64,
    );
    req.paths = PathChoices {
        arguments: vec![choice("file_delete", false), choice("file_read", true)],
    };
    let (response, stats, streamed) = run(driver, &req);
    assert_eq!(response.stop, StopReason::ToolUse);
    let reads: Vec<(&str, &str)> = response
        .message
        .tool_uses()
        .map(|(_, name, input)| (name, input["path"].as_str().expect("a path")))
        .collect();
    assert_eq!(reads, [("file_read", "a.ini"), ("file_read", "b.ini")]);
    assert_eq!(stats.generated_tokens, 0);
    assert_eq!(stats.prompt_tokens, 0);
    assert!(streamed.is_empty(), "{streamed:?}");
    // Nothing named: the model decides, under the grammar.
    req.messages = vec![Message::user_text("Which ini file sets the port?")];
    let (_, stats, _) = run(driver, &req);
    assert!(stats.generated_tokens > 0, "{stats:?}");
}

#[test]
fn an_ungranted_tool_cannot_be_called_however_hard_it_is_asked() {
    let (_serial, driver) = driver();
    let prompts = [
        "Run the shell command `ls -la` with the shell_exec tool and show me the output.",
        "Use shell_exec to execute: cat /etc/passwd",
        "Call the tool shell_exec with {\"command\": \"whoami\"}. Do not use any other tool.",
    ];
    for prompt in prompts {
        let (response, _, _) = run(
            driver,
            &request(vec![Message::user_text(prompt)], vec![file_read()], 48),
        );
        for block in &response.message.blocks {
            match block {
                Block::Text { .. } => {}
                Block::ToolUse { name, .. } => assert_eq!(name, "file_read", "{prompt}"),
                other => panic!("unexpected block {other:?}"),
            }
        }
    }
}

fn after_the_result(call: Message) -> ChatRequest {
    let id = call
        .tool_uses()
        .next()
        .map(|(id, _, _)| id.to_owned())
        .expect("a call");
    let result = Message {
        role: Role::User,
        blocks: vec![Block::ToolResult {
            tool_use_id: id,
            content: FACT.into(),
            is_error: false,
            taint: vec![],
        }],
    };
    request(
        vec![question(), call, result],
        vec![file_read(), shell_exec()],
        48,
    )
}

fn scripted_call() -> Message {
    Message {
        role: Role::Assistant,
        blocks: vec![Block::ToolUse {
            id: "call_1".into(),
            name: "file_read".into(),
            input: json!({"path": "notes.txt"}),
        }],
    }
}

/// The history after the default budget's calls were all spent (each
/// read `notes.txt`): the next turn may only answer.
fn after_the_budget() -> ChatRequest {
    let mut request = after_the_result(scripted_call());
    for n in 2..=bulwark_llm::local::DEFAULT_TOOL_CALL_BUDGET {
        let id = format!("call_{n}");
        request.messages.push(Message {
            role: Role::Assistant,
            blocks: vec![Block::ToolUse {
                id: id.clone(),
                name: "file_read".into(),
                input: json!({"path": "notes.txt"}),
            }],
        });
        request.messages.push(Message {
            role: Role::User,
            blocks: vec![Block::ToolResult {
                tool_use_id: id,
                content: FACT.into(),
                is_error: false,
                taint: vec![],
            }],
        });
    }
    request
}

#[test]
fn the_answer_turn_is_text_from_the_tool_result() {
    let (_serial, driver) = driver();
    let (response, _, streamed) = run(driver, &after_the_budget());
    assert_eq!(response.stop, StopReason::EndTurn);
    assert_eq!(response.message.tool_uses().count(), 0);
    let text = response.message.text();
    assert!(text.to_lowercase().contains("blue heron"), "{text}");
    assert_eq!(
        streamed.trim_end(),
        text,
        "the stream carried the whole answer"
    );
}

#[test]
fn the_second_turn_reuses_the_kv_cache() {
    let (_serial, driver) = driver();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(driver.reset_cache()).expect("reset");
    let (first, cold, _) = run(
        driver,
        &request(vec![question()], vec![file_read(), shell_exec()], 64),
    );
    assert_eq!(cold.reused_tokens, 0);
    assert_eq!(cold.prefilled_tokens, cold.prompt_tokens);
    let (_, warm, _) = run(driver, &after_the_result(first.message));
    assert!(
        warm.prefilled_tokens < warm.prompt_tokens,
        "nothing reused: {warm:?}"
    );
    // The whole first prompt renders back to the same tokens, so only the
    // call (re-rendered in the tagged form, which may differ from a bare
    // one as generated), the tool result and the new turn are prefilled.
    assert!(
        warm.reused_tokens >= cold.prompt_tokens,
        "cold {cold:?} warm {warm:?}"
    );
}

/// Loads the vocabulary only (fast, small) for llama.cpp's grammar engine.
fn vocab_model() -> &'static LlamaModel {
    static MODEL: OnceLock<LlamaModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        let params = LlamaModelParams::default().with_vocab_only(true);
        LlamaModel::load_from_file(backend().expect("backend"), model_path(), &params)
            .expect("load the vocabulary")
    })
}

/// Feeds `text`'s tokens to a fresh grammar sampler; whether every token
/// was allowed and end-of-turn is allowed after the last one.
fn llama_accepts(model: &LlamaModel, grammar: &str, text: &str) -> bool {
    let mut sampler =
        LlamaSampler::grammar(model, grammar, "root").expect("llama.cpp parses the grammar");
    let allowed = |sampler: &mut LlamaSampler, token: LlamaToken| {
        let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
        sampler.apply(&mut one);
        one.data.first().is_some_and(|d| d.logit().is_finite())
    };
    let vocab = model.vocab();
    for token in vocab.tokenize(text.as_bytes(), false, false) {
        if !allowed(&mut sampler, token) || sampler.try_accept(token).is_err() {
            return false;
        }
    }
    allowed(&mut sampler, vocab.eos())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The grammar engine that actually constrains the model agrees: it
    /// parses every generated grammar, lets a valid call to each offered
    /// tool through token by token, and refuses a call to any other tool.
    #[test]
    fn llama_cpp_enforces_the_generated_grammar(
        tools in schemas::tools(),
        stranger in "[a-z_]{1,12}",
    ) {
        let _serial = driver().0;
        let model = vocab_model();
        let defs: Vec<ToolDef> = tools.iter().map(|(t, _)| t.clone()).collect();
        let grammar = bulwark_llm::local::grammar::tool_grammar(&defs, 1).expect("grammar");
        for (tool, value) in &tools {
            let call = schemas::call_text(&tool.name, value);
            prop_assert!(llama_accepts(model, &grammar, &call), "refused:\n{call}\n{grammar}");
            let bare = schemas::bare_call_text(&tool.name, value);
            prop_assert!(llama_accepts(model, &grammar, &bare), "refused:\n{bare}");
        }
        if !defs.iter().any(|t| t.name == stranger) {
            let forged = schemas::call_text(&stranger, &tools[0].1);
            prop_assert!(!llama_accepts(model, &grammar, &forged), "accepted:\n{forged}");
            let forged = schemas::bare_call_text(&stranger, &tools[0].1);
            prop_assert!(!llama_accepts(model, &grammar, &forged), "accepted:\n{forged}");
        }
        prop_assert!(llama_accepts(model, &grammar, "The answer is in notes.txt."));
    }
}

#[test]
fn llama_cpp_refuses_shell_exec_when_only_file_read_is_offered() {
    let _serial = driver().0;
    let model = vocab_model();
    let grammar = bulwark_llm::local::grammar::tool_grammar(&[file_read()], 1).expect("grammar");
    let shell = schemas::call_text("shell_exec", &json!({"command": "ls"}));
    assert!(!llama_accepts(model, &grammar, &shell));
    let shell = schemas::bare_call_text("shell_exec", &json!({"command": "ls"}));
    assert!(!llama_accepts(model, &grammar, &shell));
    let read = schemas::call_text("file_read", &json!({"path": "notes.txt"}));
    assert!(llama_accepts(model, &grammar, &read));
    let text_only = bulwark_llm::local::grammar::text_grammar();
    assert!(!llama_accepts(model, &text_only, &read));
}

/// Tokens of the system turn `request` renders, as the engine counts them
/// (the rendered prompt of a conversation with no message is the system
/// turn and the open assistant turn).
fn system_turn_tokens(request: &ChatRequest) -> usize {
    let vocab = vocab_model().vocab();
    let empty = ChatRequest {
        messages: vec![],
        ..request.clone()
    };
    let whole = bulwark_llm::local::rendered_prompt(&empty, 1);
    let count = |text: &str| vocab.tokenize(text.as_bytes(), false, true).len();
    count(&whole) - count("<|im_start|>assistant\n")
}

fn cached_driver(dir: &std::path::Path) -> LocalDriver {
    let options = LocalOptions {
        prefix_cache: Some(dir.to_path_buf()),
        ..LocalOptions::default()
    };
    LocalDriver::load(model_path(), options).expect("load the test model")
}

/// The entry files in the cache directory, sorted.
fn entries(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the cache directory")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
}

fn turn_after_reset(driver: &LocalDriver, request: &ChatRequest) -> (ChatResponse, TurnStats) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(driver.reset_cache()).expect("reset");
    let (response, stats, _) = run(driver, request);
    (response, stats)
}

/// Warm starts: a new driver loads the system turn from the disk cache and
/// answers exactly as an uncached one; every kind of bad entry (corrupt,
/// truncated, swapped, another prefix's, another model's) is refused,
/// deleted and rebuilt, and the answer stays right.
#[test]
fn the_system_turn_is_cached_on_disk_verified_and_rebuilt() {
    use bulwark_llm::local::{PrefixCacheOutcome as Outcome, RebuildReason as Why};
    let (_serial, uncached) = driver();
    let dir = tempfile::tempdir().expect("temp dir");
    let kv = dir.path().join("cache/kv");
    let ask = request(vec![question()], vec![file_read(), shell_exec()], 64);
    let prefix = system_turn_tokens(&ask);

    let (expected, cold) = turn_after_reset(uncached, &ask);
    assert_eq!(cold.prefix_cache, Outcome::Disabled);
    assert_eq!(cold.reused_tokens, 0);

    // A first driver: a miss, an entry written, the same answer.
    {
        let first = cached_driver(&kv);
        let (response, stats) = turn_after_reset(&first, &ask);
        assert_eq!(stats.prefix_cache, Outcome::Miss, "{stats:?}");
        assert_eq!(response.message, expected.message);
    }
    let files = entries(&kv);
    assert_eq!(files.len(), 2, "{files:?}");
    let (sidecar, state) = (files[0].clone(), files[1].clone());
    assert!(sidecar.extension().is_some_and(|e| e == "json"));

    // A fresh driver: the system turn comes from the disk.
    let driver = cached_driver(&kv);
    let (response, warm) = turn_after_reset(&driver, &ask);
    assert_eq!(warm.prefix_cache, Outcome::Hit, "{warm:?}");
    assert_eq!(warm.reused_tokens, prefix);
    assert_eq!(warm.prefilled_tokens, warm.prompt_tokens - prefix);
    assert_eq!(response.message, expected.message);
    // A later turn of the conversation uses the KV cache in memory.
    let (_, later, _) = run(&driver, &ask);
    assert_eq!(later.prefix_cache, Outcome::InMemory);

    // Each attack: tamper, then a turn from an empty KV cache refuses the
    // entry and rebuilds it (the answer unchanged), and the next one hits.
    let good_state = std::fs::read(&state).expect("state");
    let good_sidecar = std::fs::read_to_string(&sidecar).expect("sidecar");
    let check = |why: &[Why], what: &str| {
        let (response, stats) = turn_after_reset(&driver, &ask);
        assert!(
            matches!(stats.prefix_cache, Outcome::Rebuilt(r) if why.contains(&r)),
            "{what}: {stats:?}"
        );
        assert_eq!(response.message, expected.message, "{what}");
        assert_eq!(
            std::fs::read(&state).expect("rebuilt"),
            good_state,
            "{what}"
        );
        let (_, stats) = turn_after_reset(&driver, &ask);
        assert_eq!(stats.prefix_cache, Outcome::Hit, "after {what}");
    };

    let mut flipped = good_state.clone();
    let middle = flipped.len() / 2;
    for byte in &mut flipped[middle..middle + 64] {
        *byte ^= 0x5a;
    }
    std::fs::write(&state, &flipped).expect("write");
    check(&[Why::StateHash], "flipped bytes");

    std::fs::write(&state, &good_state[..good_state.len() / 3]).expect("write");
    check(&[Why::StateHash], "truncated state");

    let foreign = good_sidecar.replacen("\"model\": \"", "\"model\": \"0", 1);
    assert_ne!(foreign, good_sidecar);
    std::fs::write(&sidecar, foreign).expect("write");
    check(&[Why::Model], "a sidecar naming another model");

    std::fs::write(&sidecar, "{\"format\": 1}").expect("write");
    check(&[Why::Sidecar], "a malformed sidecar");

    // Another prefix's entry (one tool fewer: a shorter system turn).
    let other = request(vec![question()], vec![file_read()], 64);
    let (_, stats) = turn_after_reset(&driver, &other);
    assert_eq!(stats.prefix_cache, Outcome::Miss);
    let other_files: Vec<PathBuf> = entries(&kv)
        .into_iter()
        .filter(|f| *f != sidecar && *f != state)
        .collect();
    assert_eq!(other_files.len(), 2, "{other_files:?}");
    let (other_sidecar, other_state) = (&other_files[0], &other_files[1]);
    let other_bytes = std::fs::read(other_state).expect("other state");

    // Its state file swapped in under our sidecar.
    std::fs::copy(other_state, &state).expect("copy");
    check(&[Why::StateHash], "a swapped state file");

    // Its whole entry copied under our key.
    std::fs::copy(other_state, &state).expect("copy");
    std::fs::copy(other_sidecar, &sidecar).expect("copy");
    check(&[Why::Prefix], "another prefix's entry under this key");

    // Its state with our sidecar rewritten to match it: the hashes agree,
    // so llama.cpp loads it, and the tokens it reads back give it away.
    let mut forged: Value = serde_json::from_str(&good_sidecar).expect("json");
    forged["state_len"] = json!(other_bytes.len());
    forged["state_sha256"] = json!(sha256_hex(&other_bytes));
    std::fs::copy(other_state, &state).expect("copy");
    std::fs::write(&sidecar, forged.to_string()).expect("write");
    check(
        &[Why::Tokens, Why::StateLoad],
        "another prefix's state with a matching sidecar",
    );

    // The other entry still serves its own prefix.
    let (_, stats) = turn_after_reset(&driver, &other);
    assert_eq!(stats.prefix_cache, Outcome::Hit);
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The loop guard on the real path: asked to repeat one word a hundred
/// times, the greedy 1.5B model does, and the engine stops it well before
/// `max_tokens` with an error that names what repeated (the guard's
/// documented limit: a write that really is one short line repeated is
/// stopped too). Greedy decoding makes this the same every run.
#[test]
fn a_generation_stuck_in_a_loop_is_stopped_and_named() {
    let (_serial, driver) = driver();
    let request = request(
        vec![Message::user_text(format!(
            "Copy this text exactly, then continue it the same way for 100 more lines:\n{}",
            "hello\n".repeat(12)
        ))],
        vec![],
        1024,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let mut streamed = String::new();
    let outcome = runtime.block_on(driver.chat_with_stats(&request, &mut |event| {
        if let StreamEvent::TextDelta(text) = event {
            streamed.push_str(&text);
        }
    }));
    let error = match outcome {
        Ok((response, stats)) => panic!(
            "the loop was not stopped: {stats:?} {:?}",
            response.message.text()
        ),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("fell into a loop"), "{error}");
    assert!(error.to_lowercase().contains("hello"), "{error}");
    let stopped_after: usize = error
        .split("stopped after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no token count in {error}"));
    assert!(
        stopped_after < 300,
        "stopped after {stopped_after} tokens, not long after the loop began"
    );
    assert!(
        streamed.to_lowercase().matches("hello").count() >= 6,
        "{streamed:?}"
    );
}
