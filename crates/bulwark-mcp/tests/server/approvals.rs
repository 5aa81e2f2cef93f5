//! Approvals: asked through elicitation (2025-11-25) or the MRTR round
//! trip (2026-07-28), refused when the client can be asked neither way.
//! A call needing approval runs only on an explicit yes.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bulwark_mcp::server::ServerLimits;
use rmcp::model::{CallToolRequestParams, CallToolResponse, InputResponses};
use serde_json::json;

use super::{Answer, FakeHost, TestClient, Version, connect, text};

fn guarded() -> CallToolRequestParams {
    CallToolRequestParams::new("guarded").with_arguments(
        json!({"cmd": "make"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

async fn call_guarded(
    version: Version,
    client: TestClient,
) -> (Arc<FakeHost>, String, bool, usize) {
    let host = Arc::new(FakeHost::default());
    let asked = client.asked.clone();
    let (client, _) = connect(host.clone(), client, version, ServerLimits::default()).await;
    let result = client.call_tool(guarded()).await.expect("tools/call");
    (
        host,
        text(&result),
        result.is_error == Some(true),
        asked.load(Ordering::SeqCst),
    )
}

#[tokio::test]
async fn elicitation_approve_runs_the_call_once() {
    let (host, text, is_error, asked) =
        call_guarded(Version::Legacy, TestClient::answering(Answer::Approve)).await;
    assert_eq!((text.as_str(), is_error, asked), ("ran", false, 1));
    assert_eq!(host.ran.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn elicitation_decline_cancel_or_false_denies() {
    for answer in [Answer::Decline, Answer::Cancel, Answer::False] {
        let (host, text, is_error, asked) =
            call_guarded(Version::Legacy, TestClient::answering(answer)).await;
        assert!(is_error, "{text}");
        assert_eq!(asked, 1);
        assert_eq!(
            host.ran.load(Ordering::SeqCst),
            0,
            "a denied call never runs"
        );
        assert_eq!(host.denied.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn mrtr_round_trip_approve_runs_the_call_once() {
    let (host, text, is_error, asked) =
        call_guarded(Version::Modern, TestClient::answering(Answer::Approve)).await;
    assert_eq!((text.as_str(), is_error, asked), ("ran", false, 1));
    assert_eq!(host.ran.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn mrtr_round_trip_decline_denies() {
    for answer in [Answer::Decline, Answer::False] {
        let (host, _, is_error, asked) =
            call_guarded(Version::Modern, TestClient::answering(answer)).await;
        assert!(is_error);
        assert_eq!(asked, 1);
        assert_eq!(host.ran.load(Ordering::SeqCst), 0);
        assert_eq!(host.denied.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn a_client_that_cannot_be_asked_gets_the_call_refused() {
    for version in [Version::Legacy, Version::Modern] {
        let (host, text, is_error, _) = call_guarded(version, TestClient::mute()).await;
        assert!(is_error, "{text}");
        assert!(text.contains("unavailable"), "{text}");
        assert_eq!(host.ran.load(Ordering::SeqCst), 0, "the tool never ran");
        assert_eq!(host.unavailable.load(Ordering::SeqCst), 1);
    }
}

/// The first round of a modern call: its parked handle.
async fn park(client: &super::Client) -> String {
    match client.call_tool_once(guarded()).await.expect("tools/call") {
        CallToolResponse::InputRequired(input) => {
            let requests = input.input_requests.expect("an approval form");
            assert!(requests.contains_key("approval"));
            input.request_state.expect("a handle")
        }
        other => panic!("expected input_required, got {other:?}"),
    }
}

fn approve() -> InputResponses {
    let mut responses = InputResponses::new();
    responses.insert(
        "approval".into(),
        json!({"action": "accept", "content": {"approve": true}}),
    );
    responses
}

#[tokio::test]
async fn a_forged_or_reused_handle_runs_nothing() {
    let host = Arc::new(FakeHost::default());
    let (client, server) = connect(
        host.clone(),
        TestClient::answering(Answer::Approve),
        Version::Modern,
        ServerLimits::default(),
    )
    .await;
    let handle = park(&client).await;
    assert_eq!(server.pending().len(), 1);
    // A guessed handle finds nothing.
    let mut forged = guarded().with_input_responses(approve());
    forged.request_state = Some(format!("{handle}x"));
    let result = client.call_tool_once(forged).await.expect("answered");
    let CallToolResponse::Complete(result) = result else {
        panic!("a forged handle parks nothing")
    };
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("unknown or expired"));
    assert_eq!(host.ran.load(Ordering::SeqCst), 0);
    // The real one runs the call once; replaying it finds nothing.
    let mut retry = guarded().with_input_responses(approve());
    retry.request_state = Some(handle.clone());
    let CallToolResponse::Complete(done) =
        client.call_tool_once(retry.clone()).await.expect("retry")
    else {
        panic!("the approved call completes")
    };
    assert_eq!(text(&done), "ran");
    let CallToolResponse::Complete(replayed) = client.call_tool_once(retry).await.expect("replay")
    else {
        panic!("a replay parks nothing")
    };
    assert_eq!(replayed.is_error, Some(true));
    assert_eq!(
        host.ran.load(Ordering::SeqCst),
        1,
        "the approval was spent once"
    );
    assert!(server.pending().is_empty());
}

#[tokio::test]
async fn a_handle_spent_on_other_arguments_refuses_the_parked_call() {
    let host = Arc::new(FakeHost::default());
    let (client, server) = connect(
        host.clone(),
        TestClient::answering(Answer::Approve),
        Version::Modern,
        ServerLimits::default(),
    )
    .await;
    let handle = park(&client).await;
    let mut swapped = CallToolRequestParams::new("guarded")
        .with_arguments(
            json!({"cmd": "rm -rf /"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
        .with_input_responses(approve());
    swapped.request_state = Some(handle);
    assert!(client.call_tool_once(swapped).await.is_err(), "refused");
    assert!(server.pending().is_empty());
    for _ in 0..200 {
        if host.denied.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        host.denied.load(Ordering::SeqCst),
        1,
        "the parked call was denied"
    );
    assert_eq!(host.ran.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_unanswered_question_expires_as_a_denial() {
    let host = Arc::new(FakeHost::default());
    let limits = ServerLimits {
        approval_timeout: Duration::from_millis(100),
        ..ServerLimits::default()
    };
    let (client, server) = connect(
        host.clone(),
        TestClient::answering(Answer::Approve),
        Version::Modern,
        limits,
    )
    .await;
    let handle = park(&client).await;
    for _ in 0..300 {
        if host.denied.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(host.denied.load(Ordering::SeqCst), 1, "expired: denied");
    let mut late = guarded().with_input_responses(approve());
    late.request_state = Some(handle);
    let CallToolResponse::Complete(result) = client.call_tool_once(late).await.expect("late")
    else {
        panic!("a late answer parks nothing")
    };
    assert!(text(&result).contains("unknown or expired"));
    assert_eq!(host.ran.load(Ordering::SeqCst), 0);
    assert!(server.pending().is_empty());
}

#[tokio::test]
async fn parked_calls_are_bounded_and_the_overflow_is_refused() {
    let host = Arc::new(FakeHost::default());
    let limits = ServerLimits {
        max_pending: 2,
        ..ServerLimits::default()
    };
    let (client, server) = connect(
        host.clone(),
        TestClient::answering(Answer::Approve),
        Version::Modern,
        limits,
    )
    .await;
    park(&client).await;
    park(&client).await;
    let CallToolResponse::Complete(third) = client.call_tool_once(guarded()).await.expect("third")
    else {
        panic!("no room to park a third")
    };
    assert_eq!(third.is_error, Some(true));
    assert!(text(&third).contains("unavailable"));
    assert_eq!(server.pending().len(), 2);
    assert_eq!(host.ran.load(Ordering::SeqCst), 0);
}
