//! Size and time limits (decompression bombs, slow servers) and HTTPS to a
//! local TLS server through a checked, pinned connection.

use crate::support;

use std::io::Write;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use bulwark_net::{EgressPolicy, HttpLimits, NetError, SafeHttp, StaticResolver};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use support::{Handler, answer, response, serve};
use tokio::net::TcpListener;

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(data).expect("gzip");
    enc.finish().expect("gzip")
}

fn limited(max_body_bytes: usize) -> HttpLimits {
    HttpLimits {
        max_body_bytes,
        ..HttpLimits::default()
    }
}

#[tokio::test]
async fn gzip_bombs_stop_at_the_decoded_cap() {
    // 64 MiB of zeros compress to about 64 KB.
    let bomb = Arc::new(gzip(&vec![0u8; 64 << 20]));
    let small = Arc::new(gzip(b"hello, compressed world"));
    let (port, _) = serve(Arc::new(move |head: &str| match support::path(head) {
        "/bomb" => response("200 OK", &[("Content-Encoding", "gzip")], &bomb),
        "/small" => response("200 OK", &[("Content-Encoding", "gzip")], &small),
        "/brotli" => response("200 OK", &[("Content-Encoding", "br")], b"\x0b\x00\x80"),
        _ => response(
            "200 OK",
            &[("Content-Encoding", "gzip")],
            b"not gzip at all",
        ),
    }))
    .await;
    let mut http = SafeHttp::new(EgressPolicy::default(), limited(1 << 20)).expect("client");
    http.allow_loopback_port_for_tests(port);
    let base = format!("http://127.0.0.1:{port}");

    let r = http.get(&format!("{base}/bomb")).await.expect("prefix");
    assert_eq!(r.body.len(), 1 << 20);
    assert!(r.truncated);
    let r = http.get_complete(&format!("{base}/bomb")).await;
    assert!(matches!(r, Err(NetError::TooLarge { .. })), "{r:?}");

    let r = http.get(&format!("{base}/small")).await.expect("small");
    assert_eq!(r.body, b"hello, compressed world");
    assert!(!r.truncated);

    let r = http.get(&format!("{base}/brotli")).await;
    assert!(matches!(r, Err(NetError::Encoding { .. })), "{r:?}");
    let r = http.get(&format!("{base}/corrupt")).await;
    assert!(matches!(r, Err(NetError::Transport { .. })), "{r:?}");
}

#[tokio::test]
async fn a_server_that_never_answers_hits_the_first_byte_timeout() {
    let port = support::silent().await;
    let mut http = SafeHttp::new(
        EgressPolicy::default(),
        HttpLimits {
            first_byte_timeout: Duration::from_millis(300),
            total_timeout: Duration::from_secs(30),
            ..HttpLimits::default()
        },
    )
    .expect("client");
    http.allow_loopback_port_for_tests(port);
    let started = std::time::Instant::now();
    let r = http.get(&format!("http://127.0.0.1:{port}/")).await;
    assert!(matches!(r, Err(NetError::Timeout { .. })), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "total timeout was not what fired"
    );
}

/// A CA, and a leaf for `name` signed by it; returns (CA DER, leaf DER, key).
fn pki(name: &str) -> (Vec<u8>, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("ca");
    let leaf_key = rcgen::KeyPair::generate().expect("key");
    let leaf = rcgen::CertificateParams::new(vec![name.to_string()])
        .expect("params")
        .signed_by(&leaf_key, &ca)
        .expect("leaf");
    (
        ca.der().to_vec(),
        leaf.der().clone(),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
    )
}

async fn serve_tls(name: &str, handler: Handler) -> (u16, Vec<u8>) {
    let (ca, leaf, key) = pki(name);
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![leaf], key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let handler = handler.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(sock).await {
                    answer(tls, handler, Arc::new(AtomicUsize::new(0))).await;
                }
            });
        }
    });
    (port, ca)
}

#[tokio::test]
async fn https_goes_to_the_checked_address_and_verifies_the_name() {
    let (port, ca) = serve_tls(
        "tls.test",
        Arc::new(|_: &str| response("200 OK", &[("Content-Type", "text/plain")], b"over tls")),
    )
    .await;
    let ip: IpAddr = "127.0.0.1".parse().expect("ip");
    let resolver = Arc::new(StaticResolver::new());
    resolver
        .answer("tls.test", vec![ip])
        .answer("wrong-name.test", vec![ip]);
    let policy = EgressPolicy {
        allowed_domains: vec!["*.test".into()],
        allow_all: false,
    };
    let mut http = SafeHttp::new(policy.clone(), HttpLimits::default())
        .expect("client")
        .with_resolver(resolver.clone());
    http.allow_internal_service("tls.test", port);
    http.allow_internal_service("wrong-name.test", port);

    // Untrusted root: the handshake fails.
    let r = http.get(&format!("https://tls.test:{port}/")).await;
    assert!(matches!(r, Err(NetError::Transport { .. })), "{r:?}");

    http.add_root_certificate(ca);
    let r = http
        .get(&format!("https://tls.test:{port}/"))
        .await
        .expect("https");
    assert_eq!(r.body, b"over tls");
    // The certificate must match the name asked for, not just the address.
    let r = http.get(&format!("https://wrong-name.test:{port}/")).await;
    assert!(matches!(r, Err(NetError::Transport { .. })), "{r:?}");
    // One lookup per request, none by the TLS layer.
    assert_eq!(resolver.lookups().len(), 3);
}
