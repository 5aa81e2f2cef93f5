//! The server's side of the brokered store: performs a worker's
//! [`StoreRequest`]s for that worker's conversation only.

use bulwark_audit::{Action, AuditRecord, AuditSink, Event, Identity, Reason};
use bulwark_protocol::protocol::MAX_SHORT_CHARS;
use bulwark_protocol::store_ipc::{
    AuditEntry, LedgerReceipt, StoreFailure, StoreReply, StoreRequest,
};
use bulwark_store::{
    AccountKind, Actor, Budget, HoldId, HoldRequest, LeaseHolder, LedgerError, NewSession,
    SessionLease, SqliteAuditSink, Store, StoreError, TransferRequest,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

mod ledger;
mod provenance;

/// The most holds one worker may have open at once. A session holds one
/// per model call in flight and one per priced tool call; the bound keeps
/// a worker that reserves in a loop from growing the server's memory.
pub const MAX_OPEN_HOLDS: usize = 64;

// What the wire lets through, the store takes: a request within the
// protocol's bounds is never refused for its size by the store.
const _: () = {
    use bulwark_protocol::store_ipc as wire;
    assert!(wire::MAX_PROVENANCE_PATH_BYTES == bulwark_store::MAX_PROVENANCE_PATH_BYTES);
    assert!(wire::MAX_PROVENANCE_LABELS == bulwark_store::MAX_LABELS_PER_ENTRY);
    assert!(wire::MAX_LABEL_NAME_BYTES == bulwark_store::MAX_LABEL_NAME_BYTES);
    assert!(wire::MAX_PROVENANCE_SOURCE_BYTES == bulwark_store::MAX_PROVENANCE_SOURCE_BYTES);
};

/// Whose conversation a worker runs: fixed by the server when it starts
/// the worker, never by the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerScope {
    pub user: String,
    pub agent: String,
    /// The session, once the worker created or resumed it.
    pub session: Option<String>,
    /// The server's lease on that session, held for this worker (see
    /// `bulwark_store::lease`): its writes to the session are refused
    /// once another process has taken the session over.
    lease: Option<LeaseHolder>,
    /// The holds the server made for this worker and it has not closed,
    /// with their amounts: the only ones it may settle or release, and
    /// those charged when it ends. Private, so only the broker adds to it.
    holds: BTreeMap<i64, u64>,
    /// The agent's account is known to exist.
    wallet_open: bool,
}

impl BrokerScope {
    /// The scope of a new worker of `user` with `agent`: no session yet.
    pub fn new(user: impl Into<String>, agent: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            agent: agent.into(),
            session: None,
            lease: None,
            holds: BTreeMap::new(),
            wallet_open: false,
        }
    }

    /// The holds this worker has open (id, amount), oldest first.
    pub fn open_holds(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        self.holds.iter().map(|(h, a)| (*h, *a))
    }

    /// Why `request` is one no well-behaved worker sends (a bound broken,
    /// a hold it was not given), if it is: the supervisor ends a worker
    /// that sends one instead of answering it.
    pub fn violation(&self, request: &StoreRequest) -> Option<String> {
        if let Err(err) = request.validate() {
            return Some(format!("a store request broke a bound: {err}"));
        }
        match request {
            StoreRequest::LedgerSettle { hold, .. } | StoreRequest::LedgerRelease { hold, .. }
                if !self.holds.contains_key(hold) =>
            {
                Some(format!(
                    "the worker named hold {hold}, which the server did not make for it"
                ))
            }
            // A worker sends the names of the labels it has; anything else
            // would make the entry unreadable for every later reader.
            StoreRequest::RecordProvenance { labels, .. } => labels
                .iter()
                .find(|l| bulwark_policy::TaintLabel::parse(l).is_none())
                .map(|l| format!("the worker sent `{l}`, which is not a taint label")),
            _ => None,
        }
    }
}

/// Performs store requests for workers. Called on a blocking thread.
pub trait StoreBroker: Send + Sync + 'static {
    fn handle(&self, scope: &mut BrokerScope, request: StoreRequest) -> StoreReply;

    /// The worker of `scope` has ended and sends nothing more: close what
    /// it left open. Called once, on a blocking thread.
    fn end(&self, scope: &BrokerScope) {
        let _ = scope;
    }
}

