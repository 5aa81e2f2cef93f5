//! A minimal rmcp [`ServerHandler`] over a [`ToolHost`]: `tools/list` and
//! `tools/call`, nothing else.
//!
//! Stand-in for `bulwark_mcp::server`'s handler (built in parallel), which
//! adds the approval round trip (elicitation on 2025-11-25, MRTR input
//! requests on 2026-07-28). This one cannot ask the client, so every
//! approval is [`ApprovalReply::Unavailable`]: the call is refused, never
//! run unapproved. [`handler`] is the one place to switch.

use bulwark_mcp::server::{ApprovalQuestion, ApprovalReply, Approvals, ToolHost};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use std::sync::Arc;

/// The handler `/mcp/{agent}` serves for one request.
pub(crate) fn handler(host: Arc<dyn ToolHost>) -> ToolsHandler {
    ToolsHandler { host }
}

#[derive(Clone)]
pub(crate) struct ToolsHandler {
    host: Arc<dyn ToolHost>,
}

/// No way to ask this client: every question is unanswerable.
struct NoApprovals;

#[async_trait::async_trait]
impl Approvals for NoApprovals {
    async fn ask(&self, _question: ApprovalQuestion) -> ApprovalReply {
        ApprovalReply::Unavailable
    }
}

impl ServerHandler for ToolsHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        let tools = self
            .host
            .tools()
            .await
            .into_iter()
            .map(|t| {
                let schema = match t.input_schema {
                    serde_json::Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                Tool::new(t.name, t.description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let result = self
            .host
            .call(&request.name, arguments, Arc::new(NoApprovals))
            .await;
        let content = vec![ContentBlock::text(result.content)];
        Ok(if result.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}
