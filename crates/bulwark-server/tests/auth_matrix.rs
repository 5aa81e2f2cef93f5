//! Who gets in, over REST and WebSocket: no token, malformed, wrong,
//! revoked, rotated away, in a query string, another user's session, an
//! agent not granted, user vs admin routes; and a revocation or rotation
//! ends a live WebSocket within a second.

use crate::common;

use axum::body::Body;
use bulwark_server::{AppState, Limits, ServerConfig};
use common::{
    Fixture, bearer, body_json, call, closed, get, get_authorized, local, open_session, ping,
    post_authorized, rate, recv, resubscribe, retry_after, send_message, subscribe, with_limits,
    ws_protocol, ws_refusal,
};
use std::time::{Duration, Instant};

fn lenient() -> ServerConfig {
    with_limits(Limits {
        auth_failures: rate(10_000, 10_000),
        auth_failures_global: rate(10_000, 10_000),
        ..Limits::default()
    })
}

/// The status of `GET /api/v1/agents` with this token from this client address.
async fn status_from(state: &AppState, ip: &str, token: Option<&str>) -> u16 {
    let peer: std::net::SocketAddr = (ip.parse::<std::net::IpAddr>().unwrap(), 40_000).into();
    let mut req = local("GET", "/api/v1/agents").extension(axum::extract::ConnectInfo(peer));
    if let Some(t) = token {
        req = req.header("authorization", bearer(t));
    }
    call(state, req.body(Body::empty()).unwrap())
        .await
        .status()
        .as_u16()
}

