//! One task per open conversation: moves commands in and events out,
//! enforces the FIFO turn lock, the event sequence and the idle timeout,
//! and ends the worker (cleanly, by kill, or as lost).

use crate::workers::broker::{Broker, BrokerScope};
use crate::workers::child::WorkerProcess;
use crate::workers::handle::{Control, EndReason, HandleParts};
use crate::workers::relay::relay;
use crate::workers::supervisor::{Counters, Slot, SupervisorConfig};
use crate::workers::turns::{Admit, TurnLock};
use bulwark_protocol::frame::{CommandCodec, EventCodec};
use bulwark_protocol::protocol::{Command, ErrorCode, Event, MAX_SHORT_CHARS};
use futures_util::{SinkExt, StreamExt};
use std::time::Duration;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, FramedWrite};

/// How long a worker whose output closed may take to finish exiting
/// before it is killed (to report its real exit status).
const EXIT_WAIT: Duration = Duration::from_secs(1);
/// How long the final `WorkerLost` event may wait for room in the channel.
const LAST_EVENT_WAIT: Duration = Duration::from_secs(5);
/// `ListTools` commands a tools-only worker may have unanswered.
const MAX_LISTS_ASKED: u32 = 8;

/// Writes commands to a worker's stdin until the channel or the pipe closes.
pub(crate) async fn write_commands(stdin: ChildStdin, mut commands: mpsc::Receiver<Command>) {
    let mut sink = FramedWrite::new(stdin, CommandCodec::new());
    while let Some(command) = commands.recv().await {
        if sink.send(command).await.is_err() {
            break;
        }
    }
}

/// Everything a pump owns.
pub(crate) struct Parts<'a> {
    pub(crate) scope: BrokerScope,
    pub(crate) process: WorkerProcess,
    pub(crate) events_in: FramedRead<ChildStdout, EventCodec>,
    pub(crate) to_worker: mpsc::Sender<Command>,
    pub(crate) from_server: mpsc::Receiver<Command>,
    pub(crate) to_server: mpsc::Sender<Event>,
    pub(crate) handle: HandleParts,
    pub(crate) slot: Slot,
    pub(crate) config: &'a SupervisorConfig,
}

/// How the loop ended.
enum Ending {
    /// Ask the worker to exit; kill it after the grace period.
    Clean(EndReason),
    /// Kill it now.
    Kill(EndReason),
    /// It died or misbehaved: kill it, tell the conversation.
    Lost { why: String, violation: bool },
}

type Step = Result<(), Ending>;

pub(crate) struct Pump {
    /// Whose conversation this is, for the store broker.
    scope: BrokerScope,
    broker: Option<Broker>,
    process: WorkerProcess,
    events_in: FramedRead<ChildStdout, EventCodec>,
    to_worker: mpsc::Sender<Command>,
    from_server: mpsc::Receiver<Command>,
    to_server: mpsc::Sender<Event>,
    handle: HandleParts,
    slot: Slot,
    lock: TurnLock,
    idle: Duration,
    grace: Duration,
    last_activity: Instant,
    /// The worker relayed a fatal `Error` (it is exiting on its own).
    announced_fatal: bool,
    /// Tools-only: the call the worker is running (one at a time).
    tool_call: Option<String>,
    /// Tools-only: `ListTools` commands not yet answered.
    lists_asked: u32,
}

fn lost(why: &str) -> Ending {
    Ending::Lost {
        why: why.to_owned(),
        violation: true,
    }
}

impl Pump {
    pub(crate) fn new(parts: Parts<'_>) -> Self {
        Self {
            scope: parts.scope,
            broker: parts.config.broker.clone(),
            process: parts.process,
            events_in: parts.events_in,
            to_worker: parts.to_worker,
            from_server: parts.from_server,
            to_server: parts.to_server,
            handle: parts.handle,
            slot: parts.slot,
            lock: TurnLock::new(parts.config.turn_wait, parts.config.max_queued),
            idle: parts.config.idle_timeout,
            grace: parts.config.shutdown_grace,
            last_activity: Instant::now(),
            announced_fatal: false,
            tool_call: None,
            lists_asked: 0,
        }
    }

