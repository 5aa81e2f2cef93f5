//! What the HTTP drivers share: provider configuration, the reqwest client,
//! retries, the capped event-stream reader, and error mapping that never
//! leaks the API key or the request body.
//!
//! Provider endpoints are configured by the operator, not chosen by an agent,
//! and include local servers (Ollama on 127.0.0.1), so they do not go through
//! the agent-facing egress filter; they get a plain client with proxies off
//! (an environment proxy must not see the key), redirects off (a redirect
//! would carry the key header, `x-api-key` or `api-key`, to wherever the
//! `Location` points: reqwest strips only `Authorization` and `Cookie` on a
//! cross-origin hop) and hard limits instead.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};

use crate::LlmError;
use crate::sse::{SseEvent, SseParser};

/// Longest wait between attempts, whatever `Retry-After` asks for: a server
/// must not be able to park a session for an hour.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How much of an error body is read: enough for any JSON error, no more.
const ERROR_BODY_CAP: usize = 64 * 1024;

/// How many characters of a provider's error message reach the error.
const DETAIL_CHARS: usize = 300;

/// How many characters of a redirect's `Location` reach the error.
const LOCATION_CHARS: usize = 200;

/// One provider endpoint and the limits that apply to talking to it.
///
/// `Debug` shows the key only as `[REDACTED]` (that is what `SecretString`
/// prints), so a config can be logged.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Scheme, host, port and path prefix, e.g. `https://api.anthropic.com`
    /// or `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    pub api_key: Option<SecretString>,
    pub connect_timeout: Duration,
    /// Whole request, streaming included.
    pub request_timeout: Duration,
    /// Cap on the raw response bytes (the event stream, framing included).
    pub max_response_bytes: usize,
    /// Extra attempts after the first (for 429, 5xx and connect errors only).
    pub max_retries: u32,
    /// First backoff; doubles per attempt up to [`MAX_BACKOFF`].
    pub initial_backoff: Duration,
}

impl ProviderConfig {
    /// Defaults sized for chat models: 10 s to connect, 10 min per response
    /// (long generations stream slowly), 16 MiB of stream, 3 retries from 1 s.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(600),
            max_response_bytes: 16 * 1024 * 1024,
            max_retries: 3,
            initial_backoff: Duration::from_secs(1),
        }
    }

    /// Builder-style key setter.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(SecretString::from(key.into()));
        self
    }
}

/// A configured HTTP endpoint for one provider.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    provider: &'static str,
    client: reqwest::Client,
    config: ProviderConfig,
    url: reqwest::Url,
}

