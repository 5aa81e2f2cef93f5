//! Session leases: at most one process runs a session at a time.
//!
//! Two processes running the same session (a `run --session X` beside a
//! served conversation, or a second `run`) would each save the session's
//! state last-writer-wins, resetting the loop guard's counters. A lease row
//! per session names the one holder allowed to run it. It is taken in one
//! `BEGIN IMMEDIATE` transaction (free, expired or already ours: take it;
//! anyone else's: refuse, naming them), renewed well before it expires by
//! the [`SessionLease`] guard's thread, and deleted when the guard drops. A
//! crashed holder's lease simply expires, so nothing needs cleaning up.
//!
//! Expiry alone cannot stop a holder that paused (a stopped process, a
//! suspended laptop) from writing after someone else took over, so every
//! leased write checks, in its own transaction, that the row still names
//! its holder. The row changes holder only when someone else takes it, and
//! disappears only when its holder releases it, so "the row is still mine"
//! means nobody else ran the session in between, even if the lease lapsed.

use crate::{Store, StoreError, now_ms, sqlite};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a lease lasts without renewal: a crashed holder's session can
/// be run again after this.
pub const LEASE_TTL: Duration = Duration::from_secs(30);

/// How often a [`SessionLease`] renews: a third of the TTL, so two renewals
/// can fail (a busy database) before the lease lapses.
pub const LEASE_RENEW_EVERY: Duration = Duration::from_secs(10);

/// Who holds a lease: a random id, unique per acquisition, and the process
/// id, which is only for the message a refused process prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    pub id: String,
    pub pid: u32,
}

impl LeaseHolder {
    /// A new holder for this process: a fresh random id.
    pub fn new() -> Self {
        Self {
            id: format!("{:032x}", uuid::Uuid::new_v4().as_u128()),
            pid: std::process::id(),
        }
    }
}

impl Default for LeaseHolder {
    fn default() -> Self {
        Self::new()
    }
}

/// A lease as stored. Times are milliseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    pub session: String,
    pub holder: String,
    pub pid: u32,
    pub acquired_ms: i64,
    pub renewed_ms: i64,
    pub expires_ms: i64,
}

/// Who else runs a session, for [`StoreError::LeaseHeld`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConflict {
    pub session: String,
    pub pid: u32,
    /// When that process took the lease.
    pub since_ms: i64,
    /// When its lease runs out unless it renews it.
    pub expires_ms: i64,
}

impl std::fmt::Display for LeaseConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "session `{}` is being run by another process (pid {} since {}); wait for it to \
             finish, or, if that process is gone, run it again after {} when its lease expires",
            self.session,
            self.pid,
            utc(self.since_ms),
            utc(self.expires_ms)
        )
    }
}

impl LeaseConflict {
    /// The audit record of this refusal, in the shared security-event
    /// shape: `session_lease`/`refused`, no session of its own (the refused
    /// process never ran one), the session named in the digest and detail.
    pub fn audit_record(&self, agent: &str, user: &str) -> bulwark_audit::AuditRecord {
        use bulwark_audit::{Action, AuditRecord, Decision, Event, Identity, Reason};
        AuditRecord::new(
            Identity::new("", agent, user),
            Event::new(Action::SessionLease, Decision::Denied, Reason::SessionLease)
                .operation("refused")
                .args(&serde_json::json!({ "session": self.session }))
                .detail(self.to_string()),
        )
    }
}

/// A Unix-ms time as `2026-11-27 01:02:03 UTC`.
fn utc(ms: i64) -> String {
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| t.format(&format).ok())
        .map_or_else(
            || format!("{ms} ms after the epoch"),
            |t| format!("{t} UTC"),
        )
}

fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

fn lease_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<LeaseInfo> {
    Ok(LeaseInfo {
        session: row.get(0)?,
        holder: row.get(1)?,
        pid: row.get(2)?,
        acquired_ms: row.get(3)?,
        renewed_ms: row.get(4)?,
        expires_ms: row.get(5)?,
    })
}

fn read_lease(conn: &Connection, session: &str) -> Result<Option<LeaseInfo>, StoreError> {
    conn.prepare_cached(
        "SELECT session, holder, pid, acquired_ms, renewed_ms, expires_ms \
         FROM session_leases WHERE session = ?1",
    )
    .map_err(sqlite("preparing lease lookup"))?
    .query_row([session], lease_from_row)
    .optional()
    .map_err(sqlite("reading lease"))
}

