//! Every response — success, error, refusal, 404, 405, 413, 421, 429 and the
//! WebSocket upgrade and its refusals — carries the OWASP Secure Headers
//! Project's recommended headers (values may be stricter) and none of the
//! headers it says to remove. Vectors: tests/vectors/secure-headers/.

use crate::common;

use axum::body::Body;
use axum::http::{HeaderMap, Request};
use bulwark_server::{Limits, ServerConfig};
use common::{Fixture, body_text, call, get, local, rate, with_limits, ws_protocol, ws_refusal};
use std::collections::BTreeMap;

const ADD: &str = include_str!("vectors/secure-headers/headers_add.json");
const REMOVE: &str = include_str!("vectors/secure-headers/headers_remove.json");

struct Vectors {
    add: Vec<(String, String)>,
    remove: Vec<String>,
}

fn vectors() -> Vectors {
    let add: serde_json::Value = serde_json::from_str(ADD).unwrap();
    let remove: serde_json::Value = serde_json::from_str(REMOVE).unwrap();
    Vectors {
        add: add["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["name"].as_str().unwrap().to_string(),
                    h["value"].as_str().unwrap().to_string(),
                )
            })
            .collect(),
        remove: remove["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_string())
            .collect(),
    }
}

fn directives(csp: &str) -> BTreeMap<String, Vec<String>> {
    csp.split(';')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            let mut parts = d.split_whitespace();
            let name = parts.next().unwrap().to_ascii_lowercase();
            (name, parts.map(str::to_string).collect())
        })
        .collect()
}

/// Checks one response; returns how many header checks passed.
fn conforms(what: &str, headers: &HeaderMap, tls: bool, v: &Vectors) -> usize {
    let mut checks = 0;
    let get = |name: &str| {
        let all: Vec<_> = headers.get_all(name).iter().collect();
        assert!(all.len() <= 1, "{what}: {name} sent {} times", all.len());
        all.first().map(|v| v.to_str().unwrap().to_string())
    };
    for (name, want) in &v.add {
        let lname = name.to_ascii_lowercase();
        let have = get(&lname);
        checks += 1;
        if lname == "strict-transport-security" {
            if tls {
                let have = have.unwrap_or_else(|| panic!("{what}: no HSTS over TLS"));
                assert!(
                    have.contains("max-age=63072000") && have.contains("includeSubDomains"),
                    "{what}: {have}"
                );
            } else {
                assert!(have.is_none(), "{what}: HSTS on plain http");
            }
            continue;
        }
        let have = have.unwrap_or_else(|| panic!("{what}: missing {name}"));
        match lname.as_str() {
            "content-security-policy" => {
                let ours = directives(&have);
                for bad in [
                    "'unsafe-eval'",
                    "'unsafe-inline'",
                    "*",
                    "data:",
                    "http:",
                    "https:",
                    "blob:",
                ] {
                    assert!(
                        !ours.values().flatten().any(|s| s == bad),
                        "{what}: CSP allows {bad}: {have}"
                    );
                }
                for (d, sources) in directives(want) {
                    if d == "upgrade-insecure-requests" {
                        // Only over TLS: on plain http it would turn the
                        // page's ws:// into wss:// and break it.
                        assert_eq!(ours.contains_key(&d), tls, "{what}: {d} in {have}");
                        continue;
                    }
                    let mine = ours
                        .get(&d)
                        .unwrap_or_else(|| panic!("{what}: CSP lacks {d}: {have}"));
                    let stricter =
                        mine == &["'none'".to_string()] || mine.iter().all(|s| sources.contains(s));
                    assert!(stricter, "{what}: {d} {mine:?} is not within {sources:?}");
                }
            }
            "permissions-policy" => {
                let ours: BTreeMap<&str, &str> = have
                    .split(',')
                    .filter_map(|f| f.trim().split_once('='))
                    .collect();
                for feature in want.split(',') {
                    let (f, value) = feature.trim().split_once('=').unwrap();
                    let mine = ours.get(f).unwrap_or_else(|| panic!("{what}: no {f}"));
                    assert!(*mine == "()" || *mine == value, "{what}: {f}={mine}");
                }
            }
            "cache-control" => {
                for part in want.split(',') {
                    assert!(have.contains(part.trim()), "{what}: cache-control {have}");
                }
            }
            _ => assert!(
                have.eq_ignore_ascii_case(want),
                "{what}: {name}: {have} != {want}"
            ),
        }
    }
    for name in &v.remove {
        checks += 1;
        assert!(
            !headers.contains_key(name.to_ascii_lowercase().as_str()),
            "{what}: sends {name}"
        );
    }
    for (k, _) in headers {
        assert!(
            !k.as_str().starts_with("access-control-"),
            "{what}: sends {k}"
        );
    }
    checks
}

