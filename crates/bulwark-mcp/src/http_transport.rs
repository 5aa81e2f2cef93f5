//! Streamable HTTP through `SafeHttp`: rmcp's transport (the protocol:
//! discovery, the legacy fallback, JSON and SSE answers) over Bulwark's one
//! HTTP client, so the allowlist, the address table, the connect-time peer
//! check, credential grants and the exfiltration guard apply to every POST.
//! rmcp's own reqwest client is never used.
//!
//! `SafeHttp` returns whole bodies (bounded by its `max_body_bytes`). So an
//! SSE answer is read whole and its events parsed from memory (each event
//! still bounded by the message limit), and the GET stream for
//! server-initiated messages is not offered (Bulwark answers none anyway).
//! A 2025-11-25 server's `Mcp-Session-Id` (from the response headers) is
//! carried on every later POST.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use bulwark_net::{BodyMode, CallContext, HttpRequest, NetError, SafeHttp};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData, ServerJsonRpcMessage};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use crate::client::stdio::{Fault, FaultKind};

/// Characters of an unusable body kept in an error.
const BODY_PREVIEW_CHARS: usize = 256;

/// rmcp's HTTP backend, implemented over [`SafeHttp::send_as`].
#[derive(Clone)]
pub(crate) struct SafeHttpClient {
    http: Arc<SafeHttp>,
    context: CallContext,
    max_message: usize,
    fault: Arc<Fault>,
}

/// The transport for `url`, after `http`'s pre-flight check of it.
pub(crate) fn transport(
    url: &str,
    http: Arc<SafeHttp>,
    context: CallContext,
    max_message: usize,
    fault: Arc<Fault>,
) -> Result<StreamableHttpClientTransport<SafeHttpClient>, String> {
    http.check_url(url).map_err(|e| e.to_string())?;
    let client = SafeHttpClient {
        http,
        context,
        max_message,
        fault,
    };
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .max_sse_event_size(max_message)
        .max_json_response_size(max_message)
        .max_concurrent_requests(4)
        .reinit_on_expired_session(false);
    config.allow_stateless = true;
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

fn preview(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .chars()
        .filter(|c| !c.is_control())
        .take(BODY_PREVIEW_CHARS)
        .collect()
}

impl SafeHttpClient {
    fn net_error(&self, error: NetError) -> StreamableHttpError<NetError> {
        match &error {
            NetError::TooLarge { .. } => self.fault.set(FaultKind::TooLarge),
            // Refusals by policy are final: every later request would get
            // the same answer, so the first one is the error to report.
            NetError::NotAllowed { .. }
            | NetError::ForbiddenAddress { .. }
            | NetError::Exfiltration { .. }
            | NetError::Credential { .. }
            | NetError::Scheme { .. }
            | NetError::Userinfo { .. }
            | NetError::InvalidUrl { .. }
            | NetError::Downgrade { .. } => self.fault.set(FaultKind::Http(error.to_string())),
            _ => {}
        }
        StreamableHttpError::Client(error)
    }

    fn malformed(&self, detail: String) -> StreamableHttpError<NetError> {
        self.fault.set(FaultKind::Malformed(detail.clone()));
        StreamableHttpError::UnexpectedServerResponse(Cow::Owned(detail))
    }

    /// The events of a whole `text/event-stream` body, each bounded by the
    /// message limit (an oversized one ends the stream with an error).
    fn sse_events(&self, body: Vec<u8>) -> BoxStream<'static, Result<Sse, SseError>> {
        let max = self.max_message;
        let fault = self.fault.clone();
        let source =
            futures_util::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(body)) });
        let mut failed = false;
        SseStream::from_bytes_stream(source)
            .map(move |event| match event {
                Ok(sse) if sse.data.as_ref().is_some_and(|d| d.len() > max) => {
                    fault.set(FaultKind::TooLarge);
                    Err(SseError::Body(
                        format!("an SSE event is larger than {max} bytes").into(),
                    ))
                }
                other => other,
            })
            .take_while(move |item| {
                let go = !failed;
                failed |= item.is_err();
                std::future::ready(go)
            })
            .boxed()
    }
}

