//! A bounded MCP client for one server.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::McpError;

/// How to reach a server.
pub enum Launch {
    /// A stdio server in the process sandbox: the helper binary and the
    /// spec (argv, workspace, cleared environment with only granted keys,
    /// limits, `egress_proxy` socket when the server has hosts).
    Sandboxed {
        helper: PathBuf,
        spec: bulwark_sandbox::SandboxSpec,
    },
    /// A stdio server without the process sandbox (config.toml turned it
    /// off): still a cleared environment, its own process group, killed
    /// with the connection.
    Unconfined {
        argv: Vec<String>,
        cwd: PathBuf,
        env: Vec<(String, String)>,
    },
    /// A Streamable HTTP server, reached only through `http` (allowlist,
    /// address checks, credential injection, exfiltration guard).
    Http {
        url: String,
        http: Arc<bulwark_net::SafeHttp>,
        /// Who the requests are for (`mcp:<name>`), for credential grants.
        context: bulwark_net::CallContext,
    },
}

/// Bounds on one connection.
#[derive(Debug, Clone, Copy)]
pub struct ClientLimits {
    /// Start-up (process start, discovery or initialize).
    pub connect_timeout: Duration,
    /// One request.
    pub call_timeout: Duration,
    /// Largest JSON-RPC message accepted from the server.
    pub max_message_bytes: usize,
    /// Most tools a server may list.
    pub max_tools: usize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            max_message_bytes: 4 * 1024 * 1024,
            max_tools: 256,
        }
    }
}

/// A tool as the server lists it now.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// What one call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The result's content as text: text blocks joined, other blocks
    /// summarized (`[image: image/png, 1234 bytes]`), structured content as
    /// JSON. Bounded by the connection's message limit.
    pub text: String,
    /// The server marked the result as a tool error.
    pub is_error: bool,
}

/// One live connection. Dropping it closes the transport and, for stdio,
/// kills the server's process group.
pub struct McpClient {
    server: String,
}

impl McpClient {
    /// Starts or reaches server `server` and negotiates a version:
    /// 2026-07-28 (`server/discover`), falling back to 2025-11-25
    /// (`initialize`).
    pub async fn connect(
        server: &str,
        launch: Launch,
        limits: ClientLimits,
    ) -> Result<McpClient, McpError> {
        let _ = (launch, limits);
        Err(McpError::Launch {
            server: server.to_string(),
            detail: "the MCP client is not built yet".into(),
        })
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    /// The negotiated protocol version (`2026-07-28` or `2025-11-25`).
    pub fn protocol_version(&self) -> &str {
        ""
    }

    /// Every tool, following pagination up to `max_tools`.
    pub async fn list_tools(&self) -> Result<Vec<LiveTool>, McpError> {
        Ok(Vec::new())
    }

    /// Calls `tool` with `arguments` (a JSON object) under the call timeout.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallOutcome, McpError> {
        let _ = (tool, arguments);
        Err(McpError::Closed {
            server: self.server.clone(),
            detail: String::new(),
        })
    }

    /// Closes the connection and stops the server.
    pub async fn close(self) {}
}
