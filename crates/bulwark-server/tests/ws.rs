//! The WebSocket conversation over a real loopback socket: events mapped to
//! frames, approvals, replay after a reconnect, moving a subscription,
//! worker failures, limits and shutdown.

use crate::common;

use bulwark_server::{Limits, ServerConfig};
use common::{
    Fixture, closed, open_session, ping, recv, recv_until, resubscribe, say, send, send_message,
    subscribe, turn, with_limits,
};
use futures_util::SinkExt;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

fn ids(frames: &[serde_json::Value]) -> Vec<u64> {
    frames.iter().map(|f| f["id"].as_u64().unwrap()).collect()
}

#[tokio::test]
async fn a_turn_streams_typed_frames_with_increasing_ids() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut ws = server.ws(&f.bob).await;
    send(&mut ws, json!({"type": "ping", "nonce": "n1"})).await;
    assert_eq!(recv(&mut ws).await, json!({"type": "pong", "nonce": "n1"}));
    let sub = subscribe(&mut ws, "helper").await;
    assert_eq!(sub["type"], "subscribed", "{sub}");
    assert_eq!(sub["agent"], "helper");
    assert_eq!(sub["missed"], false);
    let session = sub["session_id"].as_str().unwrap().to_string();
    let frames = turn(&mut ws, "hello there").await;
    let types: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["text_delta", "tool_call", "tool_result", "turn_ended"]
    );
    assert_eq!(frames[0]["text"], "got 11 chars");
    assert_eq!(frames[0]["message_id"], 1);
    assert_eq!(frames[1]["tool"], "files");
    assert_eq!(frames[2]["decision"], "allowed");
    assert_eq!(frames[3]["end"], "completed");
    assert_eq!(
        frames[3]["usage"],
        json!({"input_tokens": 3, "output_tokens": 4})
    );
    let got = ids(&frames);
    let first = sub["id"].as_u64().unwrap() + 1;
    assert_eq!(got, (first..first + 4).collect::<Vec<_>>());
    // The next turn continues the numbering.
    let more = turn(&mut ws, "again").await;
    assert_eq!(ids(&more)[0], got[3] + 1);
    assert_eq!(more[0]["message_id"], 2);
    assert_eq!(f.store.session(&session).unwrap().unwrap().user, "bob");
    server.stop().await;
}

#[tokio::test]
async fn approvals_round_trip() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut ws = server.ws(&f.bob).await;
    subscribe(&mut ws, "helper").await;
    say(&mut ws, "approve?").await;
    let ask = recv(&mut ws).await;
    assert_eq!(ask["type"], "approval_request");
    assert_eq!(ask["request_id"], "req-1");
    assert_eq!(ask["operation"], "edit");
    send(
        &mut ws,
        json!({"type": "tool_approval", "request_id": "req-1", "approve": false}),
    )
    .await;
    let rest = recv_until(&mut ws, "turn_ended").await;
    assert_eq!(rest[0]["decision"], "denied");
    server.stop().await;
}

#[tokio::test]
async fn reconnecting_replays_what_was_missed() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut ws = server.ws(&f.bob).await;
    let session = open_session(&mut ws, "helper").await;
    say(&mut ws, "slow:40").await;
    let mut last = 0;
    for _ in 0..5 {
        let frame = recv(&mut ws).await;
        assert_eq!(frame["type"], "text_delta");
        last = frame["id"].as_u64().unwrap();
    }
    drop(ws);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut ws = server.ws(&f.bob).await;
    send(
        &mut ws,
        json!({"type": "subscribe", "agent": "helper", "session": session, "last_message_id": last}),
    )
    .await;
    let sub = recv(&mut ws).await;
    assert_eq!(sub["type"], "subscribed", "{sub}");
    assert_eq!(sub["session_id"], session.as_str());
    assert_eq!(sub["missed"], false);
    assert!(sub["replayed"].as_u64().unwrap() > 0, "{sub}");
    let rest = recv_until(&mut ws, "turn_ended").await;
    let got = ids(&rest);
    assert_eq!(
        got,
        (last + 1..last + 1 + got.len() as u64).collect::<Vec<_>>(),
        "no gap, no duplicate"
    );
    let deltas = rest.iter().filter(|f| f["type"] == "text_delta").count();
    assert_eq!(deltas, 35);
    // One worker throughout: the conversation outlived the socket.
    assert_eq!(f.backend.counters.opened.load(Ordering::SeqCst), 1);
    // A last_message_id from the future (e.g. before a restart) is `missed`.
    send(
        &mut ws,
        json!({"type": "subscribe", "agent": "helper", "session": session, "last_message_id": 1_000_000}),
    )
    .await;
    let sub = recv(&mut ws).await;
    assert_eq!(sub["missed"], true, "{sub}");
    server.stop().await;
}

#[tokio::test]
async fn subscribing_elsewhere_moves_the_session() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut a = server.ws(&f.bob).await;
    let session = open_session(&mut a, "helper").await;
    let mut b = server.ws(&f.bob).await;
    assert_eq!(
        resubscribe(&mut b, "helper", &session).await["type"],
        "subscribed"
    );
    let moved = recv(&mut a).await;
    assert_eq!(moved["code"], "moved", "{moved}");
    send_message(&mut a, "x").await;
    assert_eq!(recv(&mut a).await["code"], "not_subscribed");
    turn(&mut b, "x").await;
    assert_eq!(f.backend.counters.opened.load(Ordering::SeqCst), 1);
    server.stop().await;
}