impl StreamableHttpClient for SafeHttpClient {
    type Error = NetError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<NetError>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        _max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<NetError>> {
        self.post_message(uri, message, session_id, auth_header, custom_headers)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        _limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<NetError>> {
        let body = serde_json::to_vec(&message)?;
        let mut headers = vec![
            ("Content-Type".to_string(), "application/json".to_string()),
            (
                "Accept".to_string(),
                "application/json, text/event-stream".to_string(),
            ),
        ];
        if let Some(token) = auth_header {
            headers.push(("Authorization".into(), format!("Bearer {token}")));
        }
        if let Some(session) = &session_id {
            headers.push(("Mcp-Session-Id".into(), session.to_string()));
        }
        for (name, value) in &custom_headers {
            if let Ok(value) = value.to_str() {
                headers.push((name.as_str().to_string(), value.to_string()));
            }
        }
        let request = HttpRequest {
            method: "POST".into(),
            url: uri.to_string(),
            headers,
            body,
        };
        let sent = self
            .http
            .send_as(&self.context, request, BodyMode::Complete)
            .await;
        let response = sent.result.map_err(|e| self.net_error(e))?;
        let status = response.status;
        let content_type = response
            .content_type
            .as_deref()
            .and_then(|ct| ct.split(';').next())
            .map(|ct| ct.trim().to_ascii_lowercase())
            .unwrap_or_default();
        let awaits_no_response = !matches!(message, ClientJsonRpcMessage::Request(_));
        // A 2025-11-25 server hands out its session on `initialize`; every
        // later POST must carry it back.
        let new_session: Option<String> = response
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| {
                !v.is_empty() && v.len() <= 256 && v.bytes().all(|b| (0x21..=0x7e).contains(&b))
            })
            .map(str::to_owned);

        if matches!(status, 202 | 204) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == 404 && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if !(200..300).contains(&status) {
            let parsed = if content_type == "application/json" {
                serde_json::from_slice::<ServerJsonRpcMessage>(&response.body).ok()
            } else {
                None
            };
            // A legacy server answers `server/discover` with a 4xx; hand the
            // lifecycle a correlated JSON-RPC error so it falls back to
            // `initialize` (what rmcp's built-in clients do).
            if let ClientJsonRpcMessage::Request(request) = &message
                && matches!(request.request, ClientRequest::DiscoverRequest(_))
                && (400..500).contains(&status)
                && !matches!(status, 401 | 403)
                && session_id.is_none()
            {
                let error = match parsed {
                    Some(ServerJsonRpcMessage::Error(error)) => error.error,
                    _ => ErrorData::invalid_request(
                        format!(
                            "server/discover rejected with HTTP {status}: {}",
                            preview(&response.body)
                        ),
                        None,
                    ),
                };
                return Ok(StreamableHttpPostResponse::Json(
                    ServerJsonRpcMessage::error(error, Some(request.id.clone())),
                    None,
                ));
            }
            if let Some(error @ ServerJsonRpcMessage::Error(_)) = parsed {
                return Ok(StreamableHttpPostResponse::Json(error, None));
            }
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {}", preview(&response.body)),
            )));
        }
        if response.body.is_empty() && awaits_no_response {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        match content_type.as_str() {
            "text/event-stream" => Ok(StreamableHttpPostResponse::Sse(
                self.sse_events(response.body),
                new_session,
            )),
            "application/json" => {
                if response.body.len() > self.max_message {
                    self.fault.set(FaultKind::TooLarge);
                    return Err(StreamableHttpError::ResponseBodyTooLarge {
                        max_size: self.max_message,
                    });
                }
                match serde_json::from_slice::<ServerJsonRpcMessage>(&response.body) {
                    Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, new_session)),
                    Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                    Err(e) => Err(self.malformed(format!(
                        "an answer is not valid JSON-RPC ({e}): {}",
                        preview(&response.body)
                    ))),
                }
            }
            _ if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
            other => Err(StreamableHttpError::UnexpectedContentType(Some(
                other.to_string(),
            ))),
        }
    }

    async fn delete_session(
        &self,
        _uri: Arc<str>,
        _session_id: Arc<str>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<NetError>> {
        Ok(())
    }

    async fn get_stream(
        &self,
        _uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        _last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<NetError>> {
        // Server-initiated messages are refused anyway; a standing GET
        // would only hold a connection (SafeHttp reads bodies whole).
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    }
}
