//! The supervisor: spawns one worker process per conversation, caps how
//! many run (in total and per user), hands the server a typed channel pair
//! per conversation, and reaps workers that crash, idle, or are replaced.
//!
//! What a conversation's channels guarantee (see [`Conversation`]):
//! events are relayed through the [`relay`](crate::workers::relay::relay)
//! allowlist; anything else from a worker kills it; a worker that dies
//! while its conversation is open produces exactly one
//! `Event::Error { code: WorkerLost, fatal: true }` and then the channel
//! closes. User messages are serialized per conversation by a FIFO lock
//! with a timeout (see [`crate::workers::turns`]).

use crate::workers::broker::{Broker, BrokerScope, end_scope};
use crate::workers::child::{self, Launch};
use crate::workers::env::{EnvError, WorkerEnv};
use crate::workers::pump::{Pump, write_commands};
use crate::workers::relay::relay;
use bulwark_protocol::frame::EventCodec;
use bulwark_protocol::protocol::{Command, ErrorCode, Event, TooLong};
use futures_util::StreamExt;
use secrecy::SecretString;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;

pub use crate::workers::handle::{EndReason, WorkerHandle};

/// Commands buffered between the server and a conversation.
const COMMAND_QUEUE: usize = 64;
/// Events buffered between a conversation and the server.
const EVENT_QUEUE: usize = 256;

/// How the supervisor runs workers. [`SupervisorConfig::new`] fills in the
/// defaults; change fields as needed.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// The worker program (the server passes `std::env::current_exe()`).
    pub program: PathBuf,
    /// Its arguments (the server passes `["worker"]`); the supervisor
    /// appends `--user=<user> --agent=<agent>` for each conversation.
    pub args: Vec<OsString>,
    /// Passed to workers as `BULWARK_HOME` (made absolute: workers run in `/`).
    pub bulwark_home: PathBuf,
    /// The allowlisted environment every worker starts with; an agent's
    /// keys come with its [`OpenRequest`] and reach only its own worker.
    pub env: WorkerEnv,
    /// Workers running at once, all users together.
    pub max_workers: usize,
    /// Workers running at once for one user.
    pub max_workers_per_user: usize,
    /// How long a worker may take to answer `Start` with `Ready` (a local
    /// model can take seconds to load). Default 30 s.
    pub ready_timeout: Duration,
    /// A worker with no command and no running turn for this long is shut
    /// down. Default 15 min.
    pub idle_timeout: Duration,
    /// How long a user message waits for the running turn before it is
    /// answered with `Busy`. Default 60 s.
    pub turn_wait: Duration,
    /// How many user messages may wait behind the running turn; more are
    /// answered with `Busy` at once. Default 8.
    pub max_queued: usize,
    /// How long a worker asked to shut down may take (it ends its turn and
    /// flushes its audit records) before it is killed. Default 5 s.
    pub shutdown_grace: Duration,
    /// Performs workers' store requests (`bulwark serve` passes a
    /// [`DatabaseBroker`](crate::workers::DatabaseBroker)). `None`: a worker that
    /// asks is breaking the protocol.
    pub broker: Option<Broker>,
}

impl SupervisorConfig {
    pub fn new<A: Into<OsString>>(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = A>,
        bulwark_home: impl Into<PathBuf>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            bulwark_home: bulwark_home.into(),
            env: WorkerEnv::from_process(),
            max_workers: 64,
            max_workers_per_user: 4,
            ready_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(15 * 60),
            turn_wait: Duration::from_secs(60),
            max_queued: 8,
            shutdown_grace: Duration::from_secs(5),
            broker: None,
        }
    }
}

