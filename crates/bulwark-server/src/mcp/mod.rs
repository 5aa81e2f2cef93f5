//! `POST /mcp/{agent}`: the agent's granted tools for MCP clients over
//! Streamable HTTP (rmcp's server transport, stateless).
//!
//! Before rmcp sees a request it passes what every request passes: the
//! Host allowlist, the Origin check (a browser page on another origin is
//! refused; DNS rebinding), the per-IP budget and the body limit (the
//! router's layers), then here a bearer token (`Authorization`, as REST),
//! the user's rate limit, an agent this user may use (access.toml and the
//! agent's `[access]`) and one of the user's connection places, held for
//! the request.
//!
//! Stateless: no `Mcp-Session-Id`, POST only (`GET` and `DELETE` are 405),
//! JSON answers. That is the 2026-07-28 transport: an approval the door
//! asks for is an MRTR input request, and the client's retry finds the
//! waiting call in the user's and agent's handler
//! ([`bulwark_mcp::server::BulwarkMcpServer`], one per user and agent).
//! 2025-11-25 clients work too (rmcp answers their `initialize`
//! statelessly), but cannot be sent server-initiated requests, so an
//! approval they would have to give is refused. Every tool call runs in the
//! tools-only worker of the user and agent ([`host`]): the door there
//! decides, audits and confines it.
//!
//! Errors: 401 no or bad token, 403 an agent the user may not use (unknown
//! agents included: the answer does not say which agents exist), 404 a
//! name that cannot be an agent's, 413 a body over the limit, 429 rate or
//! connection limits; a malformed JSON-RPC message gets rmcp's JSON-RPC
//! error, and a tool that fails or is refused an `isError` result.

pub(crate) mod host;

use crate::app::{AppState, ClientIp};
use crate::error::ApiError;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

pub(crate) use host::McpWorkers;

/// The MCP endpoint of one agent.
#[utoipa::path(
    post,
    path = "/mcp/{agent}",
    tag = "mcp",
    description = "MCP Streamable HTTP (stateless, POST only; JSON-RPC 2.0 bodies): `tools/list` and `tools/call` of the agent's granted tools, each call through the agent's door in a worker of this user. Protocol versions 2026-07-28 and 2025-11-25.",
    params(("agent" = String, Path, description = "An agent this user may use")),
    responses(
        (status = 200, description = "A JSON-RPC response (or 202 for a notification)"),
        (status = 401, description = "No valid token", body = crate::error::ErrorBody),
        (status = 403, description = "Agent not available to this user, or Origin not allowed", body = crate::error::ErrorBody),
        (status = 404, description = "Not an agent name", body = crate::error::ErrorBody),
        (status = 413, description = "Body too large"),
        (status = 429, description = "Rate limited or too many connections", body = crate::error::ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn endpoint(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    Path(agent): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let principal = state.authenticate(request.headers(), ip)?;
    crate::conns::promote(request.extensions());
    state.charge_user(&principal, state.config().limits.costs.mcp)?;
    if bulwark_policy::AgentName::new(&agent).is_err() {
        return Err(ApiError::not_found());
    }
    state
        .agent_allowed(&principal.user, &agent)
        .await
        .map_err(ApiError::Forbidden)?;
    let limits = &state.config().limits;
    let max = state
        .user_max_connections(&principal.user)
        .unwrap_or(limits.ws_connections_per_user);
    let _slot = state
        .limiters()
        .acquire_connection(&principal.user, max)
        .ok_or_else(|| {
            state.metrics().rate_limited();
            ApiError::TooManyRequests {
                message: format!(
                    "you have {max} connections and MCP requests open, the most allowed; wait for one to finish"
                ),
                retry_after_secs: 5,
            }
        })?;
    // Read here, bounded, so an oversized body is a 413 whichever layer
    // notices it first (rmcp would report a failed body read as a 500).
    let limit = limits.mcp_body_bytes;
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|err| body_error(&err, limit))?;
    if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
        return Ok(jsonrpc_error(
            StatusCode::BAD_REQUEST,
            PARSE_ERROR,
            "parse error: the body is not JSON".into(),
        ));
    }
    let request = Request::from_parts(parts, axum::body::Body::from(bytes));
    let handler = state.mcp_workers().server(&state, &principal.user, &agent);
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        // The gate checked Host and Origin against this server's own
        // allowlists (rmcp's defaults would be loopback only).
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(limits.mcp_body_bytes);
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let response = service.handle(request).await.map(axum::body::Body::new);
    Ok(as_jsonrpc(response).await)
}

/// JSON-RPC 2.0 "Parse error".
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0 "Invalid Request".
const INVALID_REQUEST: i64 = -32600;
/// How much of a plain-text refusal of rmcp's is kept in the error.
const REFUSAL_CHARS: usize = 512;

fn jsonrpc_error(status: StatusCode, code: i64, message: String) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    });
    (status, axum::Json(body)).into_response()
}

/// rmcp refuses a message that is JSON but not a JSON-RPC message it can
/// route with a plain-text 4xx; a client expects a JSON-RPC error.
async fn as_jsonrpc(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !status.is_client_error() || is_json || status == StatusCode::PAYLOAD_TOO_LARGE {
        return response;
    }
    let text = match axum::body::to_bytes(response.into_body(), 64 * 1024).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes)
            .chars()
            .take(REFUSAL_CHARS)
            .collect(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() {
        "invalid request".to_owned()
    } else {
        format!("invalid request: {text}")
    };
    jsonrpc_error(status, INVALID_REQUEST, message)
}

/// A body that could not be read: too large (413), or cut off or too slow.
fn body_error(err: &axum::Error, limit: usize) -> ApiError {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        if e.is::<http_body_util::LengthLimitError>() {
            return ApiError::PayloadTooLarge(format!(
                "an MCP request body may have at most {limit} bytes"
            ));
        }
        cause = e.source();
    }
    ApiError::BadRequest("the request body could not be read".into())
}
