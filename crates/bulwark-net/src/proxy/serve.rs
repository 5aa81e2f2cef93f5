//! The accept loop, one hyper HTTP/1.1 connection per program connection,
//! and the two request forms the proxy serves.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use super::splice::{Activity, Counted, splice};
use super::{ProxyConfig, ProxyEvent, ProxyObserver, ProxyRequestKind};
use crate::{BodyMode, HttpRequest, NetError};

/// Longest host shown in an event or a refusal.
const MAX_HOST_SHOWN: usize = 255;
/// Longest refusal line sent back to the program.
const MAX_REASON: usize = 1024;

pub(super) struct State {
    pub(super) config: ProxyConfig,
    pub(super) observer: Arc<dyn ProxyObserver>,
    pub(super) slots: Arc<Semaphore>,
    pub(super) stop: watch::Receiver<bool>,
}

impl State {
    fn observe(&self, event: ProxyEvent) {
        self.observer.observe(event);
    }

    fn refused(&self, kind: ProxyRequestKind, host: &str, port: u16, reason: &str) {
        self.observe(ProxyEvent {
            kind,
            host: clip_host(host),
            port,
            refused: Some(reason.to_string()),
            bytes_up: 0,
            bytes_down: 0,
            credentials: Vec::new(),
        });
    }
}

pub(super) async fn accept_loop(listener: UnixListener, state: Arc<State>) {
    let mut stop = state.stop.clone();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => return,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            // Out of descriptors or similar: wait a little rather than spin;
            // the listener itself stays up.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match state.slots.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(connection(stream, state.clone(), Arc::new(permit)));
            }
            Err(_) => too_many(stream, &state),
        }
    }
}

/// Over `max_connections`: a fixed 503, written without waiting (a fresh
/// socket's buffer takes it), and the connection closed.
fn too_many(stream: UnixStream, state: &State) {
    let reason = format!(
        "too many connections through the egress proxy (limit {}); close some and retry",
        state.config.limits.max_connections.max(1)
    );
    let text = format!("bulwark egress proxy: {reason}\n");
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.try_write(reply.as_bytes());
    state.refused(ProxyRequestKind::NoRequest, "", 0, &reason);
}

