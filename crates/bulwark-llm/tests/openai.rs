//! OpenAI-compatible driver against a local server speaking the Chat
//! Completions streaming format (chunk shapes as in OpenAI's docs; one
//! Ollama-style variant).

use crate::support;

use bulwark_llm::{
    Block, ChatRequest, ChatResponse, LlmDriver, LlmError, Message, OpenAiDriver, ProviderConfig,
    Role, StopReason, StreamEvent, ToolDef,
};
use serde_json::{Value, json};
use support::{Reply, TestServer};

const KEY: &str = "sk-proj-test-abcdef0123456789";

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-7QyqpwdfhqwajicIEznoc6Q47XAyW",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": null,
    })
}

fn usage_chunk(prompt: u64, completion: u64) -> Value {
    json!({
        "id": "chatcmpl-7QyqpwdfhqwajicIEznoc6Q47XAyW",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    })
}

fn call(index: u64, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
    let mut function = json!({"arguments": arguments});
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut call = json!({"index": index, "function": function});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    call
}

fn config(url: &str, key: Option<&str>) -> ProviderConfig {
    let mut config = ProviderConfig::new(format!("{url}/v1"));
    if let Some(key) = key {
        config = config.with_api_key(key);
    }
    config.initial_backoff = std::time::Duration::from_millis(10);
    config
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: "gpt-4o-mini".into(),
        system: "You are terse.".into(),
        messages,
        tools: vec![ToolDef {
            name: "get_weather".into(),
            description: "Weather for a place".into(),
            input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}}}),
        }],
        max_tokens: 512,
        paths: Default::default(),
    }
}

async fn run(
    driver: &OpenAiDriver,
    request: &ChatRequest,
) -> (Result<ChatResponse, LlmError>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let result = driver.chat(request, &mut |event| events.push(event)).await;
    (result, events)
}

#[tokio::test]
async fn streams_text_with_usage_and_bearer_auth() {
    let server = TestServer::start(vec![Reply::openai(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hello"}), None),
        chunk(json!({"content": " there"}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(9, 12),
    ])])
    .await;
    let driver = OpenAiDriver::new(config(&server.url, Some(KEY))).unwrap();
    let (result, events) = run(&driver, &request(vec![Message::user_text("Hi")])).await;
    let response = result.unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("Hello".into()),
            StreamEvent::TextDelta(" there".into())
        ]
    );
    assert_eq!(response.message, Message::assistant_text("Hello there"));
    assert_eq!(response.stop, StopReason::EndTurn);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (9, 12)
    );

    let seen = server.request(0);
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(
        seen.headers["authorization"],
        format!("Bearer {KEY}").as_str()
    );
    assert_eq!(seen.body["stream"], true);
    assert_eq!(seen.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(seen.body["model"], "gpt-4o-mini");
    assert_eq!(
        seen.body["tools"],
        json!([{"type": "function", "function": {
            "name": "get_weather",
            "description": "Weather for a place",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        }}])
    );
    assert_eq!(
        seen.body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"},
        ])
    );
}

#[tokio::test]
async fn tool_call_arguments_arrive_in_fragments() {
    let server = TestServer::start(vec![Reply::openai(&[
        chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [call(0, Some("call_abc123"), Some("get_weather"), "")]}),
            None,
        ),
        chunk(json!({"tool_calls": [call(0, None, None, "{\"lo")]}), None),
        chunk(json!({"tool_calls": [call(0, None, None, "cation\": \"Par")]}), None),
        chunk(json!({"tool_calls": [call(0, None, None, "is, FR\"}")]}), None),
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(80, 17),
    ])])
    .await;
    let driver = OpenAiDriver::new(config(&server.url, Some(KEY))).unwrap();
    let (result, events) = run(&driver, &request(vec![Message::user_text("Paris?")])).await;
    let response = result.unwrap();
    assert_eq!(
        events,
        vec![StreamEvent::ToolUseStart {
            id: "call_abc123".into(),
            name: "get_weather".into()
        }]
    );
    assert_eq!(response.stop, StopReason::ToolUse);
    assert_eq!(
        response.message.blocks,
        vec![Block::ToolUse {
            id: "call_abc123".into(),
            name: "get_weather".into(),
            input: json!({"location": "Paris, FR"}),
        }]
    );
}

