//! Live sessions: one conversation each, at most one subscribed connection,
//! and a bounded replay buffer.
//!
//! A conversation belongs to the server, not to a socket: when the socket
//! drops, the running turn goes on and its frames are buffered, so a client
//! that reconnects with `last_message_id` gets what it missed. The buffer
//! holds the newest [`Limits::replay_frames`](crate::Limits) frames and at
//! most [`Limits::replay_bytes`](crate::Limits) bytes (defaults 1024 frames,
//! 8 MiB) per live session. A session nobody is subscribed to is shut down
//! after [`Limits::ws_detached_grace`](crate::Limits).
//!
//! Frame ids increase by one per frame within a session. The last id of
//! a session that ended is remembered (for [`MAX_REMEMBERED_IDS`] sessions)
//! so a resumed session continues above it; after a server restart ids
//! start again and a client's stale `last_message_id` is answered with
//! `missed: true`.

use crate::auth::TokenRef;
use crate::backend::{Conversation, ConversationControl};
use crate::ws::frames::{ServerFrame, WsErrorCode};
use bulwark_protocol::protocol::{Command, Event};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};

/// Sessions whose last frame id is remembered after they end.
pub const MAX_REMEMBERED_IDS: usize = 10_000;
/// Frames queued for one subscriber before it counts as too slow and is
/// unsubscribed (it can resubscribe and replay).
const SUBSCRIBER_QUEUE: usize = 512;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a subscribed connection receives.
#[derive(Debug)]
pub enum Outbound {
    /// A serialized, numbered frame.
    Frame(Arc<str>),
    /// Another connection took the subscription.
    Moved,
    /// The conversation is over (its last frames were sent before this).
    Ended,
}

struct Subscriber {
    conn: u64,
    tx: mpsc::Sender<Outbound>,
}

struct Inner {
    last_id: u64,
    ring: VecDeque<(u64, Arc<str>)>,
    ring_bytes: usize,
    subscriber: Option<Subscriber>,
    detached_at: Option<Instant>,
    ended: bool,
}

pub struct LiveSession {
    pub id: String,
    pub user: String,
    pub agent: String,
    /// The token that opened it (None when that is unknown): a revocation
    /// stops it only when this token is no longer accepted.
    pub opened_with: Option<TokenRef>,
    pub history_messages: u64,
    commands: mpsc::Sender<Command>,
    next_message_id: AtomicU64,
    inner: Mutex<Inner>,
    stop: Notify,
    /// Stop without the shutdown grace (the user's tokens were revoked).
    revoked: AtomicBool,
    max_frames: usize,
    max_bytes: usize,
}

/// What [`LiveSession::attach`] hands the connection.
pub struct Attached {
    pub rx: mpsc::Receiver<Outbound>,
    pub last_id: u64,
    pub replay: Vec<Arc<str>>,
    pub missed: bool,
}

impl LiveSession {
    /// Appends a frame to the stream: numbered, buffered, and queued for
    /// the subscriber (a subscriber whose queue is full is dropped).
    pub fn publish(&self, frame: &ServerFrame) {
        let mut inner = lock(&self.inner);
        inner.last_id += 1;
        let id = inner.last_id;
        let json: Arc<str> = frame.to_json_numbered(id).into();
        inner.ring_bytes += json.len();
        inner.ring.push_back((id, json.clone()));
        while inner.ring.len() > self.max_frames
            || (inner.ring_bytes > self.max_bytes && inner.ring.len() > 1)
        {
            if let Some((_, old)) = inner.ring.pop_front() {
                inner.ring_bytes -= old.len();
            }
        }
        let full = inner
            .subscriber
            .as_ref()
            .is_some_and(|s| s.tx.try_send(Outbound::Frame(json)).is_err());
        if full {
            inner.subscriber = None;
            inner.detached_at = Some(Instant::now());
        }
    }

