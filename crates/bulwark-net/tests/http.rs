//! SafeHttp against hostile URLs and a real local server.

use crate::support::{self, response};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bulwark_net::{EgressPolicy, HttpLimits, NetError, SafeHttp};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

type Handler = Arc<dyn Fn(&str) -> Vec<u8> + Send + Sync>;

/// A minimal HTTP/1.1 server on 127.0.0.1: one response per connection,
/// chosen by `handler` from the request path. Returns (port, hit counter).
async fn serve(handler: Handler) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let handler = handler.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16384 {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let text = String::from_utf8_lossy(&req);
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                let _ = sock.write_all(&handler(&path)).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (port, hits)
}

fn redirect(to: String) -> Vec<u8> {
    response("302 Found", &[("Location", to.as_str())], b"")
}

fn client(domains: &[&str], allow_all: bool) -> SafeHttp {
    SafeHttp::new(
        EgressPolicy {
            allowed_domains: domains.iter().map(|s| s.to_string()).collect(),
            allow_all,
        },
        HttpLimits::default(),
    )
    .expect("client")
}

#[test]
fn allowlist_table() {
    let http = client(&["*.example.com", "api.test.org", "EXAMPLE.net"], false);
    let cases = [
        ("http://example.com/", true),
        ("https://a.example.com/x", true),
        ("http://a.b.example.com/", true),
        ("HTTP://A.EXAMPLE.COM/", true),
        ("http://example.com./", true),
        ("http://evilexample.com/", false),
        ("http://example.com.evil.org/", false),
        ("http://xexample.com/", false),
        ("http://api.test.org:8443/", true),
        ("http://x.api.test.org/", false),
        ("http://test.org/", false),
        ("http://example.net/", true),
        ("http://www.example.net/", false),
    ];
    for (url, ok) in cases {
        let r = http.check_url(url);
        if ok {
            assert!(r.is_ok(), "{url}: {r:?}");
        } else {
            assert!(
                matches!(r, Err(NetError::NotAllowed { .. })),
                "{url}: {r:?}"
            );
        }
    }
    let none = client(&[], false);
    assert!(matches!(
        none.check_url("https://example.com/"),
        Err(NetError::NotAllowed { .. })
    ));
    let all = client(&[], true);
    assert!(all.check_url("https://anything.example.org/").is_ok());
    assert!(all.check_url("http://93.184.216.34/").is_ok());
    assert!(all.check_url("http://[2606:4700::1111]/").is_ok());
}

#[test]
fn malformed_rules_fail_closed() {
    for bad in [
        "*",
        "http://example.com",
        "exa*mple.com",
        "example.com/x",
        "",
    ] {
        let r = SafeHttp::new(
            EgressPolicy {
                allowed_domains: vec![bad.to_string()],
                allow_all: false,
            },
            HttpLimits::default(),
        );
        assert!(matches!(r, Err(NetError::InvalidRule { .. })), "{bad:?}");
    }
}

#[test]
fn non_http_schemes_refused() {
    let http = client(&[], true);
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "data:text/plain,hi",
        "javascript:alert(1)",
        "gopher://example.com/",
        "ws://example.com/",
    ] {
        assert!(
            matches!(http.check_url(url), Err(NetError::Scheme { .. })),
            "{url}"
        );
    }
    assert!(matches!(
        http.check_url("not a url"),
        Err(NetError::InvalidUrl { .. })
    ));
}

#[test]
fn userinfo_refused() {
    let http = client(&["example.com"], true);
    for url in [
        "http://x@127.0.0.1/",
        "https://user:pass@example.com/",
        "http://:p@example.com/",
    ] {
        assert!(
            matches!(http.check_url(url), Err(NetError::Userinfo { .. })),
            "{url}"
        );
    }
}