async fn connection(stream: UnixStream, state: Arc<State>, permit: Arc<OwnedSemaphorePermit>) {
    let limits = state.config.limits;
    let activity = Activity::new();
    activity.touch();
    let io = TokioIo::new(Counted::new(stream, activity.clone()));
    let service_state = state.clone();
    let service_activity = activity.clone();
    let service = hyper::service::service_fn(move |req| {
        let state = service_state.clone();
        let activity = service_activity.clone();
        let permit = permit.clone();
        async move { Ok::<_, Infallible>(handle(req, state, activity, permit).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_head_bytes.max(8 * 1024))
        .keep_alive(true);
    let conn = builder.serve_connection(io, service).with_upgrades();
    let mut stop = state.stop.clone();
    let served = tokio::select! {
        r = conn => r,
        _ = activity.idle(limits.idle_timeout) => Ok(()),
        _ = stop.wait_for(|s| *s) => Ok(()),
    };
    if let Err(e) = served {
        // hyper has already answered a malformed or oversized head (400,
        // 431) where it could; a timeout or garbage just closes.
        let reason = if e.is_parse_too_large() {
            format!(
                "request head larger than {} bytes",
                limits.max_head_bytes.max(8 * 1024)
            )
        } else if e.is_timeout() {
            "request head not received in time".to_string()
        } else if e.is_parse() || e.is_parse_status() {
            "not an HTTP/1.1 request".to_string()
        } else {
            return; // The program went away mid-exchange: nothing decided.
        };
        state.refused(ProxyRequestKind::NoRequest, "", 0, &reason);
    }
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<State>,
    activity: Arc<Activity>,
    permit: Arc<OwnedSemaphorePermit>,
) -> Response<Full<Bytes>> {
    activity.busy.fetch_add(1, Ordering::Relaxed);
    let response = if req.method() == Method::CONNECT {
        connect(req, &state, permit).await
    } else {
        forward(req, &state).await
    };
    activity.touch();
    activity.busy.fetch_sub(1, Ordering::Relaxed);
    response
}

async fn connect(
    req: Request<Incoming>,
    state: &Arc<State>,
    permit: Arc<OwnedSemaphorePermit>,
) -> Response<Full<Bytes>> {
    let kind = ProxyRequestKind::Connect;
    let uri = req.uri();
    let Some(authority) = uri
        .authority()
        .filter(|_| uri.scheme().is_none() && uri.path_and_query().is_none())
    else {
        let reason = "CONNECT needs a host:port target";
        state.refused(kind, "", 0, reason);
        return plain(StatusCode::BAD_REQUEST, reason);
    };
    let host = authority.host();
    let Some(port) = authority.port_u16() else {
        let reason = "CONNECT needs an explicit port (host:port)";
        state.refused(kind, host, 0, reason);
        return plain(StatusCode::BAD_REQUEST, reason);
    };
    if authority.as_str().contains('@') {
        let reason = "a CONNECT target cannot carry a user name";
        state.refused(kind, host, port, reason);
        return plain(StatusCode::BAD_REQUEST, reason);
    }
    let config = &state.config;
    let upstream = match config
        .http
        .open_tunnel(&config.context, host, port, &config.held_keys)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            let (status, reason) = refusal(&e);
            state.refused(kind, host, port, &reason);
            return plain(status, &reason);
        }
    };
    let host = clip_host(host);
    let idle = config.limits.idle_timeout;
    let stop = state.stop.clone();
    let tunnel_state = state.clone();
    tokio::spawn(async move {
        let _permit = permit;
        let (up, down) = match hyper::upgrade::on(req).await {
            Ok(upgraded) => splice(TokioIo::new(upgraded), upstream, idle, stop).await,
            Err(_) => (0, 0),
        };
        tunnel_state.observe(ProxyEvent {
            kind,
            host,
            port,
            refused: None,
            bytes_up: up,
            bytes_down: down,
            credentials: Vec::new(),
        });
    });
    Response::new(Full::new(Bytes::new()))
}

/// Hop-by-hop headers (RFC 9110 section 7.6.1) and what SafeHttp sets
/// itself; never forwarded from the program.
const DROPPED_UP: &[&str] = &[
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
    // The proxy reads the whole body before asking; the origin must not
    // wait for a go-ahead nobody will act on.
    "expect",
];

/// Not returned to the program: hop-by-hop, and what the proxy re-frames
/// (SafeHttp has already decoded the body).
const DROPPED_DOWN: &[&str] = &[
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-encoding",
];

async fn forward(req: Request<Incoming>, state: &Arc<State>) -> Response<Full<Bytes>> {
    let kind = ProxyRequestKind::Forward;
    let uri = req.uri().clone();
    let host = uri.host().unwrap_or_default().to_string();
    let port = uri.port_u16().unwrap_or(80);
    let reject = |status: StatusCode, reason: &str| {
        state.refused(kind, &host, port, reason);
        plain(status, reason)
    };
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return reject(
                StatusCode::BAD_REQUEST,
                "https:// requests must be tunnelled: use CONNECT host:443 (set HTTPS_PROXY)",
            );
        }
        Some(_) => return reject(StatusCode::BAD_REQUEST, "only http:// URLs are proxied"),
        None => {
            return reject(
                StatusCode::BAD_REQUEST,
                "this is a proxy: send an absolute http:// URL, or CONNECT host:port",
            );
        }
    }
    let http = &state.config.http;
    let (parts, body) = req.into_parts();
    let head_only = parts.method == Method::HEAD;
    let headers = match request_headers(&parts.headers) {
        Ok(h) => h,
        Err(reason) => return reject(StatusCode::BAD_REQUEST, &reason),
    };
    let limit = http.limits().max_body_bytes;
    let collected = tokio::time::timeout(
        http.limits().total_timeout,
        Limited::new(body, limit).collect(),
    )
    .await;
    let body = match collected {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("request body larger than {limit} bytes"),
            );
        }
        Ok(Err(_)) => {
            return reject(
                StatusCode::BAD_REQUEST,
                "the request body could not be read",
            );
        }
        Err(_) => return reject(StatusCode::REQUEST_TIMEOUT, "the request body was too slow"),
    };
    let bytes_up = body.len() as u64;
    let request = HttpRequest {
        method: parts.method.as_str().to_string(),
        url: uri.to_string(),
        headers,
        body: body.to_vec(),
    };
    let sent = http
        .send_once_as(&state.config.context, request, BodyMode::Complete)
        .await;
    let (response, refused, bytes_down) = match sent.result {
        Ok(r) => {
            let down = r.body.len() as u64;
            let mut response = Response::new(Full::new(Bytes::from(r.body)));
            *response.status_mut() =
                StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_GATEWAY);
            let out = response.headers_mut();
            for (name, value) in &r.headers {
                // A HEAD answer's length describes the body it did not send.
                let keep_length = head_only && name == header::CONTENT_LENGTH;
                if keep_length || !DROPPED_DOWN.contains(&name.as_str()) && !is_proxy_header(name) {
                    out.append(name.clone(), value.clone());
                }
            }
            (response, None, down)
        }
        Err(e) => {
            let (status, reason) = refusal(&e);
            (plain(status, &reason), Some(reason), 0)
        }
    };
    state.observe(ProxyEvent {
        kind,
        host: clip_host(&host),
        port,
        refused,
        bytes_up,
        bytes_down,
        credentials: sent.credentials,
    });
    response
}

