//! The server's side of a tools-only worker: a [`ToolHost`] whose every
//! list and call is a frame to the worker of the caller's user and agent.
//!
//! One worker per (user, agent) serves all that user's MCP requests to
//! that agent, one operation at a time; it is opened on the first request
//! that needs a tool, and the supervisor shuts it down after its idle
//! timeout (or the server's shutdown), like any conversation. The number
//! of these workers is bounded by the supervisor's caps (`--max-workers`,
//! `--max-workers-per-user`), shared with conversations.

use crate::app::AppState;
use crate::backend::{BackendError, ConversationControl, OpenRequest};
use bulwark_mcp::server::{
    ApprovalQuestion, ApprovalReply, Approvals, HostedResult, HostedTool, ToolHost,
};
use bulwark_protocol::protocol::{Command, ErrorCode, Event};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// The longest one tool call may take, approvals included (the worker's
/// own approval wait is 5 minutes; the door's call timeout is shorter).
const CALL_WAIT: Duration = Duration::from_secs(10 * 60);
/// The longest a tool list may take.
const LIST_WAIT: Duration = Duration::from_secs(30);

/// One running tools-only worker.
struct ToolWorker {
    commands: mpsc::Sender<Command>,
    /// Held for a whole operation: one list or call at a time.
    events: tokio::sync::Mutex<mpsc::Receiver<Event>>,
    control: Box<dyn ConversationControl>,
    next_call: AtomicU64,
}

impl Drop for ToolWorker {
    fn drop(&mut self) {
        self.control.kill();
    }
}

/// The tools-only workers, by user and agent.
#[derive(Default)]
pub(crate) struct McpWorkers {
    workers: Mutex<HashMap<(String, String), Arc<ToolWorker>>>,
    /// Opens serialized per server: two first requests do not start two
    /// workers for one user and agent.
    opening: tokio::sync::Mutex<()>,
    /// The MCP handler of each user and agent. Requests are stateless, but
    /// a call waiting for an approval (a 2026-07-28 input request) lives in
    /// its handler's table until the client's retry: one handler per user
    /// and agent, never shared between users (a `requestState` handle is a
    /// capability for the call it names).
    servers: Mutex<HashMap<(String, String), bulwark_mcp::server::BulwarkMcpServer>>,
}

impl McpWorkers {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<ToolWorker>>> {
        self.workers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn live(&self, key: &(String, String)) -> Option<Arc<ToolWorker>> {
        let mut map = self.map();
        match map.get(key) {
            Some(w) if !w.commands.is_closed() => Some(w.clone()),
            Some(_) => {
                map.remove(key);
                None
            }
            None => None,
        }
    }

    fn forget(&self, key: &(String, String), worker: &Arc<ToolWorker>) {
        let mut map = self.map();
        if map.get(key).is_some_and(|w| Arc::ptr_eq(w, worker)) {
            map.remove(key);
        }
    }

    /// The MCP handler for `user` and `agent`, made on first use.
    pub(crate) fn server(
        &self,
        state: &AppState,
        user: &str,
        agent: &str,
    ) -> bulwark_mcp::server::BulwarkMcpServer {
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        servers
            .entry((user.to_string(), agent.to_string()))
            .or_insert_with(|| {
                let host = WorkerToolHost::new(state.clone(), user.to_string(), agent.to_string());
                bulwark_mcp::server::BulwarkMcpServer::new(std::sync::Arc::new(host))
            })
            .clone()
    }

    /// Ends every tools-only worker of `user` (their tokens were revoked).
    pub(crate) fn stop_user(&self, user: &str) -> usize {
        self.servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(u, _), _| u != user);
        let mut map = self.map();
        let before = map.len();
        map.retain(|(u, _), _| u != user);
        before - map.len()
    }

    /// How many are registered now (for tests and health).
    pub(crate) fn len(&self) -> usize {
        self.map().len()
    }
}

/// Why an operation on the worker failed; the text is for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostFailure(pub(crate) String);

/// A [`ToolHost`] for one authenticated user and one agent they may use.
pub(crate) struct WorkerToolHost {
    state: AppState,
    user: String,
    agent: String,
}

impl WorkerToolHost {
    pub(crate) fn new(state: AppState, user: String, agent: String) -> Self {
        Self { state, user, agent }
    }

    fn key(&self) -> (String, String) {
        (self.user.clone(), self.agent.clone())
    }

