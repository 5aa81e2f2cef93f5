//! Logs never contain tokens, the server secret or message content, even
//! at TRACE: captured from an authenticated session, a failed sign-in, a
//! token in a query string and a rejected frame.

use crate::common;

use bulwark_server::ServerConfig;
use common::{Fixture, recv, subscribe, turn};
use futures_util::SinkExt;
use std::io::Write;
use std::sync::{Arc, Mutex};
use tokio_tungstenite::tungstenite::Message;

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_secret_or_private_is_logged() {
    let capture = Capture::default();
    let writer = capture.clone();
    tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .init();

    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    const SECRET_TEXT: &str = "my-private-message-7f3a9c";

    // An authenticated conversation.
    let mut ws = server.ws(&f.bob).await;
    subscribe(&mut ws, "helper").await;
    turn(&mut ws, SECRET_TEXT).await;
    // A bad frame that contains the text.
    ws.send(Message::text(format!(
        "{{\"type\":\"message\",\"text\":\"{SECRET_TEXT}\",\"x\":1}}"
    )))
    .await
    .unwrap();
    assert_eq!(recv(&mut ws).await["code"], "unknown_field");
    // REST with the token, a failed sign-in with a near miss, a token in a URL.
    assert_eq!(server.status("/api/v1/sessions", Some(&f.bob)).await, 200);
    let near_miss = format!("{}x", &f.alice[..f.alice.len() - 1]);
    assert_eq!(
        server.status("/api/v1/sessions", Some(&near_miss)).await,
        401
    );
    let token_in_url = format!("/api/v1/agents?token={}", f.root);
    assert_eq!(server.status(&token_in_url, None).await, 400);
    drop(ws);
    server.stop().await;

    let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("websocket opened"),
        "logs were captured:\n{logs}"
    );
    assert!(logs.contains("authentication failed"), "{logs}");
    let secret = std::fs::read_to_string(bulwark_server::secret_path(f.home.root())).unwrap();
    let access = std::fs::read_to_string(f.home.access_path()).unwrap();
    let hashes: Vec<&str> = access
        .lines()
        .filter_map(|l| l.split("hash = \"").nth(1))
        .map(|h| &h[..64])
        .collect();
    assert_eq!(hashes.len(), 3);
    let token_secret_parts: Vec<&str> = [&f.bob, &f.alice, &f.root]
        .iter()
        // The 43-character secret part (it may itself contain `_`).
        .map(|t| &t[t.len() - 43..])
        .collect();
    let mut forbidden: Vec<&str> = vec![
        SECRET_TEXT,
        secret.trim(),
        &f.bob,
        &f.alice,
        &f.root,
        &near_miss,
    ];
    forbidden.extend(&token_secret_parts);
    forbidden.extend(&hashes);
    for needle in forbidden {
        if let Some(line) = logs.lines().find(|l| l.contains(needle)) {
            panic!(
                "the logs contain {needle:?}: {}",
                &line[..line.len().min(600)]
            );
        }
    }
    eprintln!("{} log lines checked", logs.lines().count());
}

#[path = "logs/events.rs"]
mod events;