impl Endpoint {
    /// Check the base URL and build the client. `path` is appended to the
    /// base URL's path (`/v1/messages`, `/chat/completions`).
    pub(crate) fn new(
        provider: &'static str,
        config: ProviderConfig,
        path: &str,
    ) -> Result<Self, LlmError> {
        let config_error = |what: &str| LlmError::Config(format!("{provider}: base_url {what}"));
        let base = reqwest::Url::parse(config.base_url.trim())
            .map_err(|e| config_error(&format!("is not a URL: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(config_error("must use http or https"));
        }
        // Userinfo would be echoed in every error message that names the URL.
        if !base.username().is_empty() || base.password().is_some() {
            return Err(config_error("must not carry credentials; set api_key"));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(config_error("must not have a query or fragment"));
        }
        let mut url = base.clone();
        let joined = format!("{}{}", base.path().trim_end_matches('/'), path);
        url.set_path(&joined);
        let client = reqwest::Client::builder()
            .no_proxy()
            // Never follow a redirect: the key header would go with it.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .build()
            .map_err(|e| LlmError::Config(format!("{provider}: cannot build HTTP client: {e}")))?;
        Ok(Self {
            provider,
            client,
            config,
            url,
        })
    }

    pub(crate) fn url(&self) -> &str {
        self.url.as_str()
    }

    /// The API key as a header value marked sensitive (so reqwest/hyper never
    /// print it). This is the only place the key is exposed.
    pub(crate) fn key_header(&self, prefix: &str) -> Result<Option<HeaderValue>, LlmError> {
        let Some(key) = &self.config.api_key else {
            return Ok(None);
        };
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", key.expose_secret()))
            .map_err(|_| {
                LlmError::Config(format!(
                    "{}: api_key contains characters not allowed in an HTTP header",
                    self.provider
                ))
            })?;
        value.set_sensitive(true);
        Ok(Some(value))
    }

    /// POST `body` and return an event stream once the server answered 2xx.
    /// Retries 429, 5xx and connect failures with exponential backoff
    /// (honouring `Retry-After` seconds), always before any response byte of
    /// a success was read, so no partial output is ever replayed.
    pub(crate) async fn post_stream(
        &self,
        headers: HeaderMap,
        body: &serde_json::Value,
    ) -> Result<EventStream, LlmError> {
        let body = Bytes::from(serde_json::to_vec(body).map_err(|e| {
            LlmError::Config(format!("{}: cannot encode request: {e}", self.provider))
        })?);
        let mut attempt: u32 = 0;
        loop {
            let sent = self
                .client
                .post(self.url.clone())
                .headers(headers.clone())
                .header(
                    reqwest::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )
                .header(
                    reqwest::header::ACCEPT,
                    HeaderValue::from_static("text/event-stream"),
                )
                .body(body.clone())
                .send()
                .await;
            let retries_left = attempt < self.config.max_retries;
            let wait = match sent {
                Ok(response) if response.status().is_success() => {
                    return Ok(EventStream {
                        response,
                        parser: SseParser::new(),
                        read: 0,
                        limit: self.config.max_response_bytes,
                        provider: self.provider,
                        timeout: self.config.request_timeout,
                    });
                }
                Ok(response) if response.status().is_redirection() => {
                    return Err(self.redirect_error(&response));
                }
                Ok(response) => {
                    let status = response.status();
                    let retryable = status.as_u16() == 429 || status.is_server_error();
                    if !(retryable && retries_left) {
                        return Err(self.status_error(response).await);
                    }
                    retry_after(response.headers()).unwrap_or_else(|| self.backoff(attempt))
                }
                Err(e) if e.is_connect() && retries_left => self.backoff(attempt),
                Err(e) => return Err(self.transport_error(e)),
            };
            tracing::debug!(
                provider = self.provider,
                attempt,
                wait_ms = wait.as_millis() as u64,
                "retrying provider request"
            );
            tokio::time::sleep(wait.min(MAX_BACKOFF)).await;
            attempt += 1;
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
        self.config
            .initial_backoff
            .checked_mul(factor)
            .unwrap_or(MAX_BACKOFF)
            .min(MAX_BACKOFF)
    }

    fn transport_error(&self, error: reqwest::Error) -> LlmError {
        if error.is_timeout() && !error.is_connect() {
            return LlmError::Timeout {
                provider: self.provider.to_owned(),
                secs: self.config.request_timeout.as_secs(),
            };
        }
        LlmError::Transport {
            provider: self.provider.to_owned(),
            url: self.url().to_owned(),
            detail: self.redact(&error_chain(error)),
        }
    }

    /// A 3xx answer: not followed (the request carries the key), so the
    /// error names where the server pointed and what to change.
    fn redirect_error(&self, response: &reqwest::Response) -> LlmError {
        let location = match response.headers().get(reqwest::header::LOCATION) {
            Some(value) => {
                let text: String = String::from_utf8_lossy(value.as_bytes())
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect();
                format!(
                    "a redirect to {}",
                    truncate_chars(&self.redact(&text), LOCATION_CHARS)
                )
            }
            None => "a redirect without a Location header".to_owned(),
        };
        LlmError::Status {
            provider: self.provider.to_owned(),
            url: self.url().to_owned(),
            status: response.status().as_u16(),
            detail: format!(
                "{location}; provider requests never follow redirects, because the API key \
                 header would go to the new address: set base_url to the address the \
                 provider serves its API at directly"
            ),
        }
    }

    /// Read (a capped prefix of) a non-2xx body and extract its message.
    async fn status_error(&self, mut response: reqwest::Response) -> LlmError {
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while body.len() < ERROR_BODY_CAP {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        body.truncate(ERROR_BODY_CAP);
        LlmError::Status {
            provider: self.provider.to_owned(),
            url: self.url().to_owned(),
            status,
            detail: self.redact(&error_detail(&body)),
        }
    }

    /// Remove the key from text a server sent back (some echo it, raw or
    /// encoded) and cut the text to [`DETAIL_CHARS`].
    fn redact(&self, text: &str) -> String {
        let text = match &self.config.api_key {
            Some(key) => bulwark_net::redact_value(text, key.expose_secret(), "[redacted]"),
            None => text.to_owned(),
        };
        truncate_chars(&text, DETAIL_CHARS)
    }
}

/// `Retry-After` in delta-seconds form. The HTTP-date form is ignored (the
/// exponential backoff applies) because clocks of client and server differ.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(HeaderName::from_static("retry-after"))?;
    let secs: u64 = value.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs).min(MAX_BACKOFF))
}

/// The error and its causes, without the URL (the caller names it once).
fn error_chain(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `error.message` (Anthropic and OpenAI), `error` as a string (Ollama), or
/// the raw body, with control characters flattened.
fn error_detail(body: &[u8]) -> String {
    let text = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(json) => match json.get("error") {
            Some(serde_json::Value::String(message)) => message.clone(),
            Some(error) => match error.get("message").and_then(|m| m.as_str()) {
                Some(message) => message.to_owned(),
                None => error.to_string(),
            },
            None => json.to_string(),
        },
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let text = text.trim();
    if text.is_empty() {
        "(no error message)".to_owned()
    } else {
        text.to_owned()
    }
}

pub(crate) fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A 2xx response read as server-sent events, with the byte cap enforced on
/// every chunk as it arrives.
pub(crate) struct EventStream {
    response: reqwest::Response,
    parser: SseParser,
    read: usize,
    limit: usize,
    provider: &'static str,
    timeout: Duration,
}

impl EventStream {
    /// The next event; `Ok(None)` when the server closed the stream cleanly.
    /// Whether that end was premature is the driver's call: only it knows the
    /// terminal event of its protocol.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, LlmError> {
        loop {
            if let Some(event) = self.parser.next_event() {
                return Ok(Some(event));
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => {
                    self.read = self.read.saturating_add(chunk.len());
                    if self.read > self.limit {
                        return Err(LlmError::TooLarge {
                            provider: self.provider.to_owned(),
                            limit: self.limit,
                        });
                    }
                    self.parser
                        .feed(&chunk)
                        .map_err(|e| protocol(self.provider, e.to_string()))?;
                }
                Ok(None) => return Ok(None),
                Err(e) if e.is_timeout() => {
                    return Err(LlmError::Timeout {
                        provider: self.provider.to_owned(),
                        secs: self.timeout.as_secs(),
                    });
                }
                Err(e) => {
                    return Err(protocol(
                        self.provider,
                        format!("stream ended early: connection broken: {}", error_chain(e)),
                    ));
                }
            }
        }
    }
}

/// The history a driver sends: repaired at the edge (whoever called the
/// driver), and never empty, since both APIs reject an empty conversation.
pub(crate) fn repaired_history(
    provider: &str,
    request: &crate::ChatRequest,
) -> Result<Vec<crate::Message>, LlmError> {
    let messages = crate::repair(request.messages.clone());
    if messages.is_empty() {
        return Err(LlmError::Config(format!(
            "{provider}: nothing to send: the conversation is empty after session repair"
        )));
    }
    Ok(messages)
}

pub(crate) fn protocol(provider: &str, detail: impl Into<String>) -> LlmError {
    LlmError::Protocol {
        provider: provider.to_owned(),
        detail: detail.into(),
    }
}

/// The error for a stream that closed before its terminal event.
pub(crate) fn ended_early(provider: &str, terminal: &str) -> LlmError {
    protocol(
        provider,
        format!("stream ended early (no {terminal} before the connection closed)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_the_key() {
        let config =
            ProviderConfig::new("https://api.example.test").with_api_key("sk-very-secret-1");
        let printed = format!("{config:?}");
        assert!(!printed.contains("sk-very-secret-1"), "{printed}");
        assert!(printed.contains("REDACTED"), "{printed}");
    }

    #[test]
    fn error_detail_shapes() {
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_detail(anthropic), "Overloaded");
        assert_eq!(
            error_detail(br#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(
            error_detail(b"<html>\nbad\ngateway</html>"),
            "<html> bad gateway</html>"
        );
        assert_eq!(error_detail(b""), "(no error message)");
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let text = "é".repeat(400);
        let cut = truncate_chars(&text, DETAIL_CHARS);
        assert_eq!(cut.chars().count(), DETAIL_CHARS + 1);
    }

    #[test]
    fn base_url_checks() {
        let bad = [
            "not a url",
            "ftp://x.test",
            "https://user:pw@x.test",
            "https://x.test/?q=1",
        ];
        for url in bad {
            let result = Endpoint::new("t", ProviderConfig::new(url), "/x");
            assert!(matches!(result, Err(LlmError::Config(_))), "{url}");
        }
        let ok = Endpoint::new(
            "t",
            ProviderConfig::new("http://127.0.0.1:11434/v1/"),
            "/chat/completions",
        );
        assert_eq!(
            ok.unwrap().url(),
            "http://127.0.0.1:11434/v1/chat/completions"
        );
    }

    #[test]
    fn retry_after_is_capped_and_backoff_doubles() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("99999"));
        assert_eq!(retry_after(&headers), Some(MAX_BACKOFF));
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
        let mut config = ProviderConfig::new("http://127.0.0.1:1");
        config.initial_backoff = Duration::from_millis(100);
        let endpoint = Endpoint::new("t", config, "/x").unwrap();
        assert_eq!(endpoint.backoff(0), Duration::from_millis(100));
        assert_eq!(endpoint.backoff(3), Duration::from_millis(800));
        assert_eq!(endpoint.backoff(40), MAX_BACKOFF);
    }
}