/// A user's credit limits (access.toml `credits_per_session`,
/// `credits_per_day`, `credits_per_month`); `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CreditLimits {
    pub per_session: Option<u64>,
    pub per_day: Option<u64>,
    pub per_month: Option<u64>,
}

/// Finds a user's credit limits. Asked at every reservation, so a changed
/// access.toml applies to the next model call of a running session; `Err`
/// (the file cannot be read) refuses the reservation.
type LimitsLookup = Box<dyn Fn(&str) -> Result<CreditLimits, String> + Send + Sync>;

/// The broker over the server's own database.
pub struct DatabaseBroker {
    store: Store,
    audit: SqliteAuditSink,
    limits: Option<LimitsLookup>,
    /// The session leases held for running workers, by holder id; dropped
    /// (released) when the worker ends.
    leases: Mutex<HashMap<String, SessionLease>>,
}

impl DatabaseBroker {
    /// A broker without credit limits: holds are counted against each
    /// user's budget periods but never refused by them.
    pub fn new(store: Store) -> Self {
        let audit = store.audit_sink();
        Self {
            store,
            audit,
            limits: None,
            leases: Mutex::new(HashMap::new()),
        }
    }

    /// The same broker, with each user's credit limits from `lookup`
    /// (the server reads them from access.toml).
    pub fn with_limits(
        mut self,
        lookup: impl Fn(&str) -> Result<CreditLimits, String> + Send + Sync + 'static,
    ) -> Self {
        self.limits = Some(Box::new(lookup));
        self
    }
}

fn failed(kind: StoreFailure, message: impl Into<String>) -> StoreReply {
    StoreReply::Failed {
        kind,
        message: message.into(),
    }
}

/// A database failure: logged here in full, reported to the worker as a
/// class (its text can name server paths).
fn internal(err: &dyn std::fmt::Display) -> StoreReply {
    tracing::error!(error = %err, "a brokered store operation failed");
    failed(StoreFailure::Internal, "the server could not store this")
}

fn from_store(result: Result<(), StoreError>) -> StoreReply {
    match result {
        Ok(()) => StoreReply::Done,
        Err(StoreError::NotFound(what)) => failed(StoreFailure::NotFound, what),
        Err(StoreError::Conflict(what)) => failed(StoreFailure::Forbidden, what),
        Err(err @ (StoreError::LeaseHeld(_) | StoreError::LeaseLost { .. })) => {
            failed(StoreFailure::Leased, clamp(err.to_string()))
        }
        // Names only the field and what is wrong with it.
        Err(err @ StoreError::Invalid { .. }) => {
            failed(StoreFailure::Forbidden, clamp(err.to_string()))
        }
        Err(err) => internal(&err),
    }
}

/// Stored JSON must be JSON: the database keeps nothing a reader could
/// choke on, whoever wrote it.
fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// Whether `id` can scope ledger keys unambiguously: a session id with a
/// `:` could make one session's prefixed keys another's.
fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// At most [`MAX_SHORT_CHARS`] characters, to fit in a reply.
fn clamp(text: String) -> String {
    if text.len() <= MAX_SHORT_CHARS {
        return text;
    }
    text.chars().take(MAX_SHORT_CHARS).collect()
}

/// A ledger error as the worker is told it: refusals and impossible
/// requests with the ledger's message (they name only this session's
/// account, key and amounts), database failures as a class.
fn ledger_failed(err: LedgerError) -> StoreReply {
    match err {
        LedgerError::Store(err) => internal(&err),
        other => StoreReply::LedgerRefused {
            denial: other.is_denial(),
            message: clamp(other.to_string()),
        },
    }
}

