//! The credits API: a user's own ledger account (`user:<name>`), transfers
//! out of it, and its journal.
//!
//! The server decides every identity here, never the body: a transfer is
//! always *from* the caller's own account (the body has no such field, and
//! unknown fields are refused), its idempotency key is scoped to the caller
//! (`user:<name>:<key>`), so nobody can replay or read another user's
//! receipt by guessing their key, and it may go only to an agent the
//! caller may use or to a user. Whether it may go at all is the ledger's
//! to decide: the account's policy (at most half the balance per transfer
//! by default, a reserve floor, a daily cap, allowed counterparties) is
//! evaluated and the debit made in one serialized transaction, and the
//! ledger audits both outcomes.

use crate::app::{AppState, Authed};
use crate::error::{ApiError, ErrorBody};
use crate::rest::{bad_query, usable_agents};
use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use bulwark_store::{AccountKind, Actor, JournalEntry, LedgerError, Store, TransferRequest};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// Longest idempotency key a client may send, in bytes.
pub const MAX_KEY_BYTES: usize = 200;
/// Longest memo, in bytes.
pub const MAX_MEMO_BYTES: usize = 1024;
const DEFAULT_HISTORY: u32 = 50;
const MAX_HISTORY: u32 = 500;

/// An account's spending rules, as the ledger evaluates them.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreditPolicy {
    /// One transfer may move at most `max_fraction_num / max_fraction_den`
    /// of the spendable balance.
    pub max_fraction_num: u64,
    pub max_fraction_den: u64,
    /// The spendable balance must stay at or above this.
    pub reserve_floor: u64,
    /// Most paid out per UTC day.
    pub daily_cap: Option<u64>,
    /// Accounts this one may pay; empty means any.
    pub counterparties: Vec<String>,
}

/// The caller's spending limits (access.toml) and what was used.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreditBudget {
    pub credits_per_session: Option<u64>,
    pub credits_per_day: Option<u64>,
    pub credits_per_month: Option<u64>,
    /// Spent or reserved by the caller's sessions today (UTC).
    pub used_today: u64,
    /// Spent or reserved by the caller's sessions this month (UTC).
    pub used_this_month: u64,
}

/// The account of an agent the caller may use (what its sessions spend).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentCredits {
    pub agent: String,
    pub account: String,
    /// Spendable credits (0 when the account was never opened).
    pub balance: u64,
    /// Reserved by model calls in flight.
    pub held: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Credits {
    /// `user:<you>`.
    pub account: String,
    pub balance: u64,
    pub held: u64,
    pub policy: CreditPolicy,
    pub budget: CreditBudget,
    pub agents: Vec<AgentCredits>,
}

/// A transfer from your own account.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferBody {
    /// `agent:<name>` (an agent you may use) or `user:<name>`.
    pub to: String,
    pub amount: u64,
    pub memo: Option<String>,
    /// Makes the transfer idempotent: sending the same key (and request)
    /// again returns the first receipt and moves nothing more.
    pub key: String,
}

/// What a transfer did (for a repeated key: the first time).
#[derive(Debug, Serialize, ToSchema)]
pub struct Receipt {
    pub id: i64,
    pub time_ms: i64,
    /// Your key, as you sent it.
    pub key: String,
    pub from: String,
    pub to: String,
    pub amount: u64,
    /// Your spendable balance right before the debit.
    pub balance_before: u64,
    pub memo: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// At most this many rows (1-500, default 50), newest first.
    pub limit: Option<u32>,
}

/// One journal row touching your account.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryEntry {
    pub id: i64,
    pub time_ms: i64,
    /// `mint`, `transfer`, `hold`, `settle` or `release`.
    pub kind: String,
    pub from: String,
    pub to: String,
    pub amount: u64,
    /// For `settle`/`release`: the part of the hold returned.
    pub released: u64,
    /// Spendable balance of `from` before this row.
    pub balance_before: u64,
    pub memo: String,
    /// Your key, for transfers you made here; others' keys are theirs.
    pub key: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct History {
    pub account: String,
    pub entries: Vec<HistoryEntry>,
}

fn user_account(user: &str) -> String {
    format!("user:{user}")
}

/// The prefix the server puts before every key `user` sends.
fn key_prefix(user: &str) -> String {
    format!("user:{user}:")
}

