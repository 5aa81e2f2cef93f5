//! The egress proxy's added latency per request: the same small GET to a
//! loopback origin made directly with SafeHttp and through the proxy's
//! forward mode (a fresh connection each, as a program making one request
//! would), and an echo round trip over a CONNECT tunnel against a plain
//! TCP connection (opened per iteration, and on an established stream).

// A benchmark is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::sync::Arc;

use bulwark_net::{
    CallContext, EgressPolicy, EgressProxy, HttpLimits, ProxyConfig, ProxyEvent, ProxyLimits,
    ProxyObserver, SafeHttp,
};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

struct Discard;
impl ProxyObserver for Discard {
    fn observe(&self, event: ProxyEvent) {
        black_box(event);
    }
}

async fn echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let _ = sock.set_nodelay(true);
            tokio::spawn(async move {
                let (mut r, mut w) = sock.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    port
}

async fn read_to_end(s: &mut UnixStream) -> usize {
    let mut buf = Vec::with_capacity(1024);
    s.read_to_end(&mut buf).await.expect("read");
    buf.len()
}

/// Writes `CONNECT` and reads the response head.
async fn open_tunnel(path: &std::path::Path, target: &str) -> UnixStream {
    let mut s = UnixStream::connect(path).await.expect("proxy");
    let req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).await.expect("head");
        head.push(b[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "tunnel refused");
    s
}

async fn ping<S: AsyncReadExt + AsyncWriteExt + Unpin>(s: &mut S) {
    let mut b = [0u8; 16];
    s.write_all(b"0123456789abcdef").await.expect("write");
    s.read_exact(&mut b).await.expect("echo");
}

fn bench(c: &mut Criterion) {
    // One thread: the proxy's own work, not cross-thread wake-ups on a
    // busy machine, is what this measures.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("egress.sock");
    let (web, echo_port, http, proxy) = rt.block_on(async {
        let (web, _) = support::serve(Arc::new(|_: &str| {
            support::response("200 OK", &[("Content-Type", "text/plain")], b"hello")
        }))
        .await;
        let echo_port = echo().await;
        let mut http = SafeHttp::new(EgressPolicy::default(), HttpLimits::default()).expect("c");
        http.allow_loopback_port_for_tests(web);
        http.allow_loopback_port_for_tests(echo_port);
        let http = Arc::new(http);
        let proxy = EgressProxy::bind(
            &path,
            ProxyConfig {
                http: http.clone(),
                context: CallContext::tool("mcp:bench"),
                held_keys: Vec::new(),
                limits: ProxyLimits::default(),
            },
            Arc::new(Discard),
        )
        .expect("proxy");
        (web, echo_port, http, proxy)
    });
    let url = format!("http://127.0.0.1:{web}/");
    let forward = format!("GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let target = format!("127.0.0.1:{echo_port}");

    let mut g = c.benchmark_group("proxy/get");
    g.bench_function("direct_safehttp", |b| {
        b.iter(|| rt.block_on(async { black_box(http.get(&url).await.expect("get")) }))
    });
    g.bench_function("through_proxy_forward", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut s = UnixStream::connect(&path).await.expect("proxy");
                s.write_all(forward.as_bytes()).await.expect("write");
                black_box(read_to_end(&mut s).await)
            })
        })
    });
    g.finish();

    let mut g = c.benchmark_group("proxy/open_and_echo");
    g.bench_function("direct_tcp", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut s = TcpStream::connect(("127.0.0.1", echo_port))
                    .await
                    .expect("tcp");
                s.set_nodelay(true).expect("nodelay");
                ping(&mut s).await;
            })
        })
    });
    g.bench_function("connect_tunnel", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut s = open_tunnel(&path, &target).await;
                ping(&mut s).await;
            })
        })
    });
    g.finish();

    let mut g = c.benchmark_group("proxy/echo_on_open_stream");
    let mut direct = rt.block_on(async {
        let s = TcpStream::connect(("127.0.0.1", echo_port))
            .await
            .expect("tcp");
        s.set_nodelay(true).expect("nodelay");
        s
    });
    g.bench_function("direct_tcp", |b| b.iter(|| rt.block_on(ping(&mut direct))));
    let mut tunnel = rt.block_on(open_tunnel(&path, &target));
    g.bench_function("connect_tunnel", |b| {
        b.iter(|| rt.block_on(ping(&mut tunnel)))
    });
    g.finish();
    drop(proxy);
}

criterion_group!(benches, bench);
criterion_main!(benches);