impl StoreBroker for DatabaseBroker {
    fn handle(&self, scope: &mut BrokerScope, request: StoreRequest) -> StoreReply {
        if let Some(why) = scope.violation(&request) {
            return failed(StoreFailure::Forbidden, why);
        }
        let opened = matches!(
            request,
            StoreRequest::Resume { .. } | StoreRequest::Create { .. }
        );
        if opened && scope.session.is_some() {
            return failed(StoreFailure::Forbidden, "the session is already open");
        }
        match request {
            StoreRequest::Resume { session } => match self.store.session(&session) {
                Ok(Some(row)) if row.user == scope.user && row.agent == scope.agent => {
                    if let Err(refused) = self.take_lease(scope, &session) {
                        return refused;
                    }
                    // The state as of the lease: no other process can
                    // save over it from here on.
                    match self.store.session(&session) {
                        Ok(Some(row)) => {
                            scope.session = Some(session);
                            StoreReply::Resumed {
                                state_json: row.state_json,
                            }
                        }
                        Ok(None) => {
                            self.drop_lease(scope);
                            failed(StoreFailure::NotFound, format!("no session `{session}`"))
                        }
                        Err(err) => {
                            self.drop_lease(scope);
                            internal(&err)
                        }
                    }
                }
                // Someone else's and absent look alike.
                Ok(_) => failed(
                    StoreFailure::NotFound,
                    format!(
                        "no session `{session}` of user `{}` with agent `{}`",
                        scope.user, scope.agent
                    ),
                ),
                Err(err) => internal(&err),
            },
            StoreRequest::Create { session } => {
                // Workers create random hex ids; anything else could be
                // made to look like another session's key prefix.
                if !plain_id(&session) {
                    return failed(
                        StoreFailure::Forbidden,
                        "a session id is letters, digits, `-`, `_` and `.`",
                    );
                }
                // An id that exists is refused before the lease is asked
                // for: whether someone runs another user's session is
                // not this worker's to learn.
                match self.store.session(&session) {
                    Ok(None) => {}
                    Ok(Some(_)) => {
                        return failed(
                            StoreFailure::Forbidden,
                            format!("session {session:?} already exists"),
                        );
                    }
                    Err(err) => return internal(&err),
                }
                if let Err(refused) = self.take_lease(scope, &session) {
                    return refused;
                }
                let created = self.store.create_session(&NewSession {
                    id: session.clone(),
                    agent: scope.agent.clone(),
                    user: scope.user.clone(),
                });
                if created.is_ok() {
                    scope.session = Some(session);
                } else {
                    self.drop_lease(scope);
                }
                from_store(created)
            }
            StoreRequest::TokensSince { since_ms } => {
                match self.store.tokens_since(&scope.user, since_ms) {
                    Ok(tokens) => StoreReply::Tokens { tokens },
                    Err(err) => internal(&err),
                }
            }
            request => {
                let Some(session) = scope.session.clone() else {
                    return failed(StoreFailure::Forbidden, "no session is open yet");
                };
                self.in_session(scope, &session, request)
            }
        }
    }

    /// Charges every hold the worker left open in full: the model call it
    /// reserved for may have been made, and a worker must gain nothing by
    /// exiting (or getting itself killed) before it settles. The budget
    /// keeps counting what was charged.
    fn end(&self, scope: &BrokerScope) {
        self.drop_lease(scope);
        let Some(session) = scope.session.as_deref() else {
            return;
        };
        for (hold, amount) in scope.open_holds() {
            let key = format!("{}end:{hold}", key_prefix(session));
            match self.store.settle(&key, HoldId(hold), amount) {
                Ok(r) => tracing::info!(
                    session,
                    hold,
                    charged = r.charged,
                    "charged a hold its worker left open"
                ),
                Err(LedgerError::HoldClosed { .. }) => {}
                Err(err) => tracing::error!(
                    session,
                    hold,
                    error = %err,
                    "cannot close a hold its worker left open"
                ),
            }
        }
    }
}

/// What the server puts before every ledger key of `session`: the session
/// scopes keys (a worker cannot replay or read another session's
/// receipts), and `session:` keeps them apart from the keys the HTTP API
/// scopes with `user:<name>:`.
pub fn key_prefix(session: &str) -> String {
    format!("session:{session}:")
}

