//! The MCP client against real counterparts: an in-process rmcp server
//! (2026-07-28) and python3 stdio servers speaking either lifecycle, then
//! the servers that misbehave ([`attacks`]).

mod attacks;
pub mod echo_server;
mod http;

use std::path::PathBuf;
use std::time::Duration;

use bulwark_mcp::McpError;
use bulwark_mcp::client::{ClientLimits, Launch, LiveTool, McpClient};
use bulwark_mcp::pins::{Drift, ServerPins, ToolPin, drift, tool_digest};

pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/mcp_server.py")
}

/// The python3 test server with `lifecycle` and `behaviour`, unconfined.
pub fn python(lifecycle: &str, behaviour: &str) -> Launch {
    Launch::Unconfined {
        argv: vec![
            "python3".into(),
            script().display().to_string(),
            lifecycle.into(),
            behaviour.into(),
        ],
        cwd: std::env::temp_dir(),
        env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
    }
}

pub fn limits() -> ClientLimits {
    ClientLimits {
        connect_timeout: Duration::from_secs(30),
        call_timeout: Duration::from_secs(3),
        max_message_bytes: 1024 * 1024,
        max_tools: 256,
    }
}

pub async fn connect(lifecycle: &str, behaviour: &str) -> McpClient {
    match McpClient::connect("py", python(lifecycle, behaviour), limits()).await {
        Ok(client) => client,
        Err(e) => panic!("connect {lifecycle}/{behaviour}: {e}"),
    }
}