type Case = (Vec<(&'static str, String)>, Option<u16>);

const WELL_FORMED_BUT_UNKNOWN: &str =
    "bwk_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

/// The status of a GET with this exact Authorization value, if any.
async fn status(state: &AppState, path: &str, auth: Option<&str>) -> u16 {
    get_authorized(state, path, auth).await.status().as_u16()
}

/// The ids in a `GET /api/v1/sessions` answer.
fn session_ids(list: &serde_json::Value) -> Vec<&str> {
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn rest_matrix() {
    let f = Fixture::new();
    let carol = f.add_user("carol");
    let dave_old = f.add_user("dave");
    f.editor().revoke("carol").unwrap();
    let (dave_new, _) = f.editor().rotate("dave").unwrap();
    let dave_new = dave_new.token.to_string();
    let state = f.state(lenient());
    let user_routes = [
        "/api/v1/agents",
        "/api/v1/sessions",
        "/api/v1/usage",
        "/api/v1/openapi.json",
        "/api/v1/credits",
        "/api/v1/credits/history",
    ];
    let admin_routes = ["/health/detail", "/metrics"];
    let mut checked = 0;
    for path in user_routes.iter().chain(admin_routes.iter()) {
        for (auth, want) in [
            (None, 401),
            (Some("Bearer".to_string()), 401),
            (Some("Bearer abc".to_string()), 401),
            (Some(format!("Basic {}", f.bob)), 401),
            (Some(bearer(WELL_FORMED_BUT_UNKNOWN)), 401),
            (Some(bearer(&f.bob.to_uppercase())), 401),
            (Some(bearer(&carol)), 401),
            (Some(bearer(&dave_old)), 401),
        ] {
            assert_eq!(
                status(&state, path, auth.as_deref()).await,
                want,
                "{path} {auth:?}"
            );
            checked += 1;
        }
        let user_want = if admin_routes.contains(path) {
            403
        } else {
            200
        };
        assert_eq!(
            status(&state, path, Some(&bearer(&f.bob))).await,
            user_want,
            "{path}"
        );
        assert_eq!(
            status(&state, path, Some(&bearer(&dave_new))).await,
            user_want,
            "{path}"
        );
        assert_eq!(
            status(&state, path, Some(&bearer(&f.root))).await,
            200,
            "{path}"
        );
        // A token in the query string is refused even when valid, with or without a header.
        for q in [
            format!("token={}", f.bob),
            format!("x={}", f.bob),
            format!("access_token={}", f.root),
        ] {
            let p = format!("{path}?{q}");
            assert_eq!(status(&state, &p, None).await, 400, "{p}");
            assert_eq!(status(&state, &p, Some(&bearer(&f.root))).await, 400, "{p}");
        }
        checked += 9;
    }
    // 401s say how to authenticate.
    let r = get(&state, "/api/v1/agents", None).await;
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    // Two credentials at once are refused.
    let r = call(
        &state,
        local("GET", "/api/v1/agents")
            .header("authorization", bearer(&f.bob))
            .header("authorization", bearer(&f.bob))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(r.status(), 401);
    eprintln!("{checked} REST auth cases");
}

/// The one write route: the same credentials matrix as the reads, and
/// no token in the query string either.
#[tokio::test]
async fn credit_transfers_need_a_valid_token() {
    let f = Fixture::new();
    let carol = f.add_user("carol");
    f.editor().revoke("carol").unwrap();
    let state = f.state(lenient());
    let path = "/api/v1/credits/transfer";
    let body = r#"{"to": "agent:helper", "amount": 1, "key": "k"}"#;
    for auth in [
        None,
        Some("Bearer".to_string()),
        Some(format!("Basic {}", f.bob)),
        Some(bearer(WELL_FORMED_BUT_UNKNOWN)),
        Some(bearer(&carol)),
    ] {
        let r = post_authorized(&state, path, auth.as_deref(), body).await;
        assert_eq!(r.status(), 401, "{auth:?}");
    }
    // Signed in, the request reaches the ledger: bob has nothing to pay
    // with (409); no admin privilege is needed or implied.
    for token in [&f.bob, &f.root] {
        let r = post_authorized(&state, path, Some(&bearer(token)), body).await;
        assert_eq!(r.status(), 409);
    }
    let r = post_authorized(
        &state,
        &format!("{path}?token={}", f.bob),
        Some(&bearer(&f.bob)),
        body,
    )
    .await;
    assert_eq!(r.status(), 400);
    // Reading it is not a thing.
    assert_eq!(status(&state, path, Some(&bearer(&f.bob))).await, 405);
}

#[tokio::test]
async fn users_see_their_own_things_only() {
    let f = Fixture::new();
    let server = f.serve(lenient()).await;
    // One session each for alice and bob.
    let mut sessions = Vec::new();
    for token in [&f.alice, &f.bob] {
        let mut ws = server.ws(token).await;
        sessions.push(open_session(&mut ws, "helper").await);
    }
    let (alices, bobs) = (&sessions[0], &sessions[1]);
    // Agents: alice is given only `helper`; bob every public agent; root all.
    let names = |v: serde_json::Value| -> Vec<String> {
        v["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(server.get_json("/api/v1/agents", Some(&f.alice)).await),
        ["helper"]
    );
    assert_eq!(
        names(server.get_json("/api/v1/agents", Some(&f.bob)).await),
        ["helper", "other"]
    );
    assert_eq!(
        names(server.get_json("/api/v1/agents", Some(&f.root)).await),
        ["helper", "other", "secret"]
    );
    // Sessions: own only; another user's is 404 exactly like a missing one.
    let list = server.get_json("/api/v1/sessions", Some(&f.alice)).await;
    assert_eq!(session_ids(&list), [alices.as_str()]);
    let theirs = server
        .get(&format!("/api/v1/sessions/{bobs}/messages"), Some(&f.alice))
        .await;
    let missing = server
        .get("/api/v1/sessions/no-such-id/messages", Some(&f.alice))
        .await;
    assert_eq!(
        (theirs.status().as_u16(), missing.status().as_u16()),
        (404, 404)
    );
    assert_eq!(body_json(theirs).await, body_json(missing).await);
    let alices_messages = format!("/api/v1/sessions/{alices}/messages");
    assert_eq!(server.status(&alices_messages, Some(&f.alice)).await, 200);
    for (path, want) in [
        ("/api/v1/sessions?user=bob", 403),
        ("/api/v1/usage?user=bob", 403),
        ("/api/v1/sessions?user=alice", 200),
    ] {
        assert_eq!(server.status(path, Some(&f.alice)).await, want, "{path}");
    }
    // Admins: anyone's, filtered by ?user=.
    let list = server
        .get_json("/api/v1/sessions?user=bob", Some(&f.root))
        .await;
    assert_eq!(session_ids(&list), [bobs.as_str()]);
    let all = server.get_json("/api/v1/sessions", Some(&f.root)).await;
    assert_eq!(all["sessions"].as_array().unwrap().len(), 2);
    let bobs_messages = format!("/api/v1/sessions/{bobs}/messages");
    assert_eq!(server.status(&bobs_messages, Some(&f.root)).await, 200);
    // WebSocket: alice cannot subscribe to bob's session or an agent not given.
    let mut ws = server.ws(&f.alice).await;
    assert_eq!(
        resubscribe(&mut ws, "helper", bobs).await["code"],
        "not_found"
    );
    assert_eq!(subscribe(&mut ws, "other").await["code"], "forbidden");
    server.stop().await;
}

#[tokio::test]
async fn websocket_handshake_matrix() {
    let f = Fixture::new();
    let carol = f.add_user("carol");
    f.editor().revoke("carol").unwrap();
    let server = f.serve(lenient()).await;
    let origin = server.origin();
    let cases: Vec<Case> = vec![
        (vec![], Some(401)),
        (
            vec![("sec-websocket-protocol", "bulwark.v1".into())],
            Some(401),
        ),
        (
            vec![("sec-websocket-protocol", ws_protocol("abc"))],
            Some(401),
        ),
        (
            vec![(
                "sec-websocket-protocol",
                ws_protocol(WELL_FORMED_BUT_UNKNOWN),
            )],
            Some(401),
        ),
        (
            vec![("sec-websocket-protocol", ws_protocol(&carol))],
            Some(401),
        ),
        (
            vec![("sec-websocket-protocol", format!("bearer.{}", f.bob))],
            Some(400),
        ),
        (
            vec![(
                "sec-websocket-protocol",
                format!("bulwark.v1, bearer.{}, bearer.{}", f.bob, f.root),
            )],
            Some(401),
        ),
        (
            vec![
                ("sec-websocket-protocol", ws_protocol(&f.bob)),
                ("origin", "http://evil.example".into()),
            ],
            Some(403),
        ),
        (
            vec![
                ("sec-websocket-protocol", ws_protocol(&f.bob)),
                ("origin", "null".into()),
            ],
            Some(403),
        ),
        (
            vec![
                ("sec-websocket-protocol", ws_protocol(&f.bob)),
                ("origin", origin.clone()),
            ],
            None,
        ),
        (vec![("sec-websocket-protocol", ws_protocol(&f.bob))], None),
        (vec![("authorization", bearer(&f.bob))], None),
    ];
    for (headers, want) in cases {
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let got = server.ws_status(&h).await.err();
        assert_eq!(got, want, "{headers:?}");
    }
    // A valid token in the URL is refused.
    let url = format!("ws://{}/api/v1/ws?token={}", server.host(), f.bob);
    assert_eq!(ws_refusal(url).await.status(), 400);
    server.stop().await;
}

async fn assert_dropped_within_a_second(ws: &mut common::Ws, started: Instant) {
    let frame = recv(ws).await;
    assert_eq!(frame["code"], "unauthorized", "{frame}");
    assert_eq!(closed(ws, Duration::from_secs(1)).await, Some(1008));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "took {took:?}");
    eprintln!("disconnected {took:?} after the change");
}

#[tokio::test]
async fn revocation_and_rotation_end_live_websockets_within_a_second() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut bob = server.ws(&f.bob).await;
    subscribe(&mut bob, "helper").await;
    let mut alice = server.ws(&f.alice).await;
    let mut root = server.ws(&f.root).await;

    let started = Instant::now();
    f.editor().revoke("bob").unwrap();
    assert_dropped_within_a_second(&mut bob, started).await;

    let started = Instant::now();
    let (new_alice, _) = f.editor().rotate("alice").unwrap();
    assert_dropped_within_a_second(&mut alice, started).await;
    // The new token works; the old one no longer does.
    let mut alice = server.ws(&new_alice.token).await;
    assert_eq!(ping(&mut alice).await["type"], "pong");
    assert_eq!(server.ws_status_as(&f.alice).await.err(), Some(401));
    // The untouched admin connection is still fine.
    assert_eq!(ping(&mut root).await["type"], "pong");

    // Taking an agent away ends that subscription (the socket stays).
    assert_eq!(subscribe(&mut alice, "helper").await["type"], "subscribed");
    let text = std::fs::read_to_string(f.home.access_path()).unwrap();
    // Replaced whole, as an editor saves (write, then rename): the server
    // polls the file, and one written in place can be read half-written,
    // e.g. empty, which revokes everyone instead of taking an agent away.
    let edited = f.home.access_path().with_extension("toml.edited");
    std::fs::write(
        &edited,
        text.replace("agents = [\"helper\"]", "agents = [\"other\"]"),
    )
    .unwrap();
    std::fs::rename(&edited, f.home.access_path()).unwrap();
    let e = recv(&mut alice).await;
    assert_eq!(e["code"], "forbidden", "{e}");
    send_message(&mut alice, "x").await;
    assert_eq!(recv(&mut alice).await["code"], "not_subscribed");

    // A broken access.toml closes everything (fail closed).
    std::fs::write(f.home.access_path(), "[users.root\n").unwrap();
    assert_dropped_within_a_second(&mut root, Instant::now()).await;
    assert_eq!(server.status("/api/v1/agents", Some(&f.root)).await, 401);
    server.stop().await;
}

#[tokio::test]
async fn no_access_file_means_no_way_in_except_health() {
    let f = Fixture::new();
    std::fs::remove_file(f.home.access_path()).unwrap();
    let state = f.state(lenient());
    assert_eq!(get(&state, "/health", None).await.status(), 200);
    for path in [
        "/api/v1/agents",
        "/api/v1/sessions",
        "/health/detail",
        "/metrics",
        "/api/v1/ws",
    ] {
        for token in [None, Some(f.root.as_str()), Some(f.bob.as_str())] {
            assert_eq!(get(&state, path, token).await.status(), 401, "{path}");
        }
    }
    // Users without tokens: still nobody.
    std::fs::write(f.home.access_path(), "[users.root]\nrole = \"admin\"\n").unwrap();
    state.reload_access();
    assert_eq!(get(&state, "/metrics", Some(&f.root)).await.status(), 401);
}

#[tokio::test]
async fn failed_sign_ins_are_throttled_per_address() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(
            status(
                &state,
                "/api/v1/agents",
                Some(&bearer(WELL_FORMED_BUT_UNKNOWN)),
            )
            .await,
        );
    }
    assert_eq!(&statuses[..10], &[401; 10]);
    assert_eq!(&statuses[10..], &[429, 429]);
    // Any attempt that fails waits, with a retry time: guessing cannot
    // continue, and a wrong guess is not told apart from any other.
    let r = get(&state, "/api/v1/agents", Some(&f.bob.replace('_', "-"))).await;
    assert_eq!(r.status(), 429);
    let retry = retry_after(&r);
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(
        status(&state, "/api/v1/agents", Some("Bearer nope")).await,
        429
    );
    // But a valid token is not refused for others' failures.
    assert_eq!(
        get(&state, "/api/v1/agents", Some(&f.bob)).await.status(),
        200
    );
    // A request without credentials is not a failed sign-in... but /health stays open.
    assert_eq!(get(&state, "/health", None).await.status(), 200);
}

/// Issue 17 item 2: behind a proxy or NAT everyone shares one address; one
/// client's bad tokens must not lock out a user whose token is valid.
#[tokio::test]
async fn others_failures_never_refuse_a_valid_token() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let mut bad = Vec::new();
    for _ in 0..30 {
        bad.push(status_from(&state, "127.0.0.1", Some(WELL_FORMED_BUT_UNKNOWN)).await);
        assert_eq!(status_from(&state, "127.0.0.1", Some(&f.bob)).await, 200);
    }
    assert_eq!(&bad[..10], &[401; 10]);
    assert_eq!(&bad[10..], &[429; 20], "the failing client is throttled");
    // A throttled address presenting a wrong token (a near miss of a valid
    // one, or malformed) gets 429 too: no oracle.
    let mut near = f.bob.clone();
    let last = near.pop().unwrap();
    near.push(if last == 'A' { 'B' } else { 'A' });
    assert_eq!(status_from(&state, "127.0.0.1", Some(&near)).await, 429);
    assert_eq!(status_from(&state, "127.0.0.1", Some("nope")).await, 429);
    assert_eq!(status_from(&state, "127.0.0.1", Some(&f.alice)).await, 200);
}

