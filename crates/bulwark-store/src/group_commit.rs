//! Group commit for the audit log.
//!
//! One SQLite commit per record costs several system calls (WAL frame write,
//! WAL-index locks), which on some machines is tens of microseconds: more
//! than the door's whole budget. Instead `enqueue` appends to an in-memory
//! queue (an uncontended mutex, no system call except when the queue was
//! empty and the writer must be woken), and a writer thread commits whatever
//! has accumulated in one transaction. Callers that need durability call
//! `flush`, which waits until everything accepted before it is committed.
//!
//! A failed commit is sticky: the records of that batch are not stored, so
//! every later `enqueue` and `flush` reports the failure and the caller stops
//! instead of carrying on with a hole in its log.

use crate::{Store, StoreError};
use bulwark_audit::AuditRecord;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

#[derive(Default)]
struct State {
    queue: Vec<AuditRecord>,
    /// Records accepted so far.
    accepted: u64,
    /// Records committed so far (always a prefix of the accepted ones).
    durable: u64,
    failed: Option<String>,
    closed: bool,
    /// A batch is being committed (by the writer or a flushing caller).
    /// One at a time keeps commits in acceptance order.
    writing: bool,
    /// The writer thread is parked on `wake`.
    writer_parked: bool,
    /// Threads parked on `committed`. Notifying a condvar is a system call
    /// even with nobody waiting, so waits are counted and notifications
    /// skipped when no one would hear them.
    committed_waiters: usize,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the writer: work arrived, or the queue is closing.
    wake: Condvar,
    /// Wakes flushers (and a closing writer): a batch was committed or failed.
    committed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the counters
        // inconsistent (each update is a single assignment), so a poisoned
        // lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait_committed<'a>(&self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        state.committed_waiters += 1;
        let mut state = self
            .committed
            .wait(state)
            .unwrap_or_else(|p| p.into_inner());
        state.committed_waiters -= 1;
        state
    }

    /// Commits `batch` (taken from the queue with `writing` set) and wakes
    /// whoever needs to know.
    fn commit(&self, store: &Store, batch: Vec<AuditRecord>) {
        let count = batch.len() as u64;
        // Counted before the connection is unlocked, so that whoever holds
        // it sees each record either in the table or pending, never both
        // (see `pending`).
        let result = crate::audit::insert_batch(store, &batch, || self.lock().durable += count);
        let mut state = self.lock();
        state.writing = false;
        if let Err(err) = result {
            state.failed = Some(format!(
                "audit batch of {count} record(s) not stored: {err}"
            ));
        }
        let wake_flushers = state.committed_waiters > 0;
        let wake_writer = state.writer_parked && (!state.queue.is_empty() || state.closed);
        drop(state);
        if wake_flushers {
            self.committed.notify_all();
        }
        if wake_writer {
            self.wake.notify_one();
        }
    }
}

pub(crate) struct GroupCommit {
    shared: Arc<Shared>,
    store: Store,
    writer: Option<JoinHandle<()>>,
}

impl GroupCommit {
    /// Starts the writer thread. If the thread cannot start, the sink writes
    /// synchronously instead (see `has_writer`).
    pub(crate) fn start(store: Store) -> Self {
        let shared = Arc::new(Shared::default());
        let thread_shared = shared.clone();
        let thread_store = store.clone();
        let writer = std::thread::Builder::new()
            .name("bulwark-audit-writer".into())
            .spawn(move || run(thread_shared, thread_store))
            .ok();
        Self {
            shared,
            store,
            writer,
        }
    }

    pub(crate) fn has_writer(&self) -> bool {
        self.writer.is_some()
    }

    /// Records accepted but not yet committed. Exact relative to the table
    /// only while the caller holds the store's connection lock: commits
    /// update it before releasing that lock.
    pub(crate) fn pending(&self) -> u64 {
        let state = self.shared.lock();
        state.accepted.saturating_sub(state.durable)
    }

    pub(crate) fn enqueue(&self, record: AuditRecord) -> Result<(), StoreError> {
        let mut state = self.shared.lock();
        if let Some(err) = &state.failed {
            return Err(StoreError::Failed(err.clone()));
        }
        state.queue.push(record);
        state.accepted += 1;
        // The writer parks indefinitely only on an empty queue; once awake it
        // gathers on its own, so later records need no notification.
        let wake_writer = state.writer_parked;
        drop(state);
        if wake_writer {
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Waits until everything accepted before the call is committed. When no
    /// commit is in flight the caller commits the queue itself (leader-based
    /// group commit): waking the writer thread would cost a context switch,
    /// which on a busy or virtualized machine can dwarf the commit.
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        let mut state = self.shared.lock();
        let target = state.accepted;
        loop {
            if let Some(err) = &state.failed {
                return Err(StoreError::Failed(err.clone()));
            }
            if state.durable >= target {
                return Ok(());
            }
            if !state.writing && !state.queue.is_empty() {
                let batch = std::mem::take(&mut state.queue);
                state.writing = true;
                drop(state);
                self.shared.commit(&self.store, batch);
                state = self.shared.lock();
                continue;
            }
            state = self.shared.wait_committed(state);
        }
    }
}

impl Drop for GroupCommit {
    /// Drains the queue: records accepted before the sink was dropped are
    /// committed before the drop returns.
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// How long the writer lets records accumulate after the first one arrives.
/// Larger batches amortize the commit; a caller that needs durability sooner
/// calls `flush`, which commits at once without waiting for the writer.
const GATHER: std::time::Duration = std::time::Duration::from_millis(2);

fn run(shared: Arc<Shared>, store: Store) {
    let mut gathered = false;
    loop {
        let batch = {
            let mut state = shared.lock();
            loop {
                if state.writing {
                    // A flusher is committing; wait for it, then look again.
                    state = shared.wait_committed(state);
                } else if state.queue.is_empty() {
                    gathered = false;
                    if state.closed {
                        return; // closed and drained
                    }
                    state.writer_parked = true;
                    state = shared.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                    state.writer_parked = false;
                } else if !gathered && !state.closed {
                    gathered = true;
                    state = shared
                        .wake
                        .wait_timeout(state, GATHER)
                        .map(|(s, _)| s)
                        .unwrap_or_else(|p| p.into_inner().0);
                } else {
                    break;
                }
            }
            gathered = false;
            state.writing = true;
            std::mem::take(&mut state.queue)
        };
        shared.commit(&store, batch);
    }
}
