//! An in-process backend with scripted conversations.
//!
//! Each message's text picks the script:
//! - `approve?`: an approval request, then a tool result that follows the answer;
//! - `stream:N`: N text deltas, then the turn ends;
//! - `slow:N`: N text deltas 20 ms apart (for disconnect/replay tests);
//! - `crash`: the conversation dies;
//! - `oversize`: an event beyond the protocol's bounds;
//! - anything else: one delta, a tool call and result, then the turn ends.

use async_trait::async_trait;
use bulwark_protocol::protocol::{Command, Event, ToolDecision, TurnEnd, Usage};
use bulwark_server::{
    Backend, BackendError, BackendStats, Conversation, ConversationControl, OpenRequest,
};
use bulwark_store::{NewSession, Store};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Default)]
pub struct Counters {
    pub opened: AtomicU64,
    pub killed: AtomicU64,
    pub live: AtomicU64,
    pub by_user: Mutex<BTreeMap<String, u64>>,
}

pub struct FakeBackend {
    pub store: Store,
    pub counters: Arc<Counters>,
    pub max_live: AtomicU64,
}

impl FakeBackend {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            counters: Arc::new(Counters::default()),
            max_live: AtomicU64::new(64),
        }
    }
}

struct Control {
    task: tokio::task::AbortHandle,
    counters: Arc<Counters>,
    user: String,
    done: std::sync::atomic::AtomicBool,
}

impl ConversationControl for Control {
    fn kill(&self) {
        self.task.abort();
        if !self.done.swap(true, Ordering::SeqCst) {
            self.counters.killed.fetch_add(1, Ordering::SeqCst);
            self.counters.live.fetch_sub(1, Ordering::SeqCst);
            let mut by_user = self.counters.by_user.lock().unwrap();
            if let Some(n) = by_user.get_mut(&self.user) {
                *n -= 1;
            }
        }
    }
}

static SESSIONS: AtomicU64 = AtomicU64::new(0);

fn usage_state(tokens: u64) -> String {
    let mut guard = bulwark_policy::LoopGuard::new(bulwark_policy::LoopGuardConfig::default());
    guard.charge_tokens(tokens);
    let state = bulwark_kernel::SessionState {
        guard,
        approved_for_session: Default::default(),
        taint: Default::default(),
        taint_sources: Default::default(),
        untrusted: Default::default(),
        taint_notes: Default::default(),
        boundary: bulwark_kernel::Boundary::new_random(),
        stopped: None,
    };
    serde_json::to_string(&state).unwrap()
}

#[async_trait]
impl Backend for FakeBackend {
    async fn open(&self, req: OpenRequest) -> Result<Conversation, BackendError> {
        if self.counters.live.load(Ordering::SeqCst) >= self.max_live.load(Ordering::SeqCst) {
            return Err(BackendError::AtCapacity {
                message: "all workers are busy".into(),
                retry_after_secs: 3,
            });
        }
        let (session_id, history) = match &req.resume {
            Some(id) => (
                id.clone(),
                self.store.messages(id).map(|m| m.len() as u64).unwrap_or(0),
            ),
            None => {
                let n = SESSIONS.fetch_add(1, Ordering::SeqCst);
                let id = format!("sess-{}-{n}", std::process::id());
                self.store
                    .create_session(&NewSession {
                        id: id.clone(),
                        agent: req.agent.clone(),
                        user: req.user.clone(),
                    })
                    .map_err(|e| BackendError::Internal(e.to_string()))?;
                (id, 0)
            }
        };
        let (cmd_tx, cmd_rx) = mpsc::channel(16);
        let (ev_tx, ev_rx) = mpsc::channel(1024);
        let store = self.store.clone();
        let sid = session_id.clone();
        let task = tokio::spawn(script(store, sid, cmd_rx, ev_tx));
        self.counters.opened.fetch_add(1, Ordering::SeqCst);
        self.counters.live.fetch_add(1, Ordering::SeqCst);
        *self
            .counters
            .by_user
            .lock()
            .unwrap()
            .entry(req.user.clone())
            .or_default() += 1;
        Ok(Conversation {
            session_id,
            history_messages: history,
            commands: cmd_tx,
            events: ev_rx,
            control: Box::new(Control {
                task: task.abort_handle(),
                counters: self.counters.clone(),
                user: req.user,
                done: Default::default(),
            }),
        })
    }

    /// The same scripted conversation; it answers tool commands too.
    async fn open_tools(&self, req: OpenRequest) -> Result<Conversation, BackendError> {
        self.open(OpenRequest {
            resume: None,
            ..req
        })
        .await
    }

