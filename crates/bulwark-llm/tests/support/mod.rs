//! A scripted HTTP server on 127.0.0.1 (ephemeral port) for driver tests.
//! It records every request (path, headers, JSON body) and answers with
//! the next scripted reply, streaming the body in several chunks so SSE
//! framing is exercised across reads.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;

/// One scripted HTTP answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub chunks: Vec<Vec<u8>>,
    /// After the chunks, break the connection instead of ending the body.
    pub abort: bool,
}

impl Reply {
    /// An event stream, cut into chunks of `chunk` bytes (so lines, CRLFs
    /// and UTF-8 sequences are split between reads).
    pub fn sse_chunked(text: &str, chunk: usize) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks: text
                .as_bytes()
                .chunks(chunk.max(1))
                .map(<[u8]>::to_vec)
                .collect(),
            abort: false,
        }
    }

    pub fn sse(text: &str) -> Self {
        Self::sse_chunked(text, 37)
    }

    /// OpenAI-style stream: each JSON chunk as `data:`, then `data: [DONE]`.
    pub fn openai(chunks: &[Value]) -> Self {
        Self::sse(&bulwark_test_support::sse::openai(chunks).concat())
    }

    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![body.to_string().into_bytes()],
            abort: false,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn aborted(mut self) -> Self {
        self.abort = true;
        self
    }
}

/// What the server saw.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    recorded: Mutex<Vec<Recorded>>,
}

pub struct TestServer {
    /// `http://127.0.0.1:<port>`
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start(replies: Vec<Reply>) -> Self {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            recorded: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind test server");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{addr}"),
            shared,
            task,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.recorded.lock().expect("lock").clone()
    }

    pub fn request(&self, n: usize) -> Recorded {
        self.requests().get(n).cloned().expect("request was made")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.recorded.lock().expect("lock").push(Recorded {
        path: uri.path().to_owned(),
        headers,
        body,
    });
    let Some(reply) = shared.replies.lock().expect("lock").pop_front() else {
        return (StatusCode::IM_A_TEAPOT, "no scripted reply left").into_response();
    };
    let abort = reply.abort;
    let chunks = futures_util::stream::iter(reply.chunks.into_iter().map(Ok::<_, std::io::Error>))
        .then(|chunk| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            chunk.map(Bytes::from)
        });
    let tail = futures_util::stream::iter(
        abort.then(|| Err(std::io::Error::other("test server drops the connection"))),
    );
    let mut response = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        response = response.header(name.as_str(), value.as_str());
    }
    response
        .body(Body::from_stream(chunks.chain(tail)))
        .expect("valid response")
}
