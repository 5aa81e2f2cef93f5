//! A scriptable stand-in for `bulwark worker`, for the supervisor tests
//! only (built with the `test-fixtures` feature).
//!
//! `FAKE_WORKER_MODE` chooses how it starts: `good` (default) answers
//! `Start` with `Ready`; `stored` first creates its session through the
//! brokered store; `silent` never answers; `refuse` answers with a
//! fatal `Forbidden` error; `exit` exits at once; `garbage` answers with a
//! frame that is not JSON. A good worker then acts on each user message's
//! text (see `turn`): echo, sleep, hold until interrupted, crash, print its
//! environment, ask for approval, or break the protocol in a chosen way.
//!
//! Started with `StartTools` it is a tools-only worker: `ListTools` lists
//! `echo` and `ask`; `CallTool` of `echo` returns its arguments, of `ask`
//! first asks for approval and answers `approved` or `denied`, of `crash`
//! exits mid-call, of `stray` ends another call than the one asked.
//!
//! It accepts and ignores the `--user=... --agent=...` arguments the
//! supervisor appends (a turn with the text `args` echoes them).

use bulwark_protocol::frame::{CommandCodec, EventCodec, MAX_FRAME_BYTES};
use bulwark_protocol::protocol::{
    Command, ErrorCode, Event, MAX_TEXT_CHARS, ToolDecision, ToolInfo, TurnEnd, Usage,
};
use futures_util::{SinkExt, StreamExt};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, Stdout};
use tokio_util::codec::{FramedRead, FramedWrite};

type Out = FramedWrite<Stdout, EventCodec>;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mode = std::env::var("FAKE_WORKER_MODE").unwrap_or_else(|_| "good".into());
    let mut input = FramedRead::new(tokio::io::stdin(), CommandCodec::new());
    let mut out = FramedWrite::new(tokio::io::stdout(), EventCodec::new());
    let (resume, tools_only) = match input.next().await {
        Some(Ok(Command::Start { resume, .. })) => (resume, false),
        Some(Ok(Command::StartTools { .. })) => (None, true),
        _ => std::process::exit(2),
    };
    match mode.as_str() {
        "silent" => tokio::time::sleep(Duration::from_secs(3600)).await,
        "exit" => std::process::exit(7),
        "refuse" => {
            send(
                &mut out,
                error(ErrorCode::Forbidden, "not your session", true),
            )
            .await;
            std::process::exit(1);
        }
        "garbage" => raw(&mut out, b"this is not json").await,
        _ => {}
    }
    let (session_id, history_messages) = match resume {
        Some(id) => (id, 3),
        None => (format!("fake-{}", std::process::id()), 0),
    };
    if mode == "stored" {
        // A supervisor that brokers a store wants the session opened
        // through it before Ready, as `bulwark worker` does.
        let create = bulwark_protocol::store_ipc::StoreRequest::Create {
            session: session_id.clone(),
        };
        send(
            &mut out,
            Event::Store {
                request_id: 1,
                request: create,
            },
        )
        .await;
        match input.next().await {
            Some(Ok(Command::StoreReply { request_id: 1, .. })) => {}
            _ => std::process::exit(5),
        }
    }
    send(
        &mut out,
        Event::Ready {
            session_id,
            history_messages,
        },
    )
    .await;
    if tools_only {
        serve_tools(&mut out, &mut input).await;
        return;
    }
    let mut holding = None;
    while let Some(command) = input.next().await {
        match command {
            Ok(Command::UserMessage { message_id, text }) => {
                if let Some(id) = turn(&mut out, &mut input, message_id, &text).await {
                    holding = Some(id);
                }
            }
            Ok(Command::Interrupt) => {
                if let Some(id) = holding.take() {
                    send(&mut out, ended(id, TurnEnd::Interrupted, "")).await;
                }
            }
            Ok(Command::Shutdown) => std::process::exit(0),
            Ok(_) => {}
            Err(_) => std::process::exit(4),
        }
    }
}

