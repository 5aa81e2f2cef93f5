//! Thousands of malformed, oversized, wrong-typed and unknown-field frames
//! over a real loopback WebSocket: each is answered by exactly one `error`
//! frame, the connection and the server stay up, and a valid frame still
//! works afterwards. Plus property tests of the parser itself.

use crate::common;

use bulwark_server::Limits;
use bulwark_server::ws::frames::ClientFrame;
use common::{Fixture, rate, raw_get, recv, send, subscribe, turn, with_limits};
use futures_util::SinkExt;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

const PARSE_MAX: usize = 200_000 * 6 + 4096;
const CODES: &[&str] = &[
    "bad_json",
    "unknown_type",
    "unknown_field",
    "missing_field",
    "invalid_frame",
    "too_long",
    "too_large",
    "binary_frame",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const TYPES: &[&str] = &[
    "subscribe",
    "message",
    "interrupt",
    "tool_approval",
    "ping",
    "PING",
    "shell",
    "",
    "subscribed",
    "error",
];
const FIELDS: &[&str] = &[
    "agent",
    "session",
    "last_message_id",
    "text",
    "request_id",
    "approve",
    "nonce",
    "id",
    "user",
    "__proto__",
];

/// Frames that are almost right: a known or near-known type, known field
/// names with values of any type, plus usually an extra field.
fn near_frame() -> impl Strategy<Value = String> {
    (
        prop::sample::select(TYPES),
        prop::collection::vec((prop::sample::select(FIELDS), json_value()), 0..4),
        prop::option::of(("[a-z]{1,10}", json_value())),
    )
        .prop_map(|(ty, fields, extra)| {
            let mut obj = serde_json::Map::new();
            obj.insert("type".into(), json!(ty));
            for (k, v) in fields {
                obj.insert(k.to_string(), v);
            }
            if let Some((k, v)) = extra {
                obj.insert(format!("x_{k}"), v);
            }
            Value::Object(obj).to_string()
        })
}

fn any_frame() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => near_frame(),
        2 => json_value().prop_map(|v| v.to_string()),
        2 => ".{0,200}",
        1 => "[\\[\\]{}\",:0-9a-z\\\\ ]{0,80}",
    ]
}

