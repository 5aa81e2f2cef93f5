//! A home with agents and users, a server on a loopback port, and clients.
#![allow(dead_code)]

pub mod fake;

use axum::body::Body;
use axum::http::{Request, Response};
use bulwark_kernel::Home;
use bulwark_server::{AccessEditor, AppState, ServerConfig, secret_path};
use bulwark_store::Store;
use fake::FakeBackend;
use futures_util::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tower::ServiceExt;

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

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
        for name in ["helper", "other"] {
            let path = home.agents_dir().join(name);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("agent.toml"), AGENT.replace("NAME", name)).unwrap();
        }
        let path = home.agents_dir().join("secret");
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(
            path.join("agent.toml"),
            AGENT.replace("NAME", "secret").replace("public", "private"),
        )
        .unwrap();
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
        let mut req = Request::get(path).header("host", self.host());
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        call(&self.state, req.body(Body::empty()).unwrap()).await
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
        let proto = format!("bulwark.v1, bearer.{token}");
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

/// A GET through the router (no socket), with `Host: localhost:8420`.
pub async fn get(state: &AppState, path: &str, token: Option<&str>) -> Response<Body> {
    let mut req = Request::get(path).header("host", "localhost:8420");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    call(state, req.body(Body::empty()).unwrap()).await
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
