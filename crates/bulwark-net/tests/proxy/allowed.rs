//! The work the proxy exists for: tunnels and forwarded requests to the
//! hosts the policy allows, with credentials injected by grant.

use std::os::unix::fs::PermissionsExt;

use bulwark_net::{ProxyRequestKind, UseOutcome};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Fixture, GH, Setup, exists, status};

#[tokio::test]
async fn connect_to_an_allowed_host_carries_bytes_both_ways() {
    let f = Fixture::new(Setup::default()).await;
    let (mut s, head) = f.tunnel(&format!("allowed.test:{}", f.echo)).await;
    assert_eq!(status(&head), 200, "{head}");
    s.write_all(b"ping through the tunnel")
        .await
        .expect("write");
    let mut back = [0u8; 23];
    s.read_exact(&mut back).await.expect("echo");
    assert_eq!(&back, b"ping through the tunnel");
    drop(s);
    let e = f
        .events
        .wait_for(|e| e.kind == ProxyRequestKind::Connect)
        .await;
    assert_eq!(e.refused, None);
    assert_eq!(e.host, "allowed.test");
    assert_eq!(e.port, f.echo);
    assert_eq!((e.bytes_up, e.bytes_down), (23, 23));
}

#[tokio::test]
async fn forward_get_to_an_allowed_host() {
    let f = Fixture::new(Setup::default()).await;
    let answer = f
        .get(&format!("http://allowed.test:{}/page?x=1", f.web))
        .await;
    assert_eq!(status(&answer), 200, "{answer}");
    // The origin saw the path, its own Host, and no proxy headers.
    assert!(answer.contains("GET /page?x=1 HTTP/1.1"), "{answer}");
    assert!(
        answer.contains(&format!("host: allowed.test:{}", f.web)),
        "{answer}"
    );
    let e = f
        .events
        .wait_for(|e| e.kind == ProxyRequestKind::Forward)
        .await;
    assert_eq!(e.refused, None);
    assert!(e.bytes_down > 0);
}

#[tokio::test]
async fn forward_strips_hop_by_hop_and_proxy_headers() {
    let f = Fixture::new(Setup::default()).await;
    let req = format!(
        "GET http://allowed.test:{}/ HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\n\
         Proxy-Connection: keep-alive\r\nX-Drop-Me: 1\r\nConnection: close, X-Drop-Me\r\nX-Keep: yes\r\n\r\n",
        f.web
    );
    let answer = f.raw(req.as_bytes()).await;
    assert_eq!(status(&answer), 200, "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(lower.contains("x-keep: yes"), "{answer}");
    assert!(
        !lower.contains("proxy-") && !lower.contains("x-drop-me"),
        "{answer}"
    );
}

#[tokio::test]
async fn forward_to_a_granted_host_gets_the_credential_injected() {
    let f = Fixture::new(Setup::default()).await;
    let answer = f.get(&format!("http://api.gh.test:{}/user", f.web)).await;
    assert_eq!(status(&answer), 200, "{answer}");
    assert!(
        answer.contains(&format!("authorization: Bearer {GH}")),
        "{answer}"
    );
    let e = f
        .events
        .wait_for(|e| e.kind == ProxyRequestKind::Forward)
        .await;
    assert_eq!(e.credentials.len(), 1, "{e:?}");
    assert_eq!(e.credentials[0].outcome, UseOutcome::Injected);
    assert_eq!(e.credentials[0].keys, ["GH_TOKEN"]);
    // The same program asking another host gets nothing injected.
    let other = f.get(&format!("http://allowed.test:{}/user", f.web)).await;
    assert!(!other.contains(GH), "{other}");
}

#[tokio::test]
async fn a_held_key_allows_a_tunnel_to_a_host_its_grant_covers() {
    let f = Fixture::new(Setup {
        held_keys: vec!["GH_TOKEN".into()],
        ..Setup::default()
    })
    .await;
    let (mut s, head) = f.tunnel(&format!("api.gh.test:{}", f.echo)).await;
    assert_eq!(status(&head), 200, "{head}");
    s.write_all(b"x").await.expect("write");
    let mut b = [0u8; 1];
    s.read_exact(&mut b).await.expect("echo");
}

#[tokio::test]
async fn keep_alive_serves_several_requests_on_one_connection() {
    let f = Fixture::new(Setup::default()).await;
    let mut s = f.connect().await;
    for _ in 0..2 {
        let req = format!(
            "GET http://allowed.test:{}/ HTTP/1.1\r\nHost: x\r\n\r\n",
            f.web
        );
        s.write_all(req.as_bytes()).await.expect("write");
        let head = super::read_head(&mut s).await;
        assert_eq!(status(&head), 200, "{head}");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .expect("length");
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).await.expect("body");
    }
}

#[tokio::test]
async fn the_socket_is_private_and_removed_on_drop_with_tunnels_closed() {
    let f = Fixture::new(Setup::default()).await;
    let path = f.proxy.socket_path().to_path_buf();
    let mode = path
        .symlink_metadata()
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let (mut s, head) = f.tunnel(&format!("allowed.test:{}", f.echo)).await;
    assert_eq!(status(&head), 200, "{head}");
    let super::Fixture { proxy, events, .. } = f;
    drop(proxy);
    assert!(!exists(&path));
    // The open tunnel is closed, and still reported.
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(std::time::Duration::from_secs(20), s.read(&mut b))
        .await
        .expect("the tunnel closes");
    assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    events
        .wait_for(|e| e.kind == ProxyRequestKind::Connect && e.refused.is_none())
        .await;
}

#[tokio::test]
async fn a_post_body_reaches_the_origin_and_head_keeps_its_length() {
    let f = Fixture::new(Setup::default()).await;
    let req = format!(
        "POST http://allowed.test:{}/submit HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\nhello",
        f.web
    );
    let answer = f.raw(req.as_bytes()).await;
    // The proxy's own go-ahead for the body, then the origin's answer.
    let answer = answer
        .strip_prefix("HTTP/1.1 100 Continue\r\n\r\n")
        .unwrap_or(&answer);
    assert_eq!(status(answer), 200, "{answer}");
    assert!(answer.contains("POST /submit HTTP/1.1"), "{answer}");
    assert!(answer.contains("content-length: 5"), "{answer}");
    assert!(!answer.to_ascii_lowercase().contains("expect:"), "{answer}");
    let e = f
        .events
        .wait_for(|e| e.kind == ProxyRequestKind::Forward)
        .await;
    assert_eq!(e.bytes_up, 5);

    let head = f
        .raw(
            format!(
                "HEAD http://allowed.test:{}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                f.web
            )
            .as_bytes(),
        )
        .await;
    assert_eq!(status(&head), 200, "{head}");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("length");
    assert!(length > 0, "{head}");
}
