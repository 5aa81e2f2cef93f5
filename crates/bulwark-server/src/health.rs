//! `/health` (public: status and version, nothing else), `/health/detail`
//! and `/metrics` (admins).
//!
//! The public endpoint says only that the process answers; worker counts,
//! users and errors are behind admin authentication, and no other public
//! route repeats them.

use crate::app::{Admin, AppState};
use crate::backend::BackendStats;
use crate::error::ErrorBody;
use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: &'static str,
    pub version: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StoreHealth {
    pub reachable: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AccessHealth {
    pub users: usize,
    pub users_with_tokens: usize,
    /// Why nobody can sign in, when access.toml or the secret is broken.
    pub problem: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthDetail {
    pub status: &'static str,
    pub version: &'static str,
    pub uptime_secs: u64,
    pub workers: BackendStats,
    pub live_sessions: usize,
    pub ws_connections: u64,
    /// 5xx responses and internal failures since start.
    pub errors: u64,
    pub auth_failures: u64,
    pub store: StoreHealth,
    pub access: AccessHealth,
}

/// Liveness, for anyone.
#[utoipa::path(get, path = "/health", tag = "health",
    responses((status = 200, body = Health)))]
pub(crate) async fn health() -> Json<Health> {
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
    })
}

/// Workers, errors, store and access state.
#[utoipa::path(get, path = "/health/detail", tag = "health",
    responses((status = 200, body = HealthDetail), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
pub(crate) async fn detail(State(state): State<AppState>, Admin(_): Admin) -> Json<HealthDetail> {
    let store = state.store().clone();
    let reachable = tokio::task::spawn_blocking(move || store.list_sessions(None, 1).is_ok())
        .await
        .unwrap_or(false);
    let snap = state.auth_watch().current();
    let metrics = state.metrics();
    Json(HealthDetail {
        status: if reachable && snap.problem.is_none() {
            "ok"
        } else {
            "degraded"
        },
        version: env!("CARGO_PKG_VERSION"),
        uptime_secs: state.uptime().as_secs(),
        workers: state.backend().stats(),
        live_sessions: state.hub().len(),
        ws_connections: state.limiters().connections(),
        errors: metrics.errors(),
        auth_failures: metrics.auth_failure_count(),
        store: StoreHealth { reachable },
        access: AccessHealth {
            users: snap.access.users.len(),
            users_with_tokens: snap.users_with_tokens(),
            problem: snap.problem.clone(),
        },
    })
}

/// Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
pub(crate) async fn metrics(State(state): State<AppState>, Admin(_): Admin) -> Response {
    let text = state.metrics().render(
        &state.backend().stats(),
        state.limiters().connections(),
        state.hub().len(),
        state.uptime().as_secs(),
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