/// Runs a ledger operation off the async threads. Database failures are
/// logged and answered 500 (their text can name server paths); anything
/// else is the caller's to map.
async fn ledger<T: Send + 'static>(
    store: &Store,
    f: impl FnOnce(&Store) -> Result<T, LedgerError> + Send + 'static,
) -> Result<Result<T, LedgerError>, ApiError> {
    let store = store.clone();
    match tokio::task::spawn_blocking(move || f(&store)).await {
        Ok(Err(LedgerError::Store(e))) => {
            tracing::error!(error = %e, "a ledger operation failed");
            Err(ApiError::internal())
        }
        Ok(result) => Ok(result),
        Err(_) => Err(ApiError::internal()),
    }
}

/// Reads that meet a ledger refusal are a server fault: the account was
/// just opened.
fn unexpected(err: &LedgerError) -> ApiError {
    tracing::error!(error = %err, "a ledger read was refused");
    ApiError::internal()
}

/// Your account, its policy and budget, and the accounts of the agents
/// you may use. Your account is opened, empty, the first time you ask:
/// everyone who may sign in has one to be paid into.
#[utoipa::path(get, path = "/api/v1/credits", tag = "credits",
    responses((status = 200, body = Credits), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub(crate) async fn credits(
    State(state): State<AppState>,
    Authed(p): Authed,
) -> Result<Json<Credits>, ApiError> {
    let agents: Vec<String> = usable_agents(&state, &p.user)
        .await?
        .into_iter()
        .map(|a| a.name)
        .collect();
    let limits = state
        .auth_watch()
        .current()
        .user(&p.user)
        .and_then(|u| u.limits);
    let user = p.user.clone();
    let read = ledger(state.store(), move |store| {
        let account = user_account(&user);
        store.ensure_account(&account, AccountKind::User)?;
        let balance = store.balance(&account)?;
        let policy = store.policy(&account)?;
        // The day and month counts do not depend on the session named.
        let used = store.budget_use(&user, "")?;
        let mut out = Vec::with_capacity(agents.len());
        for agent in agents {
            let account = bulwark_kernel::agent_wallet(&agent);
            let b = match store.balance(&account) {
                Ok(b) => b,
                Err(LedgerError::UnknownAccount(_)) => bulwark_store::Balance {
                    balance: 0,
                    held: 0,
                },
                Err(e) => return Err(e),
            };
            out.push(AgentCredits {
                agent,
                account,
                balance: b.balance,
                held: b.held,
            });
        }
        Ok((account, balance, policy, used, out))
    })
    .await?;
    let (account, balance, policy, used, agents) = read.map_err(|e| unexpected(&e))?;
    Ok(Json(Credits {
        account,
        balance: balance.balance,
        held: balance.held,
        policy: CreditPolicy {
            max_fraction_num: policy.max_fraction_num,
            max_fraction_den: policy.max_fraction_den,
            reserve_floor: policy.reserve_floor,
            daily_cap: policy.daily_cap,
            counterparties: policy.counterparties,
        },
        budget: CreditBudget {
            credits_per_session: limits.and_then(|l| l.credits_per_session),
            credits_per_day: limits.and_then(|l| l.credits_per_day),
            credits_per_month: limits.and_then(|l| l.credits_per_month),
            used_today: used.day,
            used_this_month: used.month,
        },
        agents,
    }))
}

fn bad_body(e: JsonRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::PayloadTooLarge("the request body is too large".into());
    }
    // serde's text names the field and the problem, not the value.
    ApiError::BadRequest(format!(
        "invalid body: {}; send JSON {{\"to\", \"amount\", \"key\", \"memo\"?}}",
        e.body_text().chars().take(200).collect::<String>()
    ))
}

/// Where a transfer may go: `agent:<name>` or `user:<name>`.
enum Payee {
    Agent(String),
    User(String),
}

fn payee(to: &str) -> Result<Payee, ApiError> {
    let bad = || {
        ApiError::BadRequest(
            "`to` must be `agent:<name>` or `user:<name>` (1-64 lowercase letters, digits, `-` or `_`)"
                .into(),
        )
    };
    let (kind, name) = to.split_once(':').ok_or_else(bad)?;
    match kind {
        "agent" => bulwark_policy::AgentName::new(name)
            .map(|n| Payee::Agent(n.into_string()))
            .map_err(|_| bad()),
        "user" => bulwark_policy::UserName::new(name)
            .map(|n| Payee::User(n.into_string()))
            .map_err(|_| bad()),
        _ => Err(bad()),
    }
}

/// What a ledger refusal of a transfer is answered with: 409 when the
/// account's state or policy refused (the ledger's message says what to
/// do), 422 when the request cannot be done at all.
fn refusal(err: LedgerError) -> ApiError {
    match err {
        LedgerError::KeyConflict { .. } => ApiError::Conflict(
            "this key was already used for a different request; use a new key for a new transfer"
                .into(),
        ),
        e if e.is_denial() => ApiError::Conflict(e.to_string()),
        e => ApiError::Unprocessable(e.to_string()),
    }
}

