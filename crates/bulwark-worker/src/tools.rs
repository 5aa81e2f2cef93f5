//! A tools-only worker: the session behind one MCP client of serve's
//! `/mcp/{agent}` endpoint. No model runs; the server sends `ListTools`
//! and `CallTool`, and every call goes through the session's door (grants,
//! approvals, loop guard, taint, credits, audit), exactly as a model's
//! call would.
//!
//! The session is the kernel's [`SessionToolHost`], the same host `bulwark
//! mcp serve` uses: opened through the session factory with `tools_only`,
//! each call one door dispatch whose records are stored before the answer.

use crate::broker::BrokerClient;
use crate::error::WorkerError;
use crate::records::WorkerRecords;
use bulwark_kernel::mcp_host::SessionToolHost;
use bulwark_kernel::{Home, OpenError, Origin, SessionFactory, SessionRecords};
use bulwark_mcp::server::{HostedResult, HostedTool, ToolHost};
use bulwark_policy::{AgentName, UserName};
use bulwark_protocol::protocol::{
    MAX_ID_CHARS, MAX_JSON_BYTES, MAX_TEXT_CHARS, MAX_TOOL_DESCRIPTION_CHARS, MAX_TOOLS,
    MAX_TOOLS_JSON_BYTES, ToolInfo,
};
use std::sync::Arc;

/// What the server asks of a tools-only worker.
#[derive(Debug)]
pub(crate) enum ToolJob {
    List,
    Call {
        call_id: String,
        tool: String,
        arguments: serde_json::Value,
    },
}

/// Opens the tools-only session of `agent` for `user`: [`Origin::Worker`]
/// (the `[remote]` policy narrows it), records that go to the server.
pub(crate) fn open_host(
    home: &Home,
    agent: &str,
    user: &str,
    store: &Arc<BrokerClient>,
) -> Result<Arc<dyn ToolHost>, WorkerError> {
    let agent =
        AgentName::new(agent).map_err(|e| WorkerError::Open(OpenError::Usage(e.to_string())))?;
    let user =
        UserName::new(user).map_err(|e| WorkerError::Open(OpenError::Usage(e.to_string())))?;
    let records = Arc::new(WorkerRecords::new(store.clone()));
    let host = SessionToolHost::open(
        &SessionFactory::new(home.clone()),
        agent,
        user,
        Origin::Worker,
        Box::new(move |_| Ok(records as Arc<dyn SessionRecords>)),
        Arc::new(|warning: &str| eprintln!("warning: {warning}")),
    )
    .map_err(WorkerError::Open)?;
    Ok(Arc::new(host))
}

/// The host's tools as the protocol carries them: names and descriptions
/// cut to their bounds, and tools past the count or size bounds left out
/// (with a warning in the server log) rather than failing the list.
pub(crate) fn tool_infos(tools: Vec<HostedTool>) -> Vec<ToolInfo> {
    let mut out = Vec::new();
    let mut total = 0usize;
    for tool in tools {
        let size = serde_json::to_vec(&tool.input_schema).map_or(usize::MAX, |v| v.len());
        let fits = out.len() < MAX_TOOLS
            && tool.name.chars().count() <= MAX_ID_CHARS
            && size <= MAX_JSON_BYTES
            && total.saturating_add(size) <= MAX_TOOLS_JSON_BYTES;
        if !fits {
            eprintln!(
                "warning: tool `{}` left out of the MCP list: too large",
                clamp(&tool.name, 64)
            );
            continue;
        }
        total += size;
        out.push(ToolInfo {
            name: tool.name,
            description: clamp(&tool.description, MAX_TOOL_DESCRIPTION_CHARS),
            input_schema: tool.input_schema,
        });
    }
    out
}

/// A call's result as `ToolCallDone` carries it.
pub(crate) fn result_text(result: &HostedResult) -> String {
    clamp(&result.content, MAX_TEXT_CHARS)
}

fn clamp(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    text.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hosted(name: &str, schema: serde_json::Value) -> HostedTool {
        HostedTool {
            name: name.into(),
            description: "d".repeat(MAX_TOOL_DESCRIPTION_CHARS + 10),
            input_schema: schema,
        }
    }

    #[test]
    fn listed_tools_fit_the_protocol_bounds() {
        let huge = json!({"x": "y".repeat(MAX_JSON_BYTES)});
        let infos = tool_infos(vec![
            hosted("file_read", json!({"type": "object"})),
            hosted(&"n".repeat(MAX_ID_CHARS + 1), json!({})),
            hosted("big", huge),
        ]);
        assert_eq!(infos.len(), 1);
        assert_eq!(infos[0].name, "file_read");
        assert_eq!(
            infos[0].description.chars().count(),
            MAX_TOOL_DESCRIPTION_CHARS
        );
        let event = bulwark_protocol::protocol::Event::Tools { tools: infos };
        event.validate().unwrap();
    }
}
