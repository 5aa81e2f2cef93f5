//! `bulwark worker`: one conversation in its own process, for `bulwark
//! serve`. Commands arrive as frames on stdin, events leave as frames on
//! stdout (see the `bulwark-worker` crate); nothing else is ever written
//! to stdout, which is moved off fd 1 before anything runs.
//!
//! The worker trusts its parent: only the supervisor holds its stdin, and
//! it authenticated the user named in `Start`. The session is set up
//! exactly as `bulwark run` sets one up (`prepare`), with an approver that
//! asks the server instead of a terminal.

use crate::cmd_run::{Prepared, prepare};
use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use bulwark_audit::Decision;
use bulwark_kernel::{
    ApprovalAnswer, ApprovalRequest, Approver, DispatchResult, Home, KernelError, TurnObserver,
};
use bulwark_store::Store;
use bulwark_worker::io::{FrameReader, FrameWriter};
use bulwark_worker::protocol::{
    Command, ErrorCode, Event, MAX_ID_CHARS, MAX_SHORT_CHARS, MAX_TEXT_CHARS, ToolDecision,
    TurnEnd, Usage,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// An approval nobody answers is denied after this long.
const APPROVAL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Characters of tool arguments shown in a `ToolCall` summary.
const CALL_SUMMARY_CHARS: usize = 200;
/// How long queued events may take to reach the pipe when the worker ends.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

type Events = mpsc::UnboundedSender<Event>;

pub async fn worker(home: &Home) -> Result<(), Failure> {
    // main() hardened the process already; again here so worker mode never
    // depends on the order of main's start-up (not dumpable, no core).
    bulwark_sandbox::harden_process().map_err(|e| usage_error(anyhow!(e)))?;
    let pipes = bulwark_worker::stdio::take_ipc().context("cannot take the IPC pipes")?;
    let (events, events_rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_events(pipes.events, events_rx));
    let (stop_tx, stop) = watch::channel(false);
    let approvals = Arc::new(Approvals {
        events: events.clone(),
        pending: Mutex::new(HashMap::new()),
        next: AtomicU64::new(0),
        stop: stop.clone(),
    });
    let (start_tx, start) = oneshot::channel();
    let (messages_tx, messages) = mpsc::channel(8);
    let (interrupts_tx, interrupts) = mpsc::channel(4);
    let reader = tokio::spawn(read_commands(
        pipes.commands,
        Router {
            events: events.clone(),
            start: Some(start_tx),
            messages: messages_tx,
            interrupts: interrupts_tx,
            approvals: approvals.clone(),
            stop: stop_tx,
        },
    ));
    let channels = Channels {
        events,
        start,
        messages,
        interrupts,
        stop,
    };
    let result = converse(home, channels, approvals).await;
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
    stop: watch::Receiver<bool>,
}

async fn stopped(stop: &watch::Receiver<bool>) {
    let mut stop = stop.clone();
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn converse(home: &Home, mut ch: Channels, approvals: Arc<Approvals>) -> Result<(), Failure> {
    let start = tokio::select! {
        start = &mut ch.start => start.ok(),
        () = stopped(&ch.stop) => None,
    };
    let Some(Command::Start {
        user,
        agent,
        resume,
    }) = start
    else {
        return Ok(());
    };
    // The message goes to a remote user: the server's data directory is
    // named, not spelled out (the full error is on stderr, in the log).
    let root = home.root().display().to_string();
    let fail = |code, failure: Failure| {
        let message = format!("{:#}", failure.error).replace(&root, "$BULWARK_HOME");
        let message = clamp(&message, MAX_SHORT_CHARS);
        let _ = ch.events.send(Event::Error {
            code,
            message,
            fatal: true,
        });
        Err(failure)
    };
    if let Some(id) = &resume
        && let Err(failure) = check_owner(home, id, &user, &agent)
    {
        return fail(ErrorCode::Forbidden, failure);
    }
    let mut p = match prepare(home, &agent, &user, None, resume.as_deref(), approvals) {
        Ok(p) => p,
        Err(failure) => return fail(ErrorCode::Setup, failure),
    };
    let _ = ch.events.send(Event::Ready {
        session_id: p.session.identity.id.clone(),
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
        if !run_turn(&mut p, &mut ch, message_id, &text).await {
            break;
        }
    }
    p.checkpoints.finish();
    Ok(())
}

/// A resumed session must be this user's and this agent's. Checked before
/// `prepare` (which checks again) so that the answer is `Forbidden` and
/// does not say whose session it is, or whether it exists.
fn check_owner(home: &Home, id: &str, user: &str, agent: &str) -> Result<(), Failure> {
    let store = Store::open(&home.db_path()).context("cannot open the session store")?;
    let row = store.session(id)?;
    if row.is_some_and(|row| row.user == user && row.agent == agent) {
        return Ok(());
    }
    Err(usage_error(anyhow!(
        "no session `{id}` of user `{user}` with agent `{agent}`"
    )))
}

/// Runs one turn; `false` when the worker must stop (shutdown, signal).
async fn run_turn(p: &mut Prepared, ch: &mut Channels, message_id: u64, text: &str) -> bool {
    // An interrupt that arrived between turns was meant for an earlier one.
    while ch.interrupts.try_recv().is_ok() {}
    let mut observer = EventObserver {
        message_id,
        events: ch.events.clone(),
        calls: 0,
    };
    let mut keep_going = true;
    // Dropping the turn future stops it where it is (as Ctrl-C does in
    // `chat`): every message stored so far stays, and the next turn's
    // history repair closes a tool call left without its result.
    let turn = tokio::select! {
        turn = p.kernel.run_turn(&mut p.session, &mut p.history, &p.agent, text, &mut observer) => Some(turn),
        Some(()) = ch.interrupts.recv() => None,
        () = stopped(&ch.stop) => { keep_going = false; None }
        () = p.shutdown.requested() => { keep_going = false; None }
    };
    let (end, text, usage) = match turn {
        Some(Ok(outcome)) => {
            let end = match outcome.end {
                bulwark_kernel::TurnEnd::Completed => TurnEnd::Completed,
                bulwark_kernel::TurnEnd::MaxTurns => TurnEnd::MaxTurns,
                bulwark_kernel::TurnEnd::Stopped(_) => TurnEnd::Stopped,
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
        let reason = preview(&result.reason, 64);
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
}

impl Approvals {
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
        let id = format!("r{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id.clone(), tx);
        let _waiting = Waiting {
            approvals: self,
            id: id.clone(),
        };
        let sent = self.events.send(Event::ApprovalRequest {
            request_id: id,
            tool: clamp(&request.tool, MAX_ID_CHARS),
            operation: clamp(&request.operation, MAX_ID_CHARS),
            summary: clamp(&request.args_preview, MAX_SHORT_CHARS),
            why: clamp(&request.why, MAX_SHORT_CHARS),
        });
        if sent.is_err() {
            return ApprovalAnswer::Deny;
        }
        let approved = tokio::select! {
            answer = rx => answer.unwrap_or(false),
            () = tokio::time::sleep(APPROVAL_TIMEOUT) => false,
            () = stopped(&self.stop) => false,
        };
        if approved {
            ApprovalAnswer::AllowOnce
        } else {
            ApprovalAnswer::Deny
        }
    }
}

/// Where the reader sends each command.
struct Router {
    events: Events,
    start: Option<oneshot::Sender<Command>>,
    messages: mpsc::Sender<(u64, String)>,
    interrupts: mpsc::Sender<()>,
    approvals: Arc<Approvals>,
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
async fn read_commands(input: tokio::fs::File, mut router: Router) {
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
            Command::Start { .. } => match router.start.take() {
                Some(start) => {
                    let _ = start.send(command);
                }
                None => router.refuse(ErrorCode::BadCommand, "already started".into()),
            },
            Command::UserMessage { message_id, text } => {
                if router.start.is_some() {
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
        }
    }
    let _ = router.stop.send(true);
}

async fn write_events(output: tokio::fs::File, mut events: mpsc::UnboundedReceiver<Event>) {
    let mut frames = FrameWriter::<_, Event>::new(output);
    while let Some(event) = events.recv().await {
        match frames.send(event).await {
            Ok(()) => {}
            // Refused before writing: the stream is intact; say so instead.
            Err(bulwark_worker::FrameError::Bound(err)) => {
                tracing::warn!("an event was not sent: {err}");
            }
            Err(_) => break,
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