/// The tools-only loop (see the module comment).
async fn serve_tools(out: &mut Out, input: &mut FramedRead<tokio::io::Stdin, CommandCodec>) {
    while let Some(command) = input.next().await {
        match command {
            Ok(Command::ListTools) => {
                let tool = |name: &str| ToolInfo {
                    name: name.into(),
                    description: format!("the fake {name} tool"),
                    input_schema: serde_json::json!({"type": "object"}),
                };
                let tools = vec![tool("echo"), tool("ask")];
                send(out, Event::Tools { tools }).await;
            }
            Ok(Command::CallTool {
                call_id,
                tool,
                arguments,
            }) => {
                let (content, is_error) = match tool.as_str() {
                    "echo" => (arguments.to_string(), false),
                    "crash" => std::process::exit(9),
                    "stray" => {
                        let done = Event::ToolCallDone {
                            call_id: format!("{call_id}-other"),
                            content: String::new(),
                            is_error: false,
                        };
                        send(out, done).await;
                        continue;
                    }
                    "ask" => {
                        let ask = Event::ApprovalRequest {
                            request_id: "r1".into(),
                            tool: "ask".into(),
                            operation: "ask".into(),
                            summary: arguments.to_string(),
                            why: "the fake asks".into(),
                        };
                        send(out, ask).await;
                        match input.next().await {
                            Some(Ok(Command::ToolApproval { approve: true, .. })) => {
                                ("approved".into(), false)
                            }
                            Some(Ok(Command::ToolApproval { .. })) => ("denied".into(), true),
                            _ => std::process::exit(6),
                        }
                    }
                    other => (format!("no tool `{other}`"), true),
                };
                let done = Event::ToolCallDone {
                    call_id,
                    content,
                    is_error,
                };
                send(out, done).await;
            }
            Ok(Command::Shutdown) => std::process::exit(0),
            Ok(_) => {}
            Err(_) => std::process::exit(4),
        }
    }
}