/// Moves credits from your account to an agent you may use or to a user.
/// Sending the same key again returns the first receipt.
#[utoipa::path(post, path = "/api/v1/credits/transfer", tag = "credits",
    request_body = TransferBody,
    responses((status = 200, body = Receipt), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Refused by the account's balance or policy, or the key was used for another transfer"),
        (status = 422, body = ErrorBody, description = "The transfer cannot be made (no such account, a bad amount)")),
    security(("bearer" = [])))]
pub(crate) async fn transfer(
    State(state): State<AppState>,
    Authed(p): Authed,
    body: Result<Json<TransferBody>, JsonRejection>,
) -> Result<Json<Receipt>, ApiError> {
    // A write costs like a message on top of the read the extractor charged.
    state.charge_user(&p, state.config().limits.costs.message)?;
    let Json(body) = body.map_err(bad_body)?;
    if body.key.is_empty() || body.key.len() > MAX_KEY_BYTES {
        return Err(ApiError::BadRequest(format!(
            "`key` must be 1-{MAX_KEY_BYTES} bytes"
        )));
    }
    let memo = body.memo.unwrap_or_default();
    if memo.len() > MAX_MEMO_BYTES {
        return Err(ApiError::BadRequest(format!(
            "`memo` must be at most {MAX_MEMO_BYTES} bytes"
        )));
    }
    // Only accounts the server knows to be real are opened on the way.
    let open = match payee(&body.to)? {
        Payee::Agent(agent) => {
            state
                .agent_allowed(&p.user, &agent)
                .await
                .map_err(ApiError::Forbidden)?;
            Some(AccountKind::Agent)
        }
        Payee::User(user) => state
            .auth_watch()
            .current()
            .user(&user)
            .map(|_| AccountKind::User),
    };
    let from = user_account(&p.user);
    let prefix = key_prefix(&p.user);
    let request = TransferRequest {
        key: format!("{prefix}{}", body.key),
        from: from.clone(),
        to: body.to,
        amount: body.amount,
        memo,
        actor: Actor {
            user: p.user.clone(),
            agent: String::new(),
            session: format!("token:{}", p.token_id),
        },
    };
    let done = ledger(state.store(), move |store| {
        store.ensure_account(&from, AccountKind::User)?;
        if let Some(kind) = open {
            store.ensure_account(&request.to, kind)?;
        }
        store.transfer(&request)
    })
    .await?;
    let r = done.map_err(refusal)?;
    Ok(Json(Receipt {
        id: r.id,
        time_ms: r.time_ms,
        key: r.key.strip_prefix(&prefix).unwrap_or(&r.key).to_owned(),
        from: r.from,
        to: r.to,
        amount: r.amount,
        balance_before: r.balance_before,
        memo: r.memo,
    }))
}

fn history_entry(prefix: &str, account: &str, e: JournalEntry) -> HistoryEntry {
    let key = (e.from == account)
        .then(|| e.key.strip_prefix(prefix).map(str::to_owned))
        .flatten();
    HistoryEntry {
        id: e.id,
        time_ms: e.time_ms,
        kind: e.kind,
        from: e.from,
        to: e.to,
        amount: e.amount,
        released: e.released,
        balance_before: e.balance_before,
        memo: e.memo,
        key,
    }
}

/// The journal of your account, newest first.
#[utoipa::path(get, path = "/api/v1/credits/history", tag = "credits", params(HistoryQuery),
    responses((status = 200, body = History), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub(crate) async fn history(
    State(state): State<AppState>,
    Authed(p): Authed,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Json<History>, ApiError> {
    let Query(q) = query.map_err(bad_query)?;
    let limit = q.limit.unwrap_or(DEFAULT_HISTORY);
    if limit == 0 || limit > MAX_HISTORY {
        return Err(ApiError::BadRequest(format!(
            "`limit` must be 1-{MAX_HISTORY}"
        )));
    }
    let account = user_account(&p.user);
    let read = {
        let account = account.clone();
        ledger(state.store(), move |store| {
            store.history(&account, limit as usize)
        })
        .await?
    };
    let rows = read.map_err(|e| unexpected(&e))?;
    let prefix = key_prefix(&p.user);
    let entries = rows
        .into_iter()
        .map(|e| history_entry(&prefix, &account, e))
        .collect();
    Ok(Json(History { account, entries }))
}
