//! Anthropic driver against a local server speaking the Messages API
//! streaming format (event shapes as in Anthropic's streaming docs).

use crate::support;

use bulwark_llm::{
    AnthropicDriver, Block, ChatRequest, LlmDriver, LlmError, Message, ProviderConfig, Role,
    StopReason, StreamEvent, ToolDef,
};
use serde_json::json;
use support::{Reply, TestServer};

const KEY: &str = "sk-ant-test-0123456789";

const TEXT_STREAM: &str = r#"event: message_start
data: {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ", wörld!"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, "usage": {"output_tokens": 15}}

event: message_stop
data: {"type": "message_stop"}

"#;

const TOOL_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me check the weather."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":", \"unit\": \"fahrenheit\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

const THINKING_STREAM: &str = "event: message_start\r\n\
data: {\"type\": \"message_start\", \"message\": {\"id\": \"msg_01\", \"type\": \"message\", \"role\": \"assistant\", \"content\": [], \"model\": \"claude-sonnet-4-5\", \"stop_reason\": null, \"stop_sequence\": null, \"usage\": {\"input_tokens\": 10, \"cache_read_input_tokens\": 5, \"output_tokens\": 1}}}\r\n\r\n\
event: content_block_start\r\n\
data: {\"type\": \"content_block_start\", \"index\": 0, \"content_block\": {\"type\": \"thinking\", \"thinking\": \"\"}}\r\n\r\n\
event: content_block_delta\r\n\
data: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"thinking_delta\", \"thinking\": \"Let me solve this step by step:\\n\\n1. First break down 27 * 453\"}}\r\n\r\n\
event: content_block_delta\r\n\
data: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"thinking_delta\", \"thinking\": \"\\n2. 453 = 400 + 50 + 3\"}}\r\n\r\n\
event: content_block_delta\r\n\
data: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"signature_delta\", \"signature\": \"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds\"}}\r\n\r\n\
event: content_block_stop\r\n\
data: {\"type\": \"content_block_stop\", \"index\": 0}\r\n\r\n\
event: content_block_start\r\n\
data: {\"type\": \"content_block_start\", \"index\": 1, \"content_block\": {\"type\": \"redacted_thinking\", \"data\": \"EmwKAhgBEgy3va3pzix\"}}\r\n\r\n\
event: content_block_stop\r\n\
data: {\"type\": \"content_block_stop\", \"index\": 1}\r\n\r\n\
event: content_block_start\r\n\
data: {\"type\": \"content_block_start\", \"index\": 2, \"content_block\": {\"type\": \"text\", \"text\": \"\"}}\r\n\r\n\
event: content_block_delta\r\n\
data: {\"type\": \"content_block_delta\", \"index\": 2, \"delta\": {\"type\": \"text_delta\", \"text\": \"27 * 453 = 12,231\"}}\r\n\r\n\
event: content_block_stop\r\n\
data: {\"type\": \"content_block_stop\", \"index\": 2}\r\n\r\n\
event: message_delta\r\n\
data: {\"type\": \"message_delta\", \"delta\": {\"stop_reason\": \"end_turn\", \"stop_sequence\": null}, \"usage\": {\"output_tokens\": 100}}\r\n\r\n\
event: some_future_event\r\n\
data: {\"type\": \"some_future_event\", \"whatever\": 1}\r\n\r\n\
event: message_stop\r\n\
data: {\"type\": \"message_stop\"}\r\n\r\n";

fn config(url: &str) -> ProviderConfig {
    let mut config = ProviderConfig::new(url).with_api_key(KEY);
    config.initial_backoff = std::time::Duration::from_millis(10);
    config
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: "claude-sonnet-4-5".into(),
        system: "You are terse.".into(),
        messages,
        tools: vec![ToolDef {
            name: "get_weather".into(),
            description: "Weather for a place".into(),
            input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}}}),
        }],
        max_tokens: 1024,
        paths: Default::default(),
    }
}

