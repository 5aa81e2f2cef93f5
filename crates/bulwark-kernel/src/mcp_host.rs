//! A session as an MCP tool host: the door behind `bulwark mcp serve` and
//! the `/mcp` endpoint of `bulwark serve`.
//!
//! The session is opened by the session factory like any other (with
//! `tools_only`), so an MCP client gets exactly the agent's grants, its
//! approvals, loop guard, taint, credits and audit: an MCP client is one
//! more front end, not a side door.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bulwark_mcp::server::{
    ApprovalQuestion, ApprovalReply, Approvals, HostedResult, HostedTool, ToolHost,
};
use bulwark_policy::{AgentName, UserName};

use crate::agent_load::Warn;
use crate::approval::{ApprovalAnswer, ApprovalRequest, Approver};
use crate::door::ToolCall;
use crate::factory::{
    FrontEnd, OpenError, OpenRecords, OpenSession, Origin, SessionFactory, SessionSpec,
};

/// What a call that needed a person says when its client could not be
/// asked.
const UNAVAILABLE: &str = "This call needs a person's approval, and this MCP client cannot be asked \
     (it declared no form elicitation, or did not answer): it was refused. Use a client that \
     supports elicitation, or pre-approve the tool in the agent's policy.";

/// One tools-only session behind an MCP server. Calls are dispatched one
/// at a time through its door (a call waiting for an approval holds the
/// next one back); each call's approval questions go to that call's
/// [`Approvals`].
pub struct SessionToolHost {
    agent: String,
    session_id: String,
    /// The tools the policy grants, as listed: fixed for the session (its
    /// policy and registry are), so listing never waits for a call.
    tools: Vec<HostedTool>,
    open: tokio::sync::Mutex<OpenSession>,
    slot: Arc<ApprovalSlot>,
}

/// The approvals of the call in progress, where the door's approver finds
/// them.
#[derive(Default)]
struct ApprovalSlot {
    current: Mutex<Option<Arc<dyn Approvals>>>,
    /// Set when a question of the current call could not be asked.
    unavailable: AtomicBool,
}

impl ApprovalSlot {
    fn current(&self) -> Option<Arc<dyn Approvals>> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set(&self, approvals: Option<Arc<dyn Approvals>>) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = approvals;
    }
}

/// Clears the slot when the call ends, however it ends (a dropped
/// future included): an approver asked outside a call denies.
struct SlotGuard<'a>(&'a ApprovalSlot);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.0.set(None);
    }
}

/// The door's approver for an MCP session: asks the client of the call in
/// progress; no call in progress, or a client that cannot be asked, is a
/// denial. An MCP approval is for this call only (never "for the
/// session"): the client is asked again next time.
struct BridgeApprover {
    slot: Arc<ApprovalSlot>,
}

#[async_trait::async_trait]
impl Approver for BridgeApprover {
    async fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let Some(approvals) = self.slot.current() else {
            return ApprovalAnswer::Deny;
        };
        let question = ApprovalQuestion {
            tool: request.tool.clone(),
            why: request.why.clone(),
            args_preview: request.args_preview.clone(),
        };
        match approvals.ask(question).await {
            ApprovalReply::Approve => ApprovalAnswer::AllowOnce,
            ApprovalReply::Deny => ApprovalAnswer::Deny,
            ApprovalReply::Unavailable => {
                self.slot.unavailable.store(true, Ordering::SeqCst);
                ApprovalAnswer::Deny
            }
        }
    }
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
        let slot = Arc::new(ApprovalSlot::default());
        let spec = SessionSpec {
            agent,
            user,
            origin,
            model: None,
            resume: None,
            tools_only: true,
        };
        let front = FrontEnd {
            approver: Arc::new(BridgeApprover { slot: slot.clone() }),
            records,
            warn,
        };
        let open = factory.open(spec, front)?;
        let tools = open
            .kernel
            .door
            .registry()
            .definitions_for(open.session.policy())
            .into_iter()
            .map(|t| HostedTool {
                name: t.name,
                description: t.description,
                input_schema: t.input_schema,
            })
            .collect();
        Ok(SessionToolHost {
            agent: open.agent.name.clone(),
            session_id: open.session.identity().id.clone(),
            tools,
            open: tokio::sync::Mutex::new(open),
            slot,
        })
    }

    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The session's id (its audit records carry it).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }
}

#[async_trait::async_trait]
impl ToolHost for SessionToolHost {
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
        let OpenSession {
            kernel, session, ..
        } = &mut *open;
        self.slot.unavailable.store(false, Ordering::SeqCst);
        self.slot.set(Some(approvals));
        let _clear = SlotGuard(&self.slot);
        let id = format!("mcp-{}", uuid::Uuid::new_v4().simple());
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
        // The durability barrier, as after a model's tool call: the
        // decision is stored before its result leaves, and the session's
        // taint and loop guard are saved for the next call.
        if let Err(err) = kernel.door.audit().flush() {
            session.stop("audit sink failed");
            return HostedResult {
                content: format!("the audit log failed ({err}); the session is stopped"),
                is_error: true,
            };
        }
        let saved = serde_json::to_string(session.state())
            .map_err(|e| e.to_string())
            .and_then(|json| {
                kernel
                    .store
                    .save_state(&session.identity().id, &json)
                    .map_err(|e| e.to_string())
            });
        if let Err(err) = saved {
            tracing::warn!("the MCP session's state was not saved: {err}");
        }
        let mut content = result.content;
        if self.slot.unavailable.load(Ordering::SeqCst) {
            content = format!("{UNAVAILABLE}\n{content}");
        }
        HostedResult {
            content,
            is_error: result.is_error,
        }
    }
}
