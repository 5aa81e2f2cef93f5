//! Tools-only workers (serve's `/mcp`): `StartTools`, then `ListTools` and
//! `CallTool` answered in order, approvals only during a call, one call at
//! a time, and the idle timeout; a worker that answers what was not asked
//! is ended.

use super::common::*;
use bulwark_protocol::protocol::{Command, ErrorCode, Event};
use bulwark_server::workers::{EndReason, Supervisor};
use serde_json::json;
use std::time::Duration;

fn call(call_id: &str, tool: &str) -> Command {
    Command::CallTool {
        call_id: call_id.into(),
        tool: tool.into(),
        arguments: json!({"path": "notes.txt"}),
    }
}

#[tokio::test]
async fn a_tools_only_worker_lists_calls_and_asks_for_approval() {
    let supervisor = Supervisor::new(config("good"));
    let mut tools = supervisor.open_tools(request("alice")).await.unwrap();
    send(&tools, Command::ListTools).await;
    let Some(Event::Tools { tools: listed }) = next(&mut tools).await else {
        panic!("a tool list");
    };
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo", "ask"]);

    send(&tools, call("m1", "echo")).await;
    assert_eq!(
        next(&mut tools).await,
        Some(Event::ToolCallDone {
            call_id: "m1".into(),
            content: json!({"path": "notes.txt"}).to_string(),
            is_error: false,
        })
    );

    // An approval during a call is relayed; the answer goes back.
    send(&tools, call("m2", "ask")).await;
    let Some(Event::ApprovalRequest { request_id, .. }) = next(&mut tools).await else {
        panic!("an approval request");
    };
    // A second call while one runs is refused, not queued.
    send(&tools, call("m3", "echo")).await;
    let Some(Event::Error {
        code: ErrorCode::Busy,
        fatal: false,
        ..
    }) = next(&mut tools).await
    else {
        panic!("busy");
    };
    send(
        &tools,
        Command::ToolApproval {
            request_id,
            approve: false,
        },
    )
    .await;
    assert_eq!(
        next(&mut tools).await,
        Some(Event::ToolCallDone {
            call_id: "m2".into(),
            content: "denied".into(),
            is_error: true,
        })
    );
    send(&tools, Command::Shutdown).await;
    rest(&mut tools).await;
    assert_eq!(tools.worker.wait().await, EndReason::Shutdown);
}

#[tokio::test]
async fn a_worker_that_ends_another_call_is_lost() {
    let supervisor = Supervisor::new(config("good"));
    let mut tools = supervisor.open_tools(request("alice")).await.unwrap();
    send(&tools, call("m1", "stray")).await;
    let events = rest(&mut tools).await;
    assert!(events.iter().any(is_worker_lost), "{events:?}");
    assert!(matches!(tools.worker.wait().await, EndReason::Lost(_)));
    assert_eq!(supervisor.stats().protocol_violations, 1);
}

#[tokio::test]
async fn a_worker_that_dies_mid_call_is_lost_and_its_place_freed() {
    let supervisor = Supervisor::new(config("good"));
    let mut tools = supervisor.open_tools(request("alice")).await.unwrap();
    send(&tools, call("m1", "crash")).await;
    let events = rest(&mut tools).await;
    assert!(events.iter().any(is_worker_lost), "{events:?}");
    tools.worker.wait().await;
    assert_eq!(supervisor.stats().workers, 0);
}

#[tokio::test]
async fn an_idle_tools_only_worker_is_shut_down_but_not_during_a_call() {
    let mut config = config("good");
    config.idle_timeout = Duration::from_millis(300);
    let supervisor = Supervisor::new(config);
    let mut tools = supervisor.open_tools(request("alice")).await.unwrap();
    // A call waiting for approval for longer than the idle timeout keeps
    // the worker.
    send(&tools, call("m1", "ask")).await;
    let Some(Event::ApprovalRequest { request_id, .. }) = next(&mut tools).await else {
        panic!("an approval request");
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(tools.worker.end_reason(), None, "ended during a call");
    send(
        &tools,
        Command::ToolApproval {
            request_id,
            approve: true,
        },
    )
    .await;
    let Some(Event::ToolCallDone { content, .. }) = next(&mut tools).await else {
        panic!("the call's answer");
    };
    assert_eq!(content, "approved");
    // Then idle: ended.
    assert_eq!(rest(&mut tools).await, vec![]);
    assert_eq!(tools.worker.wait().await, EndReason::Idle);
}
