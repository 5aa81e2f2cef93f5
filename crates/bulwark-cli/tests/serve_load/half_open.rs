//! A slowloris flood on loopback: thousands of connections that each send
//! half a request and then nothing. The server keeps their number bounded
//! (the oldest pending connection is closed to make room) while `/health`,
//! an authenticated request and a WebSocket from other clients are still
//! answered. Bounded in count and time; it stops by itself.
//!
//! Knob: `BULWARK_LOAD_HALF_OPEN` (default 2,000) half-open connections,
//! spread over ten loopback addresses (200 each, under the default
//! per-address cap of 256, so the global behaviour is what is measured).

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DEFAULT_HALF_OPEN: usize = 2_000;
const SOURCES: usize = 10;
/// The server's default cap on pending connections.
const MAX_PENDING: usize = 1024;

async fn half_open(from: Ipv4Addr, server: SocketAddr) -> Result<TcpStream, String> {
    let socket = TcpSocket::new_v4().map_err(|e| format!("socket: {e}"))?;
    socket
        .bind(SocketAddr::new(from.into(), 0))
        .map_err(|e| format!("bind {from}: {e}"))?;
    let mut s = socket
        .connect(server)
        .await
        .map_err(|e| format!("connect from {from}: {e}"))?;
    // Half a request: the head never ends.
    let _ = s
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await;
    Ok(s)
}

/// `GET path` on a new connection from `from`; the status.
async fn get(from: Ipv4Addr, server: SocketAddr, path: &str, token: Option<&str>) -> u16 {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::new(from.into(), 0)).expect("bind");
    let mut s = socket.connect(server).await.expect("connect");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {server}\r\n{auth}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("send");
    let mut out = String::new();
    tokio::time::timeout(FRAME_WAIT, s.read_to_string(&mut out))
        .await
        .expect("answered in time")
        .expect("read");
    out.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_users_are_answered_while_thousands_of_half_open_connections_are_held() {
    let n = env_usize("BULWARK_LOAD_HALF_OPEN", DEFAULT_HALF_OPEN);
    raise_nofile(n + FD_SLACK, n);
    let bw = Bw::init();
    bw.agent(
        AGENT,
        &common::scripted(AGENT, MANIFEST_REST),
        Some(&script()),
    );
    let token = token_for(&bw, "alice", AGENT);
    // A header timeout longer than the test: what bounds the flood here is
    // the connection table, not the timeout.
    let server = start_with(&load_bin(), &bw, &["--header-timeout-secs", "300"]);
    let pid = server.pid();
    let addr: SocketAddr = server.addr.parse().expect("a socket address");
    let fds_idle = open_fds(pid);

    let started = Instant::now();
    let mut held = Vec::with_capacity(n);
    let opened = tokio::time::timeout(PHASE, async {
        for i in 0..n {
            let from = Ipv4Addr::new(127, 3, 0, (i % SOURCES + 1) as u8);
            held.push(half_open(from, addr).await?);
        }
        Ok::<(), String>(())
    })
    .await;
    opened
        .expect("the half-open connections opened in time")
        .expect("every connection opened");
    let open_time = started.elapsed();

    // Other clients are served while the flood is held.
    let user = Ipv4Addr::new(127, 4, 0, 1);
    let asked = Instant::now();
    assert_eq!(get(user, addr, "/health", None).await, 200);
    let health_time = asked.elapsed();
    assert_eq!(get(user, addr, "/api/v1/agents", Some(&token)).await, 200);
    let mut ws = connect_from(user, addr, &token).await.expect("a WebSocket");
    send(&mut ws, json!({"type": "ping"})).await.expect("ping");
    let pong = parse(&next_text(&mut ws).await.expect("a reply")).expect("JSON");
    assert_eq!(pong["type"], "pong", "{pong}");

    // The server holds a bounded number of them, not all.
    let deadline = Instant::now() + PHASE;
    let bound = fds_idle + MAX_PENDING + 64;
    let mut fds = open_fds(pid);
    while fds > bound {
        assert!(
            Instant::now() < deadline,
            "the server still holds {fds} descriptors with {n} half-open connections (bound {bound})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        fds = open_fds(pid);
    }
    let mut closed = 0;
    for s in &mut held {
        let mut buf = [0u8; 64];
        if let Some(Ok(0)) | Some(Err(_)) = s.read(&mut buf).now_or_never() {
            closed += 1;
        }
    }
    assert!(
        n <= MAX_PENDING || closed > 0,
        "no connection was closed to make room"
    );
    eprintln!(
        "half-open flood: {n} connections opened in {}, /health answered in {}, \
         server descriptors {fds_idle} idle -> {fds} held, {closed} closed by the server",
        ms(open_time),
        ms(health_time),
    );
    drop(held);
    drop(ws);
}
