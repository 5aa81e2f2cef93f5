//! A tools-only worker: the session behind one MCP client of serve's
//! `/mcp/{agent}` endpoint. No model runs; the server sends `ListTools`
//! and `CallTool`, and every call goes through the session's door (grants,
//! approvals, loop guard, taint, credits, audit), exactly as a model's
//! call would.
//!
//! The session is a [`ToolHost`]: today [`DoorHost`], opened here through
//! the session factory with `tools_only` and dispatching through its door;
//! `bulwark_kernel::mcp_host::SessionToolHost` replaces it once built
//! (the same contract; [`open_host`] is the one place to switch).

use crate::broker::BrokerClient;
use crate::error::WorkerError;
use crate::records::WorkerRecords;
use bulwark_kernel::{
    ApprovalAnswer, ApprovalRequest, Approver, FrontEnd, Home, Kernel, OpenError, OpenSession,
    Origin, Session, SessionFactory, SessionRecords, SessionSpec, ToolCall,
};
use bulwark_mcp::server::{
    ApprovalQuestion, ApprovalReply, Approvals, HostedResult, HostedTool, ToolHost,
};
use bulwark_policy::{AgentName, UserName};
use bulwark_protocol::protocol::{
    MAX_ID_CHARS, MAX_JSON_BYTES, MAX_TEXT_CHARS, MAX_TOOL_DESCRIPTION_CHARS, MAX_TOOLS,
    MAX_TOOLS_JSON_BYTES, ToolInfo,
};
use std::sync::{Arc, Mutex};

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
    let current = Arc::new(CallApprovals::default());
    let front = FrontEnd {
        approver: current.clone(),
        records: Box::new(move |_| Ok(records as Arc<dyn SessionRecords>)),
        warn: Arc::new(|warning: &str| eprintln!("warning: {warning}")),
    };
    let spec = SessionSpec {
        agent,
        user,
        origin: Origin::Worker,
        model: None,
        resume: None,
        tools_only: true,
    };
    let OpenSession {
        kernel, session, ..
    } = SessionFactory::new(home.clone())
        .open(spec, front)
        .map_err(WorkerError::Open)?;
    let tools = kernel
        .door
        .registry()
        .definitions_for(session.policy())
        .into_iter()
        .map(|d| HostedTool {
            name: d.name,
            description: d.description,
            input_schema: d.input_schema,
        })
        .collect();
    Ok(Arc::new(DoorHost {
        open: tokio::sync::Mutex::new((kernel, session, 0)),
        current,
        tools,
    }))
}

/// A tools-only session and its door. Calls run one at a time (the door
/// takes the session mutably); each call's approval questions go to that
/// call's [`Approvals`].
struct DoorHost {
    open: tokio::sync::Mutex<(Kernel, Session, u64)>,
    current: Arc<CallApprovals>,
    tools: Vec<HostedTool>,
}

#[async_trait::async_trait]
impl ToolHost for DoorHost {
    async fn tools(&self) -> Vec<HostedTool> {
        self.tools.clone()
    }

    async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Value,
        approvals: Arc<dyn Approvals>,
    ) -> HostedResult {
        let mut open = self.open.lock().await;
        let (kernel, session, calls) = &mut *open;
        *calls += 1;
        let id = format!("mcp{calls}");
        let _asking = self.current.set(approvals);
        let result = kernel
            .door
            .dispatch(
                session,
                ToolCall {
                    id: &id,
                    name: tool,
                    input: &arguments,
                },
            )
            .await;
        // The records go to the server in batches: the client gets its
        // answer only once the call's record is stored.
        if let Err(err) = kernel.door.audit().flush() {
            eprintln!("error: the audit records of an MCP call could not be stored: {err}");
            return HostedResult {
                content: "the call's audit record could not be stored".into(),
                is_error: true,
            };
        }
        HostedResult {
            content: result.content,
            is_error: result.is_error,
        }
    }
}

/// The door's approver: asks whoever asked for the call that is running.
#[derive(Default)]
struct CallApprovals {
    current: Mutex<Option<Arc<dyn Approvals>>>,
}

/// Clears the running call's approvals when the call ends.
struct Asking<'a>(&'a CallApprovals);

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        *self.0.slot() = None;
    }
}

impl CallApprovals {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Arc<dyn Approvals>>> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, approvals: Arc<dyn Approvals>) -> Asking<'_> {
        *self.slot() = Some(approvals);
        Asking(self)
    }
}

#[async_trait::async_trait]
impl Approver for CallApprovals {
    async fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let Some(approvals) = self.slot().clone() else {
            return ApprovalAnswer::Deny;
        };
        let question = ApprovalQuestion {
            tool: request.tool.clone(),
            why: request.why.clone(),
            args_preview: request.args_preview.clone(),
        };
        match approvals.ask(question).await {
            // Once: an MCP client's yes is for this call, never the session.
            ApprovalReply::Approve => ApprovalAnswer::AllowOnce,
            ApprovalReply::Deny | ApprovalReply::Unavailable => ApprovalAnswer::Deny,
        }
    }
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
