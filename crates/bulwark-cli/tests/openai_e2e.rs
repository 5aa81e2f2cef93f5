//! `bulwark run` against a mock OpenAI Chat Completions server (`data:`
//! chunks, then `data: [DONE]`): a streamed tool call through the door, an
//! ungranted tool reported back to the model, and server errors.

use crate::common;
use crate::mock_provider;

use common::{field, with_action};
use mock_provider::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------
// OpenAI Chat Completions
// ---------------------------------------------------------------------------

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
}

fn usage_chunk(prompt: u64, completion: u64) -> Value {
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    })
}

/// A streamed tool call whose arguments arrive in `fragments`.
fn openai_tool_call(id: &str, name: &str, fragments: &[&str]) -> Reply {
    let mut chunks = vec![
        chunk(json!({"role": "assistant", "content": null}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            None,
        ),
    ];
    for fragment in fragments {
        chunks.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}),
            None,
        ));
    }
    chunks.push(chunk(json!({}), Some("tool_calls")));
    chunks.push(usage_chunk(120, 25));
    Reply::openai(&chunks)
}

/// A streamed text answer in `pieces`.
fn openai_text(pieces: &[&str]) -> Reply {
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for piece in pieces {
        chunks.push(chunk(json!({"content": piece}), None));
    }
    chunks.push(chunk(json!({}), Some("stop")));
    chunks.push(usage_chunk(200, 15));
    Reply::openai(&chunks)
}

/// Checks every OpenAI request shares: path, key, model, streaming, the
/// boundary instruction as the first (system) message, the granted tools,
/// and the user's question. Returns the messages.
fn check_openai_common(seen: &Seen) -> Result<Vec<Value>, String> {
    check(seen.path == "/v1/chat/completions", || {
        format!("unexpected path {}", seen.path)
    })?;
    let auth = seen.header("authorization");
    check(auth == Some(&format!("Bearer {KEY}")), || {
        format!("authorization header {auth:?}")
    })?;
    let body = &seen.body;
    check(body["model"] == "test-model", || {
        format!("model {}", body["model"])
    })?;
    check(body["stream"] == true, || "not a streaming request".into())?;
    let messages = body["messages"]
        .as_array()
        .cloned()
        .ok_or_else(|| format!("no messages: {body}"))?;
    let first = messages.first().ok_or("empty messages")?;
    check(first["role"] == "system", || {
        format!("first message is not the system prompt: {first}")
    })?;
    check_boundary_instruction(first["content"].as_str().unwrap_or_default())?;
    check_offered_tools(&tool_names(body, |t| t["function"]["name"].as_str()))?;
    check(
        messages.iter().any(|m| {
            m["role"] == "user" && m["content"].as_str().is_some_and(|c| c.contains(QUESTION))
        }),
        || format!("the user's question is missing: {messages:?}"),
    )?;
    Ok(messages)
}

/// The `tool` message answering `call_id`, right after the assistant
/// message that made the call with `args`.
fn openai_tool_result(
    messages: &[Value],
    call_id: &str,
    name: &str,
    args: &Value,
) -> Result<String, String> {
    let at = messages
        .iter()
        .position(|m| {
            m["role"] == "assistant"
                && m["tool_calls"].as_array().is_some_and(|calls| {
                    calls.iter().any(|c| {
                        c["id"] == call_id
                            && c["function"]["name"] == name
                            && c["function"]["arguments"]
                                .as_str()
                                .and_then(|a| serde_json::from_str::<Value>(a).ok())
                                .as_ref()
                                == Some(args)
                    })
                })
        })
        .ok_or_else(|| format!("no assistant message calling {name} {args}: {messages:?}"))?;
    let result = messages
        .get(at + 1)
        .ok_or_else(|| format!("nothing after the tool call: {messages:?}"))?;
    check(
        result["role"] == "tool" && result["tool_call_id"] == call_id,
        || format!("the message after the call is not its tool result: {result}"),
    )?;
    Ok(result["content"].as_str().unwrap_or_default().to_string())
}

/// The model reads notes.txt (arguments split over four chunks), then
/// answers from the tool result it was sent.
#[test]
fn openai_streamed_tool_call_runs_through_the_door() {
    let server = MockServer::start(|n, seen| {
        let messages = check_openai_common(seen)?;
        match n {
            0 => {
                check(messages.len() == 2, || {
                    format!("the first request should hold system + user: {messages:?}")
                })?;
                Ok(openai_tool_call(
                    "call_mock_1",
                    "file_read",
                    &["{\"pa", "th\": \"no", "tes.t", "xt\"}"],
                ))
            }
            1 => {
                let content = openai_tool_result(
                    &messages,
                    "call_mock_1",
                    "file_read",
                    &json!({"path": "notes.txt"}),
                )?;
                check_wrapped_fact(&content)?;
                Ok(openai_text(&[
                    "The code name is ",
                    "BLUE-HERON-7",
                    ", according to notes.txt.",
                ]))
            }
            _ => Err("more requests than the scenario has".into()),
        }
    });
    let bw = reader_home("mock", "openai", &format!("{}/v1", server.url()));

    let out = bw
        .cmd(&["run", "reader", QUESTION])
        .env("MOCK_KEY", KEY)
        .run();
    server.assert_no_failures();
    out.ok();
    assert!(out.stdout.contains(ANSWER), "stdout:\n{}", out.stdout);
    assert_eq!(server.seen().len(), 2, "one tool round trip, one answer");

    let records = bw.audit();
    let starts = with_action(&records, "session_start");
    assert_eq!(starts.len(), 1, "{records:#?}");
    assert!(
        field(starts[0], "detail").contains("model mock:test-model"),
        "{records:#?}"
    );
    let calls: Vec<(&str, &str, &str)> = with_action(&records, "tool_call")
        .into_iter()
        .map(|r| (field(r, "tool"), field(r, "decision"), field(r, "reason")))
        .collect();
    assert_eq!(calls, [("file_read", "allowed", "ok")], "{records:#?}");
    // Usage from the stream's final chunks reaches the summary line.
    assert!(
        out.stderr.contains("320 input / 40 output tokens"),
        "{}",
        out.stderr
    );
    assert_key_never_stored(&bw, &out);
}