impl DatabaseBroker {
    fn leases(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionLease>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `session`'s lease for the worker of `scope`. Another process
    /// running it is refused (and audited): the worker's user is told who
    /// runs it (only a session of theirs gets this far).
    fn take_lease(&self, scope: &mut BrokerScope, session: &str) -> Result<(), StoreReply> {
        match SessionLease::acquire(&self.store, session) {
            Ok(lease) => {
                let holder = lease.holder().clone();
                self.leases().insert(holder.id.clone(), lease);
                scope.lease = Some(holder);
                Ok(())
            }
            Err(StoreError::LeaseHeld(conflict)) => {
                let record = conflict.audit_record(&scope.agent, &scope.user);
                if let Err(err) = self.audit.record(&record).and_then(|()| self.audit.flush()) {
                    tracing::error!(error = %err, "cannot audit a refused session lease");
                }
                Err(failed(StoreFailure::Leased, clamp(conflict.to_string())))
            }
            Err(err) => Err(internal(&err)),
        }
    }

    /// Releases the lease held for the worker of `scope`, if any.
    fn drop_lease(&self, scope: &BrokerScope) {
        let Some(holder) = &scope.lease else {
            return;
        };
        let lease = self.leases().remove(&holder.id);
        // Released outside the map's lock: releasing waits for the
        // renewal thread and the database.
        drop(lease);
    }

    /// The lease held for `scope`'s worker; a session opened without one
    /// cannot be written to.
    fn holder<'a>(&self, scope: &'a BrokerScope) -> Result<&'a LeaseHolder, StoreReply> {
        scope
            .lease
            .as_ref()
            .ok_or_else(|| failed(StoreFailure::Forbidden, "no session is open yet"))
    }

    fn in_session(
        &self,
        scope: &mut BrokerScope,
        session: &str,
        request: StoreRequest,
    ) -> StoreReply {
        match request {
            StoreRequest::AppendMessage { role, content_json } => {
                if !is_json(&content_json) {
                    return failed(StoreFailure::Forbidden, "a message must be JSON");
                }
                let holder = match self.holder(scope) {
                    Ok(holder) => holder,
                    Err(refused) => return refused,
                };
                from_store(
                    self.store
                        .append_message_leased(session, holder, role.as_str(), &content_json)
                        .map(|_| ()),
                )
            }
            StoreRequest::Messages { from } => match self.store.messages(session) {
                Ok(rows) => page(rows.into_iter().map(|r| r.content_json), from),
                Err(err) => internal(&err),
            },
            StoreRequest::SaveState { state_json } => {
                if !is_json(&state_json) {
                    return failed(StoreFailure::Forbidden, "a session state must be JSON");
                }
                let holder = match self.holder(scope) {
                    Ok(holder) => holder,
                    Err(refused) => return refused,
                };
                from_store(self.store.save_state_leased(session, holder, &state_json))
            }
            StoreRequest::RecordTokens { tokens } => {
                from_store(self.store.record_tokens(session, &scope.user, tokens))
            }
            StoreRequest::Audit { entry } => match self.audit.record(&stamp(scope, session, entry))
            {
                Ok(()) => StoreReply::Done,
                Err(err) => internal(&err),
            },
            StoreRequest::AuditBatch { entries, flush } => {
                // In order, each stamped like a single record; the first
                // failure answers (the sink then fails every later record
                // and flush too, so nothing after a loss is taken as stored).
                for entry in entries {
                    if let Err(err) = self.audit.record(&stamp(scope, session, entry)) {
                        return internal(&err);
                    }
                }
                if flush && let Err(err) = self.audit.flush() {
                    return internal(&err);
                }
                StoreReply::Done
            }
            StoreRequest::AuditFlush {} => match self.audit.flush() {
                Ok(()) => StoreReply::Done,
                Err(err) => internal(&err),
            },
            StoreRequest::LedgerBalance {}
            | StoreRequest::LedgerTransfer { .. }
            | StoreRequest::LedgerHold { .. }
            | StoreRequest::LedgerSettle { .. }
            | StoreRequest::LedgerRelease { .. } => self.ledger(scope, session, request),
            StoreRequest::RecordProvenance {
                root,
                path,
                digest,
                labels,
                source,
            } => self.record_provenance(scope, root, &path, &digest, &labels, &source),
            StoreRequest::Provenance { root, path, digest } => {
                self.provenance(scope, root, &path, &digest)
            }
            StoreRequest::Resume { .. }
            | StoreRequest::Create { .. }
            | StoreRequest::TokensSince { .. } => {
                failed(StoreFailure::Forbidden, "not a session operation")
            }
        }
    }
}