/// Issue 17 item 3: failures count per /24 (IPv4, mapped IPv6 included)
/// and /64 (IPv6), and against a global budget.
#[tokio::test]
async fn failures_are_throttled_per_network_and_globally() {
    let f = Fixture::new();
    // 300 addresses of one /24 (and the next): a budget per network.
    let state = f.oneshot_state();
    let mut statuses = Vec::new();
    for i in 0..300u32 {
        let ip = format!("127.0.{}.{}", i / 250, 1 + i % 250);
        statuses.push(status_from(&state, &ip, Some(WELL_FORMED_BUT_UNKNOWN)).await);
    }
    assert_eq!(&statuses[..10], &[401; 10]);
    assert!(statuses[10..250].iter().all(|s| *s == 429), "{statuses:?}");
    assert_eq!(
        &statuses[250..260],
        &[401; 10],
        "127.0.1.0/24 has its own budget"
    );
    assert!(statuses[260..].iter().all(|s| *s == 429), "{statuses:?}");
    // The same network in IPv4-mapped IPv6 form.
    assert_eq!(
        status_from(&state, "::ffff:127.0.0.77", Some(WELL_FORMED_BUT_UNKNOWN)).await,
        429
    );
    // A valid token from the throttled network still signs in.
    assert_eq!(status_from(&state, "127.0.0.9", Some(&f.bob)).await, 200);
    assert_eq!(
        status_from(&state, "::ffff:127.0.1.9", Some(&f.bob)).await,
        200
    );

    // IPv6: one /64 shares a budget.
    let mut v6 = Vec::new();
    for i in 1..=12u32 {
        let ip = format!("fd00:1:2:3:{i:x}::1");
        v6.push(status_from(&state, &ip, Some(WELL_FORMED_BUT_UNKNOWN)).await);
    }
    assert_eq!(&v6[..10], &[401; 10]);
    assert_eq!(&v6[10..], &[429, 429]);
    assert_eq!(
        status_from(&state, "fd00:1:2:4::1", Some(WELL_FORMED_BUT_UNKNOWN)).await,
        401,
        "another /64"
    );

    // 300 addresses spread over 30 networks, none over its own budget:
    // the global budget (100 by default) answers 429.
    let state = f.oneshot_state();
    let mut statuses = Vec::new();
    for i in 0..300u32 {
        let ip = format!("127.0.{}.{}", i % 30, 1 + i / 30);
        statuses.push(status_from(&state, &ip, Some(WELL_FORMED_BUT_UNKNOWN)).await);
    }
    assert_eq!(&statuses[..100], &[401; 100]);
    // (It refills at 2 a second, so a slow run sees a few more 401s.)
    let limited = statuses[100..].iter().filter(|s| **s == 429).count();
    assert!(limited >= 150, "{statuses:?}");
    // Valid tokens are untouched by the global budget.
    assert_eq!(status_from(&state, "127.0.5.200", Some(&f.bob)).await, 200);
    assert_eq!(status_from(&state, "127.0.99.1", Some(&f.alice)).await, 200);
}
