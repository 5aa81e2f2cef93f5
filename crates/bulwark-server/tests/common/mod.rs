//! A home with agents and users, a server on a loopback port, and clients:
//! requests through the router, raw HTTP and WebSocket helpers.
#![allow(dead_code)]

pub mod fake;

use axum::body::Body;
use axum::http::{Request, Response};
use bulwark_kernel::Home;
use bulwark_server::{AccessEditor, AppState, Limits, Rate, ServerConfig, secret_path};
use bulwark_store::Store;
use fake::FakeBackend;
use futures_util::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tower::ServiceExt;

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The Host a state built with the default config answers to.
pub const LOCAL_HOST: &str = "localhost:8420";

const AGENT: &str = "[agent]\nname = \"NAME\"\ndescription = \"test agent NAME\"\nmodel = \"script:s.jsonl\"\n[access]\nmode = \"public\"\n[tools]\nallow = [\"time\"]\n";

/// A home: agents `helper`, `other` (public) and `secret` (private);
/// users alice (agents = ["helper"]), bob (any agent), root (admin).
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub home: Home,
    pub store: Store,
    pub backend: Arc<FakeBackend>,
    pub alice: String,
    pub bob: String,
    pub root: String,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        use bulwark_test_support::home::{for_agent, write_agent};
        for name in ["helper", "other"] {
            write_agent(dir.path(), name, &for_agent(AGENT, name), &[]);
        }
        let private = for_agent(AGENT, "secret").replace("public", "private");
        write_agent(dir.path(), "secret", &private, &[]);
        let ed = editor(&home);
        let alice = ed
            .create("alice", None, Some(&["helper".to_string()]))
            .unwrap();
        let bob = ed.create("bob", None, None).unwrap();
        let root = ed
            .create("root", Some(bulwark_policy::UserRole::Admin), None)
            .unwrap();
        let store = Store::open(&home.db_path()).unwrap();
        let backend = Arc::new(FakeBackend::new(store.clone()));
        Fixture {
            home,
            store,
            backend,
            alice: alice.token.token.to_string(),
            bob: bob.token.token.to_string(),
            root: root.token.token.to_string(),
            dir,
        }
    }

    pub fn editor(&self) -> AccessEditor {
        editor(&self.home)
    }

    /// Adds a user who may use any agent; their token.
    pub fn add_user(&self, name: &str) -> String {
        let created = self.editor().create(name, None, None).unwrap();
        created.token.token.to_string()
    }

    pub fn state(&self, config: ServerConfig) -> AppState {
        AppState::new(
            config,
            self.home.clone(),
            self.store.clone(),
            self.backend.clone(),
        )
    }

    /// A state for `oneshot` requests with `Host: localhost:8420`.
    pub fn oneshot_state(&self) -> AppState {
        self.state(ServerConfig::default())
    }

    /// A server on 127.0.0.1 with a free port.
    pub async fn serve(&self, config: ServerConfig) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = self.state(config);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let s = state.clone();
        let task = tokio::spawn(async move {
            bulwark_server::serve_on(listener, s, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Server {
            addr,
            state,
            stop: Some(tx),
            task,
        }
    }
}

fn editor(home: &Home) -> AccessEditor {
    AccessEditor::new(home.access_path(), secret_path(home.root()))
}

pub struct Server {
    pub addr: SocketAddr,
    pub state: AppState,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<()>,
}

impl Server {
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    pub fn origin(&self) -> String {
        format!("http://{}", self.host())
    }

    /// A GET through this server's router with its own Host.
    pub async fn get(&self, path: &str, token: Option<&str>) -> Response<Body> {
        let authorization = token.map(bearer);
        get_as(&self.state, &self.host(), path, authorization.as_deref()).await
    }

    /// The JSON body of [`Server::get`] (`Null` if it is not JSON).
    pub async fn get_json(&self, path: &str, token: Option<&str>) -> serde_json::Value {
        body_json(self.get(path, token).await).await
    }

    /// The status of [`Server::get`].
    pub async fn status(&self, path: &str, token: Option<&str>) -> u16 {
        self.get(path, token).await.status().as_u16()
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(Duration::from_secs(15), &mut self.task)
            .await
            .expect("the server stops")
            .unwrap();
    }

    /// A WebSocket handshake request with these extra headers.
    pub fn ws_request(
        &self,
        headers: &[(&str, &str)],
    ) -> tokio_tungstenite::tungstenite::handshake::client::Request {
        let mut req = format!("ws://{}/api/v1/ws", self.host())
            .into_client_request()
            .unwrap();
        for (k, v) in headers {
            req.headers_mut().insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        req
    }

    /// Connects with `bulwark.v1, bearer.<token>`.
    pub async fn ws(&self, token: &str) -> Ws {
        let proto = ws_protocol(token);
        let req = self.ws_request(&[("sec-websocket-protocol", &proto)]);
        let (ws, resp) = tokio_tungstenite::connect_async(req)
            .await
            .expect("handshake");
        assert_eq!(
            resp.headers()["sec-websocket-protocol"],
            "bulwark.v1",
            "only bulwark.v1 is echoed"
        );
        ws
    }

    /// A raw handshake; the HTTP status it was refused with, if refused.
    pub async fn ws_status(&self, headers: &[(&str, &str)]) -> Result<Ws, u16> {
        match tokio_tungstenite::connect_async(self.ws_request(headers)).await {
            Ok((ws, _)) => Ok(ws),
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
            Err(e) => panic!("unexpected handshake error: {e}"),
        }
    }

    /// [`Server::ws_status`] signed in with `bulwark.v1, bearer.<token>`.
    pub async fn ws_status_as(&self, token: &str) -> Result<Ws, u16> {
        self.ws_status(&[("sec-websocket-protocol", &ws_protocol(token))])
            .await
    }
}

/// `Bearer <token>`, an Authorization header value.
pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// `bulwark.v1, bearer.<token>`, the subprotocols that sign a WebSocket in.
pub fn ws_protocol(token: &str) -> String {
    format!("bulwark.v1, bearer.{token}")
}

/// A rate of `per_minute` with bursts of `burst`.
pub fn rate(per_minute: u32, burst: u32) -> Rate {
    Rate { per_minute, burst }
}

/// The default config with these limits.
pub fn with_limits(limits: Limits) -> ServerConfig {
    ServerConfig {
        limits,
        ..ServerConfig::default()
    }
}

/// The response a WebSocket handshake was refused with; panics if it was
/// accepted or failed otherwise.
pub async fn ws_refusal(
    req: impl IntoClientRequest + Unpin,
) -> tokio_tungstenite::tungstenite::http::Response<Option<Vec<u8>>> {
    match tokio_tungstenite::connect_async(req).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => *resp,
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    }
}

/// One `GET path` over a new TCP connection with this Host (and
/// `Connection: close`); the whole raw response.
pub async fn raw_get(addr: SocketAddr, path: &str, host: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// Sends a JSON text frame.
pub async fn send(ws: &mut Ws, value: serde_json::Value) {
    ws.send(Message::text(value.to_string())).await.unwrap();
}

/// The next text frame as JSON (control frames skipped), within 5 s.
pub async fn recv(ws: &mut Ws) -> serde_json::Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a frame within 5 s")
            .expect("the connection is open")
            .expect("a frame");
        match msg {
            Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected frame: {other:?}"),
        }
    }
}

