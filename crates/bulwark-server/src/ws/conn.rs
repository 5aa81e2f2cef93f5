//! One WebSocket connection.
//!
//! Every bad frame (bad JSON, unknown type or field, wrong type, too long,
//! too large, binary) is answered with an `error` frame and the connection
//! stays open; after [`Limits::ws_max_consecutive_errors`](crate::Limits)
//! bad frames in a row (default 50) it is closed (1008). The token is
//! re-verified against every new access.toml snapshot and before each frame
//! is handled; once it is no longer valid the connection is closed (1008).

use crate::app::AppState;
use crate::auth::{AuthSnapshot, Principal};
use crate::backend::{BackendError, OpenRequest};
use crate::limits::ConnectionSlot;
use crate::ws::frames::{ClientFrame, FrameError, ServerFrame, WsErrorCode};
use crate::ws::session::{LiveSession, Outbound};
use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use bulwark_protocol::protocol::Command;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use zeroize::Zeroizing;

/// A send that takes longer than this means the client stopped reading.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

struct Subscription {
    live: Arc<LiveSession>,
    rx: mpsc::Receiver<Outbound>,
}

struct Conn {
    state: AppState,
    socket: WebSocket,
    principal: Principal,
    token: Zeroizing<String>,
    ip: IpAddr,
    id: u64,
    auth: watch::Receiver<Arc<AuthSnapshot>>,
    verified_generation: u64,
    sub: Option<Subscription>,
    errors: u32,
}

/// Why the transport refused what the client sent, as far as the close
/// code goes (RFC 6455 §7.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReceiveFailure {
    /// A text message (or close reason) that is not UTF-8: 1007.
    InvalidUtf8,
    /// A message or frame over the transport limit: 1009.
    TooLarge,
    /// Anything else the client did wrong (an unmasked frame, reserved bits
    /// or opcodes, a fragmented or oversized control frame, a bad
    /// continuation, ...) or a broken connection: 1002.
    Protocol,
}

impl ReceiveFailure {
    /// axum's error is opaque; what it wraps is tungstenite's, whose
    /// messages name the kind: "UTF-8 encoding error: ..." and "Space limit
    /// exceeded: ..." (any other kind, a protocol error included, is
    /// treated as a protocol violation). The tests pin each case to its code.
    fn of(e: &axum::Error) -> Self {
        let text = e.to_string();
        if text.starts_with("UTF-8 encoding error") {
            ReceiveFailure::InvalidUtf8
        } else if text.starts_with("Space limit exceeded") {
            ReceiveFailure::TooLarge
        } else {
            ReceiveFailure::Protocol
        }
    }

    fn close(self) -> (u16, &'static str) {
        match self {
            ReceiveFailure::InvalidUtf8 => (close_code::INVALID, "text frame is not valid UTF-8"),
            ReceiveFailure::TooLarge => (close_code::SIZE, "message too large"),
            ReceiveFailure::Protocol => (close_code::PROTOCOL, "WebSocket protocol error"),
        }
    }
}

/// What the loop does next.
enum Flow {
    Continue,
    Close(u16, &'static str),
}

pub(super) async fn run(
    state: AppState,
    socket: WebSocket,
    principal: Principal,
    token: Zeroizing<String>,
    slot: ConnectionSlot,
    ip: IpAddr,
) {
    let auth = state.auth_watch().subscribe();
    let verified_generation = auth.borrow().generation;
    let id = state.hub().next_conn_id();
    let mut conn = Conn {
        state,
        socket,
        principal,
        token,
        ip,
        id,
        auth,
        verified_generation,
        sub: None,
        errors: 0,
    };
    let (code, reason) = conn.serve().await;
    if let Some(sub) = conn.sub.take() {
        sub.live.detach(conn.id);
    }
    let close = Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }));
    let _ = tokio::time::timeout(Duration::from_secs(1), conn.socket.send(close)).await;
    tracing::info!(user = %conn.principal.user, code, reason, "websocket closed");
    drop(slot);
}

