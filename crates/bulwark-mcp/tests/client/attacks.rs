//! Servers that flood, hang, or answer garbage: each costs one bounded,
//! typed error, never a panic or unbounded memory, and never the session.

use std::time::Duration;

use bulwark_mcp::McpError;
use bulwark_mcp::client::{ClientLimits, McpClient};

use super::{args, connect, limits, python};

fn echo() -> serde_json::Map<String, serde_json::Value> {
    args(serde_json::json!({"text": "hi"}))
}

#[tokio::test]
async fn an_endless_line_is_cut_at_the_bound_and_fails_too_large() {
    for lifecycle in ["modern", "legacy"] {
        let client = connect(lifecycle, "flood-line").await;
        match client.call_tool("echo", echo()).await {
            Err(McpError::TooLarge { server, limit }) => {
                assert_eq!(server, "py");
                assert_eq!(limit, 1024 * 1024);
            }
            other => panic!("{lifecycle}: {other:?}"),
        }
        // The connection is gone, and says why again rather than hanging.
        assert!(matches!(
            client.list_tools().await,
            Err(McpError::TooLarge { .. })
        ));
        client.close().await;
    }
}

#[tokio::test]
async fn one_answer_over_the_bound_fails_too_large() {
    let client = connect("modern", "big-answer").await;
    assert!(matches!(
        client.call_tool("echo", echo()).await,
        Err(McpError::TooLarge { .. })
    ));
}

#[tokio::test]
async fn many_large_messages_under_the_bound_are_read_and_dropped() {
    // 300 notifications of 200 KiB (60 MB in all) before the answer: each
    // is within the bound, none is kept, and the answer still arrives.
    let client = McpClient::connect(
        "py",
        python("legacy", "flood-many"),
        ClientLimits {
            call_timeout: Duration::from_secs(60),
            ..limits()
        },
    )
    .await
    .expect("connect");
    let out = client.call_tool("echo", echo()).await.expect("call");
    assert_eq!(out.text, "hi");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_is_cancelled() {
    let client = connect("modern", "hang").await;
    match client.call_tool("echo", echo()).await {
        Err(McpError::Timeout { server, seconds }) => {
            assert_eq!(server, "py");
            assert_eq!(seconds, 3);
        }
        other => panic!("{other:?}"),
    }
    client.close().await;
}

#[tokio::test]
async fn a_server_that_answers_once_then_hangs_times_out_on_the_second_call() {
    let client = connect("legacy", "hang-after-one").await;
    assert_eq!(
        client.call_tool("echo", echo()).await.expect("first").text,
        "hi"
    );
    assert!(matches!(
        client.call_tool("echo", echo()).await,
        Err(McpError::Timeout { .. })
    ));
}

#[tokio::test]
async fn malformed_json_is_a_protocol_error() {
    let client = connect("modern", "malformed").await;
    match client.call_tool("echo", echo()).await {
        Err(McpError::Protocol { server, detail }) => {
            assert_eq!(server, "py");
            assert!(detail.contains("not valid JSON-RPC"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_unsolicited_response_is_ignored() {
    let client = connect("modern", "unsolicited").await;
    assert_eq!(
        client.call_tool("echo", echo()).await.expect("call").text,
        "hi"
    );
}

#[tokio::test]
async fn a_sampling_request_from_the_server_is_refused() {
    let client = connect("legacy", "sampling").await;
    let out = client.call_tool("echo", echo()).await.expect("call");
    // -32601: method not found; the server could not make us prompt.
    assert_eq!(out.text, "sampling answer code -32601");
}

#[tokio::test]
async fn too_many_tools_is_an_error_not_a_silent_cut() {
    let client = connect("modern", "many-tools").await;
    match client.list_tools().await {
        Err(McpError::Protocol { detail, .. }) => {
            assert!(detail.contains("more than 256 tools"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn endless_pagination_stops_at_the_page_bound() {
    let client = connect("legacy", "endless-pages").await;
    match client.list_tools().await {
        Err(McpError::Protocol { detail, .. }) => {
            assert!(detail.contains("pages"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_exits_is_closed_with_its_stderr() {
    let client = connect("modern", "exit").await;
    match client.call_tool("echo", echo()).await {
        Err(McpError::Closed { server, detail }) => {
            assert_eq!(server, "py");
            assert!(detail.contains("boom"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_dies_at_start_is_a_launch_error_with_its_stderr() {
    let launch = bulwark_mcp::client::Launch::Unconfined {
        argv: vec![
            "python3".into(),
            "-c".into(),
            "import sys; sys.stderr.write('missing API key\\n'); sys.exit(2)".into(),
        ],
        cwd: std::env::temp_dir(),
        env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
    };
    match McpClient::connect("dead", launch, limits()).await {
        Err(McpError::Launch { detail, .. }) => {
            assert!(detail.contains("missing API key"), "{detail}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("connected"),
    }
}