#[tokio::test]
async fn two_parallel_tool_calls_by_index() {
    let server = TestServer::start(vec![Reply::openai(&[
        chunk(
            json!({"role": "assistant", "content": "Checking both."}),
            None,
        ),
        chunk(
            json!({"tool_calls": [call(0, Some("call_a"), Some("get_weather"), "")]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [call(0, None, None, "{\"location\": ")]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [call(1, Some("call_b"), Some("get_time"), "{\"tz\":")]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [call(0, None, None, "\"Paris\"}")]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [call(1, None, None, " \"Europe/Rome\"}")]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ])])
    .await;
    let driver = OpenAiDriver::new(config(&server.url, None)).unwrap();
    let (result, events) = run(&driver, &request(vec![Message::user_text("x")])).await;
    let response = result.unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("Checking both.".into()),
            StreamEvent::ToolUseStart {
                id: "call_a".into(),
                name: "get_weather".into()
            },
            StreamEvent::ToolUseStart {
                id: "call_b".into(),
                name: "get_time".into()
            },
        ]
    );
    let uses: Vec<_> = response
        .message
        .tool_uses()
        .map(|(id, name, input)| (id.to_owned(), name.to_owned(), input.clone()))
        .collect();
    assert_eq!(
        uses,
        vec![
            (
                "call_a".into(),
                "get_weather".into(),
                json!({"location": "Paris"})
            ),
            (
                "call_b".into(),
                "get_time".into(),
                json!({"tz": "Europe/Rome"})
            ),
        ]
    );
    assert_eq!(response.message.text(), "Checking both.");
}

#[tokio::test]
async fn ollama_style_whole_call_without_index_and_no_auth_header() {
    // Ollama sends a tool call whole, may omit `index`, says `stop`, and
    // closes right after the finish chunk without `[DONE]`.
    let text = format!(
        "data: {}\n\ndata: {}\n\n",
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "qwen3:8b",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": "",
                 "tool_calls": [{"id": "call_x1", "function": {"name": "get_weather", "arguments": "{\"location\":\"Oslo\"}"}}]},
                 "finish_reason": null}]}),
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "qwen3:8b",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 4}}),
    );
    let server = TestServer::start(vec![Reply::sse(&text)]).await;
    let driver = OpenAiDriver::new(config(&server.url, None)).unwrap();
    let (result, _) = run(&driver, &request(vec![Message::user_text("x")])).await;
    let response = result.unwrap();
    assert_eq!(response.stop, StopReason::ToolUse);
    assert_eq!(response.message.tool_uses().count(), 1);
    assert!(server.request(0).headers.get("authorization").is_none());
}

#[tokio::test]
async fn history_translates_to_tool_calls_and_tool_messages() {
    let server = TestServer::start(vec![Reply::openai(&[chunk(
        json!({"content": "ok"}),
        Some("stop"),
    )])])
    .await;
    let driver = OpenAiDriver::new(config(&server.url, None)).unwrap();
    let history = vec![
        Message::user_text("Weather in Paris and Rome?"),
        Message {
            role: Role::Assistant,
            blocks: vec![
                Block::Thinking {
                    text: "no place for this on the wire".into(),
                    signature: None,
                },
                Block::Text {
                    text: "Calling.".into(),
                },
                Block::ToolUse {
                    id: "call_a".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Paris"}),
                },
                Block::ToolUse {
                    id: "call_b".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Rome"}),
                },
            ],
        },
        Message {
            role: Role::User,
            blocks: vec![
                Block::ToolResult {
                    tool_use_id: "call_a".into(),
                    content: "18C".into(),
                    is_error: false,
                    taint: vec![],
                },
                Block::ToolResult {
                    tool_use_id: "call_b".into(),
                    content: "timeout".into(),
                    is_error: true,
                    taint: vec![],
                },
                Block::Text {
                    text: "thanks".into(),
                },
            ],
        },
    ];
    let (result, _) = run(&driver, &request(history)).await;
    result.unwrap();
    assert_eq!(
        server.request(0).body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": "Calling.", "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Rome\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": "18C"},
            {"role": "tool", "tool_call_id": "call_b", "content": "error: timeout"},
            {"role": "user", "content": "thanks"},
        ])
    );
}

