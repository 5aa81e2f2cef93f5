//! `--trust-proxy`: forwarding headers name the client only when the TCP
//! peer is a trusted proxy; the sign-in throttle keys on what they name.

use super::connections::get_from;
use crate::common::{Fixture, rate, with_limits};
use bulwark_server::Limits;
use std::net::{Ipv4Addr, SocketAddr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A throttle that blocks a network after three failures.
fn strict() -> Limits {
    Limits {
        auth_failures: rate(1, 3),
        auth_failures_global: rate(10_000, 10_000),
        ..Limits::default()
    }
}

/// A GET of /api/v1/agents with a wrong token and one extra header; the status.
async fn bad_sign_in(to: SocketAddr, header: &str) -> u16 {
    let mut s = tokio::net::TcpStream::connect(to).await.unwrap();
    let req = format!(
        "GET /api/v1/agents HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer bwk_wrongwrong_x\r\n{header}\r\nConnection: close\r\n\r\n",
        to.port()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn spoofed_forwarding_headers_from_an_untrusted_peer_are_ignored() {
    let f = Fixture::new();
    let server = f.serve(with_limits(strict())).await;
    let mut last = 0;
    for i in 0..5 {
        let h = if i % 2 == 0 {
            format!("X-Forwarded-For: 198.51.{i}.1")
        } else {
            format!("Forwarded: for=198.51.{i}.1")
        };
        last = bad_sign_in(server.addr, &h).await;
    }
    assert_eq!(last, 429, "the throttle keys on the peer, not the header");
    server.stop().await;
}

#[tokio::test]
async fn a_trusted_proxy_names_the_client_in_either_header() {
    let f = Fixture::new();
    let mut config = with_limits(strict());
    config.trusted_proxies = vec!["127.0.0.1/32".parse().unwrap()];
    let server = f.serve(config).await;
    // Five clients behind the proxy, each failing once: none is throttled.
    for i in 0..5 {
        let h = if i % 2 == 0 {
            format!("X-Forwarded-For: 6.6.6.6, 198.51.{i}.1")
        } else {
            format!("Forwarded: for=6.6.6.6, for=\"198.51.{i}.1:4000\"")
        };
        assert_eq!(bad_sign_in(server.addr, &h).await, 401, "{h}");
    }
    // One client failing again and again is.
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(bad_sign_in(server.addr, "X-Forwarded-For: 203.0.113.9").await);
    }
    assert_eq!(statuses, [401, 401, 401, 429]);
    // A malformed header counts against the proxy (the peer) itself.
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(bad_sign_in(server.addr, "X-Forwarded-For: not-an-address").await);
    }
    assert_eq!(statuses, [401, 401, 401, 429]);
    // Requests from another peer (not a proxy) are untouched by all this,
    // and the proxy's own health checks are answered.
    let other = Ipv4Addr::new(127, 0, 0, 7);
    assert_eq!(
        get_from(other, server.addr, "/api/v1/agents", Some(&f.bob)).await,
        200
    );
    assert_eq!(
        get_from(Ipv4Addr::LOCALHOST, server.addr, "/health", None).await,
        200
    );
    server.stop().await;
}