    pub(crate) async fn run(mut self) {
        let ending = loop {
            let deadline = self.next_deadline();
            let step = tokio::select! {
                control = self.handle.control.recv() => Err(on_control(control)),
                command = self.from_server.recv() => match command {
                    Some(command) => self.on_command(command).await,
                    None => Err(Ending::Clean(EndReason::Abandoned)),
                },
                frame = self.events_in.next() => match frame {
                    Some(Ok(event)) => self.on_event(event).await,
                    Some(Err(err)) => Err(lost(&format!("the worker broke the protocol: {err}"))),
                    None => Err(Ending::Lost { why: "the worker exited".into(), violation: false }),
                },
                () = sleep_until(deadline) => self.on_deadline().await,
            };
            if let Err(ending) = step {
                break ending;
            }
        };
        self.finish(ending).await;
    }

    /// No turn and no tool call running, nothing waiting.
    fn is_idle(&self) -> bool {
        self.lock.is_idle() && self.tool_call.is_none()
    }

    fn next_deadline(&self) -> Option<Instant> {
        let idle = self.is_idle().then(|| self.last_activity + self.idle);
        match (self.lock.next_deadline(), idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    async fn on_deadline(&mut self) -> Step {
        let now = Instant::now();
        for id in self.lock.expire(now) {
            let text = self.lock.timed_out_text(id);
            self.deliver(error(ErrorCode::Busy, text)).await?;
        }
        if self.is_idle() && now >= self.last_activity + self.idle {
            Counters::bump(&self.slot.counters().idle_closed);
            return Err(Ending::Clean(EndReason::Idle));
        }
        Ok(())
    }

    async fn on_command(&mut self, command: Command) -> Step {
        self.last_activity = Instant::now();
        if let Err(err) = command.validate() {
            let text = format!("command refused: {err}");
            return self.deliver(error(ErrorCode::BadCommand, text)).await;
        }
        match command {
            Command::Start { .. } | Command::StartTools { .. } => {
                let text = "the conversation has started already".to_owned();
                self.deliver(error(ErrorCode::BadCommand, text)).await
            }
            Command::UserMessage { message_id, text } => {
                match self.lock.submit(Instant::now(), message_id, text) {
                    Admit::Start(command) => self.forward(command),
                    Admit::Queued => Ok(()),
                    Admit::Busy(why) => self.deliver(error(ErrorCode::Busy, why)).await,
                }
            }
            Command::Shutdown => Err(Ending::Clean(EndReason::Shutdown)),
            // Store replies are the supervisor's alone to send.
            Command::StoreReply { .. } => {
                let text = "store replies come from the server only".to_owned();
                self.deliver(error(ErrorCode::BadCommand, text)).await
            }
            Command::ListTools => {
                if self.lists_asked >= MAX_LISTS_ASKED {
                    let text = "too many tool lists asked for at once".to_owned();
                    return self.deliver(error(ErrorCode::Busy, text)).await;
                }
                self.lists_asked += 1;
                self.forward(Command::ListTools)
            }
            Command::CallTool {
                call_id,
                tool,
                arguments,
            } => {
                if self.tool_call.is_some() || self.lock.running().is_some() {
                    let text = format!("tool call {call_id} refused: another call is running");
                    return self.deliver(error(ErrorCode::Busy, text)).await;
                }
                self.tool_call = Some(call_id.clone());
                self.forward(Command::CallTool {
                    call_id,
                    tool,
                    arguments,
                })
            }
            other @ (Command::Interrupt | Command::ToolApproval { .. }) => self.forward(other),
        }
    }

    /// Queues a command for the worker without waiting: a worker that
    /// stops reading its input is treated as lost rather than allowed to
    /// stall this loop.
    fn forward(&mut self, command: Command) -> Step {
        match self.to_worker.try_send(command) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                Err(lost("the worker stopped reading its commands"))
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Ending::Lost {
                why: "the worker's input pipe broke".into(),
                violation: false,
            }),
        }
    }

