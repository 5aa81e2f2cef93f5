//! Redirect chains served from loopback test servers: every hop is checked
//! again (URL, allowlist, resolved and connected address), and credentials
//! do not follow a hop to another origin.

use crate::support;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bulwark_net::{
    BodyMode, EgressPolicy, HttpLimits, HttpRequest, NetError, SafeHttp, StaticResolver,
};
use support::{RecordingDialer, path, redirect, response, serve};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

#[tokio::test]
async fn chains_to_metadata_are_stopped_at_the_hop() {
    let (port, _) = serve(Arc::new(move |head: &str| {
        let p = path(head);
        match p {
            "/a" => redirect("/b"),
            "/b" => redirect("/c"),
            "/c" => redirect("http://169.254.169.254/latest/meta-data/iam/"),
            _ => match p.strip_prefix("/to/") {
                Some(target) => redirect(&target.replace("%3A", ":")),
                None => response("404 Not Found", &[], b""),
            },
        }
    }))
    .await;
    let resolver = Arc::new(StaticResolver::new());
    resolver
        .answer("hop.test", vec![ip("127.0.0.1")])
        .answer("evil.test", vec![ip("169.254.169.254")])
        .answer("rebound.test", vec![ip("10.0.0.7")]);
    let dialer = Arc::new(RecordingDialer::default());
    let mut http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: Vec::new(),
            allow_all: true,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver(resolver)
    .with_dialer(dialer.clone());
    http.allow_loopback_port_for_tests(port);
    let base = format!("http://127.0.0.1:{port}");
    let targets = [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/",
        "http://100.100.100.200/latest/meta-data/",
        "http://192.0.0.192/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.GOOGLE.INTERNAL./",
        "http://metadata/computeMetadata/v1/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://2852039166/",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://0251.0376.0251.0376/",
        "http://169.254.43518/",
        "http://evil.test/",
        "http://rebound.test/",
        "http://localhost/",
        "http://127.0.0.1:1/",
        "http://[::1]/",
        "http://0/",
    ];
    let mut refused = 0;
    for t in targets {
        let url = format!("{base}/to/{}", t.replace(':', "%3A"));
        let r = http.get(&url).await;
        // Either the address rule or (for single-label names the resolver
        // does not know) a failed lookup: never a response.
        assert!(
            matches!(
                r,
                Err(NetError::ForbiddenAddress { .. } | NetError::Resolve { .. })
            ),
            "{t}: {r:?}"
        );
        refused += 1;
    }
    assert_eq!(refused, targets.len());
    // The three-hop chain ends at the metadata hop too.
    let r = http.get(&format!("{base}/a")).await;
    assert!(matches!(r, Err(NetError::ForbiddenAddress { .. })), "{r:?}");
    for addr in dialer.dialled() {
        assert_eq!(addr, format!("127.0.0.1:{port}").parse().expect("addr"));
    }
}

#[tokio::test]
async fn redirects_obey_the_allowlist_and_refuse_downgrades() {
    let (port, _) = serve(Arc::new(|head: &str| match path(head) {
        "/away" => redirect("http://not-listed.test/"),
        "/listed" => redirect("http://listed.test/"),
        _ => response("200 OK", &[], b"ok"),
    }))
    .await;
    let resolver = Arc::new(StaticResolver::new());
    resolver.answer("listed.test", vec![ip("93.184.215.14")]);
    resolver.answer("not-listed.test", vec![ip("93.184.215.14")]);
    let dialer = Arc::new(RecordingDialer::default());
    let mut http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: vec!["listed.test".into()],
            allow_all: false,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver(resolver)
    .with_dialer(dialer.clone());
    http.allow_loopback_port_for_tests(port);
    let r = http.get(&format!("http://127.0.0.1:{port}/away")).await;
    assert!(matches!(r, Err(NetError::NotAllowed { .. })), "{r:?}");
    // An allowed hop is followed (and fails in the test dialer, which does
    // not leave the host): the dial shows the hop was taken.
    let r = http.get(&format!("http://127.0.0.1:{port}/listed")).await;
    assert!(matches!(r, Err(NetError::Transport { .. })), "{r:?}");
    assert!(
        dialer
            .dialled()
            .contains(&"93.184.215.14:80".parse().expect("addr"))
    );
}