/// Frames chosen by hand: encodings, nesting, numbers, sizes.
fn hand_list() -> Vec<String> {
    let mut v: Vec<String> = [
        "",
        " ",
        "\u{feff}{\"type\":\"ping\"}",
        "{\"type\":\"ping\"}x",
        "{\"type\":\"ping\"} {\"type\":\"ping\"}",
        "{\"type\":\"ping\",}",
        "{'type':'ping'}",
        "{\"type\":\"ping\",\"nonce\":\"\\ud800\"}",
        "{\"type\":\"ping\",\"nonce\":NaN}",
        "{\"type\":null}",
        "{\"type\":[\"ping\"]}",
        "{\"type\":{\"type\":\"ping\"}}",
        "{\"TYPE\":\"ping\"}",
        "{\"type\":\"ping \"}",
        "{\"type\":\"message\",\"text\":null}",
        "{\"type\":\"message\",\"text\":[\"a\"]}",
        "{\"type\":\"message\",\"text\":\"a\",\"text2\":\"b\"}",
        "{\"type\":\"subscribe\"}",
        "{\"type\":\"subscribe\",\"agent\":\"\"}",
        "{\"type\":\"subscribe\",\"agent\":\"A\"}",
        "{\"type\":\"subscribe\",\"agent\":\"../x\"}",
        "{\"type\":\"subscribe\",\"agent\":\"a\",\"session\":\"\"}",
        "{\"type\":\"subscribe\",\"agent\":\"a\",\"session\":\"a b\"}",
        "{\"type\":\"subscribe\",\"agent\":\"a\",\"last_message_id\":-1}",
        "{\"type\":\"subscribe\",\"agent\":\"a\",\"last_message_id\":1.5}",
        "{\"type\":\"subscribe\",\"agent\":\"a\",\"last_message_id\":1e400}",
        "{\"type\":\"subscribe\",\"agent\":\"a\",\"last_message_id\":18446744073709551616}",
        "{\"type\":\"subscribe\",\"agent\":\"a\",\"last_message_id\":\"7\"}",
        "{\"type\":\"tool_approval\",\"request_id\":\"r\",\"approve\":1}",
        "{\"type\":\"tool_approval\",\"request_id\":\"r\"}",
        "{\"type\":\"tool_approval\",\"request_id\":\"\",\"approve\":true}",
        "{\"type\":\"interrupt\",\"now\":true}",
        "{\"type\":\"interrupt\",\"type\":\"ping\"}",
        "[{\"type\":\"ping\"}]",
        "\"ping\"",
        "true",
        "0",
        "null",
        "\u{0}",
        "{\"type\":\"ping\",\"nonce\":\"\u{0}\u{202e}\"}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("[".repeat(100_000));
    v.push(format!("{}1{}", "[".repeat(200), "]".repeat(200)));
    v.push(format!(
        r#"{{"type":"ping","nonce":"{}"}}"#,
        "n".repeat(129)
    ));
    v.push(format!(
        r#"{{"type":"subscribe","agent":"{}"}}"#,
        "a".repeat(65)
    ));
    v.push(format!(
        r#"{{"type":"subscribe","agent":"a","session":"{}"}}"#,
        "s".repeat(129)
    ));
    v.push(format!(
        r#"{{"type":"tool_approval","request_id":"{}","approve":true}}"#,
        "r".repeat(129)
    ));
    v.push(format!(
        r#"{{"type":"message","text":"{}"}}"#,
        "x".repeat(200_001)
    ));
    v.push(format!(
        r#"{{"type":"message","text":"{}"}}"#,
        "\\u00e9".repeat(200_001)
    ));
    v.push(format!(
        r#"{{"type":"message","text":"{}"}}"#,
        "y".repeat(PARSE_MAX)
    ));
    v.push(format!(r#"{{"{}":1,"type":"ping"}}"#, "k".repeat(100_000)));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_bad_frames_each_get_an_error_and_nothing_breaks() {
    let f = Fixture::new();
    let plenty = rate(10_000_000, 1_000_000);
    let config = with_limits(Limits {
        ws_max_consecutive_errors: u32::MAX,
        user_rate: plenty,
        ip_rate: plenty,
        ..Limits::default()
    });
    let server = f.serve(config).await;
    let mut ws = server.ws(&f.bob).await;

    let mut frames = hand_list();
    let mut runner = TestRunner::deterministic();
    let strategy = any_frame();
    while frames.len() < 4000 {
        frames.push(strategy.new_tree(&mut runner).unwrap().current());
    }
    let mut sent = 0;
    let mut skipped_valid = 0;
    let mut by_code = std::collections::BTreeMap::<String, u32>::new();
    for frame in &frames {
        if ClientFrame::parse(frame, PARSE_MAX).is_ok() {
            skipped_valid += 1;
            continue;
        }
        ws.send(Message::text(frame.clone())).await.unwrap();
        let answer = recv(&mut ws).await;
        assert_eq!(answer["type"], "error", "frame {frame:.200} got {answer}");
        let code = answer["code"].as_str().unwrap();
        assert!(CODES.contains(&code), "{code}");
        assert!(
            answer.get("id").is_none(),
            "connection errors are not numbered"
        );
        *by_code.entry(code.to_string()).or_default() += 1;
        sent += 1;
    }
    // Binary frames of assorted sizes.
    for size in [0usize, 1, 7, 1024, 65_536, 1 << 20] {
        ws.send(Message::binary(vec![0xAB; size])).await.unwrap();
        assert_eq!(recv(&mut ws).await["code"], "binary_frame");
        sent += 1;
    }
    eprintln!(
        "{sent} bad frames answered ({skipped_valid} generated frames were valid and skipped): {by_code:?}"
    );
    assert!(sent >= 3500, "{sent}");

    // The same connection still works.
    send(&mut ws, json!({"type": "ping", "nonce": "after"})).await;
    assert_eq!(
        recv(&mut ws).await,
        json!({"type": "pong", "nonce": "after"})
    );
    assert_eq!(subscribe(&mut ws, "helper").await["type"], "subscribed");
    let frames = turn(&mut ws, "still here").await;
    assert_eq!(frames[0]["text"], "got 10 chars");
    // And so does the server.
    let health = raw_get(server.addr, "/health", &server.host()).await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    tokio::time::timeout(Duration::from_secs(5), server.stop())
        .await
        .unwrap();
}

/// A WebSocket frame as a client writes it: `head` is the first byte (FIN,
/// RSV1-3, opcode); masked unless `masked` is false.
fn raw_frame(head: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let mut out = vec![head];
    let mask_bit = if masked { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(mask_bit | n as u8),
        n if n <= 0xFFFF => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    if masked {
        let key = [0x12, 0x34, 0x56, 0x78];
        out.extend_from_slice(&key);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    } else {
        out.extend_from_slice(payload);
    }
    out
}

/// Opens a WebSocket by hand, writes `frames` raw, and returns the code of
/// the close frame the server answers with (`None`: closed without one).
async fn close_code_for(server: &common::Server, token: &str, frames: &[Vec<u8>]) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let req = format!(
        "GET /api/v1/ws HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Protocol: bulwark.v1, bearer.{token}\r\n\r\n",
        server.host()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).await.unwrap(), 1, "handshake cut short");
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    for f in frames {
        // The server may close before reading everything.
        if s.write_all(f).await.is_err() {
            break;
        }
    }
    let mut data = Vec::new();
    let read_all = async {
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => data.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read_all)
        .await
        .expect("the server closes within 5 s");
    // Server frames are unmasked; find the close frame.
    let mut i = 0;
    while i + 2 <= data.len() {
        let opcode = data[i] & 0x0F;
        let (len, start) = match data[i + 1] & 0x7F {
            126 => (
                u16::from_be_bytes([data[i + 2], data[i + 3]]) as usize,
                i + 4,
            ),
            127 => (
                u64::from_be_bytes(data[i + 2..i + 10].try_into().unwrap()) as usize,
                i + 10,
            ),
            n => (n as usize, i + 2),
        };
        if opcode == 0x8 {
            return (len >= 2).then(|| u16::from_be_bytes([data[start], data[start + 1]]));
        }
        i = start + len;
    }
    None
}

/// Issue 17 item 7: protocol errors are closed with the codes RFC 6455
/// assigns (1007 invalid UTF-8, 1002 protocol violations), and only a
/// message over the size limit with 1009.
#[tokio::test]
async fn protocol_errors_close_with_their_rfc_6455_codes() {
    let f = Fixture::new();
    let plenty = rate(10_000_000, 1_000_000);
    let server = f
        .serve(with_limits(Limits {
            ws_transport_max_bytes: 4096,
            ws_connections_per_user: 1000,
            user_rate: plenty,
            ip_rate: plenty,
            ..Limits::default()
        }))
        .await;
    let m = |head, payload: &[u8]| raw_frame(head, payload, true);
    let cases: Vec<(&str, Vec<Vec<u8>>, u16)> = vec![
        (
            "invalid UTF-8 text",
            vec![m(0x81, &[b'"', 0xFF, 0xFE])],
            1007,
        ),
        (
            "invalid UTF-8 across fragments",
            vec![m(0x01, &[0xE2, 0x82]), m(0x80, b"(")],
            1007,
        ),
        (
            "unmasked client frame",
            vec![raw_frame(0x81, br#"{"type":"ping"}"#, false)],
            1002,
        ),
        ("RSV1 set", vec![m(0xC1, b"{}")], 1002),
        ("RSV2 set", vec![m(0xA1, b"{}")], 1002),
        ("RSV3 set", vec![m(0x91, b"{}")], 1002),
        ("reserved data opcode 3", vec![m(0x83, b"{}")], 1002),
        ("reserved control opcode 0xB", vec![m(0x8B, b"")], 1002),
        ("fragmented ping", vec![m(0x09, b"x")], 1002),
        ("ping of 126 bytes", vec![m(0x89, &[b'p'; 126])], 1002),
        ("close of 126 bytes", vec![m(0x88, &[b'c'; 126])], 1002),
        ("continuation of nothing", vec![m(0x80, b"{}")], 1002),
        (
            "new data frame inside a fragmented one",
            vec![m(0x01, b"{"), m(0x81, b"}")],
            1002,
        ),
        ("message over the limit", vec![m(0x81, &[b'a'; 5000])], 1009),
        (
            "fragmented message over the limit",
            vec![m(0x01, &[b'a'; 3000]), m(0x80, &[b'a'; 3000])],
            1009,
        ),
    ];
    for (what, frames, want) in cases {
        let got = close_code_for(&server, &f.bob, &frames).await;
        assert_eq!(got, Some(want), "{what}");
    }
    // A valid ping on a fresh connection is still answered.
    let mut ws = server.ws(&f.bob).await;
    send(&mut ws, json!({"type": "ping", "nonce": "n"})).await;
    assert_eq!(recv(&mut ws).await["type"], "pong");
    server.stop().await;
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any text: parsing never panics, and what it accepts is within bounds
    /// and round-trips.
    #[test]
    fn parser_is_total(frame in any_frame()) {
        if let Ok(parsed) = ClientFrame::parse(&frame, PARSE_MAX) {
            let again = serde_json::to_string(&parsed).unwrap();
            prop_assert_eq!(ClientFrame::parse(&again, PARSE_MAX).unwrap(), parsed);
        }
    }

    /// A valid frame with any extra field is refused as an unknown field.
    #[test]
    fn unknown_fields_are_refused(
        base in prop::sample::select(vec![
            json!({"type": "ping"}),
            json!({"type": "interrupt"}),
            json!({"type": "message", "text": "t"}),
            json!({"type": "subscribe", "agent": "a"}),
            json!({"type": "tool_approval", "request_id": "r", "approve": true}),
        ]),
        key in "x[a-z_]{0,10}",
        value in json_value(),
    ) {
        let mut obj = base.as_object().unwrap().clone();
        obj.insert(key, value);
        let err = ClientFrame::parse(&Value::Object(obj).to_string(), PARSE_MAX).unwrap_err();
        prop_assert_eq!(err.code, bulwark_server::ws::frames::WsErrorCode::UnknownField);
    }
}
