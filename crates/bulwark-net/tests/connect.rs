//! Connect-time enforcement: one lookup, every answer checked, the connected
//! peer checked before a byte is sent; rebinding, private-resolving names,
//! misdirected sockets, internal-service overrides.

use crate::support;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bulwark_net::{EgressPolicy, HttpLimits, NetError, SafeHttp, StaticResolver, forbidden_range};
use support::{MisdirectingDialer, RecordingDialer, response, serve};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

/// allow_all, the given resolver, a recording dialer.
fn open(resolver: &Arc<StaticResolver>, dialer: &Arc<RecordingDialer>) -> SafeHttp {
    SafeHttp::new(
        EgressPolicy {
            allowed_domains: Vec::new(),
            allow_all: true,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver(resolver.clone())
    .with_dialer(dialer.clone())
}

#[tokio::test]
async fn rebinding_gets_one_lookup_and_the_second_answer_is_refused() {
    let resolver = Arc::new(StaticResolver::new());
    resolver
        .answer("rebind.test", vec![ip("93.184.215.14")])
        .answer("rebind.test", vec![ip("127.0.0.1")]);
    let dialer = Arc::new(RecordingDialer::default());
    let http = open(&resolver, &dialer);

    // First request: the public answer is checked and dialled (the test
    // dialer refuses to leave the host, so the request fails in transport).
    let first = http.get("http://rebind.test/").await;
    assert!(
        matches!(first, Err(NetError::Transport { .. })),
        "{first:?}"
    );
    assert_eq!(resolver.lookups(), ["rebind.test"], "exactly one lookup");
    assert_eq!(
        dialer.dialled(),
        ["93.184.215.14:80".parse().expect("addr")]
    );

    // Second request: the rebound answer is refused before any dial.
    let second = http.get("https://rebind.test/").await;
    assert!(
        matches!(&second, Err(NetError::ForbiddenAddress { addr, .. }) if addr == "127.0.0.1"),
        "{second:?}"
    );
    assert_eq!(resolver.lookups().len(), 2);
    assert_eq!(
        dialer.dialled().len(),
        1,
        "nothing dialled after the refusal"
    );
}

#[tokio::test]
async fn names_resolving_to_refused_addresses_are_never_dialled() {
    let answers: &[&[&str]] = &[
        &["127.0.0.1"],
        &["127.1.2.3"],
        &["10.0.0.1"],
        &["172.16.5.4"],
        &["192.168.1.1"],
        &["169.254.169.254"],
        &["100.64.0.1"],
        &["100.100.100.200"],
        &["192.0.0.192"],
        &["0.0.0.0"],
        &["198.18.0.1"],
        &["192.0.2.1"],
        &["224.0.0.1"],
        &["240.0.0.1"],
        &["255.255.255.255"],
        &["::1"],
        &["::"],
        &["::ffff:127.0.0.1"],
        &["::ffff:169.254.169.254"],
        &["::127.0.0.1"],
        &["64:ff9b::a9fe:a9fe"],
        &["64:ff9b:1::a00:1"],
        &["2002:7f00:1::1"],
        &["2001:0:4136:e378:8000:63bf:3fff:fdd2"],
        &["fc00::1"],
        &["fd00:ec2::254"],
        &["fe80::1"],
        &["fec0::1"],
        &["ff02::1"],
        &["100::1"],
        &["2001:db8::1"],
        // A public address alongside a private one: the whole name is refused.
        &["93.184.215.14", "10.1.1.1"],
        &["2606:2800:21f:cb07:6820:80da:af6b:8b2c", "::1"],
        &["10.1.1.1", "93.184.215.14"],
    ];
    for (i, addrs) in answers.iter().enumerate() {
        let resolver = Arc::new(StaticResolver::new());
        let name = format!("host{i}.test");
        resolver.answer(&name, addrs.iter().map(|a| ip(a)).collect());
        let dialer = Arc::new(RecordingDialer::default());
        let http = open(&resolver, &dialer);
        for scheme in ["http", "https"] {
            let r = http.get(&format!("{scheme}://{name}:8080/")).await;
            assert!(
                matches!(r, Err(NetError::ForbiddenAddress { .. })),
                "{addrs:?} via {scheme}: {r:?}"
            );
        }
        assert!(dialer.dialled().is_empty(), "{addrs:?} was dialled");
    }
}

#[tokio::test]
async fn resolution_failures_fail_closed() {
    let resolver = Arc::new(StaticResolver::new());
    resolver.answer("empty.test", Vec::new());
    let dialer = Arc::new(RecordingDialer::default());
    let http = open(&resolver, &dialer);
    for url in ["http://nxdomain.test/", "http://empty.test/"] {
        let r = http.get(url).await;
        assert!(matches!(r, Err(NetError::Resolve { .. })), "{url}: {r:?}");
    }
    assert!(dialer.dialled().is_empty());
}

#[tokio::test]
async fn a_socket_that_lands_elsewhere_is_closed_before_any_byte() {
    let (port, hits) = serve(Arc::new(|_: &str| response("200 OK", &[], b"private"))).await;
    let resolver = Arc::new(StaticResolver::new());
    resolver.answer("public.test", vec![ip("93.184.215.14")]);
    let http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: vec!["public.test".into()],
            allow_all: false,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver(resolver.clone())
    .with_dialer(Arc::new(MisdirectingDialer { port }));
    for scheme in ["http", "https"] {
        let r = http.get(&format!("{scheme}://public.test:{port}/")).await;
        assert!(
            matches!(&r, Err(NetError::ForbiddenAddress { addr, .. }) if addr == "127.0.0.1"),
            "{scheme}: {r:?}"
        );
    }

    // Even for an internal-service pair, the peer must be the checked one.
    let mut internal = SafeHttp::new(
        EgressPolicy {
            allowed_domains: vec!["wiki.corp".into()],
            allow_all: false,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver({
        let r = StaticResolver::new();
        r.answer("wiki.corp", vec![ip("10.9.9.9")]);
        Arc::new(r)
    })
    .with_dialer(Arc::new(MisdirectingDialer { port }));
    internal.allow_internal_service("wiki.corp", port);
    let r = internal.get(&format!("http://wiki.corp:{port}/")).await;
    assert!(matches!(r, Err(NetError::ForbiddenAddress { .. })), "{r:?}");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "no request reached the server"
    );
}

#[tokio::test]
async fn internal_service_override_is_exactly_one_host_port_pair() {
    let (port, hits) = serve(Arc::new(|_: &str| response("200 OK", &[], b"wiki"))).await;
    let resolver = Arc::new(StaticResolver::new());
    resolver
        .answer("wiki.corp", vec![ip("127.0.0.1")])
        .answer("other.corp", vec![ip("127.0.0.1")])
        .answer("meta.corp", vec![ip("169.254.169.254")]);
    let mut http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: vec!["*.corp".into()],
            allow_all: false,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver(resolver.clone())
    .with_dialer(Arc::new(RecordingDialer::default()));
    http.allow_internal_service("WIKI.corp", port);
    http.allow_internal_service("meta.corp", 80);
    http.allow_internal_service("169.254.169.254", 80);

    let ok = http
        .get(&format!("http://wiki.corp:{port}/"))
        .await
        .expect("override");
    assert_eq!(ok.body, b"wiki");
    for (url, why) in [
        (
            format!("http://wiki.corp:{}/", port.wrapping_add(1)),
            "other port",
        ),
        (format!("http://other.corp:{port}/"), "other host"),
        (
            format!("http://127.0.0.1:{port}/"),
            "the address instead of the name",
        ),
        (
            "http://meta.corp/".to_string(),
            "metadata behind an override",
        ),
        (
            "http://169.254.169.254/".to_string(),
            "metadata literal override",
        ),
    ] {
        let r = http.get(&url).await;
        assert!(
            matches!(
                r,
                Err(NetError::ForbiddenAddress { .. } | NetError::NotAllowed { .. })
            ),
            "{why}: {url}: {r:?}"
        );
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn dialled_addresses_are_the_checked_ones() {
    // Every address a request dials passed the table: checked here on the
    // recorded dials of a mix of names and literals.
    let resolver = Arc::new(StaticResolver::new());
    resolver
        .answer(
            "a.test",
            vec![
                ip("93.184.215.14"),
                ip("2606:2800:21f:cb07:6820:80da:af6b:8b2c"),
            ],
        )
        .answer("b.test", vec![ip("8.8.8.8")]);
    let dialer = Arc::new(RecordingDialer::default());
    let http = open(&resolver, &dialer);
    for url in [
        "http://a.test/",
        "https://b.test:8443/",
        "http://1.1.1.1/",
        "http://[2606:4700:4700::1111]/",
        "http://[::ffff:8.8.4.4]/",
        "http://[64:ff9b::808:808]/",
    ] {
        let r = http.get(url).await;
        assert!(matches!(r, Err(NetError::Transport { .. })), "{url}: {r:?}");
    }
    let dialled = dialer.dialled();
    assert_eq!(dialled.len(), 7, "{dialled:?}");
    for addr in dialled {
        assert_eq!(forbidden_range(addr.ip()), None, "{addr}");
    }
}
