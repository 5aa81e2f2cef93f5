//! The REST reads: agents, sessions, messages, usage.
//!
//! A user sees only their own sessions. Asking for another user's session
//! by id is answered 404, exactly like an id that does not exist, so ids
//! cannot be probed. Admins may list any user's sessions (`?user=`) and
//! read any session.

use crate::app::{AppState, Authed};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use bulwark_policy::{AgentName, UserName};
use bulwark_store::SessionRow;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};

/// The most sessions read for a usage summary.
const MAX_USAGE_SESSIONS: usize = 10_000;
const DEFAULT_LIMIT: u32 = 50;
const MAX_MESSAGES: u32 = 1000;

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentInfo {
    pub name: String,
    pub description: String,
    /// `provider:model`, when the manifest names one.
    pub model: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub agents: Vec<AgentInfo>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SessionQuery {
    /// Only sessions of this agent.
    pub agent: Option<String>,
    /// Admins: this user's sessions (default: every user's).
    pub user: Option<String>,
    /// At most this many (1-500, default 50), newest first.
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionInfo {
    pub id: String,
    pub agent: String,
    pub user: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub message_count: u64,
    /// A conversation is running in this server now.
    pub live: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MessageQuery {
    /// Only messages with a larger id.
    pub after: Option<i64>,
    /// At most this many (1-1000, default 200).
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MessageInfo {
    pub id: i64,
    pub role: String,
    /// The stored message (blocks of text, tool use, tool results).
    #[schema(value_type = Object)]
    pub content: serde_json::Value,
    pub created_ms: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MessageList {
    pub session_id: String,
    pub messages: Vec<MessageInfo>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// Admins: this user's usage (default: every user's).
    pub user: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionUsage {
    pub session_id: String,
    pub agent: String,
    pub user: String,
    /// Model tokens (input + output) charged to the session so far;
    /// `None` when its state could not be read.
    pub tokens: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Usage {
    pub sessions: Vec<SessionUsage>,
    /// Tokens per agent over the sessions listed.
    pub agents: BTreeMap<String, u64>,
    pub total_tokens: u64,
}

pub(crate) fn bad_query(e: QueryRejection) -> ApiError {
    ApiError::BadRequest(format!(
        "invalid query: {}",
        e.body_text().chars().take(200).collect::<String>()
    ))
}

/// A query's `agent` or `user`: checked as the name type it must be.
fn check_name<N>(what: &str, name: &Option<String>) -> Result<(), ApiError>
where
    N: std::str::FromStr<Err = bulwark_policy::NameError>,
{
    match name.as_deref().map(N::from_str) {
        Some(Err(e)) => Err(ApiError::BadRequest(format!("`{what}`: {e}"))),
        _ => Ok(()),
    }
}

/// Whose sessions `p` asks for: `Some(user)`, or `None` for everyone's.
fn scope(p: &Principal, user: Option<String>) -> Result<Option<String>, ApiError> {
    match user {
        Some(u) if u != p.user && !p.is_admin() => Err(ApiError::Forbidden(
            "only admins may read other users' sessions".into(),
        )),
        Some(u) => Ok(Some(u)),
        None if p.is_admin() => Ok(None),
        None => Ok(Some(p.user.clone())),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, bulwark_store::StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "store read failed");
            Err(ApiError::internal())
        }
        Err(_) => Err(ApiError::internal()),
    }
}

async fn sessions_of(
    state: &AppState,
    agent: Option<String>,
    user: Option<String>,
    limit: usize,
) -> Result<Vec<SessionRow>, ApiError> {
    let store = state.store().clone();
    blocking(move || store.sessions_of(user.as_deref(), agent.as_deref(), limit)).await
}

/// The agents this user may use.
#[utoipa::path(get, path = "/api/v1/agents", tag = "agents",
    responses((status = 200, body = AgentList), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub(crate) async fn list_agents(
    State(state): State<AppState>,
    Authed(p): Authed,
) -> Result<Json<AgentList>, ApiError> {
    let agents = usable_agents(&state, &p.user).await?;
    Ok(Json(AgentList { agents }))
}

/// The agents `user` may use now (access.toml, each agent's manifest).
pub(crate) async fn usable_agents(
    state: &AppState,
    user: &str,
) -> Result<Vec<AgentInfo>, ApiError> {
    let Some(entry) = state.auth_watch().current().user(user).cloned() else {
        return Err(ApiError::Unauthorized("your entry left access.toml".into()));
    };
    let home = state.home().clone();
    let user = user.to_owned();
    tokio::task::spawn_blocking(move || {
        let names = home.list_agents().unwrap_or_default();
        names
            .into_iter()
            .filter_map(|name| home.load_agent(&name).ok())
            .filter(|a| bulwark_policy::user_may_use_agent(&a.manifest, &user, &entry).is_ok())
            .map(|a| AgentInfo {
                name: a.manifest.agent.name,
                description: a.manifest.agent.description,
                model: a.manifest.agent.model,
            })
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|_| ApiError::internal())
}

/// Sessions, newest first: yours, or (admins) anyone's.
#[utoipa::path(get, path = "/api/v1/sessions", tag = "sessions", params(SessionQuery),
    responses((status = 200, body = SessionList), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
pub(crate) async fn list_sessions(
    State(state): State<AppState>,
    Authed(p): Authed,
    query: Result<Query<SessionQuery>, QueryRejection>,
) -> Result<Json<SessionList>, ApiError> {
    let Query(q) = query.map_err(bad_query)?;
    check_name::<AgentName>("agent", &q.agent)?;
    check_name::<UserName>("user", &q.user)?;
    let max = state.config().limits.max_listed_sessions;
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT) as usize;
    if limit == 0 || limit > max {
        return Err(ApiError::BadRequest(format!("`limit` must be 1-{max}")));
    }
    let user = scope(&p, q.user)?;
    let rows = sessions_of(&state, q.agent, user, limit).await?;
    let hub = state.hub();
    let sessions = rows
        .into_iter()
        .map(|r| SessionInfo {
            live: hub.get(&r.id).is_some(),
            id: r.id,
            agent: r.agent,
            user: r.user,
            created_ms: r.created_ms,
            updated_ms: r.updated_ms,
            message_count: r.message_count,
        })
        .collect();
    Ok(Json(SessionList { sessions }))
}

/// The stored messages of one of your sessions.
#[utoipa::path(get, path = "/api/v1/sessions/{id}/messages", tag = "sessions",
    params(("id" = String, Path, description = "Session id"), MessageQuery),
    responses((status = 200, body = MessageList), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub(crate) async fn session_messages(
    State(state): State<AppState>,
    Authed(p): Authed,
    Path(id): Path<String>,
    query: Result<Query<MessageQuery>, QueryRejection>,
) -> Result<Json<MessageList>, ApiError> {
    let Query(q) = query.map_err(bad_query)?;
    let limit = q.limit.unwrap_or(200);
    if limit == 0 || limit > MAX_MESSAGES {
        return Err(ApiError::BadRequest(format!(
            "`limit` must be 1-{MAX_MESSAGES}"
        )));
    }
    let plausible = !id.is_empty()
        && id.len() <= bulwark_protocol::protocol::MAX_ID_CHARS
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !plausible {
        return Err(ApiError::not_found());
    }
    let row = state
        .session_row(&id)
        .await
        .map_err(|_| ApiError::internal())?;
    match row {
        Some(r) if r.user == p.user || p.is_admin() => {}
        _ => return Err(ApiError::not_found()),
    }
    let store = state.store().clone();
    let sid = id.clone();
    let rows = blocking(move || store.messages(&sid)).await?;
    let after = q.after.unwrap_or(i64::MIN);
    let messages = rows
        .into_iter()
        .filter(|m| m.id > after)
        .take(limit as usize)
        .map(|m| MessageInfo {
            id: m.id,
            content: serde_json::from_str(&m.content_json).unwrap_or(serde_json::Value::Null),
            role: m.role,
            created_ms: m.created_ms,
        })
        .collect();
    Ok(Json(MessageList {
        session_id: id,
        messages,
    }))
}

/// Model tokens per session and agent.
#[utoipa::path(get, path = "/api/v1/usage", tag = "usage", params(UsageQuery),
    responses((status = 200, body = Usage), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
pub(crate) async fn usage(
    State(state): State<AppState>,
    Authed(p): Authed,
    query: Result<Query<UsageQuery>, QueryRejection>,
) -> Result<Json<Usage>, ApiError> {
    let Query(q) = query.map_err(bad_query)?;
    check_name::<UserName>("user", &q.user)?;
    let user = scope(&p, q.user)?;
    let rows = sessions_of(&state, None, user, MAX_USAGE_SESSIONS).await?;
    let mut out = Usage {
        sessions: Vec::new(),
        agents: BTreeMap::new(),
        total_tokens: 0,
    };
    for r in rows {
        let tokens = r
            .state_json
            .as_deref()
            .map(serde_json::from_str::<bulwark_kernel::SessionState>)
            .and_then(Result::ok)
            .map(|s| s.guard.tokens());
        let t = tokens.unwrap_or(0);
        *out.agents.entry(r.agent.clone()).or_default() += t;
        out.total_tokens += t;
        out.sessions.push(SessionUsage {
            session_id: r.id,
            agent: r.agent,
            user: r.user,
            tokens: if r.state_json.is_none() {
                Some(0)
            } else {
                tokens
            },
        });
    }
    Ok(Json(out))
}

/// This API's OpenAPI 3.1 description.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "OpenAPI document"), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub(crate) async fn openapi(
    State(state): State<AppState>,
    Authed(_): Authed,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        state.openapi_json().as_str().to_owned(),
    )
        .into_response()
}