/// Fails with [`StoreError::LeaseLost`] unless `holder` holds `session`'s
/// lease; called inside the write's transaction.
fn check_held(conn: &Connection, session: &str, holder: &str) -> Result<(), StoreError> {
    match read_lease(conn, session)? {
        Some(lease) if lease.holder == holder => Ok(()),
        _ => Err(StoreError::LeaseLost {
            session: session.to_owned(),
        }),
    }
}

impl Store {
    /// Takes `session`'s lease for `holder` until `now_ms + ttl` if it is
    /// free, expired or already `holder`'s; otherwise
    /// [`StoreError::LeaseHeld`] names the holder. The session need not
    /// exist yet (a new session is leased before it is stored).
    pub fn acquire_lease(
        &self,
        session: &str,
        holder: &LeaseHolder,
        now_ms: i64,
        ttl: Duration,
    ) -> Result<LeaseInfo, StoreError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite("starting lease acquisition"))?;
        let acquired_ms = match read_lease(&tx, session)? {
            Some(current) if current.holder == holder.id => current.acquired_ms,
            Some(current) if current.expires_ms > now_ms => {
                return Err(StoreError::LeaseHeld(LeaseConflict {
                    session: session.to_owned(),
                    pid: current.pid,
                    since_ms: current.acquired_ms,
                    expires_ms: current.expires_ms,
                }));
            }
            _ => now_ms,
        };
        let lease = LeaseInfo {
            session: session.to_owned(),
            holder: holder.id.clone(),
            pid: holder.pid,
            acquired_ms,
            renewed_ms: now_ms,
            expires_ms: now_ms.saturating_add(ttl_ms(ttl)),
        };
        tx.prepare_cached(
            "INSERT OR REPLACE INTO session_leases \
             (session, holder, pid, acquired_ms, renewed_ms, expires_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .map_err(sqlite("preparing lease write"))?
        .execute(params![
            lease.session,
            lease.holder,
            lease.pid,
            lease.acquired_ms,
            lease.renewed_ms,
            lease.expires_ms
        ])
        .map_err(sqlite("writing lease"))?;
        tx.commit()
            .map_err(sqlite("committing lease acquisition"))?;
        Ok(lease)
    }

    /// Extends `holder`'s lease on `session` to `now_ms + ttl`. A lease
    /// that lapsed but nobody took is still `holder`'s (nobody ran the
    /// session meanwhile); one someone else took, or that is gone, is
    /// [`StoreError::LeaseLost`].
    pub fn renew_lease(
        &self,
        session: &str,
        holder: &LeaseHolder,
        now_ms: i64,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let conn = self.lock()?;
        let changed = conn
            .prepare_cached(
                "UPDATE session_leases SET renewed_ms = ?3, expires_ms = ?4 \
                 WHERE session = ?1 AND holder = ?2",
            )
            .map_err(sqlite("preparing lease renewal"))?
            .execute(params![
                session,
                holder.id,
                now_ms,
                now_ms.saturating_add(ttl_ms(ttl))
            ])
            .map_err(sqlite("renewing lease"))?;
        if changed == 0 {
            return Err(StoreError::LeaseLost {
                session: session.to_owned(),
            });
        }
        Ok(())
    }

    /// Gives `holder`'s lease on `session` up; `false` if it was not
    /// theirs (anyone else's lease is left alone).
    pub fn release_lease(&self, session: &str, holder: &LeaseHolder) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        let changed = conn
            .prepare_cached("DELETE FROM session_leases WHERE session = ?1 AND holder = ?2")
            .map_err(sqlite("preparing lease release"))?
            .execute(params![session, holder.id])
            .map_err(sqlite("releasing lease"))?;
        Ok(changed > 0)
    }

    /// The stored lease of `session`, expired or not.
    pub fn lease(&self, session: &str) -> Result<Option<LeaseInfo>, StoreError> {
        read_lease(&*self.lock()?, session)
    }

    /// [`Store::save_state`], only while `holder` holds `session`'s lease
    /// (checked in the same transaction), else [`StoreError::LeaseLost`]
    /// and nothing is written.
    pub fn save_state_leased(
        &self,
        session: &str,
        holder: &LeaseHolder,
        state_json: &str,
    ) -> Result<(), StoreError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite("starting leased state save"))?;
        check_held(&tx, session, &holder.id)?;
        crate::save_state_in(&tx, session, state_json, now_ms())?;
        tx.commit().map_err(sqlite("committing leased state save"))
    }

    /// [`Store::append_message`], only while `holder` holds `session`'s
    /// lease, else [`StoreError::LeaseLost`] and nothing is written.
    pub fn append_message_leased(
        &self,
        session: &str,
        holder: &LeaseHolder,
        role: &str,
        content_json: &str,
    ) -> Result<i64, StoreError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite("starting leased message append"))?;
        check_held(&tx, session, &holder.id)?;
        let id = crate::append_message_in(&tx, session, role, content_json, now_ms())?;
        tx.commit()
            .map_err(sqlite("committing leased message append"))?;
        Ok(id)
    }
}