    async fn on_event(&mut self, event: Event) -> Step {
        if let Event::Store {
            request_id,
            request,
        } = event
        {
            let answered = crate::workers::broker::answer(
                self.broker.as_ref(),
                &mut self.scope,
                request_id,
                request,
                &self.to_worker,
            )
            .await;
            return answered.map_err(|why| lost(&why));
        }
        let Some(event) = relay(&event) else {
            return Err(lost("the worker sent an event it may not send"));
        };
        let running = self.lock.running();
        match &event {
            Event::Ready { .. } => return Err(lost("the worker sent Ready twice")),
            Event::TextDelta { message_id, .. }
            | Event::ToolCall { message_id, .. }
            | Event::ToolResult { message_id, .. }
                if running != Some(*message_id) =>
            {
                return Err(lost(
                    "the worker sent an event for a message that is not running",
                ));
            }
            Event::ApprovalRequest { .. } if running.is_none() && self.tool_call.is_none() => {
                return Err(lost("the worker asked for approval outside a turn"));
            }
            Event::Tools { .. } => {
                if self.lists_asked == 0 {
                    return Err(lost("the worker listed tools nobody asked for"));
                }
                self.lists_asked -= 1;
            }
            Event::ToolCallDone { call_id, .. } => {
                if self.tool_call.as_deref() != Some(call_id.as_str()) {
                    return Err(lost("the worker ended a tool call that was not running"));
                }
                self.tool_call = None;
                self.last_activity = Instant::now();
            }
            Event::TurnEnded { message_id, .. } => {
                let now = Instant::now();
                self.last_activity = now;
                let Ok(finished) = self.lock.finish(now, *message_id) else {
                    return Err(lost("the worker ended a turn that was not running"));
                };
                self.deliver(event).await?;
                for id in finished.expired {
                    let text = self.lock.timed_out_text(id);
                    self.deliver(error(ErrorCode::Busy, text)).await?;
                }
                return match finished.start {
                    Some(next) => self.forward(next),
                    None => Ok(()),
                };
            }
            Event::Error { fatal: true, .. } => self.announced_fatal = true,
            _ => {}
        }
        self.deliver(event).await
    }

    /// Hands an event to the server, unless the worker is being ended
    /// meanwhile (a slow server must not make a kill wait).
    async fn deliver(&mut self, event: Event) -> Step {
        tokio::select! {
            sent = self.to_server.send(event) => match sent {
                Ok(()) => Ok(()),
                Err(_) => Err(Ending::Clean(EndReason::Abandoned)),
            },
            control = self.handle.control.recv() => Err(on_control(control)),
        }
    }

    async fn finish(self, ending: Ending) {
        let Pump {
            scope,
            broker,
            mut process,
            mut events_in,
            to_worker,
            from_server,
            to_server,
            handle,
            slot,
            grace,
            announced_fatal,
            ..
        } = self;
        // Commands sent from now on fail at once instead of piling up.
        drop(from_server);
        let reason = match ending {
            Ending::Clean(reason) => {
                let _ = to_worker.try_send(Command::Shutdown);
                // The writer delivers what is queued, then closes the
                // worker's stdin: an end of input means "exit" too.
                drop(to_worker);
                let deadline = Instant::now() + grace;
                // Let it finish writing (its events are no longer needed).
                let drain = async { while events_in.next().await.is_some() {} };
                let _ = tokio::time::timeout_at(deadline, drain).await;
                process
                    .end(deadline.saturating_duration_since(Instant::now()))
                    .await;
                reason
            }
            Ending::Kill(reason) => {
                process.kill().await;
                reason
            }
            Ending::Lost { why, violation } => {
                let status = if violation {
                    process.kill().await
                } else {
                    process.end(EXIT_WAIT).await
                };
                if announced_fatal && !violation {
                    EndReason::Exited(status)
                } else {
                    let counters = slot.counters();
                    Counters::bump(&counters.crashed);
                    if violation {
                        Counters::bump(&counters.protocol_violations);
                    }
                    let message = clamp(format!("{why} ({status})"));
                    let lost = Event::Error {
                        code: ErrorCode::WorkerLost,
                        message: message.clone(),
                        fatal: true,
                    };
                    let _ = to_server.send_timeout(lost, LAST_EVENT_WAIT).await;
                    EndReason::Lost(message)
                }
            }
        };
        tracing::debug!(worker = slot.id(), ?reason, "worker ended");
        // The worker is gone: nothing can race this with a new request.
        crate::workers::broker::end_scope(broker.as_ref(), scope).await;
        // Close the events channel, release the cap, then announce the end,
        // so a waiter that re-opens at once finds the place free.
        drop(to_server);
        drop(slot);
        let _ = handle.ended.send(Some(reason));
    }
}

fn on_control(control: Option<Control>) -> Ending {
    match control {
        Some(Control::Kill(reason)) => Ending::Kill(reason),
        Some(Control::Shutdown(reason)) => Ending::Clean(reason),
        // Every handle is gone, so nobody can reach this conversation.
        None => Ending::Clean(EndReason::Abandoned),
    }
}

fn error(code: ErrorCode, message: String) -> Event {
    Event::Error {
        code,
        message: clamp(message),
        fatal: false,
    }
}

fn clamp(text: String) -> String {
    if text.chars().count() <= MAX_SHORT_CHARS {
        return text;
    }
    text.chars().take(MAX_SHORT_CHARS).collect()
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
