//! Retries, status errors, size caps, truncation and key hygiene, for both
//! HTTP drivers, against a local server.

use crate::support;

use std::time::{Duration, Instant};

use bulwark_llm::{
    AnthropicDriver, ChatRequest, ChatResponse, LlmDriver, LlmError, Message, OpenAiDriver,
    ProviderConfig,
};
use serde_json::json;
use support::{Reply, TestServer};

const KEY: &str = "sk-live-SECRET-do-not-leak-4242";

const OK_ANTHROPIC: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

fn config(url: &str) -> ProviderConfig {
    let mut config = ProviderConfig::new(url).with_api_key(KEY);
    config.initial_backoff = Duration::from_millis(5);
    config.max_retries = 2;
    config
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        system: String::new(),
        messages: vec![Message::user_text("hi")],
        tools: vec![],
        max_tokens: 16,
        paths: Default::default(),
    }
}

async fn chat(driver: &dyn LlmDriver) -> Result<ChatResponse, LlmError> {
    driver.chat(&request(), &mut |_| {}).await
}

fn assert_no_key(err: &LlmError) {
    let shown = format!("{err} / {err:?}");
    assert!(!shown.contains(KEY), "key leaked: {shown}");
    assert!(!shown.contains("SECRET"), "part of key leaked: {shown}");
}

fn anthropic_overloaded() -> Reply {
    Reply::json(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
}

#[tokio::test]
async fn rate_limit_honours_retry_after_then_succeeds() {
    let server = TestServer::start(vec![
        Reply::json(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        )
        .header("retry-after", "1"),
        Reply::sse(OK_ANTHROPIC),
    ])
    .await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    let started = Instant::now();
    let response = chat(&driver).await.unwrap();
    assert_eq!(response.message.text(), "ok");
    assert_eq!(server.requests().len(), 2);
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "Retry-After: 1 was not honoured ({:?})",
        started.elapsed()
    );
    // The retry is the same request.
    assert_eq!(server.request(0).body, server.request(1).body);
}

#[tokio::test]
async fn server_errors_exhaust_retries_into_status_error() {
    let server = TestServer::start(vec![
        Reply::json(
            500,
            json!({"error": {"message": "boom", "type": "server_error"}}),
        ),
        Reply::json(
            502,
            json!({"error": {"message": "boom", "type": "server_error"}}),
        ),
        Reply::json(
            503,
            json!({"error": {"message": "still down", "type": "server_error"}}),
        ),
        Reply::sse("never reached"),
    ])
    .await;
    let driver = OpenAiDriver::new(config(&server.url)).unwrap();
    let err = chat(&driver).await.unwrap_err();
    assert_eq!(server.requests().len(), 3, "1 attempt + max_retries (2)");
    match &err {
        LlmError::Status { status, detail, .. } => {
            assert_eq!(*status, 503);
            assert_eq!(detail, "still down");
        }
        other => panic!("expected Status, got {other}"),
    }
    assert_no_key(&err);
}

#[tokio::test]
async fn anthropic_overload_is_retried() {
    let server = TestServer::start(vec![anthropic_overloaded(), Reply::sse(OK_ANTHROPIC)]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    chat(&driver).await.unwrap();
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn unauthorized_is_not_retried_and_names_url_and_status() {
    // A provider that echoes the key back must not get it into our error.
    let server = TestServer::start(vec![
        Reply::json(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}. (hex {})", hex_of(KEY)), "type": "invalid_request_error", "code": "invalid_api_key"}}),
        ),
        Reply::sse(OK_ANTHROPIC),
    ])
    .await;
    let driver = OpenAiDriver::new(config(&format!("{}/v1", server.url))).unwrap();
    let err = chat(&driver).await.unwrap_err();
    assert_eq!(server.requests().len(), 1);
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("{}/v1/chat/completions", server.url)),
        "{shown}"
    );
    assert!(shown.contains("401"), "{shown}");
    assert!(
        shown.contains("Incorrect API key provided: [redacted]. (hex [redacted])"),
        "{shown}"
    );
    assert_no_key(&err);
}

fn hex_of(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn long_error_bodies_are_truncated() {
    let long = "x".repeat(5000);
    let server =
        TestServer::start(vec![Reply::json(400, json!({"error": {"message": long}}))]).await;
    let driver = AnthropicDriver::new(config(&server.url)).unwrap();
    match chat(&driver).await.unwrap_err() {
        LlmError::Status { detail, status, .. } => {
            assert_eq!(status, 400);
            assert!(detail.chars().count() <= 301, "{}", detail.len());
        }
        other => panic!("expected Status, got {other}"),
    }
}

#[tokio::test]
async fn non_json_error_body_is_shown_as_text() {
    let server = TestServer::start(vec![Reply {
        status: 404,
        headers: vec![],
        chunks: vec![b"404 page not found".to_vec()],
        abort: false,
    }])
    .await;
    let driver = OpenAiDriver::new(config(&server.url)).unwrap();
    let err = chat(&driver).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Status { status: 404, detail, .. } if detail == "404 page not found"),
        "{err}"
    );
}