/// The model asks for `shell_exec`, which the agent was never granted (and
/// was never offered): the door refuses, the refusal goes back to the model
/// as the tool result, and the run still finishes.
#[test]
fn openai_ungranted_tool_is_denied_and_reported_to_the_model() {
    let server = MockServer::start(|n, seen| {
        let messages = check_openai_common(seen)?;
        match n {
            0 => Ok(openai_tool_call(
                "call_mock_sh",
                "shell_exec",
                &["{\"argv\": [\"cat\", ", "\"/etc/passwd\"]}"],
            )),
            1 => {
                let content = openai_tool_result(
                    &messages,
                    "call_mock_sh",
                    "shell_exec",
                    &json!({"argv": ["cat", "/etc/passwd"]}),
                )?;
                check(content.contains("denied ("), || {
                    format!("the shell call was not reported as denied: {content:?}")
                })?;
                check(!content.contains("root:"), || {
                    format!("the shell call ran: {content:?}")
                })?;
                Ok(openai_text(&["I am not allowed to run commands."]))
            }
            _ => Err("more requests than the scenario has".into()),
        }
    });
    let bw = reader_home("mock", "openai", &format!("{}/v1", server.url()));

    let out = bw
        .cmd(&["run", "reader", QUESTION])
        .env("MOCK_KEY", KEY)
        .run();
    server.assert_no_failures();
    out.ok();
    assert!(
        out.stdout.contains("I am not allowed to run commands."),
        "{}",
        out.stdout
    );
    assert_eq!(server.seen().len(), 2);

    let records = bw.audit();
    let calls: Vec<(&str, &str, &str)> = with_action(&records, "tool_call")
        .into_iter()
        .map(|r| (field(r, "tool"), field(r, "decision"), field(r, "reason")))
        .collect();
    assert_eq!(calls, [("shell_exec", "denied", "tool")], "{records:#?}");
}

/// A server that keeps failing: the run retries, then exits 1 naming the
/// URL and the status (with a key the server echoed redacted); the user's
/// message stays in the stored session, and a later run continues it.
#[test]
fn openai_server_errors_exit_1_and_keep_the_session() {
    let server = MockServer::start(|_, seen| {
        check_openai_common(seen)?;
        // `Retry-After: 0` keeps the backoff out of the test's run time.
        let mut reply = Reply::json(
            500,
            json!({"error": {"message": format!("mock overload (key {KEY} is fine)"),
                             "type": "server_error"}}),
        );
        reply.headers.push(("retry-after", "0".into()));
        Ok(reply)
    });
    let bw = reader_home("mock", "openai", &format!("{}/v1", server.url()));

    let out = bw
        .cmd(&["run", "reader", QUESTION])
        .env("MOCK_KEY", KEY)
        .run();
    out.expect_code(1);
    server.assert_no_failures();
    let attempts = server.seen().len();
    assert!(
        (3..=10).contains(&attempts),
        "a 500 is retried a bounded number of times; the server saw {attempts} request(s)"
    );
    let url = format!("{}/v1/chat/completions", server.url());
    assert!(
        out.stderr.contains(&url) && out.stderr.contains("HTTP 500"),
        "the error names the URL and the status:\n{}",
        out.stderr
    );
    assert!(out.stderr.contains("mock overload"), "{}", out.stderr);
    assert!(
        out.stderr.contains("[redacted]"),
        "the key the server echoed is redacted:\n{}",
        out.stderr
    );
    assert_key_never_stored(&bw, &out);

    let sessions = bw.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let (id, agent, messages) = &sessions[0];
    assert_eq!(agent, "reader");
    assert_eq!(*messages, 1, "the user's message is stored, nothing else");

    // Continue the same session against a healthy server: the stored
    // question is part of the history it is sent (session repair merges it
    // with the new message into one user turn).
    drop(server);
    let healthy = MockServer::start(|_, seen| {
        let messages = check_openai_common(seen)?;
        check(
            messages.iter().any(|m| {
                m["role"] == "user"
                    && m["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("try again"))
            }),
            || format!("the new message is missing: {messages:?}"),
        )?;
        Ok(openai_text(&["recovered"]))
    });
    write_provider(&bw, "mock", "openai", &format!("{}/v1", healthy.url()));
    let out = bw
        .cmd(&["run", "reader", "try again", "--session", id])
        .env("MOCK_KEY", KEY)
        .run();
    healthy.assert_no_failures();
    out.ok();
    assert!(out.stdout.contains("recovered"), "{}", out.stdout);
    let history = serde_json::to_string(&healthy.seen()[0].body["messages"]).expect("json");
    assert!(
        history.contains(QUESTION),
        "the stored question was sent again: {history}"
    );
    assert_eq!(bw.sessions()[0].2, 3, "question, follow-up, answer");
}
