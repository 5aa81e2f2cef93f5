//! The server's side of the brokered store: performs a worker's
//! [`StoreRequest`]s for that worker's conversation only.

use crate::store_ipc::{AuditEntry, StoreFailure, StoreReply, StoreRequest};
use bulwark_audit::{AuditRecord, AuditSink};
use bulwark_store::{NewSession, SqliteAuditSink, Store, StoreError};

/// Whose conversation a worker runs: fixed by the server when it starts
/// the worker, never by the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerScope {
    pub user: String,
    pub agent: String,
    /// The session, once the worker created or resumed it.
    pub session: Option<String>,
}

/// Performs store requests for workers. Called on a blocking thread.
pub trait StoreBroker: Send + Sync + 'static {
    fn handle(&self, scope: &mut BrokerScope, request: StoreRequest) -> StoreReply;
}

/// The broker over the server's own database.
pub struct DatabaseBroker {
    store: Store,
    audit: SqliteAuditSink,
}

impl DatabaseBroker {
    pub fn new(store: Store) -> Self {
        let audit = store.audit_sink();
        Self { store, audit }
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
        Err(err) => internal(&err),
    }
}

/// Stored JSON must be JSON: the database keeps nothing a reader could
/// choke on, whoever wrote it.
fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

impl StoreBroker for DatabaseBroker {
    fn handle(&self, scope: &mut BrokerScope, request: StoreRequest) -> StoreReply {
        if let Err(err) = request.validate() {
            return failed(StoreFailure::Forbidden, err.to_string());
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
                    scope.session = Some(session);
                    StoreReply::Resumed {
                        state_json: row.state_json,
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
                let created = self.store.create_session(&NewSession {
                    id: session.clone(),
                    agent: scope.agent.clone(),
                    user: scope.user.clone(),
                });
                if created.is_ok() {
                    scope.session = Some(session);
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
}

impl DatabaseBroker {
    fn in_session(&self, scope: &BrokerScope, session: &str, request: StoreRequest) -> StoreReply {
        match request {
            StoreRequest::AppendMessage { role, content_json } => {
                if !is_json(&content_json) {
                    return failed(StoreFailure::Forbidden, "a message must be JSON");
                }
                from_store(
                    self.store
                        .append_message(session, role.as_str(), &content_json)
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
                from_store(self.store.save_state(session, &state_json))
            }
            StoreRequest::RecordTokens { tokens } => {
                from_store(self.store.record_tokens(session, &scope.user, tokens))
            }
            StoreRequest::Audit { entry } => match self.audit.record(&stamp(scope, session, entry))
            {
                Ok(()) => StoreReply::Done,
                Err(err) => internal(&err),
            },
            StoreRequest::AuditFlush => match self.audit.flush() {
                Ok(()) => StoreReply::Done,
                Err(err) => internal(&err),
            },
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
    AuditRecord {
        time_ms: entry.time_ms,
        session: session.to_owned(),
        agent: scope.agent.clone(),
        user: scope.user.clone(),
        action: entry.action,
        tool: entry.tool,
        operation: entry.operation,
        args_digest: entry.args_digest,
        decision: entry.decision,
        reason: entry.reason,
        detail: entry.detail,
        duration_us: entry.duration_us,
    }
}

/// Messages from index `from`, as many as fit in one reply (always at
/// least one, when any is left).
fn page(items: impl Iterator<Item = String>, from: u64) -> StoreReply {
    let skip = usize::try_from(from).unwrap_or(usize::MAX);
    let mut rest = items.skip(skip).peekable();
    let mut page = Vec::new();
    let mut bytes = 0usize;
    while let Some(item) = rest.peek() {
        if !page.is_empty() && bytes + item.len() > crate::store_ipc::MAX_STORED_JSON {
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
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_at_least_one_item_and_at_most_the_budget() {
        let big = "x".repeat(crate::store_ipc::MAX_STORED_JSON);
        let items = vec![big.clone(), "1".into(), "2".into()];
        let StoreReply::Messages { items: got, more } = page(items.clone().into_iter(), 0) else {
            panic!("a page");
        };
        assert_eq!((got.len(), more), (1, true));
        let StoreReply::Messages { items: got, more } = page(items.clone().into_iter(), 1) else {
            panic!("a page");
        };
        assert_eq!((got, more), (vec!["1".to_string(), "2".to_string()], false));
        let StoreReply::Messages { items: got, more } = page(items.into_iter(), 9) else {
            panic!("a page");
        };
        assert!(got.is_empty() && !more);
    }
}

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

/// Answers one store request of a worker. `Err` says why the worker must
/// be ended (it broke the protocol, or stopped reading its commands).
pub(crate) async fn answer(
    broker: Option<&Broker>,
    scope: &mut BrokerScope,
    request_id: u64,
    request: StoreRequest,
    to_worker: &tokio::sync::mpsc::Sender<crate::protocol::Command>,
) -> Result<(), String> {
    let Some(broker) = broker else {
        return Err("the worker asked for the store, which this server does not broker".into());
    };
    if let Err(err) = request.validate() {
        return Err(format!("a store request broke a bound: {err}"));
    }
    let (next, reply) = broker.call(scope.clone(), request).await;
    *scope = next;
    to_worker
        .try_send(crate::protocol::Command::StoreReply { request_id, reply })
        .map_err(|_| "the worker stopped reading its commands".to_string())
}