#[tokio::test]
async fn response_over_the_cap_is_too_large() {
    let mut text = String::new();
    text.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n");
    text.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    for _ in 0..200 {
        text.push_str("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}\n\n");
    }
    let server = TestServer::start(vec![Reply::sse_chunked(&text, 512)]).await;
    let mut config = config(&server.url);
    config.max_response_bytes = 4096;
    let driver = AnthropicDriver::new(config).unwrap();
    let mut deltas = 0;
    let err = driver
        .chat(&request(), &mut |_| deltas += 1)
        .await
        .unwrap_err();
    assert!(
        matches!(err, LlmError::TooLarge { limit: 4096, .. }),
        "{err}"
    );
    assert!(
        deltas < 40,
        "stopped near the cap, not at the end ({deltas})"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn dropped_connection_mid_stream_is_protocol_error_for_openai() {
    let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"ind";
    let server = TestServer::start(vec![Reply::sse(text).aborted(), Reply::sse(text)]).await;
    let driver = OpenAiDriver::new(config(&server.url)).unwrap();
    let err = chat(&driver).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Protocol { detail, .. } if detail.contains("stream ended early: connection broken")),
        "{err}"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "no retry once the stream started"
    );
}

#[tokio::test]
async fn connect_failure_is_retried_then_transport_error_without_key() {
    // Bind then drop a listener to get a port where nothing listens.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut config = config(&format!("http://127.0.0.1:{port}"));
    config.initial_backoff = Duration::from_millis(50);
    let driver = AnthropicDriver::new(config).unwrap();
    let started = Instant::now();
    let err = chat(&driver).await.unwrap_err();
    assert!(matches!(err, LlmError::Transport { .. }), "{err}");
    // Two backoffs (50 ms + 100 ms) were slept.
    assert!(
        started.elapsed() >= Duration::from_millis(140),
        "{:?}",
        started.elapsed()
    );
    assert!(
        err.to_string()
            .contains(&format!("127.0.0.1:{port}/v1/messages")),
        "{err}"
    );
    assert_no_key(&err);
}

#[tokio::test]
async fn drivers_debug_never_prints_the_key() {
    let anthropic = AnthropicDriver::new(config("http://127.0.0.1:9")).unwrap();
    let openai = OpenAiDriver::new(config("http://127.0.0.1:9")).unwrap();
    for shown in [format!("{anthropic:?}"), format!("{openai:?}")] {
        assert!(!shown.contains(KEY), "{shown}");
        assert!(!shown.contains("SECRET"), "{shown}");
    }
}

#[tokio::test]
async fn header_injection_in_key_is_refused_without_echoing_it() {
    let server = TestServer::start(vec![Reply::sse(OK_ANTHROPIC)]).await;
    let config = ProviderConfig::new(&server.url).with_api_key("sk-SECRET\r\nX-Evil: 1");
    let driver = AnthropicDriver::new(config).unwrap();
    let err = chat(&driver).await.unwrap_err();
    assert!(matches!(err, LlmError::Config(_)), "{err}");
    assert!(!err.to_string().contains("SECRET"), "{err}");
    assert!(server.requests().is_empty());
}

/// A provider endpoint that answers with a redirect: the key header must
/// not reach the `Location` (reqwest's default policy strips only
/// `Authorization` and `Cookie` across origins, so Anthropic's `x-api-key`
/// would follow a redirect to another host or port). No redirect is
/// followed, and the error names the URL, the target and the fix.
#[tokio::test]
async fn redirects_are_not_followed_and_the_key_stays_home() {
    for status in [301u16, 302, 303, 307, 308] {
        let thief = TestServer::start(vec![Reply::sse(OK_ANTHROPIC)]).await;
        let target = format!("{}/steal", thief.url);
        let server = TestServer::start(vec![
            Reply::json(status, json!({})).header("location", &target),
        ])
        .await;
        let driver = AnthropicDriver::new(config(&server.url)).unwrap();
        let result = chat(&driver).await;
        assert!(
            thief.requests().is_empty(),
            "HTTP {status}: the redirect was followed (x-api-key sent: {:?})",
            thief
                .requests()
                .first()
                .map(|r| r.headers.get("x-api-key").is_some())
        );
        let err = result.unwrap_err();
        let LlmError::Status {
            status: seen,
            ref url,
            ref detail,
            ..
        } = err
        else {
            panic!("HTTP {status}: expected a status error, got {err:?}");
        };
        assert_eq!(seen, status);
        assert!(url.starts_with(&server.url), "{err}");
        assert!(detail.contains(&target), "names the Location: {err}");
        assert!(detail.contains("base_url"), "says what to fix: {err}");
        assert_eq!(server.requests().len(), 1, "a redirect is not retried");
        assert_no_key(&err);
    }

    // The OpenAI-compatible driver too, even to the same origin.
    let server = TestServer::start(vec![
        Reply::json(307, json!({})).header("location", "/elsewhere/chat/completions"),
        Reply::openai(&[]),
    ])
    .await;
    let driver = OpenAiDriver::new(config(&server.url)).unwrap();
    let err = chat(&driver).await.unwrap_err();
    assert!(
        matches!(err, LlmError::Status { status: 307, .. }),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1, "the redirect was followed");
    assert!(
        err.to_string().contains("/elsewhere/chat/completions"),
        "{err}"
    );
    assert_no_key(&err);
}