    /// Makes `conn` the subscriber (moving the subscription from any other
    /// connection) and returns the frames after `last_seen` still buffered.
    pub fn attach(&self, conn: u64, last_seen: Option<u64>) -> Attached {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_QUEUE);
        let mut inner = lock(&self.inner);
        if let Some(old) = inner.subscriber.take()
            && old.conn != conn
        {
            let _ = old.tx.try_send(Outbound::Moved);
        }
        let (replay, missed) = match last_seen {
            None => (Vec::new(), false),
            Some(last) if last > inner.last_id => (Vec::new(), true),
            Some(last) => {
                let replay: Vec<Arc<str>> = inner
                    .ring
                    .iter()
                    .filter(|(id, _)| *id > last)
                    .map(|(_, f)| f.clone())
                    .collect();
                let first = inner.ring.front().map_or(inner.last_id + 1, |(id, _)| *id);
                (replay, last < inner.last_id && first > last + 1)
            }
        };
        if inner.ended {
            let _ = tx.try_send(Outbound::Ended);
        } else {
            inner.subscriber = Some(Subscriber { conn, tx });
            inner.detached_at = None;
        }
        Attached {
            rx,
            last_id: inner.last_id,
            replay,
            missed,
        }
    }

    /// Drops `conn`'s subscription, if it still holds it.
    pub fn detach(&self, conn: u64) {
        let mut inner = lock(&self.inner);
        if inner.subscriber.as_ref().is_some_and(|s| s.conn == conn) {
            inner.subscriber = None;
            inner.detached_at = Some(Instant::now());
        }
    }

    /// The conversation is over (its pump is finishing).
    pub fn is_ended(&self) -> bool {
        lock(&self.inner).ended
    }

    fn last_id(&self) -> u64 {
        lock(&self.inner).last_id
    }

    pub fn is_subscriber(&self, conn: u64) -> bool {
        lock(&self.inner)
            .subscriber
            .as_ref()
            .is_some_and(|s| s.conn == conn)
    }

    fn detached_longer_than(&self, grace: Duration) -> bool {
        lock(&self.inner)
            .detached_at
            .is_some_and(|t| t.elapsed() >= grace)
    }

    fn end(&self) -> u64 {
        let mut inner = lock(&self.inner);
        inner.ended = true;
        if let Some(s) = inner.subscriber.take() {
            let _ = s.tx.try_send(Outbound::Ended);
        }
        inner.last_id
    }

    /// The id for the next user message of this conversation.
    pub fn next_message_id(&self) -> u64 {
        self.next_message_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Queues a command for the conversation without waiting: a full
    /// queue means the conversation is not keeping up.
    pub fn try_command(&self, command: Command) -> Result<(), mpsc::error::TrySendError<Command>> {
        self.commands.try_send(command)
    }

    /// Asks the pump to shut the conversation down.
    pub fn stop(&self) {
        self.stop.notify_one();
    }

    /// Whether [`Self::revoke`] was called.
    pub fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::SeqCst)
    }

    /// Ends the conversation now: the pump kills it without the grace a
    /// shutdown gets, so its running turn, queued messages and tools stop.
    pub fn revoke(&self) {
        self.revoked.store(true, Ordering::SeqCst);
        self.stop.notify_one();
    }
}

/// Every live session of this server.
pub struct Hub {
    sessions: Mutex<HashMap<String, Arc<LiveSession>>>,
    last_ids: Mutex<HashMap<String, u64>>,
    conn_ids: AtomicU64,
}

impl Default for Hub {
    fn default() -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            last_ids: Mutex::new(HashMap::new()),
            conn_ids: AtomicU64::new(0),
        }
    }
}