pub fn args(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn names(tools: &[LiveTool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

#[tokio::test]
async fn a_2026_server_is_discovered_listed_and_called() {
    let client = connect("modern", "normal").await;
    assert_eq!(client.protocol_version(), "2026-07-28");
    assert_eq!(client.server(), "py");
    let tools = client.list_tools().await.expect("list");
    assert_eq!(names(&tools), ["echo", "read"]);
    assert_eq!(tools[0].description, "Echoes text.");
    assert_eq!(tools[0].input_schema["type"], "object");
    let out = client
        .call_tool("echo", args(serde_json::json!({"text": "hello"})))
        .await
        .expect("call");
    assert_eq!(out.text, "hello");
    assert!(!out.is_error);
    client.close().await;
}

#[tokio::test]
async fn a_2025_only_server_is_reached_by_falling_back_to_initialize() {
    let client = connect("legacy", "normal").await;
    assert_eq!(client.protocol_version(), "2025-11-25");
    let tools = client.list_tools().await.expect("list");
    assert_eq!(names(&tools), ["echo", "read"]);
    let out = client
        .call_tool("echo", args(serde_json::json!({"text": "old"})))
        .await
        .expect("call");
    assert_eq!(out.text, "old");
    client.close().await;
}

#[tokio::test]
async fn an_in_process_rmcp_server_speaks_2026() {
    let client = echo_server::connect_echo().await.expect("connect");
    assert_eq!(client.protocol_version(), "2026-07-28");
    let tools = client.list_tools().await.expect("list");
    assert_eq!(names(&tools), ["echo"]);
    let out = client
        .call_tool("echo", args(serde_json::json!({"text": "in process"})))
        .await
        .expect("call");
    assert_eq!(out.text, "in process");
    client.close().await;
}

#[tokio::test]
async fn pagination_is_followed() {
    let client = connect("modern", "paged").await;
    let tools = client.list_tools().await.expect("list");
    assert_eq!(
        names(&tools),
        ["p0_0", "p0_1", "p1_0", "p1_1", "p2_0", "p2_1"]
    );
}

#[tokio::test]
async fn results_are_rendered_as_bounded_text() {
    let client = connect("legacy", "normal").await;
    let out = client
        .call_tool("mixed", serde_json::Map::new())
        .await
        .expect("call");
    assert_eq!(
        out.text,
        "first\n[image: image/png, 12 bytes]\nsecond\n{\"a\":1,\"b\":2}"
    );
    let failed = client
        .call_tool("fail", serde_json::Map::new())
        .await
        .expect("call");
    assert!(failed.is_error);
    assert_eq!(failed.text, "no such file");
    let refused = client.call_tool("nope", serde_json::Map::new()).await;
    match refused {
        Err(McpError::Server { server, detail }) => {
            assert_eq!(server, "py");
            assert!(detail.contains("unknown tool nope"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    // The session survives a refused call.
    let out = client
        .call_tool("echo", args(serde_json::json!({"text": "still here"})))
        .await
        .expect("call");
    assert_eq!(out.text, "still here");
}

#[tokio::test]
async fn a_tool_list_changed_between_connections_drifts_from_its_pins() {
    let first = connect("modern", "normal").await;
    let pinned_tools = first.list_tools().await.expect("list");
    first.close().await;
    let pins = ServerPins {
        pinned_at: "2026-11-27T00:00:00Z".into(),
        protocol_version: "2026-07-28".into(),
        tools: pinned_tools
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    ToolPin {
                        description: t.description.clone(),
                        input_schema: t.input_schema.clone(),
                        digest: tool_digest(&t.name, &t.description, &t.input_schema),
                    },
                )
            })
            .collect(),
        withheld: Default::default(),
    };
    // Unchanged server: no drift.
    let again = connect("modern", "normal").await;
    assert!(drift(&pins, &again.list_tools().await.expect("list")).is_empty());
    // The rug pull.
    let second = connect("modern", "v2").await;
    let live = second.list_tools().await.expect("list");
    assert_eq!(
        drift(&pins, &live),
        [
            Drift::Changed {
                tool: "echo".into()
            },
            Drift::Added {
                tool: "exfil".into()
            },
            Drift::Removed {
                tool: "read".into()
            },
        ]
    );
}

#[tokio::test]
async fn a_command_that_cannot_start_is_a_launch_error() {
    let launch = Launch::Unconfined {
        argv: vec!["/nonexistent/mcp-server".into()],
        cwd: std::env::temp_dir(),
        env: Vec::new(),
    };
    match McpClient::connect("ghost", launch, limits()).await {
        Err(McpError::Launch { server, detail }) => {
            assert_eq!(server, "ghost");
            assert!(detail.contains("/nonexistent/mcp-server"), "{detail}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("connected to nothing"),
    }
    let empty = Launch::Unconfined {
        argv: Vec::new(),
        cwd: std::env::temp_dir(),
        env: Vec::new(),
    };
    assert!(matches!(
        McpClient::connect("empty", empty, limits()).await,
        Err(McpError::Launch { .. })
    ));
}

#[tokio::test]
async fn the_server_gets_only_the_given_environment() {
    // `env` on stderr, where the error's tail quotes it. (Not python: on
    // some machines `python3` is a wrapper script that adds variables.)
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let launch = Launch::Unconfined {
        argv: vec!["sh".into(), "-c".into(), "exec env >&2".into()],
        cwd: std::env::temp_dir(),
        env: vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("GRANTED".into(), "1".into()),
        ],
    };
    match McpClient::connect("env", launch, limits()).await {
        Err(McpError::Launch { detail, .. }) => {
            let listed = detail
                .split("stderr ended with: ")
                .nth(1)
                .unwrap_or_default();
            let mut vars: Vec<&str> = listed
                .lines()
                .filter_map(|l| l.split('=').next())
                // The shell itself sets its working directory.
                .filter(|v| *v != "PWD")
                .collect();
            vars.sort_unstable();
            assert_eq!(vars, ["GRANTED", "PATH"], "{detail}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("connected"),
    }
}

#[tokio::test]
async fn connect_gives_up_at_its_timeout() {
    let launch = Launch::Unconfined {
        argv: vec!["sleep".into(), "30".into()],
        cwd: std::env::temp_dir(),
        env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
    };
    let limits = ClientLimits {
        connect_timeout: Duration::from_millis(500),
        ..limits()
    };
    assert!(matches!(
        McpClient::connect("sleepy", launch, limits).await,
        Err(McpError::Timeout { .. })
    ));
}

#[test]
fn the_client_can_be_shared_across_tasks() {
    fn shared<T: Send + Sync>(_: &T) {}
    fn sendable<F: std::future::Future + Send>(_: F) {}
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = runtime
        .block_on(echo_server::connect_echo())
        .expect("connect");
    shared(&client);
    sendable(client.call_tool("echo", serde_json::Map::new()));
    sendable(client.list_tools());
    sendable(McpClient::connect(
        "x",
        python("modern", "normal"),
        limits(),
    ));
}