/// Which cap refused a new worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapScope {
    Global,
    User,
}

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("too many conversations are open ({scope:?} limit {limit}); try again later")]
    AtCapacity { scope: CapScope, limit: usize },
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("invalid conversation request: {0}")]
    BadRequest(#[from] TooLong),
    #[error("the worker could not be started: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("the worker's environment was refused: {0}")]
    Env(#[from] EnvError),
    #[error("the worker was not ready within {0:?}")]
    ReadyTimeout(Duration),
    /// The worker refused to set the session up (unknown agent, a session
    /// of someone else, a model that cannot load); `message` is for the user.
    #[error("{message}")]
    Refused { code: ErrorCode, message: String },
    #[error("the worker broke the protocol while starting: {0}")]
    Protocol(String),
    #[error("the worker exited while starting ({0})")]
    Exited(String),
}

/// One open conversation, as the server uses it.
///
/// * Send [`Command`]s on `commands` (not `Start`: the supervisor sent it).
///   A `UserMessage` waits while a turn runs (FIFO, up to
///   [`SupervisorConfig::turn_wait`]), then is answered with
///   `Error { code: Busy }`. `Shutdown` ends the conversation cleanly.
///   Dropping `commands` (or `events`) ends it too.
/// * Receive [`Event`]s on `events`. It closes when the worker is gone:
///   after one `Error { code: WorkerLost, fatal: true }` if it died or
///   broke the protocol, after the worker's own fatal `Error` if it
///   announced one, and without a final event when it was ended on
///   purpose (shutdown, idle, kill, re-open); [`WorkerHandle::wait`] says
///   which. Pending approvals die with the worker (they count as denied).
pub struct Conversation {
    pub session_id: String,
    /// Stored messages the session had when it was opened.
    pub history_messages: u64,
    pub commands: mpsc::Sender<Command>,
    pub events: mpsc::Receiver<Event>,
    pub worker: WorkerHandle,
}

/// Who is asking for a conversation. The server authenticated `user`.
#[derive(Debug, Clone)]
pub struct OpenRequest {
    pub user: String,
    pub agent: String,
    /// A stored session of this user and agent to continue.
    pub resume: Option<String>,
    /// The variables this conversation's worker gets on top of
    /// [`SupervisorConfig::env`]: the keys its one agent may use (its
    /// credential grants', its provider's), and no other agent's. Names
    /// are checked as [`WorkerEnv::with_var`] checks them.
    pub keys: Vec<(String, SecretString)>,
}

/// Counters for the health endpoint (a snapshot).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SupervisorStats {
    /// Workers running now.
    pub workers: usize,
    /// Workers running now, per user.
    pub per_user: BTreeMap<String, usize>,
    /// Workers started since the supervisor was created.
    pub spawned: u64,
    /// Workers that died or broke the protocol with a conversation open.
    pub crashed: u64,
    /// Of `crashed`, those that sent something the relay refused.
    pub protocol_violations: u64,
    /// Workers killed because they were not ready in time.
    pub ready_timeouts: u64,
    /// Opens refused by a cap.
    pub refused_at_capacity: u64,
    /// Workers shut down for being idle.
    pub idle_closed: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) spawned: AtomicU64,
    pub(crate) crashed: AtomicU64,
    pub(crate) protocol_violations: AtomicU64,
    pub(crate) ready_timeouts: AtomicU64,
    pub(crate) refused_at_capacity: AtomicU64,
    pub(crate) idle_closed: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

struct Live {
    user: String,
    session: Option<String>,
    handle: Option<WorkerHandle>,
}

#[derive(Default)]
struct State {
    live: HashMap<u64, Live>,
    per_user: HashMap<String, usize>,
    closing: bool,
    next_id: u64,
}

pub(crate) struct Shared {
    config: SupervisorConfig,
    state: Mutex<State>,
    pub(crate) counters: Counters,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // Only counters and maps live here; a panic elsewhere leaves them usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A reserved place under the caps; released when dropped (when the
/// worker's supervision ends, after it has been reaped).
pub(crate) struct Slot {
    shared: Arc<Shared>,
    id: u64,
}

impl Slot {
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.shared.counters
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.shared.state();
        if let Some(live) = state.live.remove(&self.id)
            && let Some(n) = state.per_user.get_mut(&live.user)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                state.per_user.remove(&live.user);
            }
        }
    }
}

/// Spawns, caps and reaps workers; cheap to clone (shared state).
#[derive(Clone)]
pub struct Supervisor {
    shared: Arc<Shared>,
}

impl Supervisor {
    pub fn new(mut config: SupervisorConfig) -> Self {
        if let Ok(abs) = std::path::absolute(&config.bulwark_home) {
            config.bulwark_home = abs;
        }
        Self {
            shared: Arc::new(Shared {
                config,
                state: Mutex::new(State::default()),
                counters: Counters::default(),
            }),
        }
    }

    pub fn config(&self) -> &SupervisorConfig {
        &self.shared.config
    }

