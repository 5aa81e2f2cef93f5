//! The rmcp [`ServerHandler`] over a [`ToolHost`]: discovery and
//! `initialize` (rmcp negotiates 2026-07-28 and 2025-11-25), `tools/list`
//! and `tools/call`, and how each call's approvals are asked.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, InputRequiredResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::sync::Semaphore;

use super::approvals::{ElicitApprovals, NoApprovals, input_requests, reply_of_responses};
use super::pending::{PendingCalls, RunningCall, Step};
use super::{ApprovalReply, Approvals, HostedResult, ServerLimits, ToolHost};

/// Bulwark's MCP server: every `tools/call` goes to the [`ToolHost`] (in
/// the binary, one session's door). Clones share the host, the bound on
/// requests in flight and the table of calls parked on an approval, so
/// one client's handler instances (one per Streamable HTTP session) find
/// each other's parked calls; give each client its own with
/// [`BulwarkMcpServer::new`] or [`BulwarkMcpServer::with_limits`].
#[derive(Clone)]
pub struct BulwarkMcpServer {
    host: Arc<dyn ToolHost>,
    limits: ServerLimits,
    pending: Arc<PendingCalls>,
    in_flight: Arc<Semaphore>,
}

/// How this request's approvals can be asked.
enum Asking {
    /// A server-initiated elicitation (a client on the `initialize`
    /// lifecycle that declared form elicitation).
    Elicit,
    /// An MRTR input request (2026-07-28 with form elicitation).
    Mrtr,
    /// Nobody: approvals are unavailable and such calls are refused.
    Nobody,
}

impl BulwarkMcpServer {
    /// A server over `host` with the default [`ServerLimits`].
    pub fn new(host: Arc<dyn ToolHost>) -> Self {
        Self::with_limits(host, ServerLimits::default())
    }

    pub fn with_limits(host: Arc<dyn ToolHost>, limits: ServerLimits) -> Self {
        Self {
            host,
            limits,
            pending: Arc::new(PendingCalls::new(
                limits.max_pending,
                limits.approval_timeout,
            )),
            in_flight: Arc::new(Semaphore::new(limits.max_in_flight)),
        }
    }

    pub fn limits(&self) -> ServerLimits {
        self.limits
    }

    /// The calls parked on an approval question now.
    pub fn pending(&self) -> &PendingCalls {
        &self.pending
    }

    fn asking(context: &RequestContext<RoleServer>) -> Asking {
        let form = context
            .client_capabilities()
            .and_then(|c| c.elicitation)
            // A capability naming neither mode means form (the spec's
            // backward-compatible reading, as rmcp does).
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        if !form {
            return Asking::Nobody;
        }
        let modern = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if modern { Asking::Mrtr } else { Asking::Elicit }
    }

    fn busy() -> ErrorData {
        ErrorData::new(
            ErrorCode(-32000),
            "the server is busy with other requests of this client; retry later",
            None,
        )
    }

    /// Runs (or resumes) an MRTR call until it finishes or asks; a question
    /// parks it and answers `input_required` with its handle.
    async fn drive(
        &self,
        mut call: RunningCall,
        tool: String,
        arguments: serde_json::Value,
    ) -> CallToolResponse {
        loop {
            match call.next().await {
                Step::Done(result) => return complete(result),
                Step::Asks {
                    call: running,
                    question,
                    answer,
                } => {
                    let requests = input_requests(&question);
                    match self
                        .pending
                        .park(tool.clone(), arguments.clone(), running, answer)
                    {
                        Ok(handle) => {
                            return InputRequiredResult::new(Some(requests), Some(handle)).into();
                        }
                        Err(full) => {
                            // Too many questions open: this one cannot be
                            // asked, so the call is refused.
                            let (running, answer) = full.into_parts();
                            let _ = answer.send(ApprovalReply::Unavailable);
                            call = running;
                        }
                    }
                }
            }
        }
    }

    /// A retry carrying `handle`: the parked call gets its answer and
    /// continues.
    async fn resume(
        &self,
        handle: &str,
        request: CallToolRequestParams,
        arguments: serde_json::Value,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(parked) = self.pending.take(handle) else {
            return Ok(complete(HostedResult {
                content: "this approval request is unknown or expired (approvals wait at most a few minutes); call the tool again".into(),
                is_error: true,
            }));
        };
        if parked.tool != request.name || parked.arguments != arguments {
            // The handle was spent on a different call: the parked one is
            // refused (its answer channel closes) and nothing else runs.
            return Err(ErrorData::invalid_params(
                "the retry does not repeat the call its requestState belongs to (tool and arguments must be the same)",
                None,
            ));
        }
        let reply = reply_of_responses(request.input_responses.as_ref());
        let _ = parked.answer.send(reply);
        Ok(self.drive(parked.call, parked.tool, parked.arguments).await)
    }
}

fn complete(result: HostedResult) -> CallToolResponse {
    let content = vec![ContentBlock::text(result.content)];
    if result.is_error {
        CallToolResult::error(content).into()
    } else {
        CallToolResult::success(content).into()
    }
}

fn schema_object(schema: serde_json::Value) -> JsonObject {
    match schema {
        serde_json::Value::Object(object) => object,
        // MCP requires an object schema; a tool without one takes an
        // object of anything.
        _ => {
            let mut object = JsonObject::new();
            object.insert("type".into(), "object".into());
            object
        }
    }
}

impl ServerHandler for BulwarkMcpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bulwark", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Bulwark's confined tools: every call goes through the agent's policy, is audited, \
                 and may need a person's approval (asked through elicitation; a client that \
                 cannot be asked gets such calls refused).",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Ok(_permit) = self.in_flight.try_acquire() else {
            return Err(Self::busy());
        };
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor.parse::<usize>().map_err(|_| {
                ErrorData::invalid_params("the cursor is not one this server gave", None)
            })?,
        };
        let tools = self.host.tools().await;
        let page = self.limits.page_size.max(1);
        let end = start.saturating_add(page).min(tools.len());
        let listed = tools
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .map(|t| {
                Tool::new(
                    t.name.clone(),
                    t.description.clone(),
                    Arc::new(schema_object(t.input_schema.clone())),
                )
            })
            .collect();
        let mut result = ListToolsResult::with_all_items(listed);
        if end < tools.len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Ok(_permit) = self.in_flight.try_acquire() else {
            return Err(Self::busy());
        };
        let arguments = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
        if let Some(handle) = request.request_state.clone() {
            return self.resume(&handle, request, arguments).await;
        }
        let tool = request.name.to_string();
        let approvals: Arc<dyn Approvals> = match Self::asking(&context) {
            Asking::Mrtr => {
                let call = RunningCall::start(
                    self.host.clone(),
                    tool.clone(),
                    arguments.clone(),
                    self.limits.approval_timeout,
                );
                return Ok(self.drive(call, tool, arguments).await);
            }
            Asking::Elicit => Arc::new(ElicitApprovals {
                peer: context.peer.clone(),
                timeout: self.limits.approval_timeout,
            }),
            Asking::Nobody => Arc::new(NoApprovals),
        };
        Ok(complete(self.host.call(&tool, arguments, approvals).await))
    }
}