async fn next_outbound(sub: &mut Option<Subscription>) -> Option<Outbound> {
    match sub {
        Some(s) => s.rx.recv().await,
        None => std::future::pending().await,
    }
}

impl Conn {
    async fn serve(&mut self) -> (u16, &'static str) {
        let idle = self.state.config().limits.ws_idle_timeout;
        let mut shutdown = self.state.shutdown_signal();
        let mut deadline = Instant::now() + idle;
        loop {
            let flow = tokio::select! {
                biased;
                _ = crate::app::stopped(&mut shutdown) => Flow::Close(close_code::AWAY, "server shutting down"),
                changed = self.auth.changed() => match changed {
                    Ok(()) => self.recheck().await,
                    Err(_) => Flow::Close(close_code::AWAY, "server shutting down"),
                },
                out = next_outbound(&mut self.sub) => self.outbound(out).await,
                msg = self.socket.recv() => match msg {
                    None => return (close_code::NORMAL, ""),
                    Some(Err(e)) => {
                        let failure = ReceiveFailure::of(&e);
                        tracing::debug!(error = %e, ?failure, "websocket receive failed");
                        let (code, reason) = failure.close();
                        Flow::Close(code, reason)
                    }
                    Some(Ok(msg)) => {
                        deadline = Instant::now() + idle;
                        self.incoming(msg).await
                    }
                },
                _ = tokio::time::sleep_until(deadline) => Flow::Close(close_code::NORMAL, "idle"),
            };
            if let Flow::Close(code, reason) = flow {
                return (code, reason);
            }
        }
    }

    async fn send_text(&mut self, text: &str) -> Flow {
        match tokio::time::timeout(SEND_TIMEOUT, self.socket.send(Message::text(text))).await {
            Ok(Ok(())) => Flow::Continue,
            _ => Flow::Close(close_code::AWAY, "send failed"),
        }
    }

    async fn send_error(&mut self, code: WsErrorCode, message: impl Into<String>) -> Flow {
        let frame = ServerFrame::error(&FrameError::new(code, message));
        self.send_text(&frame.to_json()).await
    }

    /// A new access snapshot: is this token (and the subscribed agent)
    /// still allowed?
    async fn recheck(&mut self) -> Flow {
        let snap = self.auth.borrow_and_update().clone();
        self.verified_generation = snap.generation;
        let still = snap
            .verify(&self.token)
            .ok()
            .filter(|p| p.user == self.principal.user);
        let Some(p) = still else {
            self.state.metrics().ws_disconnected_revoked();
            tracing::info!(user = %self.principal.user, token_id = %self.principal.token_id, "token no longer valid; closing websocket");
            let _ = self
                .send_error(
                    WsErrorCode::Unauthorized,
                    "your token was revoked or rotated; reconnect with a valid one",
                )
                .await;
            return Flow::Close(close_code::POLICY, "token no longer valid");
        };
        self.principal = p;
        if let Some(sub) = &self.sub {
            let agent = sub.live.agent.clone();
            if let Err(message) = self.state.agent_allowed(&self.principal.user, &agent).await {
                if let Some(sub) = self.sub.take() {
                    sub.live.detach(self.id);
                    sub.live.stop();
                }
                return self.send_error(WsErrorCode::Forbidden, message).await;
            }
        }
        Flow::Continue
    }

    async fn outbound(&mut self, out: Option<Outbound>) -> Flow {
        match out {
            Some(Outbound::Frame(json)) => self.send_text(&json).await,
            Some(Outbound::Moved) => {
                self.sub = None;
                self.send_error(
                    WsErrorCode::Moved,
                    "this session was subscribed on another connection",
                )
                .await
            }
            Some(Outbound::Ended) => {
                self.sub = None;
                Flow::Continue
            }
            None => {
                self.sub = None;
                self.send_error(
                    WsErrorCode::SubscriptionEnded,
                    "the subscription ended because frames were not read fast enough; subscribe again with last_message_id",
                )
                .await
            }
        }
    }