#[tokio::test]
async fn assistant_with_only_tool_calls_has_null_content() {
    let server = TestServer::start(vec![Reply::openai(&[chunk(
        json!({"content": "ok"}),
        Some("stop"),
    )])])
    .await;
    let driver = OpenAiDriver::new(config(&server.url, None)).unwrap();
    let history = vec![
        Message::user_text("go"),
        Message {
            role: Role::Assistant,
            blocks: vec![Block::ToolUse {
                id: "c1".into(),
                name: "get_weather".into(),
                input: json!({}),
            }],
        },
    ];
    run(&driver, &request(history)).await.0.unwrap();
    let messages = &server.request(0).body["messages"];
    assert_eq!(messages[2]["content"], Value::Null);
    // Unanswered call: repair synthesized an error result.
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(
        messages[3]["content"],
        format!("error: {}", bulwark_llm::INTERRUPTED_RESULT).as_str()
    );
}

#[tokio::test]
async fn invalid_arguments_are_an_error_not_an_empty_object() {
    for bad in ["{\"location\": \"Par", "[1, 2]", "not json"] {
        let server = TestServer::start(vec![Reply::openai(&[
            chunk(
                json!({"tool_calls": [call(0, Some("call_1"), Some("rm"), bad)]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
        ])])
        .await;
        let driver = OpenAiDriver::new(config(&server.url, None)).unwrap();
        let (result, _) = run(&driver, &request(vec![Message::user_text("x")])).await;
        let err = result.unwrap_err();
        assert!(matches!(err, LlmError::Protocol { .. }), "{bad}: {err}");
        assert!(err.to_string().contains("\"rm\""), "{err}");
    }
}

#[tokio::test]
async fn stream_without_done_or_finish_reason_is_cut_short() {
    let text = format!("data: {}\n\n", chunk(json!({"content": "Hel"}), None));
    let server = TestServer::start(vec![Reply::sse(&text)]).await;
    let driver = OpenAiDriver::new(config(&server.url, None)).unwrap();
    let (result, events) = run(&driver, &request(vec![Message::user_text("x")])).await;
    let err = result.unwrap_err();
    assert!(
        matches!(&err, LlmError::Protocol { detail, .. } if detail.contains("stream ended early")),
        "{err}"
    );
    assert_eq!(events, vec![StreamEvent::TextDelta("Hel".into())]);
}

#[tokio::test]
async fn error_chunk_mid_stream_is_reported() {
    let server = TestServer::start(vec![Reply::openai(&[
        chunk(json!({"content": "Hel"}), None),
        json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}),
    ])])
    .await;
    let driver = OpenAiDriver::new(config(&server.url, None)).unwrap();
    let (result, _) = run(&driver, &request(vec![Message::user_text("x")])).await;
    let err = result.unwrap_err();
    assert!(err.to_string().contains("server had an error"), "{err}");
}

#[tokio::test]
async fn reasoning_deltas_become_thinking() {
    let server = TestServer::start(vec![Reply::openai(&[
        chunk(json!({"reasoning_content": "think"}), None),
        chunk(json!({"content": "answer"}), Some("stop")),
    ])])
    .await;
    let driver = OpenAiDriver::new(config(&server.url, None)).unwrap();
    let (result, events) = run(&driver, &request(vec![Message::user_text("x")])).await;
    let response = result.unwrap();
    assert_eq!(events[0], StreamEvent::ThinkingDelta("think".into()));
    assert_eq!(
        response.message.blocks[0],
        Block::Thinking {
            text: "think".into(),
            signature: None
        }
    );
}
