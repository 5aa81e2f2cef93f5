//! The witness over HTTP: `POST /add-checkpoint`, nothing else.
//!
//! Bodies are capped at [`MAX_REQUEST_BYTES`] and every request at
//! [`REQUEST_TIMEOUT`], so a slow or huge submission cannot hold the
//! witness. The state update runs on the blocking pool (SQLite with an
//! fsync per commit).

use crate::request::{MAX_REQUEST_BYTES, SIZE_CONTENT_TYPE, encode_size};
use crate::witness::{Refusal, Witness};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use std::sync::Arc;
use std::time::Duration;
use tower_http::timeout::TimeoutLayer;

/// The longest one request may take, body included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The witness's routes.
pub fn router(witness: Arc<Witness>) -> Router {
    Router::new()
        .route("/add-checkpoint", post(add_checkpoint))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        .with_state(witness)
}

/// Serves the witness on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    witness: Arc<Witness>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(witness))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn add_checkpoint(State(witness): State<Arc<Witness>>, body: Bytes) -> Response {
    let handled = tokio::task::spawn_blocking(move || witness.add_checkpoint(&body)).await;
    match handled {
        Ok(Ok(cosignatures)) => (StatusCode::OK, cosignatures).into_response(),
        Ok(Err(refusal)) => refusal_response(&refusal),
        Err(_) => refusal_response(&Refusal::Internal("the handler failed".into())),
    }
}

fn refusal_response(refusal: &Refusal) -> Response {
    let status =
        StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match refusal {
        Refusal::Conflict { size, .. } => (
            status,
            [(header::CONTENT_TYPE, SIZE_CONTENT_TYPE)],
            encode_size(*size),
        )
            .into_response(),
        // Internal details stay in the witness's own log.
        Refusal::Internal(detail) => {
            tracing::error!(%detail, "witness: internal failure");
            (status, "the witness failed\n").into_response()
        }
        other => (status, format!("{other}\n")).into_response(),
    }
}