async fn run(
    driver: &AnthropicDriver,
    request: &ChatRequest,
) -> (
    Result<bulwark_llm::ChatResponse, LlmError>,
    Vec<StreamEvent>,
) {
    let mut events = Vec::new();
    let result = driver.chat(request, &mut |event| events.push(event)).await;
    (result, events)
}

#[tokio::test]
async fn streams_text_and_sends_well_formed_request() {
    let server = TestServer::start(vec![Reply::sse(TEXT_STREAM)]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    let (result, events) = run(&driver, &request(vec![Message::user_text("Hi")])).await;
    let response = result.unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("Hello".into()),
            StreamEvent::TextDelta(", wörld!".into())
        ]
    );
    assert_eq!(response.message, Message::assistant_text("Hello, wörld!"));
    assert_eq!(response.stop, StopReason::EndTurn);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (25, 15)
    );

    let seen = server.request(0);
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.headers["x-api-key"], KEY);
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert!(seen.headers.get("authorization").is_none());
    assert_eq!(seen.body["stream"], true);
    assert_eq!(seen.body["system"], "You are terse.");
    assert_eq!(seen.body["max_tokens"], 1024);
    assert_eq!(seen.body["model"], "claude-sonnet-4-5");
    assert_eq!(
        seen.body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    );
    assert_eq!(seen.body["tools"][0]["input_schema"]["type"], "object");
}

#[tokio::test]
async fn tool_call_json_assembled_from_fragments() {
    // 5-byte chunks: every line is split across reads.
    let server = TestServer::start(vec![Reply::sse_chunked(TOOL_STREAM, 5)]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    let (result, events) = run(&driver, &request(vec![Message::user_text("Weather?")])).await;
    let response = result.unwrap();
    assert_eq!(response.stop, StopReason::ToolUse);
    assert_eq!(
        events.last(),
        Some(&StreamEvent::ToolUseStart {
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
            name: "get_weather".into()
        })
    );
    assert_eq!(
        response.message.blocks,
        vec![
            Block::Text {
                text: "Let me check the weather.".into()
            },
            Block::ToolUse {
                id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                name: "get_weather".into(),
                input: json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
            }
        ]
    );
    assert_eq!(response.usage.output_tokens, 89);
}

#[tokio::test]
async fn thinking_blocks_keep_their_signature() {
    let server = TestServer::start(vec![Reply::sse_chunked(THINKING_STREAM, 11)]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    let (result, events) = run(&driver, &request(vec![Message::user_text("27*453?")])).await;
    let response = result.unwrap();
    assert_eq!(
        events[..2],
        [
            StreamEvent::ThinkingDelta(
                "Let me solve this step by step:\n\n1. First break down 27 * 453".into()
            ),
            StreamEvent::ThinkingDelta("\n2. 453 = 400 + 50 + 3".into()),
        ]
    );
    // The redacted_thinking block is not modelled and is skipped.
    assert_eq!(
        response.message.blocks,
        vec![
            Block::Thinking {
                text: "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3".into(),
                signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()),
            },
            Block::Text {
                text: "27 * 453 = 12,231".into()
            },
        ]
    );
    // Cache reads are paid input.
    assert_eq!(response.usage.input_tokens, 15);
}

#[tokio::test]
async fn history_is_repaired_and_translated() {
    let server = TestServer::start(vec![Reply::sse(TEXT_STREAM)]).await;
    let mut config = config(&server.url);
    config.api_key = None;
    let driver = AnthropicDriver::new(config).unwrap();
    let history = vec![
        Message::user_text("Weather in Paris and Rome?"),
        Message {
            role: Role::Assistant,
            blocks: vec![
                Block::Thinking {
                    text: "two calls".into(),
                    signature: Some("sig".into()),
                },
                Block::Thinking {
                    text: "unsigned, from another provider".into(),
                    signature: None,
                },
                Block::ToolUse {
                    id: "toolu_a".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Paris"}),
                },
                Block::ToolUse {
                    id: "toolu_b".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Rome"}),
                },
            ],
        },
        Message {
            role: Role::User,
            // Text before the result: repair moves the result first.
            blocks: vec![
                Block::Text {
                    text: "also, hurry".into(),
                },
                Block::ToolResult {
                    tool_use_id: "toolu_a".into(),
                    content: "18C".into(),
                    is_error: false,
                    taint: vec![],
                },
            ],
        },
    ];
    let (result, _) = run(&driver, &request(history)).await;
    result.unwrap();
    let seen = server.request(0);
    assert!(
        seen.headers.get("x-api-key").is_none(),
        "no key configured, no header"
    );
    assert_eq!(
        seen.body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "two calls", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"location": "Paris"}},
                {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"location": "Rome"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "18C", "is_error": false},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": bulwark_llm::INTERRUPTED_RESULT, "is_error": true},
                {"type": "text", "text": "also, hurry"},
            ]},
        ])
    );
}

