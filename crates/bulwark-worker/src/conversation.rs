//! `bulwark worker`: one conversation in its own process, for `bulwark
//! serve`. Commands arrive as frames on stdin, events leave as frames on
//! stdout (see [`crate::io`]); nothing else is ever written to stdout,
//! which is moved off fd 1 before anything runs.
//!
//! The worker trusts its parent: only the supervisor holds its stdin, and
//! it authenticated the user named in `Start`. The session is opened by
//! the kernel's [`SessionFactory`] as `bulwark run` opens one, with
//! [`Origin::Worker`], records that go to the server ([`WorkerRecords`])
//! and an approver that asks the server instead of a terminal.

use crate::broker::BrokerClient;
use crate::confine::WorkerStart;
use crate::error::WorkerError;
use crate::io::{FrameReader, FrameWriter};
use crate::records::WorkerRecords;
use crate::tools::{ToolJob, open_host, result_text, tool_infos};
use bulwark_audit::Decision;
use bulwark_kernel::{
    AgentRuntime, ApprovalAnswer, ApprovalRequest, Approver, CancellationToken, DispatchResult,
    FrontEnd, Home, Kernel, KernelError, OpenError, OpenSession, Origin, Session, SessionFactory,
    SessionRecords, SessionSpec, TurnObserver,
};
use bulwark_llm::Message;
use bulwark_policy::{AgentName, UserName};
use bulwark_protocol::protocol::{
    Command, ErrorCode, Event, MAX_ID_CHARS, MAX_SHORT_CHARS, MAX_TEXT_CHARS, ToolDecision,
    TurnEnd, Usage,
};
use bulwark_store::StoreError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::unix::pipe::{Receiver, Sender};
use tokio::sync::{mpsc, oneshot, watch};

/// An approval nobody answers is denied after this long.
const APPROVAL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Characters of tool arguments shown in a `ToolCall` summary.
const CALL_SUMMARY_CHARS: usize = 200;
/// How long queued events may take to reach the pipe when the worker ends.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

type Events = mpsc::UnboundedSender<Event>;

/// Serves the conversation: reads commands, runs turns, writes events,
/// until `Shutdown`, the end of stdin or a signal. Runs on the runtime
/// [`crate::run_main`] built after confining the process to `expected`.
pub(crate) async fn worker(home: &Home, expected: &WorkerStart) -> Result<(), WorkerError> {
    // main() hardened the process already; again here so worker mode never
    // depends on the order of main's start-up (not dumpable, no core).
    bulwark_sandbox::harden_process().map_err(WorkerError::Harden)?;
    let pipes = crate::stdio::take_ipc().map_err(WorkerError::Pipes)?;
    let (events, events_rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_events(pipes.events, events_rx));
    let (stop_tx, stop) = watch::channel(false);
    let approvals = Arc::new(Approvals {
        events: events.clone(),
        pending: Mutex::new(HashMap::new()),
        next: AtomicU64::new(0),
        stop: stop.clone(),
        turn: Mutex::new(CancellationToken::new()),
    });
    let (start_tx, start) = oneshot::channel();
    let (messages_tx, messages) = mpsc::channel(8);
    let (interrupts_tx, interrupts) = mpsc::channel(4);
    let (tools_tx, tools) = mpsc::channel(4);
    let store = Arc::new(BrokerClient::new(events.clone()));
    let reader = tokio::spawn(read_commands(
        pipes.commands,
        Router {
            events: events.clone(),
            start: Some(start_tx),
            messages: messages_tx,
            interrupts: interrupts_tx,
            tools: tools_tx,
            tools_only: false,
            approvals: approvals.clone(),
            store: store.clone(),
            stop: stop_tx,
        },
    ));
    let channels = Channels {
        events,
        start,
        messages,
        interrupts,
        tools,
        stop,
    };
    let result = converse(home, channels, approvals, store, expected).await;
    // Every sender of events is gone once the reader is: the writer then
    // drains what is queued and ends.
    reader.abort();
    let _ = reader.await;
    let _ = tokio::time::timeout(FLUSH_WAIT, writer).await;
    result
}