/// The record as stored: the identity is the server's, not the worker's.
fn stamp(scope: &BrokerScope, session: &str, entry: AuditEntry) -> AuditRecord {
    AuditRecord::at(
        entry.time_ms,
        Identity::new(session, &scope.agent, &scope.user),
        Event {
            action: Action::from(entry.action),
            tool: entry.tool,
            operation: entry.operation,
            args_digest: entry.args_digest,
            decision: entry.decision,
            reason: Reason::from(entry.reason),
            detail: entry.detail,
            duration_us: entry.duration_us,
        },
    )
}

/// Messages from index `from`, as many as fit in one reply (always at
/// least one, when any is left).
fn page(items: impl Iterator<Item = String>, from: u64) -> StoreReply {
    let skip = usize::try_from(from).unwrap_or(usize::MAX);
    let mut rest = items.skip(skip).peekable();
    let mut page = Vec::new();
    let mut bytes = 0usize;
    while let Some(item) = rest.peek() {
        if !page.is_empty() && bytes + item.len() > bulwark_protocol::store_ipc::MAX_STORED_JSON {
            break;
        }
        bytes += item.len();
        page.extend(rest.next());
    }
    StoreReply::Messages {
        items: page,
        more: rest.peek().is_some(),
    }
}

#[cfg(test)]
mod tests;

/// A [`StoreBroker`] the supervisor can hold and clone.
#[derive(Clone)]
pub struct Broker(std::sync::Arc<dyn StoreBroker>);

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Broker")
    }
}

impl Broker {
    pub fn new(broker: impl StoreBroker) -> Self {
        Self(std::sync::Arc::new(broker))
    }

    /// Closes what the worker of `scope` left open, on a blocking thread.
    pub(crate) async fn end(&self, scope: BrokerScope) {
        let broker = self.0.clone();
        if tokio::task::spawn_blocking(move || broker.end(&scope))
            .await
            .is_err()
        {
            tracing::error!("closing a worker's store scope panicked");
        }
    }

    /// Performs `request` on a blocking thread (SQLite blocks).
    pub(crate) async fn call(
        &self,
        scope: BrokerScope,
        request: StoreRequest,
    ) -> (BrokerScope, StoreReply) {
        let broker = self.0.clone();
        let before = scope.clone();
        let mut scope = scope;
        let task = tokio::task::spawn_blocking(move || {
            let reply = broker.handle(&mut scope, request);
            (scope, reply)
        });
        match task.await {
            Ok(done) => done,
            Err(err) => {
                tracing::error!(error = %err, "a brokered store operation panicked");
                (before, failed(StoreFailure::Internal, "the server failed"))
            }
        }
    }
}

/// Closes what an ended worker left open (see [`StoreBroker::end`]), once
/// it can send nothing more.
pub(crate) async fn end_scope(broker: Option<&Broker>, scope: BrokerScope) {
    if let Some(broker) = broker {
        broker.end(scope).await;
    }
}

/// Answers one store request of a worker. `Err` says why the worker must
/// be ended (it broke the protocol, or stopped reading its commands).
pub(crate) async fn answer(
    broker: Option<&Broker>,
    scope: &mut BrokerScope,
    request_id: u64,
    request: StoreRequest,
    to_worker: &tokio::sync::mpsc::Sender<bulwark_protocol::protocol::Command>,
) -> Result<(), String> {
    let Some(broker) = broker else {
        return Err("the worker asked for the store, which this server does not broker".into());
    };
    if let Some(why) = scope.violation(&request) {
        return Err(why);
    }
    let (next, reply) = broker.call(scope.clone(), request).await;
    *scope = next;
    to_worker
        .try_send(bulwark_protocol::protocol::Command::StoreReply { request_id, reply })
        .map_err(|_| "the worker stopped reading its commands".to_string())
}
