//! Errors: [`ServerError`] for whoever starts the server, [`ApiError`] for
//! what a client is told.
//!
//! An `ApiError` body is `{"error": {"code", "message"}}`. Messages say
//! what was wrong and what to do, and never echo what the client sent (a
//! token, a message), so an error can be logged and shown safely.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::path::PathBuf;

/// Starting or running the server failed.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(
        "cannot listen on {addr}: {source} (is another server using the port? choose another with --bind)"
    )]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the server stopped with an I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Secret(#[from] crate::secret::SecretError),
    #[error("cannot open the store {path}: {message}")]
    Store { path: PathBuf, message: String },
}

/// The JSON body of every error response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Machine-readable class, e.g. `unauthorized`, `rate_limited`.
    pub code: &'static str,
    /// What was wrong and what to do, for a person.
    pub message: String,
}

/// An error answer to an HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    BadRequest(String),
    /// No, malformed or unknown credentials. Carries `WWW-Authenticate`.
    Unauthorized(String),
    Forbidden(String),
    NotFound(String),
    MethodNotAllowed,
    /// Refused by the state of what it acts on (a ledger's balance or
    /// policy, an idempotency key used for another request).
    Conflict(String),
    /// Well-formed, but cannot be done (an account that does not exist).
    Unprocessable(String),
    /// The Host header is not one this server answers to.
    MisdirectedRequest,
    PayloadTooLarge(String),
    /// A rate limit; `Retry-After` says when to try again.
    TooManyRequests {
        message: String,
        retry_after_secs: u64,
    },
    Unavailable {
        message: String,
        retry_after_secs: u64,
    },
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::MisdirectedRequest => StatusCode::MISDIRECTED_REQUEST,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Conflict(_) => "conflict",
            ApiError::Unprocessable(_) => "unprocessable",
            ApiError::MisdirectedRequest => "unknown_host",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::TooManyRequests { .. } => "rate_limited",
            ApiError::Unavailable { .. } => "unavailable",
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn message(&self) -> String {
        match self {
            ApiError::BadRequest(m)
            | ApiError::Unauthorized(m)
            | ApiError::Forbidden(m)
            | ApiError::NotFound(m)
            | ApiError::Conflict(m)
            | ApiError::Unprocessable(m)
            | ApiError::PayloadTooLarge(m)
            | ApiError::Internal(m) => m.clone(),
            ApiError::TooManyRequests { message, .. } | ApiError::Unavailable { message, .. } => {
                message.clone()
            }
            ApiError::MethodNotAllowed => "this route does not accept that method".into(),
            ApiError::MisdirectedRequest => "this server does not answer to that Host name; use the address it was configured with".into(),
        }
    }

    pub fn not_found() -> Self {
        ApiError::NotFound("no such resource".into())
    }

    pub fn internal() -> Self {
        ApiError::Internal("the server failed to answer; the error is in its log".into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code(),
                message: self.message(),
            },
        };
        let mut response = (self.status(), axum::Json(body)).into_response();
        let headers = response.headers_mut();
        match &self {
            ApiError::Unauthorized(_) => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"bulwark\""),
                );
            }
            ApiError::TooManyRequests {
                retry_after_secs, ..
            }
            | ApiError::Unavailable {
                retry_after_secs, ..
            } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            }
            _ => {}
        }
        response
    }
}