struct Channels {
    events: Events,
    start: oneshot::Receiver<Command>,
    messages: mpsc::Receiver<(u64, String)>,
    interrupts: mpsc::Receiver<()>,
    tools: mpsc::Receiver<ToolJob>,
    stop: watch::Receiver<bool>,
}

async fn stopped(stop: &watch::Receiver<bool>) {
    let mut stop = stop.clone();
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn converse(
    home: &Home,
    mut ch: Channels,
    approvals: Arc<Approvals>,
    store: Arc<BrokerClient>,
    expected: &WorkerStart,
) -> Result<(), WorkerError> {
    let start = tokio::select! {
        start = &mut ch.start => start.ok(),
        () = stopped(&ch.stop) => None,
    };
    let (user, agent, resume, tools_only) = match start {
        Some(Command::Start {
            user,
            agent,
            resume,
        }) => (user, agent, resume, false),
        Some(Command::StartTools { user, agent }) => (user, agent, None, true),
        _ => return Ok(()),
    };
    // The message goes to a remote user. A setup failure is the operator's
    // to fix and its text names files, paths and settings of the server:
    // the user gets a reference, the full error goes to stderr (the server
    // log) under that reference. A refused resume only echoes the user's
    // own request, with the data directory named, not spelled out.
    let root = home.root().display().to_string();
    let fail = |code, failure: WorkerError| {
        let (message, failure) = match code {
            ErrorCode::Setup => {
                let reference = log_reference();
                let message = format!(
                    "agent `{agent}` could not be started; an administrator can find why in the server log under reference {reference}"
                );
                let failure = WorkerError::Referenced {
                    reference,
                    source: Box::new(failure),
                };
                (message, failure)
            }
            _ => {
                let message = failure.report().replace(&root, "$BULWARK_HOME");
                (message, failure)
            }
        };
        let _ = ch.events.send(Event::Error {
            code,
            message: clamp(&message, MAX_SHORT_CHARS),
            fatal: true,
        });
        Err(failure)
    };
    // Started for one user and agent (`--user`, `--agent`) and confined to
    // their data before this runtime existed: it serves nobody else.
    if user != expected.user || agent != expected.agent {
        return fail(ErrorCode::Forbidden, WorkerError::WrongConversation);
    }
    if let Some(refusal) = &expected.refusal {
        return fail(ErrorCode::Setup, WorkerError::Unconfined(refusal.clone()));
    }
    // Resumed before the session is opened (which asks again and gets the
    // same answer)
    // so that the answer is `Forbidden` and does not say whose session it
    // is, or whether it exists.
    if let Some(id) = &resume
        && let Err(err) = store.resume(id)
    {
        return match err {
            StoreError::NotFound(_) => fail(
                ErrorCode::Forbidden,
                WorkerError::NoSession {
                    id: id.clone(),
                    user: user.clone(),
                    agent: agent.clone(),
                },
            ),
            // Another process runs the session: the server's message
            // says which and until when.
            StoreError::Conflict(why) => fail(ErrorCode::Busy, WorkerError::Busy(why)),
            other => fail(ErrorCode::Setup, WorkerError::Store(other)),
        };
    }
    if tools_only {
        let shutdown = Shutdown::listen().map_err(WorkerError::Signals)?;
        let host = match open_host(home, &agent, &user, &store) {
            Ok(host) => host,
            Err(failure) => return fail(ErrorCode::Setup, failure),
        };
        let Some(session_id) = store.session() else {
            let failure = WorkerError::Open(OpenError::Failed(
                "the tools-only session was opened without a stored session".into(),
            ));
            return fail(ErrorCode::Setup, failure);
        };
        let _ = ch.events.send(Event::Ready {
            session_id,
            history_messages: 0,
        });
        serve_tools(host, &mut ch, &approvals, &shutdown).await;
        return Ok(());
    }
    let turn_stop = approvals.clone();
    let mut p = match open(home, &agent, &user, resume, &store, approvals) {
        Ok(p) => p,
        Err(failure) => return fail(ErrorCode::Setup, failure),
    };
    let _ = ch.events.send(Event::Ready {
        session_id: p.session.identity().id.clone(),
        history_messages: p.history.len() as u64,
    });
    loop {
        let message = tokio::select! {
            message = ch.messages.recv() => message,
            () = stopped(&ch.stop) => None,
            () = p.shutdown.requested() => None,
        };
        let Some((message_id, text)) = message else {
            break;
        };
        if let Some(refusal) = budget_refusal(home, &store, &p.session.identity().user) {
            let _ = ch.events.send(refusal);
            let _ = ch.events.send(Event::TurnEnded {
                message_id,
                end: TurnEnd::Stopped,
                text: String::new(),
                usage: Usage::default(),
            });
            continue;
        }
        if !run_turn(&mut p, &mut ch, &turn_stop, message_id, &text).await {
            break;
        }
    }
    Ok(())
}

/// Answers `ListTools` and `CallTool` until the worker stops. Calls run
/// one at a time; a call cut short by a stop ends the worker (its door
/// writes the call's record as cancelled).
async fn serve_tools(
    host: Arc<dyn bulwark_mcp::server::ToolHost>,
    ch: &mut Channels,
    approvals: &Arc<Approvals>,
    shutdown: &Shutdown,
) {
    loop {
        let job = tokio::select! {
            job = ch.tools.recv() => job,
            () = stopped(&ch.stop) => None,
            () = shutdown.requested() => None,
        };
        let Some(job) = job else { break };
        match job {
            ToolJob::List => {
                let tools = tool_infos(host.tools().await);
                let _ = ch.events.send(Event::Tools { tools });
            }
            ToolJob::Call {
                call_id,
                tool,
                arguments,
            } => {
                // A fresh token per call: the approvals of an earlier call
                // that was cut off do not leak into this one.
                approvals.begin_turn(CancellationToken::new());
                let asker: Arc<dyn bulwark_mcp::server::Approvals> = approvals.clone();
                let call = host.call(&tool, arguments, asker);
                let result = tokio::select! {
                    result = call => result,
                    () = stopped(&ch.stop) => break,
                    () = shutdown.requested() => break,
                };
                let _ = ch.events.send(Event::ToolCallDone {
                    call_id,
                    content: result_text(&result),
                    is_error: result.is_error,
                });
            }
        }
    }
}

/// The worker's open session, and the signals that end it.
struct Served {
    kernel: Kernel,
    session: Session,
    history: Vec<Message>,
    agent: AgentRuntime,
    /// Ctrl-C / SIGTERM, listened for from before the session opens.
    shutdown: Shutdown,
}

/// Opens the session through the kernel's factory: [`Origin::Worker`]
/// (the `[remote]` policy narrows it, it cannot spawn), records that go
/// to the server, approvals asked of the server.
fn open(
    home: &Home,
    agent: &str,
    user: &str,
    resume: Option<String>,
    store: &Arc<BrokerClient>,
    approver: Arc<dyn Approver>,
) -> Result<Served, WorkerError> {
    let shutdown = Shutdown::listen().map_err(WorkerError::Signals)?;
    let spec = SessionSpec {
        agent: AgentName::new(agent)
            .map_err(|e| WorkerError::Open(OpenError::Usage(e.to_string())))?,
        user: UserName::new(user)
            .map_err(|e| WorkerError::Open(OpenError::Usage(e.to_string())))?,
        origin: Origin::Worker,
        model: None,
        resume,
        tools_only: false,
    };
    let records = Arc::new(WorkerRecords::new(store.clone()));
    let front = FrontEnd {
        approver,
        records: Box::new(move |_| Ok(records as Arc<dyn SessionRecords>)),
        warn: Arc::new(|warning: &str| eprintln!("warning: {warning}")),
    };
    let OpenSession {
        kernel,
        session,
        history,
        agent,
        ..
    } = SessionFactory::new(home.clone())
        .open(spec, front)
        .map_err(WorkerError::Open)?;
    Ok(Served {
        kernel,
        session,
        history,
        agent,
        shutdown,
    })
}

/// Ctrl-C and SIGTERM, remembered: once [`listen`](Self::listen) returns,
/// the handlers are installed, so a signal that arrives while nothing
/// waits is not lost.
struct Shutdown {
    requested: watch::Receiver<bool>,
}

impl Shutdown {
    /// Installs the handlers now (on the current tokio runtime).
    fn listen() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let (tx, requested) = watch::channel(false);
        tokio::spawn(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            let _ = tx.send(true);
        });
        Ok(Self { requested })
    }

    /// Resolves once a signal has arrived (immediately if one already did).
    async fn requested(&self) {
        stopped(&self.requested).await;
    }
}