#[tokio::test]
async fn refusals_are_error_frames() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    // bob's session, for alice to try.
    let mut bob = server.ws(&f.bob).await;
    let bobs = open_session(&mut bob, "helper").await;

    let mut ws = server.ws(&f.alice).await;
    send_message(&mut ws, "early").await;
    assert_eq!(recv(&mut ws).await["code"], "not_subscribed");
    let mut messages = Vec::new();
    for agent in ["other", "secret", "does-not-exist"] {
        let e = subscribe(&mut ws, agent).await;
        assert_eq!(e["code"], "forbidden", "{agent}: {e}");
        messages.push(e["message"].as_str().unwrap().replace(agent, "X"));
    }
    assert!(
        messages.windows(2).all(|w| w[0] == w[1]),
        "existence does not leak: {messages:?}"
    );
    for session in [bobs.as_str(), "no-such-session"] {
        assert_eq!(
            resubscribe(&mut ws, "helper", session).await["code"],
            "not_found"
        );
    }
    f.backend.max_live.store(0, Ordering::SeqCst);
    let e = subscribe(&mut ws, "helper").await;
    assert_eq!(e["code"], "at_capacity", "{e}");
    server.stop().await;
}

#[tokio::test]
async fn a_dead_or_misbehaving_worker_is_reported_and_resumable() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut ws = server.ws(&f.bob).await;
    let session = open_session(&mut ws, "helper").await;
    say(&mut ws, "crash").await;
    let e = recv(&mut ws).await;
    assert_eq!(
        (e["code"].as_str(), e["fatal"].as_bool()),
        (Some("worker_lost"), Some(true))
    );
    send_message(&mut ws, "x").await;
    assert_eq!(recv(&mut ws).await["code"], "not_subscribed");
    let sub = resubscribe(&mut ws, "helper", &session).await;
    assert_eq!(sub["history_messages"], 1, "{sub}");
    say(&mut ws, "oversize").await;
    let e = recv(&mut ws).await;
    assert_eq!(
        e["code"], "worker_lost",
        "an out-of-bounds event is not forwarded: {e}"
    );
    assert_eq!(f.backend.counters.opened.load(Ordering::SeqCst), 2);
    server.stop().await;
}

#[tokio::test]
async fn fifty_bad_frames_in_a_row_close_the_connection() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut ws = server.ws(&f.bob).await;
    for _ in 0..49 {
        ws.send(Message::text("nope")).await.unwrap();
        assert_eq!(recv(&mut ws).await["code"], "bad_json");
    }
    assert_eq!(
        ping(&mut ws).await["type"],
        "pong",
        "a good frame resets the count"
    );
    for i in 0..50 {
        ws.send(Message::binary(vec![1, 2, 3])).await.unwrap();
        if i < 49 {
            assert_eq!(recv(&mut ws).await["code"], "binary_frame");
        }
    }
    assert_eq!(closed(&mut ws, Duration::from_secs(5)).await, Some(1008));
    server.stop().await;
}

#[tokio::test]
async fn large_frames_and_idle_connections() {
    let f = Fixture::new();
    let server = f
        .serve(with_limits(Limits {
            ws_idle_timeout: Duration::from_millis(1500),
            ..Limits::default()
        }))
        .await;
    let mut ws = server.ws(&f.bob).await;
    // Over the parse limit but under the transport limit: an error frame.
    let big = format!(r#"{{"type":"message","text":"{}"}}"#, "a".repeat(1_300_000));
    ws.send(Message::text(big)).await.unwrap();
    assert_eq!(recv(&mut ws).await["code"], "too_large");
    // 200,000 characters is fine, 200,001 is too long.
    subscribe(&mut ws, "helper").await;
    assert_eq!(
        turn(&mut ws, &"é".repeat(200_000)).await[0]["text"],
        "got 200000 chars"
    );
    send_message(&mut ws, &"é".repeat(200_001)).await;
    assert_eq!(recv(&mut ws).await["code"], "too_long");
    // Silence closes it.
    assert_eq!(closed(&mut ws, Duration::from_secs(6)).await, Some(1000));
    // Over the transport limit: closed (its bytes cannot be skipped).
    let mut ws = server.ws(&f.bob).await;
    let huge = "a".repeat(5 << 20);
    let _ = ws.send(Message::text(huge)).await;
    let code = closed(&mut ws, Duration::from_secs(5)).await;
    assert!(matches!(code, Some(1009) | None), "{code:?}");
    server.stop().await;
}

#[tokio::test]
async fn connections_per_user_are_capped() {
    let f = Fixture::new();
    let server = f
        .serve(with_limits(Limits {
            ws_connections_per_user: 2,
            ..Limits::default()
        }))
        .await;
    let a = server.ws(&f.bob).await;
    let _b = server.ws(&f.bob).await;
    assert_eq!(server.ws_status_as(&f.bob).await.err(), Some(429));
    // Others are not affected; a closed connection frees its slot.
    let _c = server.ws(&f.alice).await;
    drop(a);
    let mut freed = false;
    for _ in 0..50 {
        if server.ws_status_as(&f.bob).await.is_ok() {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(freed);
    server.stop().await;
}

#[tokio::test]
async fn shutdown_closes_sockets_and_ends_conversations() {
    let f = Fixture::new();
    let server = f.serve(ServerConfig::default()).await;
    let mut ws = server.ws(&f.bob).await;
    subscribe(&mut ws, "helper").await;
    assert_eq!(f.backend.counters.live.load(Ordering::SeqCst), 1);
    server.stop().await;
    assert_eq!(closed(&mut ws, Duration::from_secs(5)).await, Some(1001));
    assert_eq!(f.backend.counters.live.load(Ordering::SeqCst), 0);
}

#[path = "ws/revocation.rs"]
mod revocation;
