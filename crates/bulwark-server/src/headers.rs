//! Security headers on every response, errors and refusals included.
//!
//! The set follows the OWASP Secure Headers Project's recommendations
//! (tests check every route against its lists). The CSP is stricter than
//! its baseline: nothing loads by default, scripts and styles only from
//! this origin's files (the web page's `/assets/`) or inline with this
//! response's nonce, connections only to this origin (`'self'` covers its
//! `ws://`/`wss://` too), and no `unsafe-inline`, `unsafe-eval` or
//! third-party source anywhere. HSTS and
//! `upgrade-insecure-requests` are sent only when the server is reached
//! over https; on plain loopback http they would break the page.

use crate::app::AppState;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine;

/// This response's CSP nonce, for a handler that renders inline script or
/// style (a request extension). `None` when no random nonce could be made:
/// then no inline code is allowed at all.
#[derive(Debug, Clone)]
pub struct CspNonce(pub Option<String>);

impl CspNonce {
    fn fresh() -> Self {
        let mut bytes = [0u8; 16];
        match crate::secret::random_bytes(&mut bytes) {
            Ok(()) => CspNonce(Some(
                base64::engine::general_purpose::STANDARD.encode(bytes),
            )),
            Err(_) => CspNonce(None),
        }
    }
}

/// The Content-Security-Policy for one response.
pub fn content_security_policy(nonce: &CspNonce, tls: bool) -> String {
    let inline = match &nonce.0 {
        Some(n) => format!("'nonce-{n}'"),
        None => "'none'".to_string(),
    };
    let mut csp = format!(
        "default-src 'none'; script-src 'self' {inline}; style-src 'self' {inline}; img-src 'self'; \
         connect-src 'self'; form-action 'none'; base-uri 'none'; object-src 'none'; \
         frame-ancestors 'none'"
    );
    if tls {
        csp.push_str("; upgrade-insecure-requests");
    }
    csp
}

/// Every feature off. (`sync-xhr` too, which the OWASP list leaves to
/// `self`: the API needs none of them.)
const PERMISSIONS_POLICY: &str = "accelerometer=(), autoplay=(), camera=(), \
cross-origin-isolated=(), display-capture=(), encrypted-media=(), fullscreen=(), geolocation=(), \
gyroscope=(), keyboard-map=(), magnetometer=(), microphone=(), midi=(), payment=(), \
picture-in-picture=(), publickey-credentials-get=(), screen-wake-lock=(), sync-xhr=(), usb=(), \
web-share=(), xr-spatial-tracking=(), clipboard-read=(), clipboard-write=(), gamepad=(), hid=(), \
idle-detection=(), interest-cohort=(), serial=(), unload=()";

const STATIC_HEADERS: &[(&str, &str)] = &[
    ("cache-control", "no-store, max-age=0"),
    ("clear-site-data", "\"cache\",\"cookies\",\"storage\""),
    ("cross-origin-embedder-policy", "require-corp"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    ("permissions-policy", PERMISSIONS_POLICY),
    ("referrer-policy", "no-referrer"),
    ("x-content-type-options", "nosniff"),
    ("x-dns-prefetch-control", "off"),
    ("x-frame-options", "DENY"),
    ("x-permitted-cross-domain-policies", "none"),
];

/// Headers that describe the software or its internals; never sent even
/// if a layer below adds one.
const REMOVED: &[&str] = &["server", "x-powered-by", "powered-by", "x-aspnet-version"];

/// Sets the security headers on `headers` (replacing any value a handler set).
pub fn apply(headers: &mut HeaderMap, nonce: &CspNonce, tls: bool) {
    for (name, value) in STATIC_HEADERS {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    if let Ok(csp) = HeaderValue::from_str(&content_security_policy(nonce, tls)) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    if tls {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=63072000; includeSubDomains"),
        );
    } else {
        headers.remove(header::STRICT_TRANSPORT_SECURITY);
    }
    for name in REMOVED {
        headers.remove(*name);
    }
    // Cross-origin reads are never granted (no CORS); make sure nothing
    // below granted one.
    let cors: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("access-control-"))
        .cloned()
        .collect();
    for name in cors {
        headers.remove(name);
    }
}

/// The outermost layer: every response passes here.
pub(crate) async fn security_headers(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let nonce = CspNonce::fresh();
    request.extensions_mut().insert(nonce.clone());
    let mut response = next.run(request).await;
    apply(response.headers_mut(), &nonce, state.config().tls);
    response
}
