//! Bulwark as an MCP server: a [`ToolHost`] (the door, implemented in the
//! binary) over stdio or Streamable HTTP.
//!
//! Every `tools/call` goes to [`ToolHost::call`], which runs it through the
//! door of a session opened by the session factory; this module only
//! speaks the protocol. When the door needs a person's approval, the
//! [`Approvals`] handle asks the client (an elicitation on 2025-11-25, an
//! MRTR input request on 2026-07-28); a client that declared neither
//! capability gets the call refused, never run unapproved.

mod approvals;
mod handler;
mod pending;

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::McpError;

pub use handler::BulwarkMcpServer;
pub use pending::PendingCalls;

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

/// The bounds one connection is held to: what a client may make the server
/// hold (frames, calls in flight, approvals waiting for an answer) and how
/// long it waits for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// The largest JSON-RPC frame read; a longer line is dropped unread.
    pub max_frame_bytes: usize,
    /// Requests handled at once; one more is answered with a "busy" error
    /// (a flood costs an error frame each, not a queue).
    pub max_in_flight: usize,
    /// Calls parked on an MRTR approval question at once; past it, a new
    /// question is answered "unavailable" (the call is refused).
    pub max_pending: usize,
    /// How long a person has to answer (elicitation or MRTR round trip);
    /// no answer by then is a denial.
    pub approval_timeout: Duration,
    /// Tools per `tools/list` page.
    pub page_size: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_frame_bytes: 4 * 1024 * 1024,
            max_in_flight: 32,
            max_pending: 16,
            approval_timeout: Duration::from_secs(300),
            page_size: 100,
        }
    }
}

/// Serves `host` over stdin/stdout until the client closes it.
///
/// When both are pipes (how MCP clients start servers) they are read on
/// the IO reactor, so a shutdown does not wait for a blocked stdin read.
pub async fn serve_stdio(host: Arc<dyn ToolHost>) -> Result<(), McpError> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    serve_io(
        BulwarkMcpServer::new(host),
        stdin,
        stdout,
        ServerLimits::default(),
    )
    .await
}

/// Serves `server` over one byte stream pair (stdio, a socket, a test's
/// duplex) until the client closes it. Frames longer than
/// `limits.max_frame_bytes` are dropped; unparsable lines are ignored and
/// well-formed JSON that is not a request gets a JSON-RPC error, both by
/// rmcp's transport.
pub async fn serve_io<R, W>(
    server: BulwarkMcpServer,
    read: R,
    write: W,
    limits: ServerLimits,
) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let transport = AsyncRwTransport::<RoleServer, R, W>::new(read, write)
        .with_max_line_length(limits.max_frame_bytes);
    let running = match rmcp::serve_server(server, transport).await {
        Ok(running) => running,
        // The client went away before its first request: a clean end.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(err) => {
            return Err(McpError::Protocol {
                server: "bulwark".into(),
                detail: format!("the client's opening was refused: {err}"),
            });
        }
    };
    match running.waiting().await {
        Ok(_) => Ok(()),
        Err(err) => Err(McpError::Closed {
            server: "bulwark".into(),
            detail: format!(": the server task failed: {err}"),
        }),
    }
}
