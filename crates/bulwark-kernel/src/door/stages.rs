//! The four stages of a call. Each returns the next stage's input or the
//! [`Outcome`] that ends the call; none writes the `tool_call` record.
//!
//! Session state is read here and changed in two places only: the loop
//! guard's breaker in [`Door::admit`] and [`commit`] after the record.

use super::record::{CallRecord, Outcome, truncate};
use super::{DispatchResult, Door, ToolCall, taint};
use crate::approval::{ApprovalAnswer, ApprovalRequest};
use crate::children::Caller;
use crate::mcp_hub::ScopedMcp;
use crate::scoped::{Access, ScopedFiles, ScopedHttp, ScopedMemory, ScopedProcess, SpawnRecorder};
use crate::scoped_credits::ScopedCredits;
use crate::session::Session;
use crate::tool::{ParsedCall, Tool, ToolContext, ToolError, ToolOutput};
use bulwark_audit::{Action, Decision, Reason};
use bulwark_net::{CallContext, CredentialUse, UseOutcome};
use bulwark_policy::injection::FindingKind;
use bulwark_policy::mcp::mcp_server_of;
use bulwark_policy::{Demand, SinkRule, TaintLabel, Verdict};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// Admitted: the tool exists and the loop guard let the call through.
pub(super) struct Admitted {
    tool: Arc<dyn Tool>,
    /// A loop-guard warning, already recorded, appended to the result.
    warning: Option<String>,
}

/// Authorized: the arguments parsed (once) and every demand of the call
/// is granted. `parsed` is what the tool will run: nothing re-reads the
/// raw arguments after this stage.
pub(super) struct Authorized<'t> {
    admitted: Admitted,
    demands: Vec<Demand>,
    parsed: Box<dyn ParsedCall + 't>,
}

/// Approved: a human approved the call where one had to.
pub(super) struct Approved<'t> {
    authorized: Authorized<'t>,
    human_approved: bool,
    /// The `domain:operation` a human approved for the rest of the
    /// session, and the labels it was approved under.
    for_session: Option<(String, BTreeSet<TaintLabel>)>,
    /// Hosts a fetch makes known to the session if it runs.
    fetched: Vec<String>,
}

/// The tool was called: what [`commit`] does for calls that reached it.
pub(super) struct Ran {
    for_session: Option<(String, BTreeSet<TaintLabel>)>,
    fetched: Vec<String>,
    /// The result's text as the tool returned it (before the boundary),
    /// its labels, and the scanner's findings in it.
    output: Option<(String, Vec<TaintLabel>, BTreeSet<FindingKind>)>,
}

impl Door {
    /// The four stages in order; the first `Err` ends the call.
    pub(super) async fn stages(
        &self,
        session: &mut Session,
        call: ToolCall<'_>,
        ticket: &CallRecord,
    ) -> (Outcome, Option<Ran>) {
        let admitted = match self.admit(session, call, ticket) {
            Ok(next) => next,
            Err(outcome) => return (outcome, None),
        };
        // The tool outlives its parsed call, which borrows it.
        let tool = admitted.tool.clone();
        let authorized = match self.authorize(session, call, ticket, admitted, &*tool) {
            Ok(next) => next,
            Err(outcome) => return (outcome, None),
        };
        let approved = match self.approve(session, call, ticket, authorized).await {
            Ok(next) => next,
            Err(outcome) => return (outcome, None),
        };
        self.execute(session, call, ticket, approved).await
    }

    /// Stopped session, unknown tool, loop guard.
    fn admit(
        &self,
        session: &mut Session,
        call: ToolCall<'_>,
        ticket: &CallRecord,
    ) -> Result<Admitted, Outcome> {
        if let Some(why) = session.state().stopped.clone() {
            let message = format!("the session was stopped: {why}");
            return Err(Outcome::denied(Reason::Stopped, message.clone(), message).stopping(why));
        }
        let Some(tool) = self.registry.get(call.name).cloned() else {
            // Only the tools this session holds: naming the others would tell
            // a model what exists beyond its grants.
            let names: Vec<&str> = self
                .registry
                .iter()
                .map(|t| t.spec())
                .filter(|spec| {
                    session
                        .policy
                        .check_tool(&spec.domain, &spec.operation)
                        .is_ok()
                })
                .map(|spec| spec.name.as_ref())
                .collect();
            let message = format!(
                "there is no tool named `{}`; your tools: {}",
                call.name,
                names.join(", ")
            );
            return Err(Outcome::denied(
                Reason::UnknownTool,
                message,
                "no tool has this name",
            ));
        };
        let warning = match session.guard_mut().check_call(call.name, call.input) {
            Verdict::Allow => None,
            Verdict::Warn(msg) => Some(msg),
            Verdict::Block(msg) => {
                return Err(Outcome::denied(Reason::LoopGuard, msg.clone(), msg));
            }
            Verdict::Break(msg) => {
                session.stop(msg.clone());
                let outcome = Outcome::denied(Reason::LoopGuard, msg.clone(), msg.clone());
                return Err(outcome.stopping(msg));
            }
        };
        if let Some(msg) = &warning {
            // A warning the log cannot hold is an audit failure like any other.
            ticket.side(
                Action::LoopGuard,
                Decision::Warned,
                Reason::LoopGuard,
                msg,
                ("a loop-guard warning", "loop_guard record failed"),
            )?;
        }
        Ok(Admitted { tool, warning })
    }

