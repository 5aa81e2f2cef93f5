//! A worker's store: every operation is a request to the server, which
//! performs it for this worker's own conversation (see
//! `bulwark_protocol::store_ipc`). The worker never opens the database.
//!
//! The kernel and the door call their stores synchronously; each call here
//! sends one request and blocks its thread (with `block_in_place`, so the
//! runtime's other tasks, including the one that reads the replies, move
//! to another thread) until the server answers.
//!
//! Audit records are the exception, as the [`AuditSink`] contract allows
//! (and as `SqliteAuditSink` does): `record` only queues, and the queue
//! leaves as one [`StoreRequest::AuditBatch`] when it is full, when
//! `flush` (the durability barrier) asks, or just ahead of any other store
//! request (in the same write, so the server sees records and requests in
//! the order the worker made them, at no extra round trip).

use bulwark_audit::{AuditError, AuditRecord, AuditSink, StoredRecord};
use bulwark_kernel::{ConversationStore, Ledger};
use bulwark_protocol::protocol::Event;
use bulwark_protocol::store_ipc::{
    AuditEntry, MAX_AUDIT_BATCH_CHARS, MAX_AUDIT_BATCH_ENTRIES, StoreFailure, StoreReply,
    StoreRequest, StoredRole,
};
use bulwark_store::{
    Balance, HoldId, HoldRequest, LedgerError, SettleReceipt, StoreError, TransferReceipt,
    TransferRequest,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, mpsc as std_mpsc};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long the server may take to answer (SQLite waits up to 5 s for a
/// lock; this only keeps a vanished server from hanging the worker).
const REPLY_WAIT: Duration = Duration::from_secs(60);

/// Audit records not yet sent, within one batch's bounds.
#[derive(Default)]
struct AuditQueue {
    entries: Vec<AuditEntry>,
    chars: usize,
    /// Records were sent since the last flush: the next flush must ask
    /// the server even with nothing queued.
    unflushed: bool,
}

impl AuditQueue {
    fn fits(&self, chars: usize) -> bool {
        self.entries.len() < MAX_AUDIT_BATCH_ENTRIES && self.chars + chars <= MAX_AUDIT_BATCH_CHARS
    }

    fn push(&mut self, entry: AuditEntry, chars: usize) {
        self.entries.push(entry);
        self.chars += chars;
    }

    /// The queued records, to be sent now.
    fn take(&mut self) -> Vec<AuditEntry> {
        self.chars = 0;
        self.unflushed = true;
        std::mem::take(&mut self.entries)
    }
}

/// A request sent and not yet answered.
struct Sent {
    request_id: u64,
    reply: std_mpsc::Receiver<StoreReply>,
}

/// The worker's store: the kernel's [`ConversationStore`], [`AuditSink`]
/// and [`Ledger`], each operation a request to the server. The
/// conversation loop hands it the server's replies ([`deliver`]) and says
/// when no more will come ([`close`]).
///
/// [`deliver`]: BrokerClient::deliver
/// [`close`]: BrokerClient::close
pub struct BrokerClient {
    events: mpsc::UnboundedSender<Event>,
    pending: Mutex<HashMap<u64, std_mpsc::SyncSender<StoreReply>>>,
    next: AtomicU64,
    /// Queued audit records. Held while a batch is sent, so batches leave
    /// in the order their records were made.
    audit: Mutex<AuditQueue>,
    /// An audit record was lost: every later record and flush fails too
    /// (the `AuditSink` contract), so the loss cannot go unnoticed.
    audit_failed: AtomicBool,
    /// The session resumed and its saved state: the server opens a
    /// session once per worker, so asking again answers from here.
    resumed: Mutex<Option<(String, Option<String>)>>,
    /// The session this worker created, once the server accepted it: a
    /// tools-only session's id, which its tool host does not expose, is
    /// announced in `Ready` from here.
    created: Mutex<Option<String>>,
    /// The server stopped answering (shutdown, end of input): calls fail
    /// at once instead of waiting out [`REPLY_WAIT`].
    closed: AtomicBool,
}

impl BrokerClient {
    /// A client that sends its requests as [`Event::Store`] on `events`.
    pub fn new(events: mpsc::UnboundedSender<Event>) -> Self {
        Self {
            events,
            pending: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            audit: Mutex::new(AuditQueue::default()),
            audit_failed: AtomicBool::new(false),
            resumed: Mutex::new(None),
            created: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<u64, std_mpsc::SyncSender<StoreReply>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn audit(&self) -> MutexGuard<'_, AuditQueue> {
        self.audit.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands the server's answer to the call waiting for it; `false` when
    /// none waits (the server broke the protocol, or the call timed out).
    pub fn deliver(&self, request_id: u64, reply: StoreReply) -> bool {
        match self.pending().remove(&request_id) {
            Some(waiter) => waiter.try_send(reply).is_ok(),
            None => false,
        }
    }

    /// No more replies will come: every waiting call fails now (its
    /// sender is dropped), and later calls fail at once.
    pub fn close(&self) {
        let mut pending = self.pending();
        self.closed.store(true, Ordering::SeqCst);
        pending.clear();
    }

    /// Sends `request` without waiting for its answer.
    fn send(&self, request: StoreRequest) -> Result<Sent, StoreError> {
        // An event over a bound would not be sent (and the server ends a
        // worker that sends one): refuse it here, at once.
        if let Err(err) = request.validate() {
            return Err(StoreError::Remote(format!(
                "a store request was not sent: {err}"
            )));
        }
        let request_id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = std_mpsc::sync_channel(1);
        {
            let mut pending = self.pending();
            if self.closed.load(Ordering::SeqCst) {
                return Err(StoreError::Remote("the server stopped answering".into()));
            }
            pending.insert(request_id, tx);
        }
        if self
            .events
            .send(Event::Store {
                request_id,
                request,
            })
            .is_err()
        {
            self.pending().remove(&request_id);
            return Err(StoreError::Remote("the worker is shutting down".into()));
        }
        Ok(Sent {
            request_id,
            reply: rx,
        })
    }

    /// Waits for the answer to `sent`.
    fn wait(&self, sent: Sent) -> Result<StoreReply, StoreError> {
        let reply = tokio::task::block_in_place(|| sent.reply.recv_timeout(REPLY_WAIT));
        self.pending().remove(&sent.request_id);
        match reply {
            Ok(StoreReply::Failed { kind, message }) => Err(match kind {
                StoreFailure::NotFound => StoreError::NotFound(message),
                StoreFailure::Leased => StoreError::Conflict(message),
                StoreFailure::Forbidden | StoreFailure::Internal => StoreError::Remote(message),
            }),
            Ok(reply) => Ok(reply),
            Err(_) => Err(StoreError::Remote(
                "the server did not answer a store request".into(),
            )),
        }
    }

    /// One request and its answer. Queued audit records leave first, in
    /// the same burst, so they reach the server before this request.
    fn call(&self, request: StoreRequest) -> Result<StoreReply, StoreError> {
        let (batch, sent) = {
            let mut queue = self.audit();
            let batch = (!queue.entries.is_empty()).then(|| {
                self.send(StoreRequest::AuditBatch {
                    entries: queue.take(),
                    flush: false,
                })
            });
            (batch, self.send(request))
        };
        let reply = sent.and_then(|sent| self.wait(sent));
        if let Some(batch) = batch {
            // Answered before `request` (the server answers in order), so
            // this does not wait; a loss fails the next record or flush.
            let _ = self.audit_outcome(batch.and_then(|sent| self.wait(sent)));
        }
        reply
    }

    /// Records the outcome of an audit batch: a lost batch fails every
    /// later record and flush.
    fn audit_outcome(&self, reply: Result<StoreReply, StoreError>) -> Result<(), AuditError> {
        let err = match reply {
            Ok(StoreReply::Done) => return Ok(()),
            Ok(other) => unexpected(&other),
            Err(err) => err,
        };
        self.audit_failed.store(true, Ordering::SeqCst);
        Err(AuditError::Store(err.to_string()))
    }

    /// Sends the queued records (with the durability barrier when `flush`)
    /// and waits for the answer. The caller holds the queue, so no other
    /// batch can overtake this one.
    fn send_batch(&self, queue: &mut AuditQueue, flush: bool) -> Result<(), AuditError> {
        let request = StoreRequest::AuditBatch {
            entries: queue.take(),
            flush,
        };
        self.audit_outcome(self.send(request).and_then(|sent| self.wait(sent)))?;
        if flush {
            queue.unflushed = false;
        }
        Ok(())
    }

    fn audit_lost(&self) -> Result<(), AuditError> {
        if self.audit_failed.load(Ordering::SeqCst) {
            return Err(AuditError::Store("an earlier audit record was lost".into()));
        }
        Ok(())
    }

    fn done(&self, request: StoreRequest) -> Result<(), StoreError> {
        match self.call(request)? {
            StoreReply::Done => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Opens stored session `session` of this worker's user and agent; its
    /// saved state.
    pub fn resume(&self, session: &str) -> Result<Option<String>, StoreError> {
        let mut resumed = self.resumed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((id, state)) = resumed.as_ref()
            && id == session
        {
            return Ok(state.clone());
        }
        match self.call(StoreRequest::Resume {
            session: session.to_owned(),
        })? {
            StoreReply::Resumed { state_json } => {
                *resumed = Some((session.to_owned(), state_json.clone()));
                Ok(state_json)
            }
            other => Err(unexpected(&other)),
        }
    }

    /// Creates the new session `session` for this worker's user and agent.
    pub fn create(&self, session: &str) -> Result<(), StoreError> {
        self.done(StoreRequest::Create {
            session: session.to_owned(),
        })?;
        *self.created.lock().unwrap_or_else(|p| p.into_inner()) = Some(session.to_owned());
        Ok(())
    }

    /// The session this worker created or resumed, if any yet.
    pub fn session(&self) -> Option<String> {
        let created = self.created.lock().unwrap_or_else(|p| p.into_inner());
        created.clone().or_else(|| {
            let resumed = self.resumed.lock().unwrap_or_else(|p| p.into_inner());
            resumed.as_ref().map(|(id, _)| id.clone())
        })
    }

    /// Tokens this worker's user used since `since_ms`.
    pub fn tokens_since(&self, since_ms: i64) -> Result<u64, StoreError> {
        match self.call(StoreRequest::TokensSince { since_ms })? {
            StoreReply::Tokens { tokens } => Ok(tokens),
            other => Err(unexpected(&other)),
        }
    }
}

/// A ledger request: the server's refusals come back as
/// [`LedgerError::Remote`], with the server's verdict on whether they are
/// denials.
fn ledger_call(client: &BrokerClient, request: StoreRequest) -> Result<StoreReply, LedgerError> {
    match client.call(request)? {
        StoreReply::LedgerRefused { message, denial } => {
            Err(LedgerError::Remote { message, denial })
        }
        reply => Ok(reply),
    }
}

fn unexpected(reply: &StoreReply) -> StoreError {
    StoreError::Remote(format!("an unexpected store reply: {reply:?}"))
}

/// The session ids passed in are the kernel's copy of the one this worker
/// opened; the server uses its own and ignores nothing else.
impl ConversationStore for BrokerClient {
    fn append_message(
        &self,
        _session: &str,
        role: &str,
        content_json: &str,
    ) -> Result<(), StoreError> {
        let role = match role {
            "user" => StoredRole::User,
            "assistant" => StoredRole::Assistant,
            other => return Err(StoreError::Remote(format!("unknown role `{other}`"))),
        };
        self.done(StoreRequest::AppendMessage {
            role,
            content_json: content_json.to_owned(),
        })
    }

    fn messages(&self, _session: &str) -> Result<Vec<String>, StoreError> {
        let mut all = Vec::new();
        loop {
            let from = all.len() as u64;
            match self.call(StoreRequest::Messages { from })? {
                StoreReply::Messages { items, more } => {
                    let got = items.len();
                    all.extend(items);
                    if !more {
                        return Ok(all);
                    }
                    if got == 0 {
                        return Err(StoreError::Remote(
                            "the server sent an empty page with more to come".into(),
                        ));
                    }
                }
                other => return Err(unexpected(&other)),
            }
        }
    }

    fn save_state(&self, _session: &str, state_json: &str) -> Result<(), StoreError> {
        self.done(StoreRequest::SaveState {
            state_json: state_json.to_owned(),
        })
    }

    fn record_tokens(&self, _session: &str, _user: &str, tokens: u64) -> Result<(), StoreError> {
        self.done(StoreRequest::RecordTokens { tokens })
    }
}

/// The session, user and agent of a record are the server's to stamp.
impl AuditSink for BrokerClient {
    /// Queues the record; a full queue is sent (and answered) first.
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        self.audit_lost()?;
        let entry = AuditEntry {
            time_ms: record.time_ms,
            action: record.action.to_string(),
            tool: record.tool.clone(),
            operation: record.operation.clone(),
            args_digest: record.args_digest.clone(),
            decision: record.decision,
            reason: record.reason.to_string(),
            detail: record.detail.clone(),
            duration_us: record.duration_us,
        };
        if let Err(err) = entry.validate() {
            // Not sendable, so lost: say so now and at every later call.
            self.audit_failed.store(true, Ordering::SeqCst);
            return Err(AuditError::Store(format!(
                "an audit record was not sent: {err}"
            )));
        }
        let chars = entry.chars();
        let mut queue = self.audit();
        if !queue.fits(chars) {
            self.send_batch(&mut queue, false)?;
        }
        queue.push(entry, chars);
        Ok(())
    }

    /// The barrier: sends everything queued and returns once the server
    /// has stored it and every record before it durably.
    fn flush(&self) -> Result<(), AuditError> {
        self.audit_lost()?;
        let mut queue = self.audit();
        if queue.entries.is_empty() && !queue.unflushed {
            // Everything sent before was flushed already.
            return Ok(());
        }
        self.send_batch(&mut queue, true)?;
        // A batch that went out ahead of another request may have failed
        // while this one was queued.
        self.audit_lost()
    }

    /// Reading the log is the operator's (`bulwark audit`), not a worker's.
    fn tail(&self, _limit: usize) -> Result<Vec<StoredRecord>, AuditError> {
        Err(AuditError::Store(
            "a worker cannot read the audit log".into(),
        ))
    }
}

/// The server decides the account (the session's agent's), the budget (the
/// user's access.toml limits) and the audit identity, and scopes the keys
/// to this session: the accounts, budget and actor passed in are the
/// kernel's copies of the same and are not sent.
impl Ledger for BrokerClient {
    fn balance(&self, _account: &str) -> Result<Balance, LedgerError> {
        match ledger_call(self, StoreRequest::LedgerBalance {})? {
            StoreReply::LedgerBalance { balance, held } => Ok(Balance { balance, held }),
            other => Err(unexpected(&other).into()),
        }
    }

    fn transfer(&self, req: &TransferRequest) -> Result<TransferReceipt, LedgerError> {
        let request = StoreRequest::LedgerTransfer {
            key: req.key.clone(),
            to: req.to.clone(),
            amount: req.amount,
            memo: req.memo.clone(),
        };
        match ledger_call(self, request)? {
            StoreReply::LedgerTransfer(r) => Ok(TransferReceipt {
                id: r.id,
                time_ms: r.time_ms,
                key: r.key,
                from: r.from,
                to: r.to,
                amount: r.amount,
                balance_before: r.balance_before,
                memo: r.memo,
            }),
            other => Err(unexpected(&other).into()),
        }
    }

    fn reserve(&self, req: &HoldRequest) -> Result<HoldId, LedgerError> {
        let request = StoreRequest::LedgerHold {
            key: req.key.clone(),
            amount: req.amount,
        };
        match ledger_call(self, request)? {
            StoreReply::LedgerHold { hold } => Ok(HoldId(hold)),
            other => Err(unexpected(&other).into()),
        }
    }

    fn settle(&self, key: &str, hold: HoldId, actual: u64) -> Result<SettleReceipt, LedgerError> {
        let request = StoreRequest::LedgerSettle {
            key: key.to_owned(),
            hold: hold.0,
            actual,
        };
        closed(ledger_call(self, request)?)
    }

    fn release(&self, key: &str, hold: HoldId) -> Result<SettleReceipt, LedgerError> {
        let request = StoreRequest::LedgerRelease {
            key: key.to_owned(),
            hold: hold.0,
        };
        closed(ledger_call(self, request)?)
    }
}

fn closed(reply: StoreReply) -> Result<SettleReceipt, LedgerError> {
    match reply {
        StoreReply::LedgerClosed {
            id,
            hold,
            charged,
            released,
        } => Ok(SettleReceipt {
            id,
            hold: HoldId(hold),
            charged,
            released,
        }),
        other => Err(unexpected(&other).into()),
    }
}

mod provenance;

#[cfg(test)]
mod tests;