    async fn worker(&self) -> Result<Arc<ToolWorker>, HostFailure> {
        let pool = self.state.mcp_workers();
        let key = self.key();
        if let Some(w) = pool.live(&key) {
            return Ok(w);
        }
        let _opening = pool.opening.lock().await;
        if let Some(w) = pool.live(&key) {
            return Ok(w);
        }
        let request = OpenRequest {
            user: self.user.clone(),
            agent: self.agent.clone(),
            resume: None,
        };
        let timeout = self.state.config().limits.open_timeout;
        let opened = tokio::time::timeout(timeout, self.state.backend().open_tools(request)).await;
        let conversation = match opened {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                self.state.metrics().conversation_open_failures();
                return Err(HostFailure(open_failure(e)));
            }
            Err(_) => {
                self.state.metrics().conversation_open_failures();
                return Err(HostFailure(
                    "the agent's tool session took too long to start; try again".into(),
                ));
            }
        };
        tracing::info!(user = %self.user, agent = %self.agent, session = %conversation.session_id, "MCP tool session opened");
        let worker = Arc::new(ToolWorker {
            commands: conversation.commands,
            events: tokio::sync::Mutex::new(conversation.events),
            control: conversation.control,
            next_call: AtomicU64::new(0),
        });
        pool.map().insert(key, worker.clone());
        Ok(worker)
    }

    /// Sends `command` and reads events until `done` picks the answer.
    /// Approval requests go to `approvals` meanwhile. A worker that ends,
    /// refuses or times out is forgotten (the next request opens another).
    async fn exchange<T>(
        &self,
        command: Command,
        wait: Duration,
        approvals: Option<&Arc<dyn Approvals>>,
        mut done: impl FnMut(Event) -> Option<T>,
    ) -> Result<T, HostFailure> {
        let worker = self.worker().await?;
        let mut events = worker.events.lock().await;
        // Whatever an earlier, abandoned operation left behind.
        while events.try_recv().is_ok() {}
        let lost = |why: &str| {
            self.state.mcp_workers().forget(&self.key(), &worker);
            HostFailure(why.to_owned())
        };
        if worker.commands.send(command).await.is_err() {
            return Err(lost("the agent's tool session ended; try again"));
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let event = match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(event)) => event,
                Ok(None) => return Err(lost("the agent's tool session ended; try again")),
                Err(_) => {
                    worker.control.kill();
                    return Err(lost("the tool did not finish in time"));
                }
            };
            match event {
                Event::ApprovalRequest {
                    request_id,
                    tool,
                    summary,
                    why,
                    ..
                } => {
                    let reply = match approvals {
                        Some(a) => {
                            let question = ApprovalQuestion {
                                tool,
                                why,
                                args_preview: summary,
                            };
                            a.ask(question).await
                        }
                        None => ApprovalReply::Unavailable,
                    };
                    let answer = Command::ToolApproval {
                        request_id,
                        approve: reply == ApprovalReply::Approve,
                    };
                    if worker.commands.send(answer).await.is_err() {
                        return Err(lost("the agent's tool session ended; try again"));
                    }
                }
                Event::Error {
                    code,
                    message,
                    fatal,
                    ..
                } => {
                    if fatal || code == ErrorCode::WorkerLost {
                        return Err(lost(&message));
                    }
                    return Err(HostFailure(message));
                }
                other => {
                    if let Some(answer) = done(other) {
                        return Ok(answer);
                    }
                }
            }
        }
    }

    /// The tools the session grants, or why they cannot be listed.
    pub(crate) async fn list(&self) -> Result<Vec<HostedTool>, HostFailure> {
        self.exchange(Command::ListTools, LIST_WAIT, None, |event| match event {
            Event::Tools { tools } => Some(
                tools
                    .into_iter()
                    .map(|t| HostedTool {
                        name: t.name,
                        description: t.description,
                        input_schema: t.input_schema,
                    })
                    .collect(),
            ),
            _ => None,
        })
        .await
    }
}

fn open_failure(e: BackendError) -> String {
    match e {
        BackendError::AtCapacity {
            message,
            retry_after_secs,
        } => format!("{message} (retry in {retry_after_secs} s)"),
        BackendError::Forbidden(m)
        | BackendError::NotFound(m)
        | BackendError::Setup(m)
        | BackendError::Internal(m) => m,
    }
}

#[async_trait::async_trait]
impl ToolHost for WorkerToolHost {
    async fn tools(&self) -> Vec<HostedTool> {
        match self.list().await {
            Ok(tools) => tools,
            Err(HostFailure(why)) => {
                tracing::warn!(user = %self.user, agent = %self.agent, %why, "MCP tool list failed");
                Vec::new()
            }
        }
    }

    async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Value,
        approvals: Arc<dyn Approvals>,
    ) -> HostedResult {
        let worker = match self.worker().await {
            Ok(w) => w,
            Err(HostFailure(why)) => {
                return HostedResult {
                    content: why,
                    is_error: true,
                };
            }
        };
        let call_id = format!("m{}", worker.next_call.fetch_add(1, Ordering::Relaxed) + 1);
        drop(worker);
        let command = Command::CallTool {
            call_id: call_id.clone(),
            tool: tool.to_owned(),
            arguments,
        };
        if let Err(err) = command.validate() {
            return HostedResult {
                content: format!("the call was refused: {err}"),
                is_error: true,
            };
        }
        let answer = self
            .exchange(command, CALL_WAIT, Some(&approvals), |event| match event {
                Event::ToolCallDone {
                    call_id: id,
                    content,
                    is_error,
                } if id == call_id => Some(HostedResult { content, is_error }),
                _ => None,
            })
            .await;
        answer.unwrap_or_else(|HostFailure(why)| HostedResult {
            content: why,
            is_error: true,
        })
    }
}
