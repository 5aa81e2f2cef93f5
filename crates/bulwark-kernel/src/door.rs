//! The door: the only code path that executes a tool.
//!
//! Pipeline, identical for every tool: breaker → lookup → loop guard →
//! capability check (domain, operation, then each concrete demand) → taint →
//! approval → execute with a context scoped to the approved demands → audit →
//! result wrapped in the session's content boundary. Every exit from the
//! pipeline writes exactly one `tool_call` audit record.

use crate::approval::{ApprovalAnswer, ApprovalRequest, Approver};
use crate::children::Caller;
use crate::registry::ToolRegistry;
use crate::scoped::{Access, ScopedFiles, ScopedHttp, ScopedMemory, ScopedProcess, SpawnRecorder};
use crate::scoped_credits::ScopedCredits;
use crate::session::Session;
use crate::tool::{ToolContext, ToolError, ToolOutput};
use bulwark_audit::{AuditRecord, AuditSink, Decision};
use bulwark_net::{CallContext, CredentialUse, UseOutcome};
use bulwark_policy::taint_needs_approval;
use bulwark_policy::{Demand, TaintLabel, Verdict};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

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
    pub reason: String,
    /// Set when the session must stop (breaker, audit failure).
    pub stop: Option<String>,
}

pub struct Door {
    registry: ToolRegistry,
    audit: Arc<dyn AuditSink>,
    approver: Arc<dyn Approver>,
    record_arguments: bool,
}

/// The largest `arguments` record detail; longer arguments are cut (the
/// record's digest still covers all of them).
const MAX_RECORDED_ARGUMENTS: usize = 64 * 1024;

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What every audit record of one call shares. Owns its strings so the
/// pipeline can mutate session state while it is alive.
struct CallAudit<'a> {
    /// Canonical, redacted arguments when the door records them.
    arguments: Option<String>,
    session: String,
    agent: String,
    user: String,
    tool: &'a str,
    domain: &'a str,
    operation: &'a str,
    digest: String,
    started: Instant,
}

impl CallAudit<'_> {
    fn record(&self, action: &str, decision: Decision, reason: &str, detail: &str) -> AuditRecord {
        AuditRecord {
            time_ms: now_ms(),
            session: self.session.clone(),
            agent: self.agent.clone(),
            user: self.user.clone(),
            action: action.to_string(),
            tool: self.tool.to_string(),
            operation: if self.domain.is_empty() {
                String::new()
            } else {
                format!("{}:{}", self.domain, self.operation)
            },
            args_digest: self.digest.clone(),
            decision,
            reason: reason.to_string(),
            detail: truncate(detail, 500),
            duration_us: self.started.elapsed().as_micros() as u64,
        }
    }
}

/// How one call ended, before it is audited.
struct Outcome {
    decision: Decision,
    reason: String,
    /// What the model sees.
    message: String,
    /// What the audit log keeps. Never argument values (paths, argv, URLs,
    /// contents): those stay in the session transcript, and the audit record
    /// carries their digest.
    audit_detail: String,
    taint: Vec<TaintLabel>,
    stop: Option<String>,
}

impl Outcome {
    fn denied(reason: &str, message: String, audit_detail: impl Into<String>) -> Self {
        Self {
            decision: Decision::Denied,
            reason: reason.into(),
            message,
            audit_detail: audit_detail.into(),
            taint: Vec::new(),
            stop: None,
        }
    }
    fn failed(reason: &str, message: String, audit_detail: impl Into<String>) -> Self {
        Self {
            decision: Decision::Failed,
            ..Self::denied(reason, message, audit_detail)
        }
    }
    fn stopping(mut self, why: String) -> Self {
        self.stop = Some(why);
        self
    }
}

