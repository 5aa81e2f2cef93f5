//! The web page: a small chat client for the API, built into the binary.
//!
//! Three static files (`web/`), embedded at compile time so the server
//! needs nothing on disk and nothing from a CDN, and so what a browser runs
//! is exactly what was reviewed with this build. The page holds no secret:
//! it asks for a token and keeps it in memory; every call it makes is an
//! ordinary authenticated API call.
//!
//! They are outside the OpenAPI document (they are not API) but pass every
//! layer the API passes: the Host and Origin gate, the per-IP budget and
//! the security headers. The CSP allows scripts and styles from `'self'`
//! only, so these files need no nonce and nothing inline runs. Caching is
//! `no-store` like every response (the headers layer sets it): the files
//! are a few KiB, and a browser never runs a script from an older build.

use crate::app::AppState;
use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const INDEX_HTML: &str = include_str!("../web/index.html");
const APP_JS: &str = include_str!("../web/app.js");
const APP_CSS: &str = include_str!("../web/app.css");

/// `GET /`, `/assets/app.js`, `/assets/app.css` (HEAD too).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/assets/app.js", get(app_js))
        .route("/assets/app.css", get(app_css))
}

/// An embedded file with its exact type; the headers layer adds `nosniff`,
/// so a browser never guesses another.
fn file(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn index() -> Response {
    file("text/html; charset=utf-8", INDEX_HTML)
}

async fn app_js() -> Response {
    file("text/javascript; charset=utf-8", APP_JS)
}

async fn app_css() -> Response {
    file("text/css; charset=utf-8", APP_CSS)
}