#[tokio::test]
async fn authorization_does_not_cross_origins() {
    // The echo server returns the request head it received.
    let (echo, _) = serve(Arc::new(|head: &str| {
        response("200 OK", &[("Content-Type", "text/plain")], head.as_bytes())
    }))
    .await;
    let (port, _) = serve(Arc::new(move |head: &str| match path(head) {
        "/cross" => redirect(&format!("http://echo.test:{echo}/landed")),
        "/same" => redirect("/echo-here"),
        _ => response("200 OK", &[], head.as_bytes()),
    }))
    .await;
    let resolver = Arc::new(StaticResolver::new());
    resolver.answer("echo.test", vec![ip("127.0.0.1")]);
    resolver.answer("start.test", vec![ip("127.0.0.1")]);
    let mut http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: vec!["*.test".into()],
            allow_all: false,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver(resolver);
    http.allow_internal_service("echo.test", echo);
    http.allow_internal_service("start.test", port);
    let request = |p: &str| HttpRequest {
        method: "GET".into(),
        url: format!("http://start.test:{port}{p}"),
        headers: vec![
            ("Authorization".into(), "Bearer abc123".into()),
            ("Cookie".into(), "session=xyz".into()),
            ("X-Trace".into(), "kept".into()),
        ],
        body: Vec::new(),
    };
    let r = http
        .send(request("/cross"), BodyMode::Prefix)
        .await
        .expect("cross");
    let seen = String::from_utf8_lossy(&r.body).to_ascii_lowercase();
    assert!(seen.starts_with("get /landed"), "{seen}");
    assert!(
        !seen.contains("abc123") && !seen.contains("session=xyz"),
        "{seen}"
    );
    assert!(seen.contains("x-trace: kept"), "{seen}");

    let r = http
        .send(request("/same"), BodyMode::Prefix)
        .await
        .expect("same");
    let seen = String::from_utf8_lossy(&r.body).to_ascii_lowercase();
    assert!(seen.contains("authorization: bearer abc123"), "{seen}");
}