    /// The tool's domain and operation, then every concrete resource the
    /// arguments name, then the per-call spending limit.
    fn authorize<'t>(
        &self,
        session: &Session,
        call: ToolCall<'_>,
        ticket: &CallRecord,
        admitted: Admitted,
        tool: &'t dyn Tool,
    ) -> Result<Authorized<'t>, Outcome> {
        let spec = admitted.tool.spec();
        let (domain, operation) = (spec.domain.as_ref(), spec.operation.as_ref());
        if let Err(denial) = session.policy.check_tool(domain, operation) {
            // Domain and operation names are not arguments: safe to keep.
            return Err(Outcome::denied(
                deny_reason(denial.reason),
                denial.message.clone(),
                denial.message,
            ));
        }
        // Parse the arguments once into the call and its demands: the one
        // place the door reads the raw arguments.
        let parsed = tool.parse(call.input).map_err(Outcome::tool_error)?;
        let demands = parsed.demands().to_vec();
        for demand in &demands {
            if let Err(denial) = session.policy.check_demand(demand) {
                let detail = format!("no capability covers this {} request", demand.kind());
                return Err(Outcome::denied(
                    deny_reason(denial.reason),
                    denial.message,
                    detail,
                ));
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
                return Err(Outcome::denied(Reason::ExecPolicy, denial.message, detail));
            }
        }
        // econ_spend: a priced tool above the per-call limit is refused
        // before anyone is asked to approve it.
        if let Some(credits) = &session.credits {
            let price = credits.prices.tool_cost(&ticket.domain);
            if !session.policy.call_limits.spend_allowed(price) {
                let message = format!(
                    "the tool costs {price} credits and agent {} may reserve at most {} per call (econ_spend)",
                    session.identity.agent,
                    session.policy.call_limits.max_spend.unwrap_or(0)
                );
                return Err(Outcome::denied(
                    Reason::Capability,
                    message.clone(),
                    message,
                ));
            }
        }
        Ok(Authorized {
            admitted,
            demands,
            parsed,
        })
    }

    /// Taint and policy approval. A `[taint]` rule that denies ends the
    /// call here; one that asks, or the policy's `[approval]`, asks the
    /// approver unless a person already approved this `domain:operation`
    /// for the session under labels that cover the call's.
    async fn approve<'t>(
        &self,
        session: &Session,
        call: ToolCall<'_>,
        ticket: &CallRecord,
        authorized: Authorized<'t>,
    ) -> Result<Approved<'t>, Outcome> {
        let spec = authorized.admitted.tool.spec();
        let (domain, operation) = (spec.domain.as_ref(), spec.operation.as_ref());
        let approval_key = format!("{domain}:{operation}");
        let check = taint::check(
            session,
            (domain, operation),
            call.input,
            &authorized.demands,
            authorized.parsed.sends_body(),
        );
        let fetched = taint::fetched_hosts(session, (domain, operation), &authorized.demands);
        let counted = check
            .as_ref()
            .map(|c| c.counted.clone())
            .unwrap_or_default();
        let covered = session.state().approval_covers(&approval_key, &counted);
        if let Some(c) = &check {
            c.record(ticket, covered)?;
            if c.rule == SinkRule::Deny {
                return Err(Outcome::denied(Reason::Taint, c.denial(), c.detail()));
            }
        }
        let taint_why = check
            .as_ref()
            .filter(|c| c.rule == SinkRule::Approve)
            .map(taint::TaintCheck::why);
        let policy_why = session
            .policy
            .needs_approval(domain, operation)
            .then(|| "the agent's policy requires approval for this tool".to_string());
        let why = match (taint_why, policy_why) {
            (Some(t), Some(p)) => Some(format!("{t}; {p}")),
            (t, p) => t.or(p),
        };
        let Some(why) = why.filter(|_| !covered) else {
            return Ok(Approved {
                authorized,
                human_approved: covered,
                for_session: None,
                fetched,
            });
        };
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
        ticket.side(
            Action::Approval,
            decision,
            Reason::Approval,
            detail,
            ("the approval", "approval record failed"),
        )?;
        let for_session = match answer {
            ApprovalAnswer::Deny => {
                let message = format!("{why}, and it was not approved");
                return Err(Outcome::denied(Reason::Approval, message.clone(), message));
            }
            ApprovalAnswer::AllowSession => Some((approval_key, counted)),
            ApprovalAnswer::AllowOnce => None,
        };
        Ok(Approved {
            authorized,
            human_approved: true,
            for_session,
            fetched,
        })
    }

    /// Reserves the cost, runs the tool with a context that holds only what
    /// was approved, settles the cost, records credential uses and sandbox
    /// warnings.
    async fn execute(
        &self,
        session: &Session,
        call: ToolCall<'_>,
        ticket: &CallRecord,
        approved: Approved<'_>,
    ) -> (Outcome, Option<Ran>) {
        let Approved {
            authorized:
                Authorized {
                    admitted,
                    demands,
                    parsed,
                },
            human_approved,
            for_session,
            fetched,
        } = approved;
        // A tool with a cost reserves it first: no credits, no call.
        let cost = match &session.credits {
            Some(credits) => {
                match credits.reserve("tool", credits.prices.tool_cost(&ticket.domain)) {
                    Ok(reserved) => reserved,
                    Err(err) => {
                        let message = format!("the tool's cost could not be reserved: {err}");
                        let outcome = if err.is_denial() {
                            Outcome::denied(
                                Reason::Credits,
                                message,
                                "the credits ledger refused the tool's cost",
                            )
                        } else {
                            Outcome::failed(Reason::Credits, message, "the credits ledger failed")
                        };
                        return (outcome, None);
                    }
                }
            }
            None => None,
        };
        let credentials_used = Arc::new(Mutex::new(Vec::new()));
        let sandbox_warnings = Arc::new(Mutex::new(Vec::new()));
        let ctx = self.scope(
            session,
            call.id,
            ticket,
            (&demands, &admitted.tool.spec().operation),
            CallContext {
                tool: ticket.domain.to_string(),
                human_approved,
            },
            credentials_used.clone(),
            sandbox_warnings.clone(),
        );
        // Call the tool: the one place it runs.
        let limit = session.resources.limits.call_timeout;
        let result = match tokio::time::timeout(limit, parsed.call(&ctx)).await {
            Ok(result) => result,
            Err(_) => Err(ToolError::Failed(format!(
                "the tool did not finish within {} s",
                limit.as_secs()
            ))),
        };
        if let (Some(reserved), Some(credits)) = (cost, &session.credits) {
            // The tool ran (or tried to): its cost is charged either way.
            let amount = reserved.amount();
            if let Err(err) = credits.settle(reserved, amount) {
                tracing::warn!(session = %session.identity.id, "settling a tool cost failed: {err}");
            }
        }
        if let Err(outcome) = record_credential_uses(ticket, &credentials_used)
            .and_then(|()| record_sandbox_warnings(ticket, &sandbox_warnings))
        {
            // The result is withheld; the session stops.
            return (outcome, None);
        }
        let mut output = None;
        let outcome = match result {
            Ok(ToolOutput {
                content,
                taint,
                audit_note,
                findings,
            }) => {
                // Scanned as the tool returned it: the boundary's tags are
                // the runtime's, not the content's.
                let scanned = taint::scan_output(&ticket.domain, &content, &taint, &findings);
                for (kind, offset) in &scanned.findings {
                    let detail = format!(
                        "kind={} offset={offset} source={}",
                        taint::kind_name(*kind),
                        call.id
                    );
                    if let Err(outcome) = ticket.side(
                        Action::InjectionScan,
                        Decision::Warned,
                        Reason::Injection,
                        &detail,
                        ("an injection-scan finding", "injection_scan record failed"),
                    ) {
                        return (outcome, None);
                    }
                }
                let mut text = if taint.is_empty() {
                    content.clone()
                } else {
                    session.state().boundary.wrap(call.name, &taint, &content)
                };
                if let Some(advisory) = scanned.advisory() {
                    text.push('\n');
                    text.push_str(&advisory);
                }
                if let Some(msg) = &admitted.warning {
                    text.push_str(&format!("\n[loop guard warning: {msg}]"));
                }
                if !taint.is_empty() {
                    output = Some((content, taint.clone(), scanned.kinds()));
                }
                Outcome::allowed(text, audit_note, taint)
            }
            Err(err) => Outcome::tool_error(err),
        };
        let ran = Ran {
            for_session,
            fetched,
            output,
        };
        (outcome, Some(ran))
    }

    /// Builds the per-call context: one narrowed handle per kind of demand.
    #[allow(clippy::too_many_arguments)]
    fn scope(
        &self,
        session: &Session,
        call_id: &str,
        ticket: &CallRecord,
        (demands, operation): (&[Demand], &str),
        call: CallContext,
        credentials_used: Arc<Mutex<Vec<CredentialUse>>>,
        sandbox_warnings: Arc<Mutex<Vec<String>>>,
    ) -> ToolContext {
        let res = &session.resources;
        let mut files = Vec::new();
        let mut memory = Vec::new();
        let mut argv = None;
        let mut hosts = Vec::new();
        let credits =
            matches!(ticket.domain.as_str(), "credits" | "agents").then(|| ScopedCredits {
                caller: Caller {
                    identity: session.identity.clone(),
                    policy: session.policy.clone(),
                    credits: session.credits.clone(),
                    taint: session.state().taint.clone(),
                },
                host: session.children.clone(),
                approved: demands.to_vec(),
                call_id: call_id.to_owned(),
            });
        let recorder = || SpawnRecorder {
            audit: self.audit.clone(),
            template: ticket.record(Action::Spawn, Decision::Allowed, Reason::Spawn, ""),
        };
        // A call to `mcp:<server>` (its domain and operation approved in
        // authorize) gets that server, for that one tool.
        let mcp = mcp_server_of(&ticket.domain)
            .and_then(|server| self.registry.mcp_server(server))
            .map(|slot| ScopedMcp {
                slot: slot.clone(),
                tool: operation.to_string(),
                recorder: recorder(),
                secrets: res.secrets.clone(),
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
                spawn_log: recorder(),
                egress: self.registry.shell_egress().cloned(),
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
            mcp,
            taint: Some(crate::tool::CallTaint {
                labels: session.state().taint.clone(),
                source: call_id.to_owned(),
                provenance: session.provenance.clone(),
                workspace: session.policy.taint.workspace,
            }),
        }
    }
}

