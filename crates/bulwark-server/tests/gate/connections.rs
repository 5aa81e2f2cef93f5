//! Open connections: the header timeout (slowloris), the per-address cap,
//! and the headroom signed-in users and health checks keep while the
//! table is full of half-open connections.

use crate::common::{Fixture, with_limits};
use bulwark_server::{ConnectionLimits, Limits};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Bound on every wait: far above what the server needs, far below a hang.
const PATIENCE: Duration = Duration::from_secs(10);

fn limits(connections: ConnectionLimits) -> Limits {
    Limits {
        connections,
        ..Limits::default()
    }
}

async fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((from, 0))).unwrap();
    socket.connect(to).await.unwrap()
}

/// Whether the server closed `s` within `within` (EOF or reset).
async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 512];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// `GET path` from `from` on a new connection; the status.
pub async fn get_from(from: Ipv4Addr, to: SocketAddr, path: &str, token: Option<&str>) -> u16 {
    let mut s = connect_from(from, to).await;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{auth}Connection: close\r\n\r\n",
        to.port()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(PATIENCE, s.read_to_string(&mut out))
        .await
        .expect("an answer in time")
        .unwrap();
    out.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn half_sent_and_silent_connections_are_closed_after_the_header_timeout() {
    let f = Fixture::new();
    let server = f
        .serve(with_limits(limits(ConnectionLimits {
            header_timeout: Duration::from_secs(1),
            ..ConnectionLimits::default()
        })))
        .await;
    let mut half = connect_from(Ipv4Addr::LOCALHOST, server.addr).await;
    half.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    let mut silent = connect_from(Ipv4Addr::LOCALHOST, server.addr).await;
    assert!(
        closed_within(&mut half, PATIENCE).await,
        "a half-sent request is closed"
    );
    assert!(
        closed_within(&mut silent, PATIENCE).await,
        "a silent connection is closed"
    );
    // The work it must allow: a request sent at once is answered.
    assert_eq!(
        get_from(Ipv4Addr::LOCALHOST, server.addr, "/health", None).await,
        200
    );
    server.stop().await;
}

#[tokio::test]
async fn one_address_cannot_hold_more_than_its_share() {
    let f = Fixture::new();
    let server = f
        .serve(with_limits(limits(ConnectionLimits {
            per_address: 4,
            header_timeout: Duration::from_secs(60),
            ..ConnectionLimits::default()
        })))
        .await;
    let greedy = Ipv4Addr::new(127, 0, 0, 2);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(connect_from(greedy, server.addr).await);
    }
    // Give the server the moment to accept them (they are idle).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while server.state.conns().stats().open < 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the four are accepted"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut fifth = connect_from(greedy, server.addr).await;
    assert!(
        closed_within(&mut fifth, PATIENCE).await,
        "the fifth connection from one address is closed at once"
    );
    // The four held are still served, and so is another address.
    held[0]
        .write_all(
            format!(
                "GET /health HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
                server.addr.port()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(PATIENCE, held[0].read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let other = Ipv4Addr::new(127, 0, 0, 3);
    assert_eq!(get_from(other, server.addr, "/health", None).await, 200);
    assert!(server.state.conns().stats().refused >= 1);
    server.stop().await;
}

#[tokio::test]
async fn a_full_table_of_half_open_connections_still_lets_users_and_health_in() {
    let f = Fixture::new();
    let server = f
        .serve(with_limits(limits(ConnectionLimits {
            max: 40,
            max_pending: 20,
            per_address: 1000,
            header_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
        })))
        .await;
    let mut flood = Vec::new();
    for i in 0..60u8 {
        let mut s = connect_from(Ipv4Addr::new(127, 0, 1, i % 4), server.addr).await;
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.unwrap();
        flood.push(s);
    }
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while server.state.conns().stats().evicted < 40 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            server.state.conns().stats()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stats = server.state.conns().stats();
    assert!(stats.pending <= 20, "{stats:?}");
    let from = Ipv4Addr::new(127, 0, 2, 1);
    assert_eq!(get_from(from, server.addr, "/health", None).await, 200);
    assert_eq!(
        get_from(from, server.addr, "/api/v1/agents", Some(&f.bob)).await,
        200
    );
    // An anonymous request is still answered too (it took a pending slot).
    assert_eq!(
        get_from(from, server.addr, "/api/v1/agents", None).await,
        401
    );
    drop(flood);
    server.stop().await;
}