    fn stats(&self) -> BackendStats {
        BackendStats {
            workers: self.counters.live.load(Ordering::SeqCst),
            workers_by_user: self.counters.by_user.lock().unwrap().clone(),
            crashes: 0,
            max_workers: Some(self.max_live.load(Ordering::SeqCst)),
        }
    }
}

async fn script(
    store: Store,
    session: String,
    mut commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<Event>,
) {
    let mut tokens = 0;
    while let Some(cmd) = commands.recv().await {
        match cmd {
            Command::UserMessage { message_id, text } => {
                let json =
                    serde_json::json!({"role": "user", "blocks": [{"type": "text", "text": text}]});
                let _ = store.append_message(&session, "user", &json.to_string());
                tokens += 7;
                let _ = store.save_state(&session, &usage_state(tokens));
                let end = |text: &str| Event::TurnEnded {
                    message_id,
                    end: TurnEnd::Completed,
                    text: text.into(),
                    usage: Usage {
                        input_tokens: 3,
                        output_tokens: 4,
                    },
                };
                if text == "crash" {
                    return;
                } else if text == "oversize" {
                    let _ = events
                        .send(Event::ToolCall {
                            message_id,
                            call_id: "c".into(),
                            tool: "x".repeat(10_000),
                            summary: String::new(),
                        })
                        .await;
                } else if text == "approve?" {
                    let _ = events
                        .send(Event::ApprovalRequest {
                            request_id: "req-1".into(),
                            tool: "files".into(),
                            operation: "edit".into(),
                            summary: "notes.txt".into(),
                            why: "policy asks".into(),
                        })
                        .await;
                    let approved = loop {
                        match commands.recv().await {
                            Some(Command::ToolApproval { approve, .. }) => break approve,
                            Some(_) => continue,
                            None => return,
                        }
                    };
                    let decision = if approved {
                        ToolDecision::Allowed
                    } else {
                        ToolDecision::Denied
                    };
                    let _ = events
                        .send(Event::ToolResult {
                            message_id,
                            call_id: "call-1".into(),
                            decision,
                            summary: "edited".into(),
                        })
                        .await;
                    let _ = events.send(end("approved turn")).await;
                } else if let Some(n) = text
                    .strip_prefix("stream:")
                    .or_else(|| text.strip_prefix("slow:"))
                {
                    let slow = text.starts_with("slow:");
                    let n: u64 = n.parse().unwrap_or(1);
                    for i in 0..n {
                        if slow {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        let _ = events
                            .send(Event::TextDelta {
                                message_id,
                                text: format!("d{i} "),
                            })
                            .await;
                    }
                    let _ = events.send(end("streamed")).await;
                } else {
                    let _ = events
                        .send(Event::TextDelta {
                            message_id,
                            text: format!("got {} chars", text.chars().count()),
                        })
                        .await;
                    let _ = events
                        .send(Event::ToolCall {
                            message_id,
                            call_id: "call-1".into(),
                            tool: "files".into(),
                            summary: "read notes.txt".into(),
                        })
                        .await;
                    let _ = events
                        .send(Event::ToolResult {
                            message_id,
                            call_id: "call-1".into(),
                            decision: ToolDecision::Allowed,
                            summary: "12 lines".into(),
                        })
                        .await;
                    let _ = events.send(end("done")).await;
                }
            }
            Command::Interrupt => {
                let _ = events
                    .send(Event::TurnEnded {
                        message_id: 0,
                        end: TurnEnd::Interrupted,
                        text: String::new(),
                        usage: Usage::default(),
                    })
                    .await;
            }
            Command::ToolApproval { .. } => {
                let _ = events
                    .send(Event::Error {
                        code: bulwark_protocol::protocol::ErrorCode::BadCommand,
                        message: "no approval is pending".into(),
                        fatal: false,
                    })
                    .await;
            }
            Command::Shutdown => return,
            // The fake stores directly; a store reply is never sent to it.
            Command::Start { .. } | Command::StartTools { .. } | Command::StoreReply { .. } => {}
            // A tools-only conversation (`/mcp`): one tool that echoes.
            Command::ListTools => {
                let tools = vec![bulwark_protocol::protocol::ToolInfo {
                    name: "echo".into(),
                    description: "says it back".into(),
                    input_schema: serde_json::json!({"type": "object"}),
                }];
                let _ = events.send(Event::Tools { tools }).await;
            }
            Command::CallTool {
                call_id,
                tool,
                arguments,
            } => {
                let is_error = tool != "echo";
                let content = if is_error {
                    format!("no tool `{tool}`")
                } else {
                    format!("echo {arguments}")
                };
                let _ = events
                    .send(Event::ToolCallDone {
                        call_id,
                        content,
                        is_error,
                    })
                    .await;
            }
        }
    }
}