#[tokio::test]
async fn invalid_tool_json_is_a_protocol_error() {
    let broken = TOOL_STREAM.replace(
        r#"\"unit\": \"fahrenheit\"}"#,
        r#"\"unit\": \"fahrenheit\""#,
    );
    let server = TestServer::start(vec![Reply::sse(&broken)]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    let (result, _) = run(&driver, &request(vec![Message::user_text("x")])).await;
    let err = result.unwrap_err();
    assert!(matches!(err, LlmError::Protocol { .. }), "{err}");
    assert!(err.to_string().contains("get_weather"), "{err}");
}

#[tokio::test]
async fn error_event_mid_stream_is_reported() {
    let stream = TEXT_STREAM.replace(
        "event: content_block_stop",
        "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\nevent: content_block_stop",
    );
    let server = TestServer::start(vec![Reply::sse(&stream)]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    let (result, events) = run(&driver, &request(vec![Message::user_text("x")])).await;
    let err = result.unwrap_err();
    assert!(matches!(err, LlmError::Protocol { .. }), "{err}");
    assert!(
        err.to_string().contains("overloaded_error: Overloaded"),
        "{err}"
    );
    assert_eq!(events.len(), 2, "deltas before the error were streamed");
}

#[tokio::test]
async fn stream_without_message_stop_is_cut_short() {
    let cut = TEXT_STREAM
        .split("event: message_stop")
        .next()
        .unwrap()
        .to_owned();
    let server = TestServer::start(vec![Reply::sse(&cut)]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    let (result, _) = run(&driver, &request(vec![Message::user_text("x")])).await;
    let err = result.unwrap_err();
    assert!(
        matches!(&err, LlmError::Protocol { detail, .. } if detail.contains("stream ended early")),
        "{err}"
    );
}

#[tokio::test]
async fn connection_dropped_mid_stream_is_a_protocol_error() {
    let half = &TOOL_STREAM[..TOOL_STREAM.len() / 2];
    let server = TestServer::start(vec![Reply::sse(half).aborted()]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    let (result, _) = run(&driver, &request(vec![Message::user_text("x")])).await;
    let err = result.unwrap_err();
    assert!(
        matches!(&err, LlmError::Protocol { detail, .. } if detail.contains("stream ended early")),
        "{err}"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "a started stream is never retried"
    );
}

#[tokio::test]
async fn delta_for_unknown_block_is_rejected() {
    let stream = TEXT_STREAM.replace(r#""index": 0, "delta""#, r#""index": 7, "delta""#);
    let server = TestServer::start(vec![Reply::sse(&stream)]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    let (result, _) = run(&driver, &request(vec![Message::user_text("x")])).await;
    assert!(matches!(result, Err(LlmError::Protocol { .. })));
}

#[tokio::test]
async fn empty_history_is_refused_before_any_request() {
    let server = TestServer::start(vec![]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    let only_assistant = vec![Message::assistant_text("leading assistant is dropped")];
    let (result, _) = run(&driver, &request(only_assistant)).await;
    assert!(matches!(result, Err(LlmError::Config(_))));
    assert!(server.requests().is_empty());
}
