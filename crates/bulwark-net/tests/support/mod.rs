//! Shared fixtures: a loopback HTTP server, and dialers that record or
//! misdirect connections so tests can see exactly what would be dialled.
#![allow(dead_code)]

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bulwark_net::{Dialer, TcpDialer};
use futures_util::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Gets the full request head (request line and headers) as text.
pub type Handler = Arc<dyn Fn(&str) -> Vec<u8> + Send + Sync>;

/// A minimal HTTP/1.1 server on 127.0.0.1: one response per connection,
/// chosen by `handler` from the request head. Returns (port, requests seen).
pub async fn serve(handler: Handler) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let handler = handler.clone();
            let counter = counter.clone();
            tokio::spawn(answer(sock, handler, counter));
        }
    });
    (port, hits)
}

pub async fn answer<S>(mut sock: S, handler: Handler, counter: Arc<AtomicUsize>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 65536 {
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    counter.fetch_add(1, Ordering::SeqCst);
    let text = String::from_utf8_lossy(&req).to_string();
    let _ = sock.write_all(&handler(&text)).await;
    let _ = sock.shutdown().await;
}

/// The request path of a request head.
pub fn path(head: &str) -> &str {
    head.split_whitespace().nth(1).unwrap_or("/")
}

pub use bulwark_test_support::http::response;

/// A server on 127.0.0.1 that accepts every connection, holds it open and
/// never answers. Returns its port.
pub async fn silent() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    port
}

pub fn redirect(to: &str) -> Vec<u8> {
    response("302 Found", &[("Location", to)], b"")
}

/// Records every address asked for; connects only to loopback (the test
/// servers) and refuses everything else, so no test ever leaves the host.
#[derive(Debug, Default)]
pub struct RecordingDialer {
    pub dialled: Mutex<Vec<SocketAddr>>,
}

impl RecordingDialer {
    pub fn dialled(&self) -> Vec<SocketAddr> {
        self.dialled.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

impl Dialer for RecordingDialer {
    fn dial(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>> {
        if let Ok(mut d) = self.dialled.lock() {
            d.push(addr);
        }
        Box::pin(async move {
            if addr.ip().is_loopback() {
                TcpDialer.dial(addr).await
            } else {
                Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "test dialer: only loopback is reachable",
                ))
            }
        })
    }
}

/// Connects to `127.0.0.1:<port>` whatever address it is asked for: a
/// stand-in for a network path that lands somewhere other than the checked
/// address.
#[derive(Debug)]
pub struct MisdirectingDialer {
    pub port: u16,
}

impl Dialer for MisdirectingDialer {
    fn dial(&self, _addr: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>> {
        let to = SocketAddr::from(([127, 0, 0, 1], self.port));
        Box::pin(async move { TcpStream::connect(to).await })
    }
}