/// Sends a `subscribe` to a new session of `agent`; the reply.
pub async fn subscribe(ws: &mut Ws, agent: &str) -> serde_json::Value {
    send(ws, serde_json::json!({"type": "subscribe", "agent": agent})).await;
    recv(ws).await
}

/// Subscribes to a new session of `agent`; its id.
pub async fn open_session(ws: &mut Ws, agent: &str) -> String {
    subscribe(ws, agent).await["session_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Sends a `subscribe` to an existing `session` of `agent`; the reply.
pub async fn resubscribe(ws: &mut Ws, agent: &str, session: &str) -> serde_json::Value {
    send(
        ws,
        serde_json::json!({"type": "subscribe", "agent": agent, "session": session}),
    )
    .await;
    recv(ws).await
}

/// Sends a `message` frame with this text (the reply is the caller's).
pub async fn send_message(ws: &mut Ws, text: &str) {
    send(ws, serde_json::json!({"type": "message", "text": text})).await;
}

/// Sends a `message` frame with this text; the `message_id` of the
/// `accepted` frame that must answer it before any frame of its turn.
pub async fn say(ws: &mut Ws, text: &str) -> u64 {
    send_message(ws, text).await;
    let accepted = recv(ws).await;
    assert_eq!(accepted["type"], "accepted", "{accepted}");
    accepted["message_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("accepted without a message id: {accepted}"))
}

/// Sends a message; the turn's frames up to and including `turn_ended`.
pub async fn turn(ws: &mut Ws, text: &str) -> Vec<serde_json::Value> {
    let message_id = say(ws, text).await;
    let frames = recv_until(ws, "turn_ended").await;
    for frame in &frames {
        if frame.get("message_id").is_some() {
            assert_eq!(frame["message_id"], message_id, "{frame}");
        }
    }
    frames
}

/// Sends a `ping`; the reply.
pub async fn ping(ws: &mut Ws) -> serde_json::Value {
    send(ws, serde_json::json!({"type": "ping"})).await;
    recv(ws).await
}

/// Frames until (and including) one of type `ty`.
pub async fn recv_until(ws: &mut Ws, ty: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    loop {
        let v = recv(ws).await;
        let done = v["type"] == ty;
        out.push(v);
        if done {
            return out;
        }
    }
}

/// Waits for the server to close the connection; its close code.
pub async fn closed(ws: &mut Ws, within: Duration) -> Option<u16> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => panic!("not closed within {within:?}"),
            Ok(None) => return None,
            Ok(Some(Err(_))) => return None,
            Ok(Some(Ok(Message::Close(frame)))) => return frame.map(|f| u16::from(f.code)),
            Ok(Some(Ok(_))) => continue,
        }
    }
}

