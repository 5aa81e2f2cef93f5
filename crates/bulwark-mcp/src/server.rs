//! Bulwark as an MCP server: a [`ToolHost`] (the door, implemented in the
//! binary) over stdio or Streamable HTTP.
//!
//! Every `tools/call` goes to [`ToolHost::call`], which runs it through the
//! door of a session opened by the session factory; this module only
//! speaks the protocol. When the door needs a person's approval, the
//! [`Approvals`] handle asks the client (an elicitation on 2025-11-25, an
//! MRTR input request on 2026-07-28); a client that declared neither
//! capability gets the call refused, never run unapproved.

use std::sync::Arc;

use crate::McpError;

/// One tool as the MCP client is shown it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostedTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// A question the door asks a person, put to the MCP client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalQuestion {
    pub tool: String,
    /// Why approval is needed (policy, or which label reaches which sink).
    pub why: String,
    /// Arguments, truncated for display.
    pub args_preview: String,
}

/// The client's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalReply {
    Approve,
    Deny,
    /// The client cannot be asked (no elicitation capability, cancelled,
    /// timed out): the call is refused.
    Unavailable,
}

/// Asks the MCP client of the current request.
#[async_trait::async_trait]
pub trait Approvals: Send + Sync {
    async fn ask(&self, question: ApprovalQuestion) -> ApprovalReply;
}

/// What a call produced, as the MCP client receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostedResult {
    pub content: String,
    pub is_error: bool,
}

/// The tools behind the server: in the binary, one session opened by the
/// session factory and its door.
#[async_trait::async_trait]
pub trait ToolHost: Send + Sync {
    /// The tools the session's policy grants (only those).
    async fn tools(&self) -> Vec<HostedTool>;
    /// Runs one call through the door. `approvals` answers the door's
    /// approval questions for this call only.
    async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Value,
        approvals: Arc<dyn Approvals>,
    ) -> HostedResult;
}

/// Serves `host` over stdin/stdout until the client closes it.
pub async fn serve_stdio(host: Arc<dyn ToolHost>) -> Result<(), McpError> {
    let _ = host;
    Err(McpError::Closed {
        server: "bulwark".into(),
        detail: ": the MCP server is not built yet".into(),
    })
}