/// After the record: what the call changes in the session. Taint only
/// grows (each label with the call that brought it; untrusted text is kept
/// for value mode, scanner findings for later sinks); a stop is kept; the
/// loop guard learns the result, and a session approval and the hosts a
/// fetch made known take effect only for calls that reached the tool.
pub(super) fn commit(
    session: &mut Session,
    call: ToolCall<'_>,
    ran: Option<Ran>,
    result: &DispatchResult,
) {
    if let Some(ran) = ran {
        if let Some((key, labels)) = ran.for_session {
            session.approve_for_session(key, labels);
        }
        session
            .guard_mut()
            .record_outcome(call.name, call.input, &result.content);
        if result.decision == Decision::Allowed {
            for host in ran.fetched {
                session.note_known_host(host);
            }
        }
        if let Some((text, labels, findings)) = ran.output {
            if labels.iter().any(|l| l.is_untrusted()) {
                let set: BTreeSet<TaintLabel> = labels.iter().copied().collect();
                session.add_untrusted_text(&text, &set, call.id);
            }
            session.note_injection(call.id, findings);
        }
    }
    session.add_taint_from(result.taint.iter().copied(), call.id);
    if let Some(stop) = &result.stop {
        session.stop(stop.clone());
    }
}

/// One audit record per credential use of the call, by grant, key and
/// host names.
fn record_credential_uses(
    ticket: &CallRecord,
    used: &Mutex<Vec<CredentialUse>>,
) -> Result<(), Outcome> {
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
        ticket.side(
            Action::Credential,
            decision,
            Reason::Credential,
            &detail,
            ("a credential use", "credential record failed"),
        )?;
    }
    Ok(())
}

/// One `sandbox` record per warning of a permissive-mode run (which
/// confinement layer was missing), or the refusal line of a strict run.
fn record_sandbox_warnings(
    ticket: &CallRecord,
    warnings: &Mutex<Vec<String>>,
) -> Result<(), Outcome> {
    let lines = warnings.lock().map(|w| w.clone()).unwrap_or_default();
    for line in lines {
        ticket.side(
            Action::Sandbox,
            Decision::Warned,
            Reason::Sandbox,
            &line,
            ("a sandbox warning", "sandbox record failed"),
        )?;
    }
    Ok(())
}

/// The audit reason of a policy refusal.
fn deny_reason(reason: bulwark_policy::DenyReason) -> Reason {
    match reason {
        bulwark_policy::DenyReason::Tool => Reason::Tool,
        bulwark_policy::DenyReason::Operation => Reason::Operation,
        bulwark_policy::DenyReason::Capability => Reason::Capability,
    }
}