impl Hub {
    pub fn next_conn_id(&self) -> u64 {
        self.conn_ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The live session `session`, unless it is over.
    pub fn get(&self, session: &str) -> Option<Arc<LiveSession>> {
        lock(&self.sessions)
            .get(session)
            .filter(|s| !s.is_ended())
            .cloned()
    }

    pub fn len(&self) -> usize {
        lock(&self.sessions).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every live session (for shutdown).
    pub fn all(&self) -> Vec<Arc<LiveSession>> {
        lock(&self.sessions).values().cloned().collect()
    }

    /// Registers an opened conversation and returns its live session and
    /// the pump to spawn. When the session is already live (a race between
    /// two subscribes), the existing one is returned with the new
    /// conversation, which the caller must end.
    pub fn register(
        &self,
        conversation: Conversation,
        user: &str,
        agent: &str,
        opened_with: Option<TokenRef>,
        max_frames: usize,
        max_bytes: usize,
    ) -> Result<(Arc<LiveSession>, Pump), (Arc<LiveSession>, Conversation)> {
        let mut sessions = lock(&self.sessions);
        // An entry whose conversation is over is replaced; the new stream
        // continues above its ids.
        let mut last_id = None;
        if let Some(existing) = sessions.get(&conversation.session_id) {
            if !existing.is_ended() {
                return Err((existing.clone(), conversation));
            }
            last_id = Some(existing.last_id());
        }
        let Conversation {
            session_id,
            history_messages,
            commands,
            events,
            control,
        } = conversation;
        let remembered = lock(&self.last_ids).remove(&session_id).unwrap_or(0);
        let last_id = last_id.unwrap_or(0).max(remembered);
        let live = Arc::new(LiveSession {
            id: session_id.clone(),
            user: user.to_owned(),
            agent: agent.to_owned(),
            opened_with,
            history_messages,
            commands,
            next_message_id: AtomicU64::new(0),
            inner: Mutex::new(Inner {
                last_id,
                ring: VecDeque::new(),
                ring_bytes: 0,
                subscriber: None,
                detached_at: Some(Instant::now()),
                ended: false,
            }),
            stop: Notify::new(),
            revoked: AtomicBool::new(false),
            max_frames: max_frames.max(1),
            max_bytes,
        });
        sessions.insert(session_id, live.clone());
        Ok((
            live.clone(),
            Pump {
                live,
                events,
                control,
            },
        ))
    }

    fn remove(&self, live: &Arc<LiveSession>, last_id: u64) {
        let mut sessions = lock(&self.sessions);
        if sessions.get(&live.id).is_some_and(|s| Arc::ptr_eq(s, live)) {
            sessions.remove(&live.id);
        }
        drop(sessions);
        let mut ids = lock(&self.last_ids);
        if ids.len() >= MAX_REMEMBERED_IDS
            && let Some(victim) = ids.keys().next().cloned()
        {
            ids.remove(&victim);
        }
        ids.insert(live.id.clone(), last_id);
    }
}

/// Moves a conversation's events into its live session until it ends.
pub struct Pump {
    live: Arc<LiveSession>,
    events: mpsc::Receiver<Event>,
    control: Box<dyn ConversationControl>,
}

impl Pump {
    /// Runs until the conversation ends, nobody has been subscribed for
    /// `grace`, or `shutdown` is set; then shuts the conversation down.
    pub async fn run(
        mut self,
        hub: Arc<Hub>,
        grace: Duration,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        let live = self.live.clone();
        let mut tick =
            tokio::time::interval(Duration::from_secs(1).min(grace.max(Duration::from_millis(50))));
        loop {
            tokio::select! {
                event = self.events.recv() => match event {
                    Some(event) => {
                        if event.validate().is_err() {
                            tracing::warn!(session = %live.id, "conversation sent an event beyond the protocol's bounds; stopping it");
                            live.publish(&lost("the conversation broke the protocol and was stopped"));
                            break;
                        }
                        let fatal = matches!(event, Event::Error { fatal: true, .. });
                        if let Some(frame) = ServerFrame::from_event(event) {
                            live.publish(&frame);
                        }
                        if fatal {
                            break;
                        }
                    }
                    None => {
                        live.publish(&lost("the conversation ended unexpectedly; subscribe again to resume the session"));
                        break;
                    }
                },
                _ = tick.tick() => {
                    if live.detached_longer_than(grace) {
                        tracing::debug!(session = %live.id, "no subscriber; shutting the conversation down");
                        break;
                    }
                }
                _ = live.stop.notified() => break,
                _ = crate::app::stopped(&mut shutdown) => break,
            }
        }
        if live.revoked.load(Ordering::SeqCst) {
            live.publish(&ServerFrame::Error {
                code: WsErrorCode::Unauthorized,
                message: "your access was revoked; the conversation was stopped".into(),
                fatal: true,
            });
            let last_id = live.end();
            hub.remove(&live, last_id);
            self.control.kill();
            return;
        }
        let last_id = live.end();
        hub.remove(&live, last_id);
        let _ = live.commands.try_send(Command::Shutdown);
        // A moment to finish cleanly (sign its checkpoint), then kill.
        let drain = async { while self.events.recv().await.is_some() {} };
        let _ = tokio::time::timeout(Duration::from_secs(5), drain).await;
        self.control.kill();
    }
}

fn lost(message: &str) -> ServerFrame {
    ServerFrame::Error {
        code: WsErrorCode::WorkerLost,
        message: message.into(),
        fatal: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nothing;
    impl ConversationControl for Nothing {
        fn kill(&self) {}
    }

    fn live(hub: &Hub, id: &str, max_frames: usize) -> Arc<LiveSession> {
        let (commands, _) = mpsc::channel(1);
        let (_, events) = mpsc::channel(1);
        let conversation = Conversation {
            session_id: id.into(),
            history_messages: 0,
            commands,
            events,
            control: Box::new(Nothing),
        };
        match hub.register(conversation, "u", "a", None, max_frames, 1 << 20) {
            Ok((live, _pump)) => live,
            Err(_) => panic!("not registered"),
        }
    }

    fn delta(i: u64) -> ServerFrame {
        ServerFrame::TextDelta {
            message_id: 1,
            text: format!("{i}"),
        }
    }

    #[test]
    fn replay_is_bounded_and_reports_what_was_lost() {
        let hub = Hub::default();
        let s = live(&hub, "s1", 4);
        for i in 0..10 {
            s.publish(&delta(i));
        }
        // Ids 7..=10 are buffered.
        let a = s.attach(1, Some(8));
        assert_eq!((a.replay.len(), a.missed, a.last_id), (2, false, 10));
        let a = s.attach(1, Some(6));
        assert_eq!((a.replay.len(), a.missed), (4, false));
        let a = s.attach(1, Some(2));
        assert_eq!((a.replay.len(), a.missed), (4, true), "3..=6 are gone");
        let a = s.attach(1, Some(10));
        assert_eq!((a.replay.len(), a.missed), (0, false));
        let a = s.attach(1, Some(11));
        assert!(a.missed, "an id never issued means the stream restarted");
        let a = s.attach(1, None);
        assert_eq!((a.replay.len(), a.missed), (0, false));
    }

    #[test]
    fn a_moved_subscriber_is_told_and_ids_survive_a_restart() {
        let hub = Hub::default();
        let s = live(&hub, "s2", 16);
        let mut first = s.attach(1, None);
        let _second = s.attach(2, None);
        assert!(matches!(first.rx.try_recv(), Ok(Outbound::Moved)));
        assert!(!s.is_subscriber(1) && s.is_subscriber(2));
        s.publish(&delta(0));
        s.publish(&delta(1));
        let last = s.end();
        hub.remove(&s, last);
        assert!(hub.get("s2").is_none());
        let again = live(&hub, "s2", 16);
        assert_eq!(again.attach(3, None).last_id, 2, "numbering continues");
    }
}