    async fn incoming(&mut self, msg: Message) -> Flow {
        self.state.metrics().ws_frames_in();
        if self.auth.borrow().generation != self.verified_generation
            && let Flow::Close(code, reason) = self.recheck().await
        {
            return Flow::Close(code, reason);
        }
        let limits = &self.state.config().limits;
        let (max_bytes, costs) = (limits.ws_frame_max_bytes, limits.costs);
        let parsed = match msg {
            Message::Text(text) => ClientFrame::parse(text.as_str(), max_bytes),
            Message::Binary(_) => Err(FrameError::new(
                WsErrorCode::BinaryFrame,
                "binary frames are not accepted; send JSON text frames",
            )),
            Message::Ping(_) | Message::Pong(_) => return Flow::Continue,
            Message::Close(_) => return Flow::Close(close_code::NORMAL, ""),
        };
        let cost = match &parsed {
            Ok(ClientFrame::Subscribe { .. }) => costs.open,
            Ok(ClientFrame::Message { .. }) => costs.message,
            _ => costs.frame,
        };
        let charged = self
            .state
            .charge_user(&self.principal, cost)
            .and_then(|()| self.state.charge_ip(self.ip, cost));
        let result = match (charged, parsed) {
            (Err(limited), _) => Err(FrameError::new(WsErrorCode::RateLimited, limited.message())),
            (Ok(()), Err(e)) => Err(e),
            (Ok(()), Ok(frame)) => self.dispatch(frame).await,
        };
        match result {
            Ok(flow) => {
                self.errors = 0;
                flow
            }
            Err(e) => {
                self.state.metrics().ws_frame_errors();
                self.errors += 1;
                if let Flow::Close(c, r) = self.send_text(&ServerFrame::error(&e).to_json()).await {
                    return Flow::Close(c, r);
                }
                if self.errors >= self.state.config().limits.ws_max_consecutive_errors {
                    return Flow::Close(close_code::POLICY, "too many invalid frames in a row");
                }
                Flow::Continue
            }
        }
    }

    /// Handles one valid frame; `Err` is answered with an error frame.
    async fn dispatch(&mut self, frame: ClientFrame) -> Result<Flow, FrameError> {
        match frame {
            ClientFrame::Ping { nonce } => {
                Ok(self.send_text(&ServerFrame::Pong { nonce }.to_json()).await)
            }
            ClientFrame::Subscribe {
                agent,
                session,
                last_message_id,
            } => self.subscribe(agent, session, last_message_id).await,
            ClientFrame::Message { text } => {
                let live = self.subscribed()?;
                let message_id = live.next_message_id();
                send(&live, Command::UserMessage { message_id, text })?;
                Ok(self
                    .send_text(&ServerFrame::Accepted { message_id }.to_json())
                    .await)
            }
            ClientFrame::Interrupt {} => {
                send(&*self.subscribed()?, Command::Interrupt)?;
                Ok(Flow::Continue)
            }
            ClientFrame::ToolApproval {
                request_id,
                approve,
            } => {
                send(
                    &*self.subscribed()?,
                    Command::ToolApproval {
                        request_id,
                        approve,
                    },
                )?;
                Ok(Flow::Continue)
            }
        }
    }

    fn subscribed(&self) -> Result<Arc<LiveSession>, FrameError> {
        self.sub
            .as_ref()
            .filter(|s| s.live.is_subscriber(self.id))
            .map(|s| s.live.clone())
            .ok_or_else(|| {
                FrameError::new(
                    WsErrorCode::NotSubscribed,
                    "subscribe to a conversation first: {\"type\":\"subscribe\",\"agent\":\"NAME\"}",
                )
            })
    }