/// A held session lease: renewed every [`LEASE_RENEW_EVERY`] by a thread
/// while it lives, released when dropped (or by [`SessionLease::release`]).
/// Writes through it ([`SessionLease::save_state`],
/// [`SessionLease::append_message`]) are refused once the lease is lost.
pub struct SessionLease {
    store: Store,
    session: String,
    holder: LeaseHolder,
    lost: Arc<AtomicBool>,
    renewer: Mutex<Option<(Sender<()>, JoinHandle<()>)>>,
}

impl std::fmt::Debug for SessionLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLease")
            .field("session", &self.session)
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

impl SessionLease {
    /// Takes `session`'s lease with the default TTL and renewal period.
    pub fn acquire(store: &Store, session: &str) -> Result<Self, StoreError> {
        Self::acquire_with(store, session, LEASE_TTL, LEASE_RENEW_EVERY)
    }

    /// Takes `session`'s lease for `ttl`, renewed every `renew_every`
    /// (which must be well under `ttl`).
    pub fn acquire_with(
        store: &Store,
        session: &str,
        ttl: Duration,
        renew_every: Duration,
    ) -> Result<Self, StoreError> {
        let holder = LeaseHolder::new();
        store.acquire_lease(session, &holder, now_ms(), ttl)?;
        let lost = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = channel::<()>();
        let thread = {
            let (store, session, holder, lost) = (
                store.clone(),
                session.to_owned(),
                holder.clone(),
                lost.clone(),
            );
            std::thread::Builder::new()
                .name("bulwark-lease".into())
                .spawn(move || {
                    // Dropping the sender (release) ends the wait at once.
                    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(renew_every) {
                        match store.renew_lease(&session, &holder, now_ms(), ttl) {
                            Ok(()) => {}
                            Err(StoreError::LeaseLost { .. }) => {
                                tracing::error!(session, "the session lease was taken over");
                                lost.store(true, Ordering::SeqCst);
                                return;
                            }
                            // A busy or failing database: try again next
                            // period; the lease lasts `ttl`.
                            Err(err) => tracing::warn!(session, error = %err, "cannot renew the session lease"),
                        }
                    }
                })
        };
        let renewer = match thread {
            Ok(thread) => Some((stop, thread)),
            Err(err) => {
                let _ = store.release_lease(session, &holder);
                return Err(StoreError::Io {
                    context: "starting the session lease renewal thread".into(),
                    source: err,
                });
            }
        };
        Ok(Self {
            store: store.clone(),
            session: session.to_owned(),
            holder,
            lost,
            renewer: Mutex::new(renewer),
        })
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    pub fn holder(&self) -> &LeaseHolder {
        &self.holder
    }

    /// The lease is no longer this guard's: the renewal found it taken
    /// by someone else, or it was released.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Saves the session's state if the lease is still this guard's.
    pub fn save_state(&self, state_json: &str) -> Result<(), StoreError> {
        self.store
            .save_state_leased(&self.session, &self.holder, state_json)
    }

    /// Appends a message if the lease is still this guard's.
    pub fn append_message(&self, role: &str, content_json: &str) -> Result<i64, StoreError> {
        self.store
            .append_message_leased(&self.session, &self.holder, role, content_json)
    }

    /// Stops renewing and gives the lease up; later writes through this
    /// guard are refused. Idempotent.
    pub fn release(&self) {
        let renewer = self
            .renewer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some((stop, thread)) = renewer else {
            return;
        };
        drop(stop);
        if thread.join().is_err() {
            tracing::error!(session = self.session, "the lease renewal thread panicked");
        }
        self.lost.store(true, Ordering::SeqCst);
        if let Err(err) = self.store.release_lease(&self.session, &self.holder) {
            tracing::warn!(session = self.session, error = %err, "cannot release the session lease; it expires by itself");
        }
    }
}

impl Drop for SessionLease {
    fn drop(&mut self) {
        self.release();
    }
}
