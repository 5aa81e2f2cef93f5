//! The checks every request passes before any route sees it: the Host
//! allowlist (DNS rebinding), no tokens in query strings, no CORS
//! preflights, an allowed Origin when one is sent, and the per-IP budget.
//!
//! Origin: browsers send it on every WebSocket handshake and on every
//! cross-origin request, so a request *with* a foreign Origin is a page on
//! another site acting through the user's browser and is refused. A request
//! without one comes from a non-browser client (curl, the CLI), which a
//! hostile page cannot impersonate; it still needs a token like any other.

use crate::app::{AppState, client_ip};
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Query parameter names that would carry a credential.
const CREDENTIAL_PARAMS: &[&str] = &[
    "token",
    "access_token",
    "auth",
    "authorization",
    "bearer",
    "api_key",
    "apikey",
    "key",
    "jwt",
];

/// The request's Host: the one `Host` header, else the URI authority
/// (HTTP/2 `:authority`). Several Host headers, or a Host that differs
/// from the authority, are refused (`None`).
fn request_host(headers: &HeaderMap, uri: &axum::http::Uri) -> Option<String> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return None;
    }
    let authority = uri.authority().map(|a| a.as_str().to_ascii_lowercase());
    match host {
        Some(h) => {
            let h = h.to_str().ok()?.trim().to_ascii_lowercase();
            match authority {
                Some(a) if a != h => None,
                _ => Some(h),
            }
        }
        None => authority,
    }
}

/// Percent-decodes (and `+` → space) once.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a query string looks like it carries a token: a credential
/// parameter name, or anything shaped like a Bulwark token (also after up
/// to three rounds of percent-decoding).
pub fn query_carries_token(query: &str) -> bool {
    let mut text = query.to_ascii_lowercase();
    for _ in 0..4 {
        if text.contains("bwk_") || text.contains("bearer") {
            return true;
        }
        for pair in text.split(['&', ';']) {
            let name = pair.split('=').next().unwrap_or("").trim();
            if CREDENTIAL_PARAMS.contains(&name) {
                return true;
            }
        }
        let decoded = percent_decode(&text).to_ascii_lowercase();
        if decoded == text {
            break;
        }
        text = decoded;
    }
    false
}

/// Runs inside the security-header layer, before routing.
pub(crate) async fn gate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let policy = state.host_policy();
    let host_ok =
        request_host(request.headers(), request.uri()).is_some_and(|h| policy.host_allowed(&h));
    if !host_ok {
        state.metrics().refused_host();
        return ApiError::MisdirectedRequest.into_response();
    }
    if request.uri().query().is_some_and(query_carries_token) {
        // Not logged: the query is the secret.
        return ApiError::BadRequest(
            "credentials are never accepted in a URL (they end up in logs and history): send `Authorization: Bearer <token>`, or for WebSocket the subprotocol `bearer.<token>`. If that was a real token, rotate it (`bulwark access rotate USER`)".into(),
        )
        .into_response();
    }
    let headers = request.headers();
    if request.method() == Method::OPTIONS
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        return ApiError::Forbidden(
            "cross-origin requests are not allowed: this API grants no CORS access".into(),
        )
        .into_response();
    }
    let mut origins = headers.get_all(header::ORIGIN).iter();
    if let Some(origin) = origins.next() {
        let ok =
            origins.next().is_none() && origin.to_str().is_ok_and(|o| policy.origin_allowed(o));
        if !ok {
            state.metrics().refused_origin();
            return ApiError::Forbidden(
                "requests from this Origin are not allowed; open the page from the server's own address".into(),
            )
            .into_response();
        }
    }
    let cost = if request.uri().path() == "/health" {
        // Health checks keep their connection: they must get through a
        // flood of half-open connections (see `conns`).
        crate::conns::promote(request.extensions());
        state.config().limits.costs.health
    } else {
        state.config().limits.costs.read
    };
    if let Err(limited) = state.limiters().charge_ip(client_ip(&request), cost) {
        state.metrics().rate_limited();
        return ApiError::TooManyRequests {
            message: "too many requests from this address; slow down".into(),
            retry_after_secs: limited.retry_after_secs,
        }
        .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_in_queries_are_recognised() {
        for q in [
            "token=abc",
            "access_token=x",
            "a=1&api_key=2",
            "x=bwk_0123",
            "x=%62wk_0123",
            "x=%2562wk_0123",
            "AUTHORIZATION=Bearer%20x",
            "k=bearer.abc",
        ] {
            assert!(query_carries_token(q), "{q}");
        }
        for q in [
            "user=alice",
            "limit=10&agent=a",
            "after=5",
            "%",
            "%zz",
            "a=%e2%82",
        ] {
            assert!(!query_carries_token(q), "{q}");
        }
    }

    #[test]
    fn host_must_be_single_and_agree_with_the_authority() {
        let uri: axum::http::Uri = "/x".parse().unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(request_host(&h, &uri), None);
        h.insert(header::HOST, "LocalHost:1".parse().unwrap());
        assert_eq!(request_host(&h, &uri).as_deref(), Some("localhost:1"));
        h.append(header::HOST, "evil:1".parse().unwrap());
        assert_eq!(request_host(&h, &uri), None);
        let abs: axum::http::Uri = "http://evil:1/x".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "localhost:1".parse().unwrap());
        assert_eq!(request_host(&h, &abs), None);
        assert_eq!(
            request_host(&HeaderMap::new(), &abs).as_deref(),
            Some("evil:1")
        );
    }
}
