//! An in-process rmcp server with one `echo` tool, over a duplex pipe:
//! the 2026-07-28 counterpart for the client tests and its benchmark.

use std::time::Duration;

use bulwark_mcp::McpError;
use bulwark_mcp::client::{ClientLimits, McpClient};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

#[derive(Clone, Default)]
pub struct EchoServer;

impl ServerHandler for EchoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut schema = serde_json::Map::new();
        schema.insert("type".into(), "object".into());
        schema.insert(
            "properties".into(),
            serde_json::json!({"text": {"type": "string"}}),
        );
        Ok(ListToolsResult {
            tools: vec![Tool::new("echo", "Echoes text.", schema)],
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("text"))
            .and_then(|t| t.as_str())
            .unwrap_or_default()
            .to_string();
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text(text),
        ])))
    }
}

pub fn limits() -> ClientLimits {
    ClientLimits {
        connect_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(10),
        max_message_bytes: 1024 * 1024,
        max_tools: 256,
    }
}

/// A client connected to a fresh [`EchoServer`] in this process.
pub async fn connect_echo() -> Result<McpClient, McpError> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(server) = EchoServer.serve(server_io).await {
            let _ = server.waiting().await;
        }
    });
    let (read, write) = tokio::io::split(client_io);
    McpClient::connect_stream("echo", read, write, limits()).await
}