/// A request builder with `Host: localhost:8420`.
pub fn local(method: &str, uri: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(uri)
        .header("host", LOCAL_HOST)
}

/// A GET through the router (no socket), with `Host: localhost:8420`.
pub async fn get(state: &AppState, path: &str, token: Option<&str>) -> Response<Body> {
    get_authorized(state, path, token.map(bearer).as_deref()).await
}

/// A GET with `Host: localhost:8420` and this exact Authorization value.
pub async fn get_authorized(
    state: &AppState,
    path: &str,
    authorization: Option<&str>,
) -> Response<Body> {
    get_as(state, LOCAL_HOST, path, authorization).await
}

async fn get_as(
    state: &AppState,
    host: &str,
    path: &str,
    authorization: Option<&str>,
) -> Response<Body> {
    let mut req = Request::get(path).header("host", host);
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    call(state, req.body(Body::empty()).unwrap()).await
}

/// A POST of `body` (sent as JSON) through the router, with `Host:
/// localhost:8420`.
pub async fn post(state: &AppState, path: &str, token: Option<&str>, body: &str) -> Response<Body> {
    post_authorized(state, path, token.map(bearer).as_deref(), body).await
}

/// [`post`] with this exact Authorization value, if any.
pub async fn post_authorized(
    state: &AppState,
    path: &str,
    authorization: Option<&str>,
    body: &str,
) -> Response<Body> {
    let mut req = local("POST", path).header("content-type", "application/json");
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    call(state, req.body(Body::from(body.to_owned())).unwrap()).await
}

/// The JSON body of [`get`] (`Null` if it is not JSON).
pub async fn get_json(state: &AppState, path: &str, token: Option<&str>) -> serde_json::Value {
    body_json(get(state, path, token).await).await
}

/// The status of [`get`].
pub async fn status(state: &AppState, path: &str, token: Option<&str>) -> u16 {
    get(state, path, token).await.status().as_u16()
}

/// The status of a GET with exactly these headers (no Host unless given).
pub async fn status_with_headers(state: &AppState, uri: &str, headers: &[(&str, &str)]) -> u16 {
    let mut req = Request::get(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    call(state, req.body(Body::empty()).unwrap())
        .await
        .status()
        .as_u16()
}

/// A 429's Retry-After, in seconds.
pub fn retry_after(resp: &Response<Body>) -> u64 {
    resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

pub async fn call(state: &AppState, req: Request<Body>) -> Response<Body> {
    bulwark_server::router(state.clone())
        .oneshot(req)
        .await
        .unwrap()
}

pub async fn body_json(resp: Response<Body>) -> serde_json::Value {
    use http_body_util::BodyExt;
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null)
}

pub async fn body_text(resp: Response<Body>) -> String {
    use http_body_util::BodyExt;
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}