    async fn subscribe(
        &mut self,
        agent: String,
        session: Option<String>,
        last_message_id: Option<u64>,
    ) -> Result<Flow, FrameError> {
        let user = self.principal.user.clone();
        self.state
            .agent_allowed(&user, &agent)
            .await
            .map_err(|m| FrameError::new(WsErrorCode::Forbidden, m))?;
        let not_found = || {
            FrameError::new(
                WsErrorCode::NotFound,
                "no such session of yours with this agent (list them with GET /api/v1/sessions)",
            )
        };
        if let Some(old) = self.sub.take() {
            old.live.detach(self.id);
        }
        let live = match &session {
            Some(id) => match self.state.hub().get(id) {
                Some(live) if live.user == user && live.agent == agent => live,
                Some(_) => return Err(not_found()),
                None => {
                    let owned = self
                        .state
                        .session_row(id)
                        .await
                        .map_err(|_| {
                            FrameError::new(
                                WsErrorCode::Internal,
                                "the session store could not be read",
                            )
                        })?
                        .is_some_and(|row| row.user == user && row.agent == agent);
                    if !owned {
                        return Err(not_found());
                    }
                    self.open(&user, &agent, session.clone()).await?
                }
            },
            None => self.open(&user, &agent, None).await?,
        };
        let attached = live.attach(self.id, last_message_id);
        let subscribed = ServerFrame::Subscribed {
            session_id: live.id.clone(),
            agent: live.agent.clone(),
            history_messages: live.history_messages,
            replayed: attached.replay.len() as u64,
            missed: attached.missed,
        };
        let replay = attached.replay;
        let last_id = attached.last_id;
        self.sub = Some(Subscription {
            live,
            rx: attached.rx,
        });
        if let Flow::Close(c, r) = self.send_text(&subscribed.to_json_numbered(last_id)).await {
            return Ok(Flow::Close(c, r));
        }
        for frame in replay {
            if let Flow::Close(c, r) = self.send_text(&frame).await {
                return Ok(Flow::Close(c, r));
            }
        }
        Ok(Flow::Continue)
    }

    async fn open(
        &mut self,
        user: &str,
        agent: &str,
        resume: Option<String>,
    ) -> Result<Arc<LiveSession>, FrameError> {
        let request = OpenRequest {
            user: user.to_owned(),
            agent: agent.to_owned(),
            resume,
        };
        let timeout = self.state.config().limits.open_timeout;
        let opened = tokio::time::timeout(timeout, self.state.backend().open(request)).await;
        let conversation = match opened {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                self.state.metrics().conversation_open_failures();
                return Err(backend_error(e));
            }
            Err(_) => {
                self.state.metrics().conversation_open_failures();
                return Err(FrameError::new(
                    WsErrorCode::Internal,
                    "the conversation took too long to start; try again",
                ));
            }
        };
        self.state.metrics().conversations_opened();
        tracing::info!(user, agent, "conversation opened");
        // Recorded after the open: had the token been rotated meanwhile,
        // it is absent here and the conversation is stopped with the rest.
        let opened_with = self.auth.borrow().token_ref(&self.principal.token_id);
        Ok(self.state.register(conversation, user, agent, opened_with))
    }
}

fn send(live: &LiveSession, command: Command) -> Result<(), FrameError> {
    use tokio::sync::mpsc::error::TrySendError;
    match live.try_command(command) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(_)) => Err(FrameError::new(
            WsErrorCode::Busy,
            "the conversation is still handling earlier commands; wait for it",
        )),
        Err(TrySendError::Closed(_)) => Err(FrameError::new(
            WsErrorCode::WorkerLost,
            "the conversation has ended; subscribe again to resume it",
        )),
    }
}

fn backend_error(e: BackendError) -> FrameError {
    match e {
        BackendError::AtCapacity {
            message,
            retry_after_secs,
        } => FrameError::new(
            WsErrorCode::AtCapacity,
            format!("{message} (retry in {retry_after_secs} s)"),
        ),
        BackendError::Forbidden(m) => FrameError::new(WsErrorCode::Forbidden, m),
        BackendError::NotFound(m) => FrameError::new(WsErrorCode::NotFound, m),
        BackendError::Setup(m) => FrameError::new(WsErrorCode::Setup, m),
        BackendError::Internal(m) => FrameError::new(WsErrorCode::Internal, m),
    }
}
