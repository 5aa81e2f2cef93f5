//! Work the server must do: discovery/initialize on both lifecycles,
//! tool lists (paginated), calls.

use std::sync::Arc;

use bulwark_mcp::server::ServerLimits;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use serde_json::json;

use super::{FakeHost, TestClient, Version, connect, text};

#[tokio::test]
async fn a_2025_11_25_client_initializes_lists_and_calls() {
    let host = Arc::new(FakeHost::default());
    let (client, _) = connect(
        host,
        TestClient::mute(),
        Version::Legacy,
        ServerLimits::default(),
    )
    .await;
    let info = client.peer_info().expect("initialize answered");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
    assert!(info.capabilities.tools.is_some());
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, ["echo", "guarded", "slow"]);
    let args = json!({"path": "notes.txt"});
    let result = client
        .call_tool(
            CallToolRequestParams::new("echo")
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text(&result), args.to_string());
}

#[tokio::test]
async fn a_2026_07_28_client_discovers_lists_and_calls() {
    let host = Arc::new(FakeHost::default());
    let (client, _) = connect(
        host,
        TestClient::mute(),
        Version::Modern,
        ServerLimits::default(),
    )
    .await;
    let info = client.peer_info().expect("server/discover answered");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 3);
    let result = client
        .call_tool(CallToolRequestParams::new("echo"))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text(&result), "{}");
}

#[tokio::test]
async fn a_long_tool_list_is_paginated_and_complete() {
    let host = Arc::new(FakeHost::with_extra_tools(250));
    let limits = ServerLimits {
        page_size: 100,
        ..ServerLimits::default()
    };
    let (client, _) = connect(host, TestClient::mute(), Version::Legacy, limits).await;
    let first = client.list_tools(None).await.expect("first page");
    assert_eq!(first.tools.len(), 100);
    assert!(first.next_cursor.is_some());
    let all = client.list_all_tools().await.expect("every page");
    assert_eq!(all.len(), 253);
    let mut names: Vec<_> = all.iter().map(|t| t.name.to_string()).collect();
    names.dedup();
    assert_eq!(names.len(), 253, "no tool listed twice");
}

#[tokio::test]
async fn a_cursor_the_server_never_gave_is_an_error_not_a_panic() {
    let host = Arc::new(FakeHost::default());
    let (client, _) = connect(
        host,
        TestClient::mute(),
        Version::Legacy,
        ServerLimits::default(),
    )
    .await;
    let err = client
        .list_tools(Some(
            rmcp::model::PaginatedRequestParams::default().with_cursor(Some("../../etc".into())),
        ))
        .await;
    assert!(err.is_err(), "a forged cursor is refused");
    // Past the end: an empty page, not a panic.
    let empty = client
        .list_tools(Some(
            rmcp::model::PaginatedRequestParams::default().with_cursor(Some("999999".into())),
        ))
        .await
        .expect("a cursor past the end");
    assert!(empty.tools.is_empty());
    assert!(client.list_all_tools().await.is_ok(), "still serving");
}

#[tokio::test]
async fn a_host_error_is_a_tool_error_the_client_reads() {
    let host = Arc::new(FakeHost::default());
    let (client, _) = connect(
        host,
        TestClient::mute(),
        Version::Legacy,
        ServerLimits::default(),
    )
    .await;
    let result = client
        .call_tool(CallToolRequestParams::new("nope"))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("no tool `nope`"));
}
