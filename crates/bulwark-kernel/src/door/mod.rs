//! The door: the only code path that executes a tool.
//!
//! Every call passes the same four stages, each a function that returns the
//! next stage's input or an [`Outcome`](record::Outcome) that ends the call:
//!
//! 1. **admit** ([`stages`]): the session is not stopped, the tool exists,
//!    the loop guard lets the call through;
//! 2. **authorize**: the tool's domain and operation are granted, the
//!    arguments are parsed into demands and every demand is covered (exec
//!    policy included), the price is within the per-call limit;
//! 3. **approve**: where taint is decided ([`taint`]): if the call reaches
//!    a `[taint]` sink, the labels it is judged by (the session's in
//!    `session` mode; in `value` mode those of untrusted text its arguments
//!    copy, or the session's after a scanner finding) meet the sink's rules:
//!    `deny` refuses the call, `approve` asks a human unless a session
//!    approval given under a covering label set exists, and every decision
//!    with untrusted content present is audited as a `taint` record. The
//!    policy's `[approval]` asks here too;
//! 4. **execute**: the cost is reserved, the tool runs with a context scoped
//!    to exactly the approved demands under the call timeout, the cost is
//!    settled, credential uses and sandbox warnings are recorded; a result
//!    carrying an untrusted label is scanned for prompt injection before it
//!    is wrapped in the session's boundary (findings audited, an advisory
//!    line appended).
//!
//! The session's state changes after the record, in the commit: taint
//! labels with the call that brought them, the untrusted text (for value
//! mode), scanner findings, hosts fetched before untrusted content named
//! them, session approvals with their label sets.
//!
//! The call's one `tool_call` record is written by
//! [`CallRecord::finish`](record::CallRecord::finish), which consumes the
//! ticket [`Door::dispatch`] opens first; a ticket dropped unfinished
//! writes it from `Drop`.

mod record;
mod stages;
mod taint;

use crate::approval::Approver;
use crate::registry::ToolRegistry;
use crate::session::Session;
use bulwark_audit::{AuditRecord, AuditSink, Decision, Identity, Reason};
use bulwark_policy::TaintLabel;
use record::CallRecord;
use serde_json::Value;
use std::sync::Arc;

/// Who a session's audit records are about: the one place the kernel turns
/// a session's identity into the audit vocabulary.
pub(crate) fn audit_identity(session: &Session) -> Identity {
    let id = &session.identity;
    Identity::new(&id.id, &id.agent, &id.user)
}

/// A tool call proposed by the model.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub input: &'a Value,
}

/// What the door decided and what goes back to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchResult {
    /// The tool result text as the model will see it (boundary-wrapped when
    /// it carries content from outside the conversation).
    pub content: String,
    pub is_error: bool,
    pub taint: Vec<TaintLabel>,
    pub decision: Decision,
    /// Reason class, as audited (`capability`, `path`, `loop_guard`, ...).
    pub reason: Reason,
    /// Set when the session must stop (breaker, audit failure).
    pub stop: Option<String>,
}

/// The one path from a model's tool call to an effect.
///
/// Guarantees, for every call through [`dispatch`](Self::dispatch):
/// - nothing runs that the session's effective policy does not grant: the
///   tool's domain and operation, and each concrete resource its arguments
///   name, are checked before the tool is called, and the tool receives
///   handles scoped to exactly those resources;
/// - a call that needs a human approval (policy or taint) runs only after
///   one, and only once unless approved for the session under a label set
///   that covers the call's; a call a `[taint]` rule denies never runs;
/// - a priced call runs only once its cost is reserved;
/// - exactly one `tool_call` audit record is written, after every record
///   the call depends on (arguments, approval, loop-guard and sandbox
///   warnings, credential uses); if a record cannot be written the result
///   is an error and the session stops.
pub struct Door {
    registry: ToolRegistry,
    audit: Arc<dyn AuditSink>,
    approver: Arc<dyn Approver>,
    record_arguments: bool,
}

impl Door {
    pub fn new(
        registry: ToolRegistry,
        audit: Arc<dyn AuditSink>,
        approver: Arc<dyn Approver>,
    ) -> Self {
        Self {
            registry,
            audit,
            approver,
            record_arguments: false,
        }
    }

    /// Keep each call's arguments in an `arguments` record written just
    /// before its `tool_call` record (config.toml `[audit]
    /// record_arguments`). Secret values are redacted first.
    pub fn with_recorded_arguments(mut self, on: bool) -> Self {
        self.record_arguments = on;
        self
    }

    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    pub fn audit(&self) -> &Arc<dyn AuditSink> {
        &self.audit
    }

    /// Runs one tool call through admit → authorize → approve → execute and
    /// writes its one `tool_call` record.
    ///
    /// Whatever the outcome, the session's taint only grows (by the labels
    /// of what the tool returned), a stop (loop-guard breaker, audit
    /// failure) is kept in the session so every later call is refused, and
    /// the record is written before this returns. If the returned future is
    /// dropped before it completes, the record is still written (as a
    /// `cancelled` failure).
    pub async fn dispatch(&self, session: &mut Session, call: ToolCall<'_>) -> DispatchResult {
        let ticket = self.open(session, call);
        let (outcome, ran) = self.stages(session, call, &ticket).await;
        let result = ticket.finish(outcome);
        stages::commit(session, call, ran, &result);
        result
    }

    /// Opens the call's record: who, which tool, the argument digest and,
    /// when kept, the redacted arguments.
    fn open(&self, session: &Session, call: ToolCall<'_>) -> CallRecord {
        let spec = self
            .registry
            .get(call.name)
            .map(|t| (t.spec().domain.to_string(), t.spec().operation.to_string()))
            .unwrap_or_default();
        let arguments = self.record_arguments.then(|| {
            let canonical = AuditRecord::canonical_args(call.input);
            let text = String::from_utf8_lossy(&canonical);
            session.resources.secrets.redact(&text)
        });
        CallRecord::open(
            self.audit.clone(),
            audit_identity(session),
            call.name,
            spec,
            AuditRecord::digest_args(call.input),
            arguments,
        )
    }
}