/// Runs one turn; returns the id when the turn is held until an Interrupt.
async fn turn(
    out: &mut Out,
    input: &mut FramedRead<tokio::io::Stdin, CommandCodec>,
    id: u64,
    text: &str,
) -> Option<u64> {
    let delta = |text: String| Event::TextDelta {
        message_id: id,
        text,
    };
    match text {
        "hold" => {
            send(out, delta("holding".into())).await;
            return Some(id);
        }
        "env" => {
            let mut vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
            vars.sort();
            send(out, delta(vars.join("\n"))).await;
        }
        "args" => {
            let args: Vec<String> = std::env::args().skip(1).collect();
            send(out, delta(args.join(" "))).await;
        }
        "crash" => {
            send(out, delta("partial".into())).await;
            std::process::exit(3);
        }
        "tool" => {
            let call = |call_id: &str| Event::ToolCall {
                message_id: id,
                call_id: call_id.into(),
                tool: "file_read".into(),
                summary: "file_read {\"path\":\"notes.txt\"}".into(),
            };
            send(out, call("c1")).await;
            let result = Event::ToolResult {
                message_id: id,
                call_id: "c1".into(),
                decision: ToolDecision::Allowed,
                summary: "allowed".into(),
            };
            send(out, result).await;
        }
        "approve" => {
            let request = Event::ApprovalRequest {
                request_id: "r1".into(),
                tool: "file_write".into(),
                operation: "write".into(),
                summary: "{\"path\":\"out.txt\"}".into(),
                why: "policy".into(),
            };
            send(out, request).await;
            let answer = loop {
                match input.next().await {
                    Some(Ok(Command::ToolApproval { approve, .. })) => break approve,
                    Some(Ok(_)) => continue,
                    _ => std::process::exit(5),
                }
            };
            send(
                out,
                delta(if answer { "approved" } else { "denied" }.into()),
            )
            .await;
        }
        "unknown-field" => {
            let body = format!(r#"{{"type":"text_delta","message_id":{id},"text":"x","debug":1}}"#);
            raw(out, body.as_bytes()).await;
        }
        "unknown-type" => raw(out, br#"{"type":"debug_dump","data":"x"}"#).await,
        "wrong-type" => {
            raw(
                out,
                br#"{"type":"text_delta","message_id":"one","text":"x"}"#,
            )
            .await
        }
        "oversized" => {
            let len = u32::try_from(MAX_FRAME_BYTES + 1).unwrap_or(u32::MAX);
            let stdout = out.get_mut();
            let _ = stdout.write_all(&len.to_be_bytes()).await;
            let _ = stdout.flush().await;
        }
        "bad-bound" => {
            let text = "x".repeat(MAX_TEXT_CHARS + 1);
            let body = serde_json::json!({"type": "text_delta", "message_id": id, "text": text});
            raw(out, body.to_string().as_bytes()).await;
        }
        "foreign" => {
            send(
                out,
                Event::TextDelta {
                    message_id: id + 1000,
                    text: "not yours".into(),
                },
            )
            .await
        }
        "lost" => {
            send(
                out,
                error(ErrorCode::WorkerLost, "someone else died", false),
            )
            .await
        }
        // A store request to a supervisor that brokers no store.
        "store" => {
            let request = Event::Store {
                request_id: 1,
                request: bulwark_protocol::store_ipc::StoreRequest::AuditFlush {},
            };
            send(out, request).await;
        }
        // The label table through the broker (mode `stored`): `label`
        // records `external` for notes.txt's bytes and asks, `lookup`
        // asks; both echo what the server answered.
        "label" | "lookup" => {
            use bulwark_protocol::store_ipc::{DigestHex, LabelRootWire, StoreRequest};
            let mut next_id = 100;
            let mut ask = async |request: StoreRequest| {
                next_id += 1;
                let request_id = next_id;
                send(
                    out,
                    Event::Store {
                        request_id,
                        request,
                    },
                )
                .await;
                loop {
                    match input.next().await {
                        Some(Ok(Command::StoreReply {
                            request_id: id,
                            reply,
                        })) if id == request_id => {
                            break reply;
                        }
                        Some(Ok(_)) => continue,
                        _ => std::process::exit(5),
                    }
                }
            };
            let digest = DigestHex([7; 32]);
            let mut said = Vec::new();
            if text == "label" {
                let record = StoreRequest::RecordProvenance {
                    root: LabelRootWire::Workspace,
                    path: "notes.txt".into(),
                    digest,
                    labels: vec!["external".into()],
                    source: "c1".into(),
                };
                said.push(format!("recorded: {:?}", ask(record).await));
            }
            let lookup = StoreRequest::Provenance {
                root: LabelRootWire::Workspace,
                path: "notes.txt".into(),
                digest,
            };
            said.push(format!("labels: {:?}", ask(lookup).await));
            send(out, delta(said.join("\n"))).await;
        }
        "ready-again" => {
            let ready = Event::Ready {
                session_id: "again".into(),
                history_messages: 0,
            };
            send(out, ready).await;
        }
        other => {
            if let Some(ms) = other.strip_prefix("sleep:") {
                let ms = ms.parse().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            send(out, delta(format!("echo: {other}"))).await;
        }
    }
    send(out, ended(id, TurnEnd::Completed, text)).await;
    None
}

fn ended(id: u64, end: TurnEnd, text: &str) -> Event {
    Event::TurnEnded {
        message_id: id,
        end,
        text: text.into(),
        usage: Usage::default(),
    }
}

fn error(code: ErrorCode, message: &str, fatal: bool) -> Event {
    Event::Error {
        code,
        message: message.into(),
        fatal,
    }
}

async fn send(out: &mut Out, event: Event) {
    if out.send(event).await.is_err() {
        std::process::exit(6);
    }
}

/// Writes `body` as one frame without the codec's checks.
async fn raw(out: &mut Out, body: &[u8]) {
    let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let stdout = out.get_mut();
    let _ = stdout.write_all(&len.to_be_bytes()).await;
    let _ = stdout.write_all(body).await;
    let _ = stdout.flush().await;
}