#[test]
fn loopback_and_private_literals_refused_in_every_encoding() {
    let mut http = client(&[], true);
    // The override is for one exact port; it must not open the others.
    http.allow_loopback_port_for_tests(9);
    for url in [
        "http://127.0.0.1/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://0x7f000001/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[::1]/",
        "http://[::]/",
        "http://[::127.0.0.1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://0.0.0.0/",
        "http://0/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://192.168.0.1/",
        "http://100.64.0.1/",
        "http://224.0.0.1/",
        "http://240.0.0.1/",
        "http://255.255.255.255/",
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://[ff02::1]/",
        "http://127.0.0.1:8080/",
    ] {
        let r = http.check_url(url);
        assert!(
            matches!(r, Err(NetError::ForbiddenAddress { .. })),
            "{url}: {r:?}"
        );
    }
    // The override names a port on the loopback address, in either family;
    // every other port and every other spelling stays refused.
    assert!(http.check_url("http://127.0.0.1:9/").is_ok());
    assert!(http.check_url("http://[::1]:9/").is_ok());
    assert!(matches!(
        http.check_url("http://[::1]:10/"),
        Err(NetError::ForbiddenAddress { .. })
    ));
    assert!(matches!(
        http.check_url("http://[::ffff:127.0.0.1]:9/"),
        Err(NetError::ForbiddenAddress { .. })
    ));
}

proptest! {
    #[test]
    fn any_loopback_or_private_integer_form_refused(low in 0u32..(1 << 24), which in 0usize..3) {
        let base: u32 = [0x7f00_0000, 0x0a00_0000, 0xa9fe_0000][which];
        let n = base | (low & if which == 2 { 0xffff } else { 0xff_ffff });
        let http = client(&[], true);
        for url in [format!("http://{n}/"), format!("http://0x{n:x}/"), format!("http://0{n:o}/")] {
            let r = http.check_url(&url);
            prop_assert!(matches!(r, Err(NetError::ForbiddenAddress { .. })), "{}: {:?}", url, r);
        }
    }
}

#[tokio::test]
async fn real_get_on_allowed_loopback_port() {
    let (port, _) = serve(Arc::new(|path: &str| {
        response(
            "200 OK",
            &[("Content-Type", "text/plain")],
            format!("hello {path}").as_bytes(),
        )
    }))
    .await;
    let url = format!("http://127.0.0.1:{port}/x");
    let blocked = client(&[], false).get(&url).await;
    assert!(
        matches!(blocked, Err(NetError::ForbiddenAddress { .. })),
        "{blocked:?}"
    );

    let mut http = client(&[], false);
    http.allow_loopback_port_for_tests(port);
    let r = http.get(&url).await.expect("get");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello /x");
    assert_eq!(r.final_url, url);
    assert_eq!(r.content_type.as_deref(), Some("text/plain"));
    assert!(!r.truncated);
}