fn is_proxy_header(name: &HeaderName) -> bool {
    name.as_str().starts_with("proxy-")
}

/// The program's headers minus hop-by-hop ones (and those its
/// `Connection` header names), `Proxy-*`, and what SafeHttp sets.
fn request_headers(given: &HeaderMap) -> Result<Vec<(String, String)>, String> {
    let named: Vec<String> = given
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut out = Vec::new();
    for (name, value) in given {
        let n = name.as_str();
        if DROPPED_UP.contains(&n) || is_proxy_header(name) || named.iter().any(|t| t == n) {
            continue;
        }
        let value = value
            .to_str()
            .map_err(|_| format!("header {n} is not ASCII text"))?;
        out.push((n.to_string(), value.to_string()));
    }
    Ok(out)
}

/// The status and the one line the program is told for a SafeHttp error.
fn refusal(error: &NetError) -> (StatusCode, String) {
    let status = match error {
        NetError::InvalidUrl { .. } | NetError::Header { .. } => StatusCode::BAD_REQUEST,
        NetError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
        NetError::TooLarge { .. }
        | NetError::Transport { .. }
        | NetError::Resolve { .. }
        | NetError::Encoding { .. }
        | NetError::TooManyRedirects { .. }
        | NetError::Downgrade { .. }
        | NetError::Listen { .. } => StatusCode::BAD_GATEWAY,
        NetError::InvalidRule { .. }
        | NetError::Scheme { .. }
        | NetError::Userinfo { .. }
        | NetError::NotAllowed { .. }
        | NetError::ForbiddenAddress { .. }
        | NetError::Credential { .. }
        | NetError::HeldKey { .. }
        | NetError::Exfiltration { .. } => StatusCode::FORBIDDEN,
    };
    let line: String = error
        .to_string()
        .replace(['\r', '\n'], " ")
        .chars()
        .take(MAX_REASON)
        .collect();
    (status, line)
}

fn plain(status: StatusCode, reason: &str) -> Response<Full<Bytes>> {
    let text = format!("bulwark egress proxy: {reason}\n");
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn clip_host(host: &str) -> String {
    host.chars().take(MAX_HOST_SHOWN).collect()
}