#[tokio::test]
async fn every_route_and_error_carries_the_secure_headers() {
    let v = vectors();
    let f = Fixture::new();
    for tls in [false, true] {
        let state = f.state(ServerConfig {
            tls,
            ..ServerConfig::default()
        });
        let mut responses = Vec::new();
        let (user, admin) = (Some(f.bob.as_str()), Some(f.root.as_str()));
        for (path, token, status) in [
            ("/health", None, 200),
            ("/", None, 200),
            ("/assets/app.js", None, 200),
            ("/assets/app.css", None, 200),
            ("/assets/nope.js", None, 404),
            ("/health/detail", admin, 200),
            ("/health/detail", user, 403),
            ("/health/detail", None, 401),
            ("/metrics", admin, 200),
            ("/metrics", Some("bwk_malformed"), 401),
            ("/api/v1/agents", user, 200),
            ("/api/v1/sessions", user, 200),
            ("/api/v1/sessions?user=root", user, 403),
            ("/api/v1/sessions?limit=abc", user, 400),
            ("/api/v1/sessions/nope/messages", user, 404),
            ("/api/v1/usage", user, 200),
            ("/api/v1/openapi.json", user, 200),
            ("/api/v1/ws", user, 400),
            ("/api/v1/ws", None, 401),
            ("/nope", None, 404),
            ("/health?access_token=x", None, 400),
        ] {
            let r = get(&state, path, token).await;
            assert_eq!(r.status().as_u16(), status, "{path}");
            responses.push((format!("GET {path} -> {status}"), r.headers().clone()));
        }
        let extra = [
            (local("POST", "/health").body(Body::empty()).unwrap(), 405),
            (
                local("OPTIONS", "/api/v1/agents")
                    .header("origin", "https://evil.example")
                    .header("access-control-request-method", "GET")
                    .body(Body::empty())
                    .unwrap(),
                403,
            ),
            (
                Request::get("/health")
                    .header("host", "evil.example")
                    .body(Body::empty())
                    .unwrap(),
                421,
            ),
            (
                local("GET", "/health")
                    .header("origin", "https://evil.example")
                    .body(Body::empty())
                    .unwrap(),
                403,
            ),
            (
                local("POST", "/api/v1/agents")
                    .header("content-length", (2 << 20).to_string())
                    .body(Body::from(vec![b'x'; 2 << 20]))
                    .unwrap(),
                413,
            ),
        ];
        for (request, status) in extra {
            let what = format!("{} {} -> {status}", request.method(), request.uri());
            let r = call(&state, request).await;
            assert_eq!(r.status().as_u16(), status, "{what}");
            responses.push((what, r.headers().clone()));
        }
        // 429: a tiny per-IP budget.
        let tight = f.state(ServerConfig {
            tls,
            ..with_limits(Limits {
                ip_rate: rate(1, 2),
                ..Limits::default()
            })
        });
        let mut limited = None;
        for _ in 0..5 {
            let r = get(&tight, "/health", None).await;
            if r.status() == 429 {
                assert!(r.headers().contains_key("retry-after"));
                limited = Some(r.headers().clone());
                break;
            }
        }
        responses.push(("GET /health -> 429".into(), limited.expect("a 429")));

        let mut checks = 0;
        for (what, headers) in &responses {
            checks += conforms(what, headers, tls, &v);
        }
        eprintln!(
            "tls={tls}: {} responses, {checks} header checks",
            responses.len()
        );
    }
}