#[tokio::test]
async fn localhost_name_is_refused_at_resolution() {
    let (port, hits) = serve(Arc::new(|_: &str| response("200 OK", &[], b"x"))).await;
    let mut http = client(&["localhost"], false);
    http.allow_loopback_port_for_tests(port);
    let r = http.get(&format!("http://localhost:{port}/")).await;
    assert!(matches!(r, Err(NetError::ForbiddenAddress { .. })), "{r:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn body_is_capped() {
    let (port, _) = serve(Arc::new(|_: &str| {
        response("200 OK", &[], &[b'a'; 100_000])
    }))
    .await;
    let mut http = SafeHttp::new(
        EgressPolicy::default(),
        HttpLimits {
            max_body_bytes: 1000,
            ..HttpLimits::default()
        },
    )
    .expect("client");
    http.allow_loopback_port_for_tests(port);
    let url = format!("http://127.0.0.1:{port}/");
    let r = http.get(&url).await.expect("get");
    assert!(r.truncated);
    assert_eq!(r.body.len(), 1000);
    let r = http.get_complete(&url).await;
    assert!(
        matches!(r, Err(NetError::TooLarge { limit: 1000, .. })),
        "{r:?}"
    );
}

#[tokio::test]
async fn redirects_are_rechecked_every_hop() {
    let (other, other_hits) = serve(Arc::new(|_: &str| response("200 OK", &[], b"secret"))).await;
    let (port, _) = serve(Arc::new(move |path: &str| match path {
        "/other-port" => redirect(format!("http://127.0.0.1:{other}/")),
        "/metadata" => redirect("http://169.254.169.254/latest/".into()),
        "/mapped" => redirect(format!("http://[::ffff:127.0.0.1]:{other}/")),
        "/elsewhere" => redirect("http://not-allowed.example/".into()),
        "/creds" => redirect("http://user:pw@127.0.0.1/".into()),
        "/file" => redirect("file:///etc/passwd".into()),
        "/start" => response("301 Moved", &[("Location", "/end")], b""),
        "/end" => response("200 OK", &[], b"end"),
        _ => response("404 Not Found", &[], b""),
    }))
    .await;
    let mut http = client(&[], true);
    http.allow_loopback_port_for_tests(port);
    let base = format!("http://127.0.0.1:{port}");
    for (path, want) in [
        ("/other-port", "ForbiddenAddress"),
        ("/metadata", "ForbiddenAddress"),
        ("/mapped", "ForbiddenAddress"),
        ("/creds", "Userinfo"),
        ("/file", "Scheme"),
    ] {
        let r = http.get(&format!("{base}{path}")).await;
        let got = format!("{r:?}");
        assert!(got.starts_with(&format!("Err({want}")), "{path}: {got}");
    }
    assert_eq!(
        other_hits.load(Ordering::SeqCst),
        0,
        "forbidden hop was contacted"
    );

    let mut strict = client(&[], false);
    strict.allow_loopback_port_for_tests(port);
    let r = strict.get(&format!("{base}/elsewhere")).await;
    assert!(matches!(r, Err(NetError::NotAllowed { .. })), "{r:?}");

    let r = http
        .get(&format!("{base}/start"))
        .await
        .expect("redirect followed");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"end"[..]));
    assert_eq!(r.final_url, format!("{base}/end"));
}

#[tokio::test]
async fn redirect_loop_stops() {
    let (port, hits) = serve(Arc::new(|_: &str| {
        response("302 Found", &[("Location", "/loop")], b"")
    }))
    .await;
    let mut http = client(&[], false);
    http.allow_loopback_port_for_tests(port);
    let r = http.get(&format!("http://127.0.0.1:{port}/loop")).await;
    assert!(matches!(r, Err(NetError::TooManyRedirects { .. })), "{r:?}");
    // The first request plus max_redirects (5) followed hops.
    assert_eq!(hits.load(Ordering::SeqCst), 6);
}

#[tokio::test]
async fn slow_server_times_out() {
    let port = support::silent().await;
    let mut http = SafeHttp::new(
        EgressPolicy::default(),
        HttpLimits {
            total_timeout: Duration::from_millis(500),
            ..HttpLimits::default()
        },
    )
    .expect("client");
    http.allow_loopback_port_for_tests(port);
    let r = http.get(&format!("http://127.0.0.1:{port}/")).await;
    assert!(matches!(r, Err(NetError::Timeout { .. })), "{r:?}");
}

#[test]
fn length_bounds() {
    let http = client(&[], true);
    let long_path = format!(
        "https://example.com/{}",
        "a".repeat(bulwark_net::MAX_URL_BYTES)
    );
    assert!(matches!(
        http.check_url(&long_path),
        Err(NetError::InvalidUrl { .. })
    ));
    let ok_path = format!("https://example.com/{}", "a".repeat(4000));
    assert!(http.check_url(&ok_path).is_ok());
    let long_host = format!("https://{}.example.com/", ["abcdefghij"; 25].join("."));
    let r = http.check_url(&long_host);
    assert!(
        matches!(&r, Err(NetError::InvalidUrl { detail, .. }) if detail.contains("host")),
        "{r:?}"
    );
}
