//! The record of one call: the ticket [`dispatch`](super::Door::dispatch)
//! takes first and gives up last, and the [`Outcome`] every stage can end
//! with.
//!
//! [`CallRecord::finish`] consumes the ticket, so a second `tool_call`
//! record for one call does not compile; a ticket dropped unfinished (the
//! dispatch future cancelled mid-call) writes its record from `Drop`, so a
//! missing one cannot happen either.

use super::DispatchResult;
use crate::tool::ToolError;
use bulwark_audit::{Action, AuditRecord, AuditSink, Decision, Event, Identity, Reason};
use bulwark_policy::TaintLabel;
use std::sync::Arc;
use std::time::Instant;

/// The largest `arguments` record detail; longer arguments are cut (the
/// record's digest still covers all of them).
const MAX_RECORDED_ARGUMENTS: usize = 64 * 1024;

/// How one call ended, before it is recorded. Boxed: it is the error of
/// every stage, and travels through them by value.
#[derive(Debug)]
pub(super) struct Outcome(Box<Ending>);

#[derive(Debug)]
pub(super) struct Ending {
    pub(super) decision: Decision,
    pub(super) reason: Reason,
    /// What the model sees.
    pub(super) message: String,
    /// What the audit log keeps. Never argument values (paths, argv, URLs,
    /// contents): those stay in the session transcript, and the audit record
    /// carries their digest.
    pub(super) audit_detail: String,
    pub(super) taint: Vec<TaintLabel>,
    pub(super) stop: Option<String>,
}

impl Outcome {
    fn new(decision: Decision, reason: Reason, message: String, audit_detail: String) -> Self {
        Self(Box::new(Ending {
            decision,
            reason,
            message,
            audit_detail,
            taint: Vec::new(),
            stop: None,
        }))
    }

    pub(super) fn denied(reason: Reason, message: String, audit_detail: impl Into<String>) -> Self {
        Self::new(Decision::Denied, reason, message, audit_detail.into())
    }

    pub(super) fn failed(reason: Reason, message: String, audit_detail: impl Into<String>) -> Self {
        Self::new(Decision::Failed, reason, message, audit_detail.into())
    }

    pub(super) fn allowed(message: String, audit_detail: String, taint: Vec<TaintLabel>) -> Self {
        let mut outcome = Self::new(Decision::Allowed, Reason::Ok, message, audit_detail);
        outcome.0.taint = taint;
        outcome
    }

    pub(super) fn stopping(mut self, why: String) -> Self {
        self.0.stop = Some(why);
        self
    }

    /// A record the call depended on (`what`, e.g. "the approval") could
    /// not be written: the call fails and the session stops.
    pub(super) fn audit_failed(what: Side, err: &bulwark_audit::AuditError) -> Self {
        let message = format!("{} could not be recorded: {err}", what.0);
        Self::failed(Reason::Audit, message, what.1).stopping("audit sink failed".into())
    }

    /// Path and egress refusals are denials (refused before any effect);
    /// other tool errors are failures.
    pub(super) fn tool_error(err: ToolError) -> Self {
        let detail = error_detail(&err);
        let message = err.to_string();
        match err {
            ToolError::Path(_) => Self::denied(Reason::Path, message, detail),
            ToolError::Egress(_) => Self::denied(Reason::Egress, message, detail),
            ToolError::Credits(_) => Self::denied(Reason::Credits, message, detail),
            ToolError::SpawnRefused(_) => Self::denied(Reason::SpawnCheck, message, detail),
            ToolError::PinDrift(_) => Self::denied(Reason::PinDrift, message, detail),
            ToolError::Exfiltration { ref key, .. } => {
                let detail = format!("the request carried the value of secret {key}; refused");
                Self::denied(Reason::Exfiltration, message, detail)
            }
            ToolError::InvalidArgs(_) => Self::failed(Reason::InvalidArgs, message, detail),
            ToolError::NotGranted(_) => Self::failed(Reason::Scope, message, detail),
            ToolError::Sandbox(_) => Self::failed(Reason::Sandbox, message, detail),
            ToolError::Failed(_) => Self::failed(Reason::ToolError, message, detail),
        }
    }
}

/// A record a call depends on, for the failure when it cannot be written:
/// what the model is told could not be recorded, and the audit detail.
pub(super) type Side = (&'static str, &'static str);

/// The audit-safe description of a tool error: its class, never its text,
/// which may quote arguments.
fn error_detail(err: &ToolError) -> &'static str {
    match err {
        ToolError::InvalidArgs(_) => "the arguments did not fit the tool's schema",
        ToolError::Path(_) => "a path argument was refused (absolute, '..', or invalid characters)",
        ToolError::NotGranted(_) => "the tool asked for a resource the door had not approved",
        ToolError::Egress(_) => "the egress client refused the destination",
        ToolError::Exfiltration { .. } => "the request carried a secret value",
        ToolError::Sandbox(_) => "the process sandbox could not be set up; nothing ran",
        ToolError::Credits(_) => "the credits ledger refused; nothing moved",
        ToolError::SpawnRefused(_) => {
            "the child would hold more than its parent; it was not spawned"
        }
        ToolError::PinDrift(_) => {
            "the MCP server's tools changed since they were pinned; it is refused for the session"
        }
        ToolError::Failed(_) => "the tool ran and reported an error",
    }
}

pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// What every audit record of one call shares, and the obligation to write
/// its one `tool_call` record. Not `Clone`: there is one per dispatch.
pub(super) struct CallRecord {
    sink: Arc<dyn AuditSink>,
    identity: Identity,
    /// Canonical, redacted arguments when the door records them.
    arguments: Option<String>,
    pub(super) tool: String,
    pub(super) domain: String,
    operation: String,
    digest: String,
    started: Instant,
    /// Set by [`finish`](Self::finish); a ticket dropped without it was
    /// cancelled.
    finished: bool,
}

impl CallRecord {
    pub(super) fn open(
        sink: Arc<dyn AuditSink>,
        identity: Identity,
        tool: &str,
        (domain, operation): (String, String),
        digest: String,
        arguments: Option<String>,
    ) -> Self {
        Self {
            sink,
            identity,
            arguments,
            tool: tool.to_owned(),
            operation: if domain.is_empty() {
                String::new()
            } else {
                format!("{domain}:{operation}")
            },
            domain,
            digest,
            started: Instant::now(),
            finished: false,
        }
    }

    /// A record of this call (a side record, or the template of one).
    pub(super) fn record(
        &self,
        action: Action,
        decision: Decision,
        reason: Reason,
        detail: &str,
    ) -> AuditRecord {
        let elapsed = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        AuditRecord::new(
            self.identity.clone(),
            Event::new(action, decision, reason)
                .tool(self.tool.clone())
                .operation(self.operation.clone())
                .digest(self.digest.clone())
                .detail(truncate(detail, 500))
                .duration_us(elapsed),
        )
    }

    /// Writes a record the call depends on (loop-guard warning, approval,
    /// credential use, sandbox warning) before its `tool_call` record; if
    /// it cannot be written, the call ends with an audit failure.
    pub(super) fn side(
        &self,
        action: Action,
        decision: Decision,
        reason: Reason,
        detail: &str,
        what: Side,
    ) -> Result<(), Outcome> {
        self.sink
            .record(&self.record(action, decision, reason, detail))
            .map_err(|err| Outcome::audit_failed(what, &err))
    }

    /// Writes the `arguments` record (when kept) and the one `tool_call`
    /// record.
    fn write(&self, decision: Decision, reason: Reason, detail: &str) -> Result<(), String> {
        let arguments = self.arguments.as_ref().map(|text| AuditRecord {
            detail: truncate(text, MAX_RECORDED_ARGUMENTS),
            ..self.record(Action::Arguments, decision, Reason::Arguments, "")
        });
        match &arguments {
            Some(arguments) => self.sink.record(arguments),
            None => Ok(()),
        }
        .and_then(|()| {
            self.sink
                .record(&self.record(Action::ToolCall, decision, reason, detail))
        })
        .map_err(|err| err.to_string())
    }

    /// Writes the call's final record and shapes the result. If the audit
    /// sink fails, the result becomes an error and the session stops: an
    /// action that cannot be recorded must not look like it succeeded.
    pub(super) fn finish(mut self, outcome: Outcome) -> DispatchResult {
        self.finished = true;
        let written = self.write(
            outcome.0.decision,
            outcome.0.reason.clone(),
            &outcome.0.audit_detail,
        );
        let Ending {
            decision,
            reason,
            message,
            taint,
            mut stop,
            ..
        } = *outcome.0;
        let mut is_error = decision != Decision::Allowed;
        let mut content = match decision {
            Decision::Denied => format!("denied ({reason}): {message}"),
            Decision::Failed => format!("failed ({reason}): {message}"),
            _ => message,
        };
        if let Err(err) = written {
            content =
                format!("the audit log could not record this call ({err}); the session is stopped");
            is_error = true;
            stop = Some("audit sink failed".into());
        }
        DispatchResult {
            content,
            is_error,
            taint,
            decision,
            reason,
            stop,
        }
    }
}

impl Drop for CallRecord {
    /// A dispatch future dropped mid-call (its turn aborted while an
    /// approval was pending or the tool ran) still leaves its `tool_call`
    /// record. Whether the tool had an effect is unknown, so it is a
    /// failure, not a denial.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let detail =
            "the call was cancelled before it finished; whether the tool had an effect is unknown";
        if let Err(err) = self.write(Decision::Failed, Reason::Cancelled, detail) {
            tracing::error!(session = %self.identity.session, tool = %self.tool, "a cancelled call could not be recorded: {err}");
        }
    }
}