#[tokio::test]
async fn websocket_upgrade_and_its_refusals_carry_them_too() {
    let v = vectors();
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let proto = ws_protocol(&f.bob);
    // Accepted: the 101 response.
    let (_ws, resp) =
        tokio_tungstenite::connect_async(server.ws_request(&[("sec-websocket-protocol", &proto)]))
            .await
            .unwrap();
    let mut checks = conforms("101", resp.headers(), false, &v);
    // Refused: foreign Origin, no token, bad Host.
    let evil_host = format!("evil.example:{}", server.addr.port());
    for (headers, status) in [
        (
            vec![
                ("sec-websocket-protocol", proto.as_str()),
                ("origin", "http://evil.example"),
            ],
            403,
        ),
        (vec![("sec-websocket-protocol", "bulwark.v1")], 401),
        (
            vec![
                ("sec-websocket-protocol", proto.as_str()),
                ("host", evil_host.as_str()),
            ],
            421,
        ),
    ] {
        let r = ws_refusal(server.ws_request(&headers)).await;
        assert_eq!(r.status().as_u16(), status);
        checks += conforms(&format!("ws refusal {status}"), r.headers(), false, &v);
    }
    eprintln!("{checks} header checks on WebSocket handshakes");
    server.stop().await;
}

#[tokio::test]
async fn csp_nonce_is_fresh_per_response() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    let a = get(&state, "/health", None).await;
    let b = get(&state, "/health", None).await;
    let nonce = |h: &HeaderMap| {
        let csp = h["content-security-policy"].to_str().unwrap().to_string();
        let start = csp.find("'nonce-").unwrap();
        csp[start..].split('\'').nth(1).unwrap().to_string()
    };
    let (na, nb) = (nonce(a.headers()), nonce(b.headers()));
    assert_ne!(na, nb);
    assert!(na.len() >= 22, "{na}");
    assert!(!a.headers().contains_key("server"));
}

#[tokio::test]
async fn the_web_page_is_served_with_exact_types_and_loads_only_its_own_files() {
    let f = Fixture::new();
    let state = f.oneshot_state();
    for (path, kind) in [
        ("/", "text/html; charset=utf-8"),
        ("/assets/app.js", "text/javascript; charset=utf-8"),
        ("/assets/app.css", "text/css; charset=utf-8"),
    ] {
        let r = get(&state, path, None).await;
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], kind, "{path}");
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
        let csp = directives(r.headers()["content-security-policy"].to_str().unwrap());
        for d in ["script-src", "style-src"] {
            assert_eq!(csp[d][0], "'self'", "{path}: {d}");
            assert!(csp[d][1].starts_with("'nonce-"), "{path}: {d}");
            assert_eq!(csp[d].len(), 2, "{path}: {d}");
        }
        assert_eq!(csp["connect-src"], ["'self'"], "{path}");
    }
    // The page itself has no inline script, style or handler, and loads
    // nothing from another origin.
    let html = body_text(get(&state, "/", None).await).await;
    assert!(html.contains(r#"<script src="/assets/app.js" defer></script>"#));
    assert_eq!(html.matches("<script").count(), 1, "one external script");
    for bad in ["style=", "<style", "javascript:", "http:", "https:", "//"] {
        assert!(!html.contains(bad), "index.html contains {bad:?}");
    }
    let handler = html.split(" on").skip(1).find(|rest| {
        let name: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
        rest[name.len()..].starts_with('=')
    });
    assert!(handler.is_none(), "an inline event handler: on{handler:?}");
}
