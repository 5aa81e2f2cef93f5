//! `GET /api/v1/ws`: one conversation at a time per connection.
//!
//! The handshake is authenticated like any request (a token in
//! `Authorization` or a `bearer.<token>` subprotocol; the server echoes only
//! `bulwark.v1`) and passes the same Host and Origin checks first: a
//! browser always sends `Origin` on a handshake, so one from a foreign site
//! is refused (403); a handshake without `Origin` comes from a non-browser
//! client and needs its token like any other. Each user has a bounded
//! number of connections (default 8).
//!
//! The conversation, in frames (see [`frames`]):
//!
//! 1. `subscribe {agent, session?, last_message_id?}` opens a conversation
//!    with an agent the user may use, or continues one of the user's stored
//!    sessions. A session that is live on another connection moves here
//!    (that connection gets `error {code: "moved"}`); its conversation keeps
//!    running. Answer: `subscribed {id, session_id, ...}`, then the frames
//!    after `last_message_id` still in the replay buffer ([`session`]).
//! 2. `message {text}` starts a turn; `text_delta`, `tool_call`,
//!    `tool_result`, `approval_request` and `turn_ended` follow, each with
//!    the session's next `id`. `tool_approval` answers an approval request;
//!    `interrupt` stops the turn; `ping` gets `pong`.
//! 3. A bad frame gets `error {code, message}` and the connection stays
//!    open, until 50 bad frames in a row close it (1008). A revoked or
//!    rotated token closes it (1008) within one access-file poll; silence
//!    for 5 minutes closes it (1000); server shutdown closes it (1001).

mod conn;
pub mod frames;
pub mod session;

use crate::app::{AppState, ClientIp};
use crate::error::ApiError;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use frames::SUBPROTOCOL;
use zeroize::Zeroizing;

/// Initial read and write buffer of a WebSocket connection.
const WS_BUFFER_BYTES: usize = 4096;

/// The WebSocket handshake.
#[utoipa::path(
    get,
    path = "/api/v1/ws",
    tag = "conversations",
    description = "WebSocket upgrade. Subprotocols `bulwark.v1, bearer.<token>` (or an Authorization header). Client frames: ClientFrame; server frames: ServerFrame.",
    responses(
        (status = 101, description = "Switching protocols"),
        (status = 400, description = "Not a WebSocket handshake, or `bulwark.v1` not offered", body = crate::error::ErrorBody),
        (status = 401, description = "No valid token", body = crate::error::ErrorBody),
        (status = 403, description = "Origin not allowed", body = crate::error::ErrorBody),
        (status = 429, description = "Rate limited or too many connections", body = crate::error::ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn handshake(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    crate::conns::Conn(tcp): crate::conns::Conn,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let principal = state.authenticate(&headers, ip)?;
    if let Some(c) = &tcp {
        c.0.promote();
    }
    let token = Zeroizing::new(
        crate::auth::credential(&headers)
            .map_err(|f| ApiError::Unauthorized(f.message().into()))?
            .to_owned(),
    );
    let offered: Vec<&str> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    if !offered.is_empty() && !offered.contains(&SUBPROTOCOL) {
        return Err(ApiError::BadRequest(format!(
            "offer the subprotocol `{SUBPROTOCOL}` (with `bearer.<token>`)"
        )));
    }
    let upgrade = upgrade.map_err(|_| {
        ApiError::BadRequest(
            "this route is a WebSocket: send a WebSocket upgrade (GET with `Upgrade: websocket`)"
                .into(),
        )
    })?;
    state.charge_user(&principal, state.config().limits.costs.read)?;
    let limits = &state.config().limits;
    let max = state
        .user_max_connections(&principal.user)
        .unwrap_or(limits.ws_connections_per_user);
    let slot = state
        .limiters()
        .acquire_connection(&principal.user, max)
        .ok_or_else(|| {
            state.metrics().rate_limited();
            ApiError::TooManyRequests {
                message: format!(
                    "you have {max} WebSocket connections open, the most allowed; close one first"
                ),
                retry_after_secs: 5,
            }
        })?;
    state.metrics().ws_connections_total();
    tracing::info!(user = %principal.user, token_id = %principal.token_id, "websocket opened");
    let transport = limits.ws_transport_max_bytes;
    let run_state = state.clone();
    Ok(upgrade
        .protocols([SUBPROTOCOL])
        .max_message_size(transport)
        .max_frame_size(transport)
        // Most connections sit idle: start with small buffers (they grow
        // for a large frame, up to the limits above) instead of tungstenite's
        // 128 KiB each way, which made an idle socket cost about 130 KiB.
        .read_buffer_size(WS_BUFFER_BYTES)
        .write_buffer_size(WS_BUFFER_BYTES)
        .on_upgrade(move |socket| async move {
            // The upgraded socket keeps its connection slot while open.
            let _tcp = tcp;
            conn::run(run_state, socket, principal, token, slot, ip).await
        }))
}