    /// Starts a worker for `request` and waits until it is ready. Opening a
    /// session that is already open for this user kills the previous worker
    /// first (a re-subscribe: one worker per session).
    pub async fn open(&self, request: OpenRequest) -> Result<Conversation, SupervisorError> {
        let start = Command::Start {
            user: request.user.clone(),
            agent: request.agent.clone(),
            resume: request.resume.clone(),
        };
        self.open_with(request, start).await
    }

    /// Starts a *tools-only* worker for `request` (its `resume` is
    /// ignored: every one runs a new session) and waits until it is ready:
    /// the conversation then takes `ListTools` and `CallTool` instead of
    /// user messages. Capped, idle-timed-out and reaped like any worker.
    pub async fn open_tools(
        &self,
        mut request: OpenRequest,
    ) -> Result<Conversation, SupervisorError> {
        request.resume = None;
        let start = Command::StartTools {
            user: request.user.clone(),
            agent: request.agent.clone(),
        };
        self.open_with(request, start).await
    }

    async fn open_with(
        &self,
        request: OpenRequest,
        start: Command,
    ) -> Result<Conversation, SupervisorError> {
        start.validate()?;
        let env = request
            .keys
            .iter()
            .try_fold(self.shared.config.env.clone(), |env, (name, value)| {
                env.with_var(name, value.clone())
            })?;
        if let Some(session) = &request.resume {
            self.end_session(&request.user, session).await;
        }
        let slot = self.reserve(&request.user)?;
        let config = &self.shared.config;
        let spawned = child::spawn(&Launch {
            program: &config.program,
            args: &config.args,
            bulwark_home: &config.bulwark_home,
            env: &env,
            user: &request.user,
            agent: &request.agent,
        })
        .map_err(SupervisorError::Spawn)?;
        Counters::bump(&self.shared.counters.spawned);
        let mut process = spawned.process;
        let (to_worker, writer_rx) = mpsc::channel(COMMAND_QUEUE);
        tokio::spawn(write_commands(spawned.stdin, writer_rx));
        tokio::spawn(child::log_stderr(spawned.stderr, slot.id));
        let mut events_in = FramedRead::new(spawned.stdout, EventCodec::new());
        // A fresh channel has room for the first command.
        let _ = to_worker.try_send(start);

        let mut scope = BrokerScope::new(request.user.clone(), request.agent.clone());
        // Until Ready, the worker may only set its session up: store
        // requests are answered here, anything else ends the wait.
        let deadline = tokio::time::Instant::now() + config.ready_timeout;
        let first = loop {
            let next = tokio::time::timeout_at(deadline, events_in.next()).await;
            let Ok(Some(Ok(Event::Store {
                request_id,
                request: store_request,
            }))) = next
            else {
                break next;
            };
            let answered = crate::workers::broker::answer(
                config.broker.as_ref(),
                &mut scope,
                request_id,
                store_request,
                &to_worker,
            )
            .await;
            if let Err(why) = answered {
                process.kill().await;
                end_scope(config.broker.as_ref(), scope).await;
                return Err(SupervisorError::Protocol(why));
            }
        };
        let failure = match first {
            Err(_) => {
                Counters::bump(&self.shared.counters.ready_timeouts);
                SupervisorError::ReadyTimeout(config.ready_timeout)
            }
            Ok(None) => SupervisorError::Exited(process.end(Duration::from_secs(1)).await),
            Ok(Some(Err(err))) => SupervisorError::Protocol(err.to_string()),
            Ok(Some(Ok(event))) => match relay(&event) {
                Some(Event::Ready {
                    session_id,
                    history_messages,
                }) if request.resume.as_ref().is_none_or(|id| *id == session_id)
                    && (config.broker.is_none() || scope.session.as_ref() == Some(&session_id)) =>
                {
                    let (handle, parts) = WorkerHandle::new(slot.id, process.pid());
                    let previous = self.register(&slot, &request.user, &session_id, &handle);
                    for old in previous {
                        old.replace().await;
                    }
                    if self.shared.state().closing {
                        process.kill().await;
                        end_scope(config.broker.as_ref(), scope).await;
                        return Err(SupervisorError::ShuttingDown);
                    }
                    let (commands, from_server) = mpsc::channel(COMMAND_QUEUE);
                    let (to_server, events) = mpsc::channel(EVENT_QUEUE);
                    let pump = Pump::new(crate::workers::pump::Parts {
                        scope,
                        process,
                        events_in,
                        to_worker,
                        from_server,
                        to_server,
                        handle: parts,
                        slot,
                        config,
                    });
                    tokio::spawn(pump.run());
                    return Ok(Conversation {
                        session_id,
                        history_messages,
                        commands,
                        events,
                        worker: handle,
                    });
                }
                Some(Event::Error { code, message, .. }) => {
                    SupervisorError::Refused { code, message }
                }
                _ => SupervisorError::Protocol(
                    "its first event was not Ready for the requested session".into(),
                ),
            },
        };
        process.kill().await;
        end_scope(config.broker.as_ref(), scope).await;
        Err(failure)
    }

