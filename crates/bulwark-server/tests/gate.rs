//! The checks before any route: Host allowlist (DNS rebinding), Origin
//! (cross-site), CORS preflights, and the rate limits with Retry-After.

use crate::common;

use axum::body::Body;
use bulwark_server::{Limits, ServerConfig};
use common::{
    Fixture, LOCAL_HOST, bearer, call, get, local, ping, rate, raw_get, recv, retry_after,
    send_message, status, status_with_headers, subscribe, turn, with_limits,
};

#[tokio::test]
async fn only_allowed_host_names_are_answered() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    for host in [
        "localhost:8420",
        "LOCALHOST:8420",
        "127.0.0.1:8420",
        "[::1]:8420",
    ] {
        assert_eq!(
            status_with_headers(&state, "/health", &[("host", host)]).await,
            200,
            "{host}"
        );
    }
    for host in [
        "localhost",
        "localhost:8421",
        "attacker.example:8420",
        "127.0.0.1.nip.io:8420",
        "localhost.:8420",
        "0.0.0.0:8420",
        "",
    ] {
        assert_eq!(
            status_with_headers(&state, "/health", &[("host", host)]).await,
            421,
            "{host}"
        );
        // Before authentication too: a valid token does not help.
        let auth = bearer(&f.root);
        let s = status_with_headers(
            &state,
            "/metrics",
            &[("host", host), ("authorization", &auth)],
        )
        .await;
        assert_eq!(s, 421, "{host}");
    }
    assert_eq!(
        status_with_headers(&state, "/health", &[]).await,
        421,
        "no Host at all"
    );
    // Two Host headers, or an absolute URI naming another host.
    let two = local("GET", "/health")
        .header("host", "attacker.example")
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(&state, two).await.status(), 421);
    let abs = local("GET", "http://attacker.example/health")
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(&state, abs).await.status(), 421);
}

#[tokio::test]
async fn a_rebound_name_is_refused_on_a_real_socket() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    for (host, want) in [
        (
            format!("rebind.attacker.example:{}", server.addr.port()),
            "HTTP/1.1 421",
        ),
        (server.host(), "HTTP/1.1 200"),
        (format!("localhost:{}", server.addr.port()), "HTTP/1.1 200"),
    ] {
        let out = raw_get(server.addr, "/health", &host).await;
        assert!(out.starts_with(want), "{host}: {out}");
    }
    server.stop().await;
}

#[tokio::test]
async fn configured_names_and_origins() {
    let f = Fixture::new();
    let state = f.state(ServerConfig {
        allowed_hosts: vec!["bulwark.example.com".into()],
        tls: true,
        ..ServerConfig::default()
    });
    let auth = bearer(&f.bob);
    let h = [
        ("host", "bulwark.example.com"),
        ("authorization", auth.as_str()),
    ];
    assert_eq!(status_with_headers(&state, "/api/v1/agents", &h).await, 200);
    assert_eq!(
        status_with_headers(&state, "/health", &[("host", LOCAL_HOST)]).await,
        421
    );
    let with_origin = |o: &'static str| [h[0], h[1], ("origin", o)];
    assert_eq!(
        status_with_headers(
            &state,
            "/api/v1/agents",
            &with_origin("https://bulwark.example.com")
        )
        .await,
        200
    );
    assert_eq!(
        status_with_headers(
            &state,
            "/api/v1/agents",
            &with_origin("http://bulwark.example.com")
        )
        .await,
        403
    );
}

#[tokio::test]
async fn cross_site_requests_are_refused_and_never_granted() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let auth = bearer(&f.bob);
    let base = [("host", LOCAL_HOST), ("authorization", auth.as_str())];
    for (origin, want) in [
        ("http://localhost:8420", 200),
        ("http://127.0.0.1:8420", 200),
        ("https://evil.example", 403),
        ("http://localhost:8421", 403),
        ("null", 403),
        ("http://localhost:8420/", 403),
    ] {
        let h = [base[0], base[1], ("origin", origin)];
        assert_eq!(
            status_with_headers(&state, "/api/v1/agents", &h).await,
            want,
            "{origin}"
        );
    }
    // Preflights are refused; a plain OPTIONS is just an unsupported method.
    let pre = local("OPTIONS", "/api/v1/sessions")
        .header("origin", "http://localhost:8420")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "authorization")
        .body(Body::empty())
        .unwrap();
    let r = call(&state, pre).await;
    assert_eq!(r.status(), 403);
    assert!(
        r.headers()
            .keys()
            .all(|k| !k.as_str().starts_with("access-control"))
    );
    let plain = local("OPTIONS", "/api/v1/sessions")
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(&state, plain).await.status(), 405);
}

#[tokio::test]
async fn per_user_budgets_answer_429_with_retry_after() {
    let f = Fixture::new();
    // bob gets a smaller budget in access.toml.
    let text = std::fs::read_to_string(f.home.access_path()).unwrap();
    std::fs::write(
        f.home.access_path(),
        format!("{text}\n[users.bob.limits]\nrequests_per_minute = 2\n"),
    )
    .unwrap();
    let state = f.state(with_limits(Limits {
        user_rate: rate(60, 6),
        ..Limits::default()
    }));
    // Reads cost 2: alice gets 3, bob 1.
    let statuses = |token: String| {
        let state = state.clone();
        async move {
            let mut out = Vec::new();
            for _ in 0..4 {
                out.push(status(&state, "/api/v1/sessions", Some(&token)).await);
            }
            out
        }
    };
    assert_eq!(statuses(f.alice.clone()).await, [200, 200, 200, 429]);
    assert_eq!(statuses(f.bob.clone()).await, [200, 429, 429, 429]);
    let r = get(&state, "/api/v1/sessions", Some(&f.alice)).await;
    assert_eq!(r.status(), 429);
    assert!((1..=60).contains(&retry_after(&r)));
    // Another user is unaffected.
    assert_eq!(status(&state, "/api/v1/sessions", Some(&f.root)).await, 200);
}

#[tokio::test]
async fn websocket_frames_are_rate_limited_without_closing() {
    let f = Fixture::new();
    let server = f
        .serve(with_limits(Limits {
            user_rate: rate(60, 45),
            ..Limits::default()
        }))
        .await;
    let mut ws = server.ws(&f.bob).await;
    // handshake 2 + subscribe 20 + message 20 = 42 of 45.
    assert_eq!(subscribe(&mut ws, "helper").await["type"], "subscribed");
    turn(&mut ws, "one").await;
    send_message(&mut ws, "two").await;
    let e = recv(&mut ws).await;
    assert_eq!(e["code"], "rate_limited", "{e}");
    assert_eq!(
        ping(&mut ws).await["type"],
        "pong",
        "still open, cheap frames still pass"
    );
    server.stop().await;
}

#[tokio::test]
async fn request_bodies_are_bounded() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let big = local("POST", "/api/v1/agents")
        .header("authorization", bearer(&f.bob))
        .header("content-length", (1 << 20) + 1)
        .body(Body::from(vec![0u8; (1 << 20) + 1]))
        .unwrap();
    assert_eq!(call(&state, big).await.status(), 413);
}

#[path = "gate/connections.rs"]
mod connections;
#[path = "gate/proxy.rs"]
mod proxy;