/// The kind of a demand (`file_read`, `net_connect`, ...) without its value.
fn demand_kind(demand: &Demand) -> String {
    demand
        .to_string()
        .split_whitespace()
        .next()
        .unwrap_or("resource")
        .to_string()
}

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
        ToolError::Failed(_) => "the tool ran and reported an error",
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
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

    /// Writes the final record of a call and shapes the result. If the audit
    /// sink fails, the result becomes an error and the session stops: an
    /// action that cannot be recorded must not look like it succeeded.
    fn finish(&self, audit: &CallAudit<'_>, outcome: Outcome) -> DispatchResult {
        let arguments = audit.arguments.as_ref().map(|text| AuditRecord {
            detail: truncate(text, MAX_RECORDED_ARGUMENTS),
            ..audit.record("arguments", outcome.decision, "arguments", "")
        });
        let record = audit.record(
            "tool_call",
            outcome.decision,
            &outcome.reason,
            &outcome.audit_detail,
        );
        let Outcome {
            decision,
            reason,
            message,
            taint,
            mut stop,
            ..
        } = outcome;
        let mut is_error = decision != Decision::Allowed;
        let mut content = match decision {
            Decision::Denied => format!("denied ({reason}): {message}"),
            Decision::Failed => format!("failed ({reason}): {message}"),
            _ => message,
        };
        let written = match &arguments {
            Some(arguments) => self.audit.record(arguments),
            None => Ok(()),
        }
        .and_then(|()| self.audit.record(&record));
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

    /// Path and egress refusals are denials (refused before any effect);
    /// other tool errors are failures.
    fn tool_error(err: ToolError) -> Outcome {
        let detail = error_detail(&err);
        match err {
            ToolError::Path(_) => Outcome::denied("path", err.to_string(), detail),
            ToolError::Egress(_) => Outcome::denied("egress", err.to_string(), detail),
            ToolError::Credits(_) => Outcome::denied("credits", err.to_string(), detail),
            ToolError::SpawnRefused(_) => Outcome::denied("spawn_check", err.to_string(), detail),
            ToolError::Exfiltration { ref key, .. } => {
                let detail = format!("the request carried the value of secret {key}; refused");
                Outcome::denied("exfiltration", err.to_string(), detail)
            }
            other => Outcome::failed(other.reason(), other.to_string(), detail),
        }
    }

    pub async fn dispatch(&self, session: &mut Session, call: ToolCall<'_>) -> DispatchResult {
        let tool = self.registry.get(call.name).cloned();
        let (domain, operation) = tool
            .as_ref()
            .map(|t| (t.spec().domain, t.spec().operation))
            .unwrap_or(("", ""));
        let arguments = self.record_arguments.then(|| {
            let canonical = AuditRecord::canonical_args(call.input);
            let text = String::from_utf8_lossy(&canonical);
            session.resources.secrets.redact(&text)
        });
        let audit = CallAudit {
            arguments,
            session: session.identity.id.clone(),
            agent: session.identity.agent.clone(),
            user: session.identity.user.clone(),
            tool: call.name,
            domain,
            operation,
            digest: AuditRecord::digest_args(call.input),
            started: Instant::now(),
        };
        if let Some(why) = session.state.stopped.clone() {
            let message = format!("the session was stopped: {why}");
            return self.finish(
                &audit,
                Outcome::denied("stopped", message.clone(), message).stopping(why),
            );
        }
        let Some(tool) = tool else {
            // Only the tools this session holds: naming the others would tell
            // a model what exists beyond its grants.
            let names: Vec<&str> = self
                .registry
                .iter()
                .map(|t| t.spec())
                .filter(|spec| {
                    session
                        .policy
                        .check_tool(spec.domain, spec.operation)
                        .is_ok()
                })
                .map(|spec| spec.name)
                .collect();
            let message = format!(
                "there is no tool named `{}`; your tools: {}",
                call.name,
                names.join(", ")
            );
            return self.finish(
                &audit,
                Outcome::denied("unknown_tool", message, "no tool has this name"),
            );
        };

        let mut warning = None;
        match session.state.guard.check_call(call.name, call.input) {
            Verdict::Allow => {}
            Verdict::Warn(msg) => warning = Some(msg),
            Verdict::Block(msg) => {
                return self.finish(&audit, Outcome::denied("loop_guard", msg.clone(), msg));
            }
            Verdict::Break(msg) => {
                session.state.stopped = Some(msg.clone());
                let outcome = Outcome::denied("loop_guard", msg.clone(), msg.clone());
                return self.finish(&audit, outcome.stopping(msg));
            }
        }

        // Capability check: the tool's domain and operation, then every
        // concrete resource the arguments name.
        if let Some(msg) = &warning
            && let Err(err) =
                self.audit
                    .record(&audit.record("loop_guard", Decision::Warned, "loop_guard", msg))
        {
            // A warning the log cannot hold is an audit failure like any other.
            let message = format!("a loop-guard warning could not be recorded: {err}");
            let outcome = Outcome::failed("audit", message, "loop_guard record failed");
            return self.finish(&audit, outcome.stopping("audit sink failed".into()));
        }
        if let Err(denial) = session.policy.check_tool(domain, operation) {
            // Domain and operation names are not arguments: safe to keep.
            let outcome = Outcome::denied(
                denial.reason.as_str(),
                denial.message.clone(),
                denial.message,
            );
            return self.finish(&audit, outcome);
        }
        let parsed = match tool.parse(call.input) {
            Ok(parsed) => parsed,
            Err(err) => return self.finish(&audit, Self::tool_error(err)),
        };
        let demands = parsed.demands().to_vec();
        for demand in &demands {
            if let Err(denial) = session.policy.check_demand(demand) {
                let detail = format!("no capability covers this {} request", demand_kind(demand));
                return self.finish(
                    &audit,
                    Outcome::denied(denial.reason.as_str(), denial.message, detail),
                );
            }
            if let Demand::ShellExec(argv) = demand
                && let Err(denial) = session.resources.exec_policy.check(argv)
            {
                // The reason class, never the argv (arguments stay out of
                // the audit log).
                let detail = format!(
                    "the exec policy ({} mode) refused the command: {:?}",
                    session.resources.exec_policy.mode(),
                    denial.reason
                );
                return self.finish(
                    &audit,
                    Outcome::denied("exec_policy", denial.message, detail),
                );
            }
        }

        // econ_spend: a priced tool above the per-call limit is refused
        // before anyone is asked to approve it.
        if let Some(credits) = &session.credits {
            let price = credits.prices.tool_cost(domain);
            if !session.policy.call_limits.spend_allowed(price) {
                let message = format!(
                    "the tool costs {price} credits and agent {} may reserve at most {} per call (econ_spend)",
                    session.identity.agent,
                    session.policy.call_limits.max_spend.unwrap_or(0)
                );
                return self.finish(
                    &audit,
                    Outcome::denied("capability", message.clone(), message),
                );
            }
        }

        // Taint and approval.
        let approval_key = format!("{domain}:{operation}");
        let taint_why = taint_needs_approval(&session.state.taint, domain, operation);
        let policy_why = session
            .policy
            .needs_approval(domain, operation)
            .then(|| "the agent's policy requires approval for this tool".to_string());
        let mut approved_for_session = false;
        let mut human_approved = session.state.approved_for_session.contains(&approval_key);
        if let Some(why) = taint_why.or(policy_why)
            && !session.state.approved_for_session.contains(&approval_key)
        {
            let request = ApprovalRequest {
                session: session.identity.id.clone(),
                agent: session.identity.agent.clone(),
                user: session.identity.user.clone(),
                tool: call.name.to_string(),
                domain: domain.to_string(),
                operation: operation.to_string(),
                args_preview: truncate(&call.input.to_string(), 400),
                why: why.clone(),
            };
            let answer = self.approver.ask(&request).await;
            let (decision, detail) = match answer {
                ApprovalAnswer::AllowOnce => (Decision::Approved, "allowed once"),
                ApprovalAnswer::AllowSession => (Decision::Approved, "allowed for the session"),
                ApprovalAnswer::Deny => (Decision::Denied, "denied by approver"),
            };
            if let Err(err) = self
                .audit
                .record(&audit.record("approval", decision, "approval", detail))
            {
                let message = format!("the approval could not be recorded: {err}");
                let outcome = Outcome::failed("audit", message, "approval record failed");
                return self.finish(&audit, outcome.stopping("audit sink failed".into()));
            }
            match answer {
                ApprovalAnswer::Deny => {
                    let message = format!("{why}, and it was not approved");
                    return self.finish(
                        &audit,
                        Outcome::denied("approval", message.clone(), message),
                    );
                }
                ApprovalAnswer::AllowSession => {
                    approved_for_session = true;
                    human_approved = true;
                }
                ApprovalAnswer::AllowOnce => human_approved = true,
            }
        }

        // Execute with a context that holds only what was approved.
        let credentials_used = Arc::new(Mutex::new(Vec::new()));
        let sandbox_warnings = Arc::new(Mutex::new(Vec::new()));
        // A tool with a cost reserves it first: no credits, no call.
        let cost = match &session.credits {
            Some(credits) => match credits.reserve("tool", credits.prices.tool_cost(domain)) {
                Ok(reserved) => reserved,
                Err(err) => {
                    let message = format!("the tool's cost could not be reserved: {err}");
                    let outcome = if err.is_denial() {
                        Outcome::denied(
                            "credits",
                            message,
                            "the credits ledger refused the tool's cost",
                        )
                    } else {
                        Outcome::failed("credits", message, "the credits ledger failed")
                    };
                    return self.finish(&audit, outcome);
                }
            },
            None => None,
        };
        let ctx = self.scope(
            session,
            call.id,
            &audit,
            &demands,
            CallContext {
                tool: domain.to_string(),
                human_approved,
            },
            credentials_used.clone(),
            sandbox_warnings.clone(),
        );
        let limit = session.resources.limits.call_timeout;
        let outcome = match tokio::time::timeout(limit, parsed.call(&ctx)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ToolError::Failed(format!(
                "the tool did not finish within {} s",
                limit.as_secs()
            ))),
        };
        if let (Some(reserved), Some(credits)) = (cost, &session.credits) {
            // The tool ran (or tried to): its cost is charged either way.
            let amount = reserved_amount(&reserved);
            if let Err(err) = credits.settle(reserved, amount) {
                tracing::warn!(session = %session.identity.id, "settling a tool cost failed: {err}");
            }
        }
        if let Some(failed) = self.audit_credential_uses(&audit, &credentials_used) {
            return failed;
        }
        if let Some(failed) = self.audit_sandbox_warnings(&audit, &sandbox_warnings) {
            return failed;
        }
        let result = match outcome {
            Ok(ToolOutput {
                content,
                taint,
                audit_note,
            }) => {
                let mut text = if taint.is_empty() {
                    content
                } else {
                    session.state.boundary.wrap(call.name, &taint, &content)
                };
                if let Some(msg) = &warning {
                    text.push_str(&format!("\n[loop guard warning: {msg}]"));
                }
                let outcome = Outcome {
                    decision: Decision::Allowed,
                    reason: "ok".into(),
                    message: text,
                    audit_detail: audit_note,
                    taint,
                    stop: None,
                };
                self.finish(&audit, outcome)
            }
            Err(err) => self.finish(&audit, Self::tool_error(err)),
        };
        if approved_for_session {
            session.state.approved_for_session.insert(approval_key);
        }
        session
            .state
            .guard
            .record_outcome(call.name, call.input, &result.content);
        session.state.taint.extend(result.taint.iter().copied());
        if let Some(stop) = &result.stop {
            session.state.stopped = Some(stop.clone());
        }
        result
    }

    /// One audit record per credential use of the call, by grant, key and
    /// host names. If one cannot be written, the call's result is withheld
    /// and the session stops.
    fn audit_credential_uses(
        &self,
        audit: &CallAudit<'_>,
        used: &Mutex<Vec<CredentialUse>>,
    ) -> Option<DispatchResult> {
        let uses = used.lock().map(|u| u.clone()).unwrap_or_default();
        for u in uses {
            let grant = u.grant.as_deref().unwrap_or("(legacy mode, no grant)");
            let (decision, what) = match u.outcome {
                UseOutcome::Injected => (Decision::Allowed, "injected"),
                UseOutcome::Substituted => (Decision::Allowed, "substituted for a placeholder"),
                UseOutcome::SkippedNeedsApproval => (
                    Decision::Denied,
                    "not used: the grant requires a human approval",
                ),
            };
            let detail = format!(
                "grant {grant}: keys {} to {}: {what}",
                u.keys.join(","),
                u.host
            );
            if let Err(err) =
                self.audit
                    .record(&audit.record("credential", decision, "credential", &detail))
            {
                let message = format!("a credential use could not be recorded: {err}");
                let outcome = Outcome::failed("audit", message, "credential record failed");
                return Some(self.finish(audit, outcome.stopping("audit sink failed".into())));
            }
        }
        None
    }

    /// One `sandbox` record per warning of a permissive-mode run (which
    /// confinement layer was missing), or the refusal line of a strict run.
    fn audit_sandbox_warnings(
        &self,
        audit: &CallAudit<'_>,
        warnings: &Mutex<Vec<String>>,
    ) -> Option<DispatchResult> {
        let lines = warnings.lock().map(|w| w.clone()).unwrap_or_default();
        for line in lines {
            if let Err(err) =
                self.audit
                    .record(&audit.record("sandbox", Decision::Warned, "sandbox", &line))
            {
                let message = format!("a sandbox warning could not be recorded: {err}");
                let outcome = Outcome::failed("audit", message, "sandbox record failed");
                return Some(self.finish(audit, outcome.stopping("audit sink failed".into())));
            }
        }
        None
    }

    /// Builds the per-call context: one narrowed handle per kind of demand.
    #[allow(clippy::too_many_arguments)]
    fn scope(
        &self,
        session: &Session,
        call_id: &str,
        audit: &CallAudit<'_>,
        demands: &[Demand],
        call: CallContext,
        credentials_used: Arc<Mutex<Vec<CredentialUse>>>,
        sandbox_warnings: Arc<Mutex<Vec<String>>>,
    ) -> ToolContext {
        let res = &session.resources;
        let mut files = Vec::new();
        let mut memory = Vec::new();
        let mut argv = None;
        let mut hosts = Vec::new();
        let credits = matches!(audit.domain, "credits" | "agents").then(|| ScopedCredits {
            caller: Caller {
                identity: session.identity.clone(),
                policy: session.policy.clone(),
                credits: session.credits.clone(),
            },
            host: session.children.clone(),
            approved: demands.to_vec(),
            call_id: call_id.to_owned(),
        });
        for demand in demands {
            match demand {
                Demand::FileRead(p) => files.push((Access::Read, p.clone())),
                Demand::FileWrite(p) => files.push((Access::Write, p.clone())),
                Demand::MemoryRead(s) => memory.push((Access::Read, s.clone())),
                Demand::MemoryWrite(s) => memory.push((Access::Write, s.clone())),
                Demand::ShellExec(a) => argv = Some(a.clone()),
                Demand::NetConnect { host, port } => hosts.push((host.clone(), *port)),
                _ => {}
            }
        }
        ToolContext {
            files: (!files.is_empty()).then(|| {
                ScopedFiles::new(
                    res.workspace.clone(),
                    files,
                    session.policy.clone(),
                    res.limits.max_read_bytes,
                    res.limits.max_write_bytes,
                )
            }),
            memory: (!memory.is_empty()).then(|| ScopedMemory {
                agent: res.memory_agent.clone(),
                user: res.memory_user.clone(),
                granted: memory,
                max_bytes: res.limits.max_memory_bytes,
            }),
            process: argv.map(|argv| ScopedProcess {
                argv,
                cwd: res.process_cwd.clone(),
                env: res.process_env.clone(),
                timeout: res.limits.shell_timeout,
                max_output: res.limits.shell_max_output,
                sandbox: res.sandbox.clone(),
                warnings: sandbox_warnings,
                secret_env: res.process_secrets.clone(),
                secrets: res.secrets.clone(),
                used: credentials_used.clone(),
                spawn_log: SpawnRecorder {
                    audit: self.audit.clone(),
                    template: audit.record("spawn", Decision::Allowed, "spawn", ""),
                },
            }),
            http: match (&res.http, hosts.is_empty()) {
                (Some(http), false) => Some(ScopedHttp {
                    http: http.clone(),
                    hosts,
                    call,
                    used: credentials_used,
                }),
                _ => None,
            },
            credits,
        }
    }
}

fn reserved_amount(reserved: &crate::credits::Reserved) -> u64 {
    reserved.amount()
}
