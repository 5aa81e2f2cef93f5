//! `bulwark run` against a mock Anthropic Messages API server (named SSE
//! events): a streamed tool use through the door.

use crate::common;
use crate::mock_provider;

use common::{field, with_action};
use mock_provider::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------
// Anthropic Messages API
// ---------------------------------------------------------------------------

fn message_start() -> Value {
    json!({"type": "message_start", "message": {
        "id": "msg_mock", "type": "message", "role": "assistant", "content": [],
        "model": "test-model", "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 90, "output_tokens": 1}}})
}

fn message_end(stop_reason: &str, output_tokens: u64) -> [Value; 2] {
    [
        json!({"type": "message_delta",
               "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": output_tokens}}),
        json!({"type": "message_stop"}),
    ]
}

fn check_anthropic_common(seen: &Seen) -> Result<Vec<Value>, String> {
    check(seen.path == "/v1/messages", || {
        format!("unexpected path {}", seen.path)
    })?;
    let key = seen.header("x-api-key");
    check(key == Some(KEY), || format!("x-api-key header {key:?}"))?;
    check(seen.header("authorization").is_none(), || {
        "an Anthropic request carries an Authorization header".into()
    })?;
    let version = seen.header("anthropic-version");
    check(version.is_some(), || "no anthropic-version header".into())?;
    let body = &seen.body;
    check(body["model"] == "test-model", || {
        format!("model {}", body["model"])
    })?;
    check(body["stream"] == true, || "not a streaming request".into())?;
    check_boundary_instruction(body["system"].as_str().unwrap_or_default())?;
    check_offered_tools(&tool_names(body, |t| t["name"].as_str()))?;
    let messages = body["messages"]
        .as_array()
        .cloned()
        .ok_or_else(|| format!("no messages: {body}"))?;
    let first = messages.first().ok_or("empty messages")?;
    check(
        first["role"] == "user" && first.to_string().contains(QUESTION),
        || format!("the first message is not the user's question: {first}"),
    )?;
    Ok(messages)
}

/// The Anthropic wire: a text block, then a tool_use block whose input
/// arrives as `input_json_delta` fragments; the next request must carry a
/// `tool_result` block for it in a user message.
#[test]
fn anthropic_streamed_tool_use_runs_through_the_door() {
    let server = MockServer::start(|n, seen| {
        let messages = check_anthropic_common(seen)?;
        match n {
            0 => {
                check(messages.len() == 1, || {
                    format!("the first request should hold the question only: {messages:?}")
                })?;
                let fragments = ["", "{\"pa", "th\": \"not", "es.txt\"}"];
                let mut events = vec![
                    message_start(),
                    json!({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}}),
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": "Let me look."}}),
                    json!({"type": "content_block_stop", "index": 0}),
                    json!({"type": "content_block_start", "index": 1,
                           "content_block": {"type": "tool_use", "id": "toolu_mock_1",
                                             "name": "file_read", "input": {}}}),
                    json!({"type": "ping"}),
                ];
                for fragment in fragments {
                    events.push(json!({"type": "content_block_delta", "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": fragment}}));
                }
                events.push(json!({"type": "content_block_stop", "index": 1}));
                events.extend(message_end("tool_use", 30));
                Ok(Reply::anthropic(&events))
            }
            1 => {
                let call = messages
                    .iter()
                    .position(|m| {
                        m["role"] == "assistant"
                            && m["content"].as_array().is_some_and(|blocks| {
                                blocks.iter().any(|b| {
                                    b["type"] == "tool_use"
                                        && b["id"] == "toolu_mock_1"
                                        && b["name"] == "file_read"
                                        && b["input"] == json!({"path": "notes.txt"})
                                })
                            })
                    })
                    .ok_or_else(|| format!("no assistant tool_use block: {messages:?}"))?;
                let next = messages
                    .get(call + 1)
                    .ok_or_else(|| format!("nothing after the tool_use: {messages:?}"))?;
                check(next["role"] == "user", || {
                    format!("the tool result is not in a user message: {next}")
                })?;
                let result = next["content"]
                    .as_array()
                    .and_then(|blocks| {
                        blocks.iter().find(|b| {
                            b["type"] == "tool_result" && b["tool_use_id"] == "toolu_mock_1"
                        })
                    })
                    .ok_or_else(|| format!("no tool_result block for toolu_mock_1: {next}"))?;
                check(result["is_error"] != true, || {
                    format!("the read failed: {result}")
                })?;
                check_wrapped_fact(result["content"].as_str().unwrap_or_default())?;
                let events = vec![
                    message_start(),
                    json!({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}}),
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": "The code name is BLUE-HERON-7"}}),
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": ", according to notes.txt."}}),
                    json!({"type": "content_block_stop", "index": 0}),
                ]
                .into_iter()
                .chain(message_end("end_turn", 12))
                .collect::<Vec<_>>();
                Ok(Reply::anthropic(&events))
            }
            _ => Err("more requests than the scenario has".into()),
        }
    });
    let bw = reader_home("mockant", "anthropic", &server.url());

    let out = bw
        .cmd(&["run", "reader", QUESTION])
        .env("MOCK_KEY", KEY)
        .run();
    server.assert_no_failures();
    out.ok();
    assert!(out.stdout.contains(ANSWER), "stdout:\n{}", out.stdout);
    assert_eq!(server.seen().len(), 2);

    let records = bw.audit();
    let calls: Vec<(&str, &str, &str)> = with_action(&records, "tool_call")
        .into_iter()
        .map(|r| (field(r, "tool"), field(r, "decision"), field(r, "reason")))
        .collect();
    assert_eq!(calls, [("file_read", "allowed", "ok")], "{records:#?}");
    assert_key_never_stored(&bw, &out);
}