/// The window of `tokens_per_day`.
const BUDGET_WINDOW_MS: i64 = 24 * 60 * 60 * 1000;

/// An error event when the user may not start a turn: their
/// `tokens_per_day` (read from the current access.toml, so a change applies
/// to the next turn) is spent, or the budget cannot be checked (fail
/// closed).
fn budget_refusal(home: &Home, store: &BrokerClient, user: &str) -> Option<Event> {
    let refuse = |code, message: String| {
        Some(Event::Error {
            code,
            message: clamp(&message, MAX_SHORT_CHARS),
            fatal: false,
        })
    };
    let access = match home.load_access() {
        Ok(access) => access,
        Err(err) => {
            tracing::error!(error = %err, "access.toml unreadable; turn refused");
            return refuse(
                ErrorCode::Internal,
                "the server cannot read its access settings; try again later".into(),
            );
        }
    };
    let limit = access
        .users
        .get(user)
        .and_then(|u| u.limits.as_ref())
        .and_then(|l| l.tokens_per_day)?;
    let since = now_ms().saturating_sub(BUDGET_WINDOW_MS);
    match store.tokens_since(since) {
        Ok(used) if used < limit => None,
        Ok(used) => refuse(
            ErrorCode::BudgetExhausted,
            format!(
                "your token budget is spent: {used} of {limit} tokens in the last 24 hours; \
                 it frees up as older use ages out, or an administrator can raise \
                 `tokens_per_day` in access.toml"
            ),
        ),
        Err(err) => {
            tracing::error!(error = %err, "token usage unreadable; turn refused");
            refuse(
                ErrorCode::Internal,
                "the server cannot check your token budget; try again later".into(),
            )
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Runs one turn; `false` when the worker must stop (shutdown, signal).
async fn run_turn(
    p: &mut Served,
    ch: &mut Channels,
    approvals: &Approvals,
    message_id: u64,
    text: &str,
) -> bool {
    // An interrupt that arrived between turns was meant for an earlier one.
    while ch.interrupts.try_recv().is_ok() {}
    let mut observer = EventObserver {
        message_id,
        events: ch.events.clone(),
        calls: 0,
    };
    let interrupt = CancellationToken::new();
    approvals.begin_turn(interrupt.clone());
    let mut keep_going = true;
    // An interrupt asks the kernel to stop at its next step boundary (and
    // denies any approval the turn waits for), so the turn ends with a
    // whole history. Shutdown and stop drop the turn where it is: the
    // process is ending, and the next start repairs what was cut.
    let turn = p.kernel.run_turn_interruptible(
        &mut p.session,
        &mut p.history,
        &p.agent,
        text,
        &mut observer,
        &interrupt,
    );
    tokio::pin!(turn);
    let turn = loop {
        tokio::select! {
            turn = &mut turn => break Some(turn),
            Some(()) = ch.interrupts.recv() => interrupt.cancel(),
            () = stopped(&ch.stop) => { keep_going = false; break None }
            () = p.shutdown.requested() => { keep_going = false; break None }
        }
    };
    let (end, text, usage) = match turn {
        Some(Ok(outcome)) => {
            let end = match outcome.end {
                bulwark_kernel::TurnEnd::Completed => TurnEnd::Completed,
                bulwark_kernel::TurnEnd::MaxTurns => TurnEnd::MaxTurns,
                bulwark_kernel::TurnEnd::Stopped(_) => TurnEnd::Stopped,
                bulwark_kernel::TurnEnd::Interrupted => TurnEnd::Interrupted,
                bulwark_kernel::TurnEnd::Unfunded(why) => {
                    // The model call was not made; the client is told why.
                    let _ = ch.events.send(Event::Error {
                        code: ErrorCode::BudgetExhausted,
                        message: clamp(&why, MAX_SHORT_CHARS),
                        fatal: false,
                    });
                    TurnEnd::Stopped
                }
            };
            let usage = Usage {
                input_tokens: outcome.usage.input_tokens,
                output_tokens: outcome.usage.output_tokens,
            };
            (end, clamp(&outcome.text, MAX_TEXT_CHARS), usage)
        }
        Some(Err(err)) => {
            let code = match err {
                KernelError::Llm(_) => ErrorCode::Model,
                _ => ErrorCode::Internal,
            };
            let _ = ch.events.send(Event::Error {
                code,
                message: clamp(&err.to_string(), MAX_SHORT_CHARS),
                fatal: false,
            });
            (TurnEnd::Stopped, String::new(), Usage::default())
        }
        None => (TurnEnd::Interrupted, String::new(), Usage::default()),
    };
    let _ = ch.events.send(Event::TurnEnded {
        message_id,
        end,
        text,
        usage,
    });
    keep_going
}

/// Turns the kernel's progress into events. Tool calls get ids of their
/// own (`c1`, `c2`, ...): the kernel dispatches them one after another, so
/// each result belongs to the call before it.
struct EventObserver {
    message_id: u64,
    events: Events,
    calls: u64,
}

impl EventObserver {
    fn call_id(&self) -> String {
        format!("c{}", self.calls)
    }
}

impl TurnObserver for EventObserver {
    fn text_delta(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let _ = self.events.send(Event::TextDelta {
            message_id: self.message_id,
            text: clamp(text, MAX_TEXT_CHARS),
        });
    }

    fn tool_call(&mut self, name: &str, input: &Value) {
        self.calls += 1;
        let tool = clamp(name, MAX_ID_CHARS);
        let summary = format!("{tool} {}", preview(&input.to_string(), CALL_SUMMARY_CHARS));
        let _ = self.events.send(Event::ToolCall {
            message_id: self.message_id,
            call_id: self.call_id(),
            tool,
            summary: clamp(&summary, MAX_SHORT_CHARS),
        });
    }

    /// The decision and the audited reason class, never the output.
    fn tool_result(&mut self, _name: &str, result: &DispatchResult) {
        let decision = match result.decision {
            Decision::Denied => ToolDecision::Denied,
            Decision::Failed => ToolDecision::Failed,
            Decision::Allowed | Decision::Approved | Decision::Warned => ToolDecision::Allowed,
        };
        let reason = preview(result.reason.as_str(), 64);
        let summary = match reason.as_str() {
            "" | "ok" => result.decision.as_str().to_owned(),
            reason => format!("{} ({reason})", result.decision.as_str()),
        };
        let _ = self.events.send(Event::ToolResult {
            message_id: self.message_id,
            call_id: self.call_id(),
            decision,
            summary,
        });
    }
}

/// Asks the server: sends `ApprovalRequest` and waits for the matching
/// `ToolApproval`. Denies on timeout, on shutdown, and when the turn is
/// dropped (interrupt) while it waits.
struct Approvals {
    events: Events,
    pending: Mutex<HashMap<String, oneshot::Sender<bool>>>,
    next: AtomicU64,
    stop: watch::Receiver<bool>,
    /// The running turn's interrupt: an interrupted turn's approvals are
    /// denied, whether asked before or after the interrupt arrived.
    turn: Mutex<CancellationToken>,
}

impl Approvals {
    fn begin_turn(&self, interrupt: CancellationToken) {
        *self.turn.lock().unwrap_or_else(|p| p.into_inner()) = interrupt;
    }

    fn turn(&self) -> CancellationToken {
        self.turn.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<bool>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Delivers an answer; `false` when no such request is waiting.
    fn answer(&self, request_id: &str, approve: bool) -> bool {
        match self.pending().remove(request_id) {
            Some(waiter) => waiter.send(approve).is_ok(),
            None => false,
        }
    }
}

/// Forgets a request when its `ask` ends, however it ends.
struct Waiting<'a> {
    approvals: &'a Approvals,
    id: String,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.approvals.pending().remove(&self.id);
    }
}

#[async_trait::async_trait]
impl Approver for Approvals {
    async fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let approved = self
            .ask_server(
                &request.tool,
                &request.operation,
                &request.args_preview,
                &request.why,
            )
            .await;
        if approved {
            ApprovalAnswer::AllowOnce
        } else {
            ApprovalAnswer::Deny
        }
    }
}

/// A tools-only session's questions take the same way: the server puts
/// them to the MCP client of the running call.
#[async_trait::async_trait]
impl bulwark_mcp::server::Approvals for Approvals {
    async fn ask(
        &self,
        question: bulwark_mcp::server::ApprovalQuestion,
    ) -> bulwark_mcp::server::ApprovalReply {
        // The question names the tool only; the door audits the operation.
        if self
            .ask_server(&question.tool, "", &question.args_preview, &question.why)
            .await
        {
            bulwark_mcp::server::ApprovalReply::Approve
        } else {
            bulwark_mcp::server::ApprovalReply::Deny
        }
    }
}

impl Approvals {
    /// Sends an `ApprovalRequest` and waits for its answer: `false` on a
    /// no, a timeout, a stop or an interrupt.
    async fn ask_server(&self, tool: &str, operation: &str, summary: &str, why: &str) -> bool {
        let id = format!("r{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id.clone(), tx);
        let _waiting = Waiting {
            approvals: self,
            id: id.clone(),
        };
        let sent = self.events.send(Event::ApprovalRequest {
            request_id: id,
            tool: clamp(tool, MAX_ID_CHARS),
            operation: clamp(operation, MAX_ID_CHARS),
            summary: clamp(summary, MAX_SHORT_CHARS),
            why: clamp(why, MAX_SHORT_CHARS),
        });
        if sent.is_err() {
            return false;
        }
        let interrupt = self.turn();
        if interrupt.is_cancelled() {
            return false;
        }
        tokio::select! {
            answer = rx => answer.unwrap_or(false),
            () = interrupt.cancelled() => false,
            () = tokio::time::sleep(APPROVAL_TIMEOUT) => false,
            () = stopped(&self.stop) => false,
        }
    }
}

/// Where the reader sends each command.
struct Router {
    events: Events,
    start: Option<oneshot::Sender<Command>>,
    messages: mpsc::Sender<(u64, String)>,
    interrupts: mpsc::Sender<()>,
    tools: mpsc::Sender<ToolJob>,
    /// `StartTools` began this worker: it takes tool jobs, not messages.
    tools_only: bool,
    approvals: Arc<Approvals>,
    store: Arc<BrokerClient>,
    stop: watch::Sender<bool>,
}

impl Router {
    fn refuse(&self, code: ErrorCode, message: String) {
        let _ = self.events.send(Event::Error {
            code,
            message: clamp(&message, MAX_SHORT_CHARS),
            fatal: false,
        });
    }
}

/// Reads commands until `Shutdown`, the end of stdin (the parent is gone)
/// or an unreadable frame; then tells everything to stop.
async fn read_commands(input: Receiver, mut router: Router) {
    let mut frames = FrameReader::<_, Command>::new(input);
    while let Some(frame) = frames.next().await {
        let command = match frame {
            Ok(command) => command,
            Err(err) => {
                let _ = router.events.send(Event::Error {
                    code: ErrorCode::BadCommand,
                    message: format!("unreadable command: {err}"),
                    fatal: true,
                });
                break;
            }
        };
        match command {
            Command::Start { .. } | Command::StartTools { .. } => match router.start.take() {
                Some(start) => {
                    router.tools_only = matches!(command, Command::StartTools { .. });
                    let _ = start.send(command);
                }
                None => router.refuse(ErrorCode::BadCommand, "already started".into()),
            },
            Command::ListTools | Command::CallTool { .. } => {
                if router.start.is_some() || !router.tools_only {
                    router.refuse(
                        ErrorCode::BadCommand,
                        "tool commands need a tools-only worker (StartTools)".into(),
                    );
                    continue;
                }
                let job = match command {
                    Command::CallTool {
                        call_id,
                        tool,
                        arguments,
                    } => ToolJob::Call {
                        call_id,
                        tool,
                        arguments,
                    },
                    _ => ToolJob::List,
                };
                if router.tools.try_send(job).is_err() {
                    router.refuse(ErrorCode::Busy, "too many tool commands waiting".into());
                }
            }
            Command::UserMessage { message_id, text } => {
                if router.tools_only {
                    let text = "this worker serves tool calls only (StartTools)".into();
                    router.refuse(ErrorCode::BadCommand, text);
                } else if router.start.is_some() {
                    router.refuse(ErrorCode::BadCommand, "no Start yet".into());
                } else if router.messages.try_send((message_id, text)).is_err() {
                    router.refuse(
                        ErrorCode::Busy,
                        format!("message {message_id} refused: too many waiting"),
                    );
                }
            }
            Command::Interrupt => {
                let _ = router.interrupts.try_send(());
            }
            Command::ToolApproval {
                request_id,
                approve,
            } => {
                if !router.approvals.answer(&request_id, approve) {
                    let text = format!("no approval `{request_id}` is waiting");
                    router.refuse(ErrorCode::BadCommand, text);
                }
            }
            Command::Shutdown => break,
            Command::StoreReply { request_id, reply } => {
                if !router.store.deliver(request_id, reply) {
                    tracing::warn!(request_id, "a store reply nobody waits for was dropped");
                }
            }
        }
    }
    router.store.close();
    let _ = router.stop.send(true);
}

/// Writes events as they come; a burst already queued leaves in one flush.
async fn write_events(output: Sender, mut events: mpsc::UnboundedReceiver<Event>) {
    let mut frames = FrameWriter::<_, Event>::new(output);
    while let Some(event) = events.recv().await {
        let mut next = Some(event);
        while let Some(event) = next {
            match frames.feed(event).await {
                Ok(()) => {}
                // Refused before writing: the stream is intact; say so instead.
                Err(bulwark_protocol::FrameError::Bound(err)) => {
                    tracing::warn!("an event was not sent: {err}");
                }
                Err(_) => return,
            }
            next = events.try_recv().ok();
        }
        if frames.flush().await.is_err() {
            return;
        }
    }
}

/// At most `max` characters of `text`.
fn clamp(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    text.chars().take(max).collect()
}

/// `text` on one line, cut to `max` characters with an ellipsis.
fn preview(text: &str, max: usize) -> String {
    let one_line = text.replace(['\n', '\r'], " ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let cut: String = one_line.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// A short random reference that ties a message a remote user sees to the
/// full error in the server log.
fn log_reference() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    id[..12].to_owned()
}