    /// Counters and current workers.
    pub fn stats(&self) -> SupervisorStats {
        let c = &self.shared.counters;
        let state = self.shared.state();
        SupervisorStats {
            workers: state.live.len(),
            per_user: state
                .per_user
                .iter()
                .map(|(user, n)| (user.clone(), *n))
                .collect(),
            spawned: c.spawned.load(Ordering::Relaxed),
            crashed: c.crashed.load(Ordering::Relaxed),
            protocol_violations: c.protocol_violations.load(Ordering::Relaxed),
            ready_timeouts: c.ready_timeouts.load(Ordering::Relaxed),
            refused_at_capacity: c.refused_at_capacity.load(Ordering::Relaxed),
            idle_closed: c.idle_closed.load(Ordering::Relaxed),
        }
    }

    /// Refuses new conversations, asks every worker to shut down (each
    /// flushes its audit records), and kills those still running after
    /// the shutdown grace.
    pub async fn shutdown(&self) {
        let handles: Vec<WorkerHandle> = {
            let mut state = self.shared.state();
            state.closing = true;
            state
                .live
                .values()
                .filter_map(|l| l.handle.clone())
                .collect()
        };
        for handle in &handles {
            handle.shutdown();
        }
        let all = futures_util::future::join_all(handles.iter().map(WorkerHandle::wait));
        let limit = self.shared.config.shutdown_grace + Duration::from_secs(2);
        if tokio::time::timeout(limit, all).await.is_err() {
            for handle in &handles {
                handle.kill();
            }
            let all = futures_util::future::join_all(handles.iter().map(WorkerHandle::wait));
            let _ = tokio::time::timeout(Duration::from_secs(5), all).await;
        }
    }

    /// Kills the workers running `session` for `user` and waits until they
    /// are reaped.
    async fn end_session(&self, user: &str, session: &str) {
        let doomed: Vec<WorkerHandle> = {
            let state = self.shared.state();
            state
                .live
                .values()
                .filter(|l| l.user == user && l.session.as_deref() == Some(session))
                .filter_map(|l| l.handle.clone())
                .collect()
        };
        for handle in doomed {
            handle.replace().await;
        }
    }

    fn reserve(&self, user: &str) -> Result<Slot, SupervisorError> {
        let config = &self.shared.config;
        let mut state = self.shared.state();
        if state.closing {
            return Err(SupervisorError::ShuttingDown);
        }
        let refuse = |scope, limit| {
            Counters::bump(&self.shared.counters.refused_at_capacity);
            Err(SupervisorError::AtCapacity { scope, limit })
        };
        if state.live.len() >= config.max_workers {
            return refuse(CapScope::Global, config.max_workers);
        }
        let mine = state.per_user.get(user).copied().unwrap_or(0);
        if mine >= config.max_workers_per_user {
            return refuse(CapScope::User, config.max_workers_per_user);
        }
        state.next_id += 1;
        let id = state.next_id;
        state.live.insert(
            id,
            Live {
                user: user.to_owned(),
                session: None,
                handle: None,
            },
        );
        *state.per_user.entry(user.to_owned()).or_insert(0) += 1;
        Ok(Slot {
            shared: self.shared.clone(),
            id,
        })
    }

    /// Records which session a ready worker runs; returns the other
    /// workers of the same session (to be replaced).
    fn register(
        &self,
        slot: &Slot,
        user: &str,
        session: &str,
        handle: &WorkerHandle,
    ) -> Vec<WorkerHandle> {
        let mut state = self.shared.state();
        if let Some(live) = state.live.get_mut(&slot.id) {
            live.session = Some(session.to_owned());
            live.handle = Some(handle.clone());
        }
        state
            .live
            .iter()
            .filter(|(id, l)| {
                **id != slot.id && l.user == user && l.session.as_deref() == Some(session)
            })
            .filter_map(|(_, l)| l.handle.clone())
            .collect()
    }
}
