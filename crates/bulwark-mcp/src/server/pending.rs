//! Calls parked on an MRTR approval question (2026-07-28).
//!
//! The door's call keeps running server-side, suspended in its approval
//! question; the client gets only an opaque, random `requestState` handle.
//! Nothing the client echoes back is trusted: an unknown, expired or
//! reused handle finds nothing, and a retry that does not repeat the
//! original call (tool and arguments) refuses the parked one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::approvals::{Asked, MrtrApprovals};
use super::{ApprovalQuestion, ApprovalReply, HostedResult, ToolHost};

/// A call running in its own task, reached through its question channel
/// and its result.
pub(crate) struct RunningCall {
    questions: mpsc::Receiver<Asked>,
    result: oneshot::Receiver<HostedResult>,
}

/// Where a running call stands.
pub(crate) enum Step {
    Done(HostedResult),
    Asks {
        call: RunningCall,
        question: ApprovalQuestion,
        answer: oneshot::Sender<ApprovalReply>,
    },
}

impl RunningCall {
    /// Starts `tool` on `host` in a task of its own, so it can wait for an
    /// answer across the client's retry.
    pub(crate) fn start(
        host: Arc<dyn ToolHost>,
        tool: String,
        arguments: serde_json::Value,
        timeout: Duration,
    ) -> Self {
        let (questions_tx, questions) = mpsc::channel(1);
        let (result_tx, result) = oneshot::channel();
        let approvals = Arc::new(MrtrApprovals {
            questions: questions_tx,
            timeout,
        });
        tokio::spawn(async move {
            let outcome = host.call(&tool, arguments, approvals).await;
            let _ = result_tx.send(outcome);
        });
        Self { questions, result }
    }

    /// Waits until the call finishes or asks a question.
    pub(crate) async fn next(mut self) -> Step {
        tokio::select! {
            biased;
            asked = self.questions.recv() => match asked {
                Some((question, answer)) => Step::Asks { call: self, question, answer },
                // The call's task ended: its result is (or never will be) there.
                None => Step::Done(self.finished().await),
            },
            result = &mut self.result => Step::Done(result.unwrap_or_else(|_| lost())),
        }
    }

    async fn finished(self) -> HostedResult {
        self.result.await.unwrap_or_else(|_| lost())
    }
}

fn lost() -> HostedResult {
    HostedResult {
        content: "the call ended without a result".into(),
        is_error: true,
    }
}

/// One parked call.
pub(crate) struct Parked {
    pub(crate) tool: String,
    pub(crate) arguments: serde_json::Value,
    pub(crate) call: RunningCall,
    pub(crate) answer: oneshot::Sender<ApprovalReply>,
    parked_at: Instant,
}

/// The calls one client has parked, bounded in number and in age. Share
/// one table between the handler instances of one client (a Streamable
/// HTTP session per request) so its retry finds its call; never between
/// clients (a handle is a capability for the call it names).
pub struct PendingCalls {
    max: usize,
    ttl: Duration,
    calls: Mutex<HashMap<String, Parked>>,
}

/// Why a call could not be parked.
pub(crate) struct Full(pub(crate) Parked);

impl PendingCalls {
    /// A table of at most `max` parked calls, each dropped (its question
    /// denied) after `ttl`.
    pub fn new(max: usize, ttl: Duration) -> Self {
        Self {
            max,
            ttl,
            calls: Mutex::new(HashMap::new()),
        }
    }

    /// How many calls are parked now.
    pub fn len(&self) -> usize {
        let mut calls = self.lock();
        self.sweep(&mut calls);
        calls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Parked>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops expired calls: their answer channel closes and the question
    /// is denied (if it has not already timed out itself).
    fn sweep(&self, calls: &mut HashMap<String, Parked>) {
        let ttl = self.ttl;
        calls.retain(|_, p| p.parked_at.elapsed() < ttl);
    }

    /// Parks a call; its random handle, or the call back when the table
    /// is full.
    pub(crate) fn park(
        &self,
        tool: String,
        arguments: serde_json::Value,
        call: RunningCall,
        answer: oneshot::Sender<ApprovalReply>,
    ) -> Result<String, Full> {
        let parked = Parked {
            tool,
            arguments,
            call,
            answer,
            parked_at: Instant::now(),
        };
        let mut calls = self.lock();
        self.sweep(&mut calls);
        if calls.len() >= self.max {
            return Err(Full(parked));
        }
        // 122 random bits from the OS: not guessable, not derived from
        // anything the client sent.
        let handle = format!("bwk-{}", uuid::Uuid::new_v4().simple());
        calls.insert(handle.clone(), parked);
        Ok(handle)
    }

    /// Takes the call `handle` names (once: a handle is spent by its
    /// retry), unless it expired.
    pub(crate) fn take(&self, handle: &str) -> Option<Parked> {
        let mut calls = self.lock();
        self.sweep(&mut calls);
        calls.remove(handle)
    }
}

impl Full {
    pub(crate) fn into_parts(self) -> (RunningCall, oneshot::Sender<ApprovalReply>) {
        (self.0.call, self.0.answer)
    }
}
