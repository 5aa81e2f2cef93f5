//! A session as an MCP tool host: the door behind `bulwark mcp serve` and
//! the `/mcp` endpoint of `bulwark serve`.
//!
//! The session is opened by the session factory like any other (with
//! `tools_only`), so an MCP client gets exactly the agent's grants, its
//! approvals, loop guard, taint, credits and audit: an MCP client is one
//! more front end, not a side door.

use std::sync::Arc;

use bulwark_mcp::server::{Approvals, HostedResult, HostedTool, ToolHost};
use bulwark_policy::{AgentName, UserName};

use crate::agent_load::Warn;
use crate::factory::{OpenError, OpenRecords, Origin, SessionFactory};

/// One tools-only session behind an MCP server. Calls are dispatched one
/// at a time through its door; each call's approval questions go to that
/// call's [`Approvals`].
pub struct SessionToolHost {
    agent: String,
}

impl SessionToolHost {
    /// Opens a tools-only session of `agent` for `user` through `factory`.
    pub fn open(
        factory: &SessionFactory,
        agent: AgentName,
        user: UserName,
        origin: Origin,
        records: OpenRecords,
        warn: Warn,
    ) -> Result<SessionToolHost, OpenError> {
        let _ = (factory, user, origin, records, warn);
        Err(OpenError::Usage(format!(
            "serving agent `{agent}` over MCP is not built yet"
        )))
    }

    pub fn agent(&self) -> &str {
        &self.agent
    }
}

#[async_trait::async_trait]
impl ToolHost for SessionToolHost {
    async fn tools(&self) -> Vec<HostedTool> {
        Vec::new()
    }

    async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Value,
        approvals: Arc<dyn Approvals>,
    ) -> HostedResult {
        let _ = (arguments, approvals);
        HostedResult {
            content: format!("tool `{tool}` cannot be served yet"),
            is_error: true,
        }
    }
}
