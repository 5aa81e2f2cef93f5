//! The proxy's own bounds: head size and time, connection count, idle
//! tunnels, bytes that are not HTTP, a failing observer, the socket path.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bulwark_net::{
    CallContext, EgressPolicy, EgressProxy, HttpLimits, NetError, ProxyConfig, ProxyEvent,
    ProxyLimits, ProxyObserver, ProxyRequestKind, SafeHttp,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Fixture, Recorder, Setup, read_all, status};

fn limits(f: impl FnOnce(&mut ProxyLimits)) -> Setup {
    let mut l = Setup::default().limits;
    f(&mut l);
    Setup {
        limits: l,
        ..Setup::default()
    }
}

#[tokio::test]
async fn an_oversized_head_is_refused_and_reported() {
    let f = Fixture::new(limits(|l| l.max_head_bytes = 8 * 1024)).await;
    let mut s = f.connect().await;
    let req = format!(
        "GET http://allowed.test:{}/ HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        f.web,
        "a".repeat(100 * 1024)
    );
    let (mut r, mut w) = s.split();
    let (_, answer) = tokio::join!(w.write_all(req.as_bytes()), async {
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(20), r.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).to_string()
    });
    assert_eq!(status(&answer), 431, "{answer}");
    let e = f
        .events
        .wait_for(|e| e.kind == ProxyRequestKind::NoRequest)
        .await;
    assert!(e.refused.is_some_and(|r| r.contains("larger than")));
    assert!(f.dialer.dialled().is_empty());
}

#[tokio::test]
async fn a_slow_head_is_closed() {
    let f = Fixture::new(limits(|l| l.header_timeout = Duration::from_millis(200))).await;
    let mut s = f.connect().await;
    s.write_all(b"GET http://allowed.test/ HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    // Never finished: the proxy closes the connection.
    let answer = read_all(&mut s).await;
    assert!(!answer.contains(" 200 "), "{answer}");
    let e = f
        .events
        .wait_for(|e| e.kind == ProxyRequestKind::NoRequest)
        .await;
    assert!(e.refused.is_some_and(|r| r.contains("in time")));
}

#[tokio::test]
async fn an_idle_tunnel_is_closed_and_reported() {
    let f = Fixture::new(limits(|l| l.idle_timeout = Duration::from_millis(200))).await;
    let (mut s, head) = f.tunnel(&format!("allowed.test:{}", f.echo)).await;
    assert_eq!(status(&head), 200, "{head}");
    let rest = read_all(&mut s).await;
    assert!(rest.is_empty(), "{rest}");
    f.events
        .wait_for(|e| e.kind == ProxyRequestKind::Connect && e.refused.is_none())
        .await;
}

#[tokio::test]
async fn connections_over_the_limit_get_503_and_the_rest_still_work() {
    let f = Fixture::new(limits(|l| l.max_connections = 2)).await;
    let target = format!("allowed.test:{}", f.echo);
    let (a, ha) = f.tunnel(&target).await;
    let (b, hb) = f.tunnel(&target).await;
    assert_eq!((status(&ha), status(&hb)), (200, 200), "{ha} {hb}");
    let over = f.get(&format!("http://allowed.test:{}/", f.web)).await;
    assert_eq!(status(&over), 503, "{over}");
    assert!(over.contains("too many connections"), "{over}");
    f.events
        .wait_for(|e| e.kind == ProxyRequestKind::NoRequest)
        .await;
    // Closing a tunnel frees its slot.
    drop((a, b));
    f.events
        .wait_for(|e| e.kind == ProxyRequestKind::Connect)
        .await;
    let mut ok = false;
    for _ in 0..100 {
        let again = f.get(&format!("http://allowed.test:{}/", f.web)).await;
        if status(&again) == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok, "a slot was never freed");
}

#[tokio::test]
async fn garbage_instead_of_http_is_refused_and_reported() {
    let f = Fixture::new(Setup::default()).await;
    let answer = f
        .raw(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n")
        .await;
    assert_eq!(status(&answer), 400, "{answer}");
    let e = f
        .events
        .wait_for(|e| e.kind == ProxyRequestKind::NoRequest)
        .await;
    assert!(e.refused.is_some_and(|r| r.contains("not an HTTP")));
    // The listener is still serving.
    let ok = f.get(&format!("http://allowed.test:{}/", f.web)).await;
    assert_eq!(status(&ok), 200, "{ok}");
}

/// Panics on its first call.
struct Panicky {
    calls: AtomicUsize,
    inner: Arc<Recorder>,
}

impl ProxyObserver for Panicky {
    fn observe(&self, event: ProxyEvent) {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("observer failure (expected by the test)");
        }
        self.inner.observe(event);
    }
}

#[tokio::test]
async fn a_panicking_connection_does_not_stop_the_listener() {
    let inner = Arc::new(Recorder::default());
    let f = Fixture::new(Setup {
        observer: Some(Arc::new(Panicky {
            calls: AtomicUsize::new(0),
            inner: inner.clone(),
        })),
        ..Setup::default()
    })
    .await;
    let _ = f.get("http://evil.example/").await;
    let ok = f.get(&format!("http://allowed.test:{}/", f.web)).await;
    assert_eq!(status(&ok), 200, "{ok}");
    inner
        .wait_for(|e| e.kind == ProxyRequestKind::Forward && e.refused.is_none())
        .await;
}

fn config() -> ProxyConfig {
    ProxyConfig {
        http: Arc::new(SafeHttp::new(EgressPolicy::default(), HttpLimits::default()).expect("c")),
        context: CallContext::tool("shell"),
        held_keys: Vec::new(),
        limits: ProxyLimits::default(),
    }
}

#[tokio::test]
async fn bind_refuses_an_existing_path_and_leaves_it_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("taken");
    std::fs::write(&path, b"someone else's").expect("write");
    let err = EgressProxy::bind(&path, config(), Arc::new(Recorder::default()));
    assert!(matches!(err, Err(NetError::Listen { .. })));
    assert_eq!(std::fs::read(&path).expect("kept"), b"someone else's");
}

#[test]
fn bind_outside_a_runtime_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = EgressProxy::bind(
        &dir.path().join("s"),
        config(),
        Arc::new(Recorder::default()),
    );
    assert!(matches!(err, Err(NetError::Listen { .. })));
}
