//! The per-conversation FIFO lock: one turn at a time, later messages wait
//! in order, for a bounded time, in a bounded queue.
//!
//! It lives in the supervisor rather than in the worker because the
//! supervisor sees both ends of a turn (the `UserMessage` it forwards and
//! the `TurnEnded` it relays) and must answer a message that waited too
//! long even when the worker is stuck or slow. The worker therefore only
//! ever sees one `UserMessage` at a time.
//!
//! This type is pure state (time is passed in), so its rules are tested
//! without processes.

use bulwark_protocol::protocol::Command;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// What happens to a submitted message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Nothing was running: forward this command now.
    Start(Command),
    /// Waiting behind the running turn.
    Queued,
    /// Refused now (the queue is full); the text says why, without content.
    Busy(String),
}

/// A `TurnEnded` (or another turn event) for a message that is not the
/// running one.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NotRunning;

/// The outcome of a finished turn.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Finished {
    /// Messages whose wait ran out (answer each with `Busy`).
    pub(crate) expired: Vec<u64>,
    /// The next queued message, to forward now.
    pub(crate) start: Option<Command>,
}

struct Waiting {
    message_id: u64,
    text: String,
    deadline: Instant,
}

pub(crate) struct TurnLock {
    running: Option<u64>,
    queue: VecDeque<Waiting>,
    wait: Duration,
    max_queued: usize,
}

impl TurnLock {
    pub(crate) fn new(wait: Duration, max_queued: usize) -> Self {
        Self {
            running: None,
            queue: VecDeque::new(),
            wait,
            max_queued,
        }
    }

    /// The message whose turn is running.
    pub(crate) fn running(&self) -> Option<u64> {
        self.running
    }

    /// No turn running and nothing waiting.
    pub(crate) fn is_idle(&self) -> bool {
        self.running.is_none() && self.queue.is_empty()
    }

    pub(crate) fn submit(&mut self, now: Instant, message_id: u64, text: String) -> Admit {
        if self.running.is_none() && self.queue.is_empty() {
            self.running = Some(message_id);
            return Admit::Start(Command::UserMessage { message_id, text });
        }
        if self.queue.len() >= self.max_queued {
            return Admit::Busy(format!(
                "message {message_id} was refused: a turn is running and {} message(s) are already waiting",
                self.queue.len()
            ));
        }
        self.queue.push_back(Waiting {
            message_id,
            text,
            deadline: now + self.wait,
        });
        Admit::Queued
    }

    /// The running turn for `message_id` ended; starts the next one that
    /// has not waited too long.
    pub(crate) fn finish(&mut self, now: Instant, message_id: u64) -> Result<Finished, NotRunning> {
        if self.running != Some(message_id) {
            return Err(NotRunning);
        }
        self.running = None;
        let expired = self.expire(now);
        let start = self.queue.pop_front().map(|next| {
            self.running = Some(next.message_id);
            Command::UserMessage {
                message_id: next.message_id,
                text: next.text,
            }
        });
        Ok(Finished { expired, start })
    }

    /// Removes the messages whose wait has run out, in order. Deadlines
    /// grow along the queue (same wait, later arrival), so only a prefix
    /// can have expired.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<u64> {
        let mut expired = Vec::new();
        while let Some(head) = self.queue.front() {
            if head.deadline > now {
                break;
            }
            expired.push(head.message_id);
            self.queue.pop_front();
        }
        expired
    }

    /// When the next queued message expires.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.queue.front().map(|w| w.deadline)
    }

    /// The `Busy` text for a message that waited too long.
    pub(crate) fn timed_out_text(&self, message_id: u64) -> String {
        format!(
            "message {message_id} was not started: a turn was still running after {} s",
            self.wait.as_secs_f32()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(id: u64) -> Admit {
        Admit::Start(msg(id))
    }

    fn msg(id: u64) -> Command {
        Command::UserMessage {
            message_id: id,
            text: format!("m{id}"),
        }
    }

    #[test]
    fn messages_run_one_at_a_time_in_arrival_order() {
        let t0 = Instant::now();
        let mut lock = TurnLock::new(Duration::from_secs(60), 8);
        assert_eq!(lock.submit(t0, 1, "m1".into()), start(1));
        assert_eq!(lock.submit(t0, 2, "m2".into()), Admit::Queued);
        assert_eq!(lock.submit(t0, 3, "m3".into()), Admit::Queued);
        assert_eq!(lock.finish(t0, 2), Err(NotRunning), "2 is not running");
        let done = lock.finish(t0, 1).unwrap();
        assert_eq!(done.start, Some(msg(2)));
        let done = lock.finish(t0, 2).unwrap();
        assert_eq!(done.start, Some(msg(3)));
        let done = lock.finish(t0, 3).unwrap();
        assert_eq!(done, Finished::default());
        assert!(lock.is_idle());
    }

    #[test]
    fn a_message_that_waits_too_long_expires_and_the_rest_keep_order() {
        let t0 = Instant::now();
        let wait = Duration::from_secs(10);
        let mut lock = TurnLock::new(wait, 8);
        lock.submit(t0, 1, "m1".into());
        lock.submit(t0, 2, "m2".into());
        lock.submit(t0 + Duration::from_secs(5), 3, "m3".into());
        assert_eq!(lock.next_deadline(), Some(t0 + wait));
        assert_eq!(lock.expire(t0 + Duration::from_secs(9)), Vec::<u64>::new());
        // Turn 1 ends after 12 s: 2 has expired, 3 has not.
        let done = lock.finish(t0 + Duration::from_secs(12), 1).unwrap();
        assert_eq!(done.expired, vec![2]);
        assert_eq!(done.start, Some(msg(3)));
    }

    #[test]
    fn a_full_queue_refuses_at_once() {
        let t0 = Instant::now();
        let mut lock = TurnLock::new(Duration::from_secs(60), 1);
        lock.submit(t0, 1, "m1".into());
        assert_eq!(lock.submit(t0, 2, "m2".into()), Admit::Queued);
        assert!(matches!(lock.submit(t0, 3, "m3".into()), Admit::Busy(_)));
        assert_eq!(lock.finish(t0, 1).unwrap().start, Some(msg(2)));
    }
}