#[tokio::test]
async fn see_other_turns_a_post_into_a_get_without_body() {
    let (port, hits) = serve(Arc::new(|head: &str| match path(head) {
        "/submit" => response("303 See Other", &[("Location", "/result")], b""),
        _ => response("200 OK", &[], head.as_bytes()),
    }))
    .await;
    let mut http = SafeHttp::new(EgressPolicy::default(), HttpLimits::default()).expect("client");
    http.allow_loopback_port_for_tests(port);
    let r = http
        .send(
            HttpRequest {
                method: "POST".into(),
                url: format!("http://127.0.0.1:{port}/submit"),
                headers: vec![("Content-Type".into(), "application/json".into())],
                body: b"{\"a\":1}".to_vec(),
            },
            BodyMode::Complete,
        )
        .await
        .expect("post");
    let seen = String::from_utf8_lossy(&r.body).to_ascii_lowercase();
    assert!(seen.starts_with("get /result"), "{seen}");
    assert!(!seen.contains("content-type"), "{seen}");
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn caller_headers_cannot_smuggle() {
    let http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: Vec::new(),
            allow_all: true,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_dialer(Arc::new(RecordingDialer::default()));
    for (name, value) in [
        ("X-A", "ok\r\nHost: evil"),
        ("X-A", "line\nbreak"),
        ("Host", "evil.test"),
        ("Content-Length", "0"),
        ("Transfer-Encoding", "chunked"),
        ("Connection", "keep-alive"),
        ("Bad Name", "x"),
        ("X:Colon", "x"),
        ("Proxy-Authorization", "Basic x"),
    ] {
        let r = http
            .send(
                HttpRequest {
                    method: "GET".into(),
                    url: "http://1.1.1.1/".into(),
                    headers: vec![(name.into(), value.into())],
                    body: Vec::new(),
                },
                BodyMode::Prefix,
            )
            .await;
        assert!(matches!(r, Err(NetError::Header { .. })), "{name}: {r:?}");
    }
}

/// Two loopback services on one host name, both declared internal by the
/// operator; the allowlist (a `net_connect` grant of `svc.test:<first>`)
/// names only the first port, `other.test` is granted on any port.
async fn two_port_client(
    handler: support::Handler,
) -> (SafeHttp, u16, u16, Arc<std::sync::atomic::AtomicUsize>) {
    let (second, second_hits) = serve(Arc::new(|head: &str| {
        response(
            "200 OK",
            &[],
            format!("second port saw {}", path(head)).as_bytes(),
        )
    }))
    .await;
    let (first, _) = serve(Arc::new(move |head: &str| {
        handler(&format!("{second} {head}"))
    }))
    .await;
    let resolver = Arc::new(StaticResolver::new());
    resolver
        .answer("svc.test", vec![ip("127.0.0.1")])
        .answer("other.test", vec![ip("127.0.0.1")]);
    let mut http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: vec![format!("svc.test:{first}"), "other.test".into()],
            allow_all: false,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver(resolver);
    for port in [first, second] {
        http.allow_internal_service("svc.test", port);
        http.allow_internal_service("other.test", port);
    }
    (http, first, second, second_hits)
}

#[tokio::test]
async fn redirects_keep_the_port_of_the_grant() {
    // The handler gets "<second port> <request head>".
    let (http, first, second, second_hits) = two_port_client(Arc::new(|line: &str| {
        let (second, head) = line.split_once(' ').unwrap_or_default();
        match path(head) {
            "/other-port" => redirect(&format!("http://svc.test:{second}/landed")),
            "/other-port-upper" => redirect(&format!("HTTP://SVC.TEST.:{second}/landed")),
            "/default-port" => redirect("http://svc.test/landed"),
            "/upgrade" => redirect("https://svc.test/landed"),
            "/ftp" => redirect(&format!("ftp://svc.test:{second}/landed")),
            "/same-port" => redirect("/landed"),
            "/same-port-absolute" => {
                let authority = head
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("host: ")
                            .or_else(|| l.strip_prefix("Host: "))
                    })
                    .unwrap_or_default();
                redirect(&format!("http://{authority}/landed"))
            }
            "/portless-grant" => redirect(&format!("http://other.test:{second}/landed")),
            p => response("200 OK", &[], format!("first port saw {p}").as_bytes()),
        }
    }))
    .await;
    let url = |p: &str| format!("http://svc.test:{first}{p}");

    // The first request to the second port is refused by the allowlist...
    let direct = http.check_url(&format!("http://svc.test:{second}/landed"));
    assert!(
        matches!(direct, Err(NetError::NotAllowed { .. })),
        "{direct:?}"
    );
    // ...and so is every redirect that ends there, with the reason.
    for p in ["/other-port", "/other-port-upper"] {
        let r = http.get(&url(p)).await;
        let Err(NetError::NotAllowed { ref host, ref rule }) = r else {
            panic!("{p}: a redirect to another port of the granted host was followed: {r:?}");
        };
        assert_eq!(host.replace(".:", ":"), format!("svc.test:{second}"), "{p}");
        let msg = r
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(
            rule.contains(&format!("port {first}")) && msg.contains("redirect from"),
            "{p}: {msg}"
        );
    }
    // A scheme's default port is a port like any other.
    for p in ["/default-port", "/upgrade"] {
        let r = http.get(&url(p)).await;
        assert!(matches!(r, Err(NetError::NotAllowed { .. })), "{p}: {r:?}");
    }
    let r = http.get(&url("/ftp")).await;
    assert!(matches!(r, Err(NetError::Scheme { .. })), "{r:?}");
    assert_eq!(
        second_hits.load(Ordering::SeqCst),
        0,
        "the second port was reached"
    );

    // Work that must still be allowed: a redirect on the granted port, and
    // to a host granted without a port.
    for p in ["/same-port", "/same-port-absolute"] {
        let r = http.get(&url(p)).await.expect("same port");
        assert_eq!(r.body, b"first port saw /landed", "{p}");
    }
    let r = http.get(&url("/portless-grant")).await.expect("portless");
    assert_eq!(r.body, b"second port saw /landed");
    assert_eq!(second_hits.load(Ordering::SeqCst), 1);
}
