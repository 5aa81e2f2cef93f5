//! The egress proxy, driven over its Unix socket the way the sandbox's
//! relay would: the work it must allow, and the attacks it refuses and
//! reports.

mod allowed;
mod attacks;
mod bounds;
mod props;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bulwark_net::{
    CallContext, Credentials, EgressPolicy, EgressProxy, HttpLimits, ProxyConfig, ProxyEvent,
    ProxyLimits, ProxyObserver, SafeHttp, SecretStore, StaticResolver,
};
use bulwark_policy::CredentialGrant;
use secrecy::SecretString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

use crate::support::RecordingDialer;

pub const GH: &str = "ghp_S3cretTokenValue_0123456789";
pub const MAPS: &str = "maps-key-7f3a9c1e55";

/// `mcp:fs` may send GH_TOKEN to api.gh.test (any port), injected as a
/// bearer token. MAPS_KEY has no grant at all.
const GRANTS: &str = r#"
[grants.github]
keys = ["GH_TOKEN"]
tools = ["mcp:fs"]
hosts = ["api.gh.test"]
inject = [{ header = "Authorization", value = "Bearer ${GH_TOKEN}" }]
"#;

#[derive(Default)]
pub struct Recorder(Mutex<Vec<ProxyEvent>>);

impl ProxyObserver for Recorder {
    fn observe(&self, event: ProxyEvent) {
        if let Ok(mut e) = self.0.lock() {
            e.push(event);
        }
    }
}

impl Recorder {
    pub fn events(&self) -> Vec<ProxyEvent> {
        self.0.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Waits (bounded) until an event matching `pred` was observed.
    pub async fn wait_for(&self, pred: impl Fn(&ProxyEvent) -> bool) -> ProxyEvent {
        for _ in 0..500 {
            if let Some(e) = self.events().into_iter().find(|e| pred(e)) {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no matching event; saw {:#?}", self.events());
    }
}

/// A TCP echo server on 127.0.0.1. Returns its port.
pub async fn echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = sock.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    port
}

pub struct Fixture {
    pub proxy: EgressProxy,
    pub events: Arc<Recorder>,
    pub dialer: Arc<RecordingDialer>,
    pub resolver: Arc<StaticResolver>,
    /// Port of a TCP echo server reachable as `allowed.test` and
    /// `api.gh.test`.
    pub echo: u16,
    /// Port of an HTTP server reachable as the same names, echoing the
    /// request head it received as its body.
    pub web: u16,
    pub _dir: tempfile::TempDir,
}

pub struct Setup {
    pub held_keys: Vec<String>,
    pub limits: ProxyLimits,
    /// Extra HTTP origin (port) reachable as `redirector.test`.
    pub redirector: Option<u16>,
    pub observer: Option<Arc<dyn ProxyObserver>>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            held_keys: Vec::new(),
            limits: ProxyLimits {
                header_timeout: Duration::from_secs(5),
                ..ProxyLimits::default()
            },
            redirector: None,
            observer: None,
        }
    }
}

pub fn store() -> Arc<SecretStore> {
    let mut s = SecretStore::new();
    s.insert("GH_TOKEN", SecretString::from(GH), true);
    s.insert("MAPS_KEY", SecretString::from(MAPS), true);
    Arc::new(s)
}

fn grants() -> BTreeMap<String, CredentialGrant> {
    #[derive(serde::Deserialize)]
    struct G {
        grants: BTreeMap<String, CredentialGrant>,
    }
    toml::from_str::<G>(GRANTS).expect("grants").grants
}

/// The client policy both the proxy and the benches' direct path use:
/// `allowed.test` and `api.gh.test` on the two test ports, `private.test`
/// (which resolves to 10.0.0.5) on any port.
pub fn client(echo: u16, web: u16, redirector: Option<u16>) -> (SafeHttp, Arc<StaticResolver>) {
    let lo: IpAddr = "127.0.0.1".parse().expect("ip");
    let resolver = Arc::new(StaticResolver::new());
    let mut allowed = vec!["private.test".to_string()];
    for host in ["allowed.test", "api.gh.test"] {
        resolver.answer(host, vec![lo]);
        allowed.push(format!("{host}:{echo}"));
        allowed.push(format!("{host}:{web}"));
    }
    if let Some(port) = redirector {
        resolver.answer("redirector.test", vec![lo]);
        allowed.push(format!("redirector.test:{port}"));
    }
    resolver.answer("private.test", vec!["10.0.0.5".parse().expect("ip")]);
    resolver.answer("metadata.google.internal", vec![lo]);
    let mut http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: allowed,
            allow_all: false,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver(resolver.clone())
    .with_credentials(Arc::new(
        Credentials::new(&grants(), store()).expect("credentials"),
    ));
    for host in ["allowed.test", "api.gh.test"] {
        http.allow_internal_service(host, echo);
        http.allow_internal_service(host, web);
    }
    if let Some(port) = redirector {
        http.allow_internal_service("redirector.test", port);
    }
    (http, resolver)
}

pub async fn head_echo() -> u16 {
    crate::support::serve(Arc::new(|head: &str| {
        crate::support::response("200 OK", &[("Content-Type", "text/plain")], head.as_bytes())
    }))
    .await
    .0
}

impl Fixture {
    pub async fn new(setup: Setup) -> Fixture {
        let echo = echo().await;
        let web = head_echo().await;
        let (http, resolver) = client(echo, web, setup.redirector);
        let dialer = Arc::new(RecordingDialer::default());
        let http = http.with_dialer(dialer.clone());
        let dir = tempfile::tempdir().expect("tempdir");
        let events = Arc::new(Recorder::default());
        let observer = setup.observer.unwrap_or_else(|| events.clone());
        let proxy = EgressProxy::bind(
            &dir.path().join("egress.sock"),
            ProxyConfig {
                http: Arc::new(http),
                context: CallContext::tool("mcp:fs"),
                held_keys: setup.held_keys,
                limits: setup.limits,
            },
            observer,
        )
        .expect("bind");
        Fixture {
            proxy,
            events,
            dialer,
            resolver,
            echo,
            web,
            _dir: dir,
        }
    }

    pub async fn connect(&self) -> UnixStream {
        UnixStream::connect(self.proxy.socket_path())
            .await
            .expect("connect to the proxy")
    }

    /// Sends `CONNECT target` and returns the stream and the response head.
    pub async fn tunnel(&self, target: &str) -> (UnixStream, String) {
        let mut s = self.connect().await;
        let req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("write");
        let head = read_head(&mut s).await;
        (s, head)
    }

    /// Sends a raw request (it should say `Connection: close`) and reads
    /// the whole answer.
    pub async fn raw(&self, request: &[u8]) -> String {
        let mut s = self.connect().await;
        let _ = s.write_all(request).await;
        read_all(&mut s).await
    }

    pub async fn get(&self, url: &str) -> String {
        self.raw(format!("GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
            .await
    }
}

/// Reads up to the end of the response head (bounded by a generous wait).
pub async fn read_head(s: &mut UnixStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    let read = async {
        while !head.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(20), read).await;
    String::from_utf8_lossy(&head).to_string()
}

/// Reads until the proxy closes (bounded by a generous wait).
pub async fn read_all(s: &mut UnixStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(20), read).await;
    String::from_utf8_lossy(&out).to_string()
}

pub fn status(response: &str) -> u16 {
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}
