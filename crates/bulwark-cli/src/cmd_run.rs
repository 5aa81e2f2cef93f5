//! `bulwark run` and `bulwark chat`: one task, or a conversation.

use crate::approver::TerminalApprover;
use crate::checkpoints::{Checkpointer, Shutdown};
use crate::cmd_keys::{ForRun, SignatureStatus, check_for_run};
use crate::printer::Printer;
use crate::records::Records;
use crate::verified_agent::{VerifiedFiles, after_check_hook, loaded_from_bundle};
use crate::worker_store::BrokerClient;
use crate::{ChatArgs, Failure, RunArgs, usage_error};
use anyhow::{Context, anyhow};
use bulwark_audit::{AuditRecord, Decision};
use bulwark_kernel::{
    AgentRuntime, AgentSetup, Approver, ConversationStore, Door, Home, Kernel, KernelError,
    PolicyContext, PreApproved, Session, SessionIdentity, SessionState, ToolLimits, ToolRegistry,
    TurnEnd, build_session, effective_policy, load_secrets, resolve_model, resolve_model_with,
};
use bulwark_llm::Message;
use bulwark_trust::TrustError;
use std::io::{BufRead, Write};
use std::sync::Arc;

/// Setup failures are the user's to fix (exit 2); everything else is 1.
pub(crate) fn kernel_failure(err: KernelError) -> Failure {
    match err {
        KernelError::Setup(_) => usage_error(err),
        other => Failure::from(other),
    }
}

/// A session ready to take turns (shared by `run`, `chat` and `worker`).
pub(crate) struct Prepared {
    pub(crate) kernel: Kernel,
    pub(crate) session: Session,
    pub(crate) history: Vec<Message>,
    pub(crate) agent: AgentRuntime,
    /// Signs checkpoints while the run lasts, and the last one at its end
    /// (`None` in a worker: the server signs).
    pub(crate) checkpoints: Option<Checkpointer>,
    /// Ctrl-C / SIGTERM, listened for from before the session starts.
    pub(crate) shutdown: Shutdown,
    /// This process's lease on the session (`None` in a worker: the
    /// server holds it), given up when this is dropped.
    pub(crate) lease: Option<Arc<bulwark_store::SessionLease>>,
}

impl Drop for Prepared {
    /// Gives the lease up as the run ends, not whenever the last clone of
    /// the conversation store goes: the next `--session` resume may start
    /// the moment this process exits.
    fn drop(&mut self) {
        if let Some(lease) = &self.lease {
            lease.release();
        }
    }
}

impl Prepared {
    /// Signs the final checkpoint (once; a no-op in a worker).
    pub(crate) fn finish_checkpoints(&mut self) {
        if let Some(checkpoints) = self.checkpoints.take() {
            checkpoints.finish();
        }
    }
}

/// What a run was configured with, for its `config_load` audit record:
/// digests of the exact bytes parsed, and the agent's signature status.
struct LoadedSources<'a> {
    config: Option<[u8; 32]>,
    access: Option<[u8; 32]>,
    /// The agent's files parsed and the model file, with their digests.
    agent: &'a [(String, [u8; 32])],
    signature: &'a SignatureStatus,
}

/// The audit record of a refused rollback.
fn rollback_record(agent: &str, user: &str, reason: &str) -> AuditRecord {
    AuditRecord {
        time_ms: now_ms(),
        session: uuid_like(),
        agent: agent.into(),
        user: user.into(),
        action: "config_load".into(),
        tool: String::new(),
        operation: String::new(),
        args_digest: String::new(),
        decision: Decision::Denied,
        reason: "rollback".into(),
        detail: reason.into(),
        duration_us: 0,
    }
}

/// Audits the refusal of a rolled-back agent in `records`, then fails
/// with `reason`.
fn refuse_rollback(records: Records, agent: &str, user: &str, reason: String) -> Failure {
    let audited = records.audit.record(&rollback_record(agent, user, &reason));
    if let Some(checkpoints) = records.checkpoints {
        checkpoints.finish();
    }
    let reason = match audited {
        Ok(()) => reason,
        Err(err) => format!("{reason} (and the refusal could not be audited: {err})"),
    };
    Failure {
        code: 1,
        error: anyhow!("{reason}"),
    }
}

impl LoadedSources<'_> {
    fn describe(&self) -> String {
        let digest = |d: &Option<[u8; 32]>, absent: &str| match d {
            Some(d) => format!("sha256:{}", hex::encode(d)),
            None => absent.to_string(),
        };
        let mut parts = vec![
            format!("config.toml {}", digest(&self.config, "absent (defaults)")),
            format!("access.toml {}", digest(&self.access, "absent")),
        ];
        for (path, d) in self.agent {
            parts.push(format!("{path} sha256:{}", hex::encode(d)));
        }
        parts.push(match self.signature {
            SignatureStatus::Valid {
                signer,
                key_id,
                version,
                ..
            } => {
                format!("signed by {signer} ({key_id:08x}) version {version}")
            }
            SignatureStatus::Unsigned => "unsigned".to_string(),
            SignatureStatus::Invalid { .. } => "signature invalid".to_string(),
        });
        parts.join("; ")
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Who the session serves. It decides whether config.toml's `[remote]`
/// policy (no shell unless `remote.shell`, the `remote.tools` filter)
/// narrows it, and where its records go.
pub(crate) enum Origin {
    /// `run` and `chat`: the operator at this machine's terminal. This
    /// process opens the database, checks the audit log and signs
    /// checkpoints.
    Terminal,
    /// A worker for `serve`: a user who reached the server over the
    /// network. Every record goes through the server, which keeps them
    /// for this worker's conversation only.
    Remote(Arc<BrokerClient>),
}

/// Sets a session up: names, config, signature, policy, model, store,
/// audit records. `approver` answers the door's approval requests (the
/// terminal for `run`/`chat`, the server for a worker).
pub(crate) fn prepare(
    home: &Home,
    agent_name: &str,
    user: &str,
    model_override: Option<&str>,
    resume: Option<&str>,
    origin: Origin,
    approver: Arc<dyn Approver>,
) -> Result<Prepared, Failure> {
    // Both names become directory names: refuse bad ones before anything
    // (the database, a session row) is created.
    home.workspace_dir(user, agent_name)
        .map_err(kernel_failure)?;
    let (global, config_digest) = home.load_global_digested().map_err(kernel_failure)?;
    let (access, access_digest) = home.load_access_digested().map_err(kernel_failure)?;
    let require_signed = global.trust.require_signed;
    let signature = match check_for_run(home, agent_name, require_signed)? {
        ForRun::Go(status) => status,
        ForRun::Rollback { reason } => {
            let records = Records::open(home, &origin, &global)?;
            return Err(refuse_rollback(records, agent_name, user, reason));
        }
    };
    after_check_hook(agent_name);
    // A verified agent is used from the bytes that were verified, read
    // once; anything else is loaded from disk as before.
    let verified = match &signature {
        SignatureStatus::Valid { agent, .. } => Some(agent.clone()),
        SignatureStatus::Invalid { reason } => {
            eprintln!("warning: the signature of agent `{agent_name}` does not hold: {reason}");
            None
        }
        SignatureStatus::Unsigned => None,
    };
    let loaded = match &verified {
        Some(verified) => loaded_from_bundle(agent_name, verified)?,
        None => home.load_agent(agent_name).map_err(kernel_failure)?,
    };
    let registry = ToolRegistry::builtin();
    let policy = effective_policy(
        &PolicyContext {
            global: &global,
            access: &access,
            agent: &loaded,
            user,
            remote: matches!(origin, Origin::Remote(_)),
        },
        &registry,
    )
    .map_err(kernel_failure)?;
    let model = model_override
        .map(str::to_string)
        .or_else(|| loaded.manifest.agent.model.clone())
        .or_else(|| bulwark_kernel::default_model(&global))
        .ok_or_else(|| {
            usage_error(anyhow!(
                "agent `{agent_name}` names no model and config.toml has no default_model; with a provider key set, \
                 Bulwark does not pick one of its models for you: pass --model provider:model, or set default_model"
            ))
        })?;
    let mut sources = loaded.sources.clone();
    let resolved = match &verified {
        Some(verified) => {
            let field = if model_override.is_some() {
                "--model"
            } else if loaded.manifest.agent.model.is_some() {
                "agent.toml [agent] model"
            } else {
                "config.toml default_model"
            };
            let files = VerifiedFiles::new(verified.clone(), require_signed, field, &model)
                .map_err(|e| Failure {
                    code: 1,
                    error: anyhow!("{e}"),
                })?;
            let resolved = files
                .check_model_paths(&model, &global)
                .and_then(|()| resolve_model_with(&model, &global, &loaded.dir, &files));
            let refused = files.refused();
            sources.extend(files.take_used());
            resolved.map_err(|err| {
                if refused {
                    Failure {
                        code: 1,
                        error: anyhow!("{err}"),
                    }
                } else {
                    kernel_failure(err)
                }
            })?
        }
        None => resolve_model(&model, &global, &loaded.dir).map_err(kernel_failure)?,
    };
    let (secrets, missing) = load_secrets(&global, &loaded);
    if !missing.is_empty() {
        eprintln!(
            "warning: credential keys not set in the environment: {}; requests that need them will be refused (see `bulwark credentials check {agent_name}`)",
            missing.join(", ")
        );
    }
    let net = AgentSetup::for_agent(&global, &loaded, Arc::new(secrets));
    let mut limits = ToolLimits::default();
    if let Some(secs) = global.sandbox.timeout_secs {
        limits.shell_timeout = std::time::Duration::from_secs(secs);
    }

    let records = Records::open(home, &origin, &global)?;
    // The highest version run is recorded as the run starts (under a lock,
    // checked again: a concurrent run may have run a newer one). A served
    // worker may read trust/ but not write it: it enforces, the terminal
    // records.
    if let (Some(verified), Origin::Terminal) = (&verified, &origin) {
        let trust_dir = home.root().join(bulwark_trust::TRUST_DIR);
        match bulwark_trust::record_version(
            &trust_dir,
            agent_name,
            &verified.signers,
            verified.version,
        ) {
            Ok(_) => {}
            Err(err @ TrustError::Rollback { .. }) if require_signed => {
                let reason = format!("{err}. {}", crate::cmd_keys::REQUIRE_SIGNED_POLICY);
                return Err(refuse_rollback(records, agent_name, user, reason));
            }
            Err(err) => eprintln!("warning: the version run was not recorded: {err}"),
        }
    }
    let shutdown = Shutdown::listen().context("cannot install the Ctrl-C / SIGTERM handlers")?;
    let audit = records.audit.clone();
    let loads = LoadedSources {
        config: config_digest,
        access: access_digest,
        agent: &sources,
        signature: &signature,
    };
    let approver_for_children = approver.clone();
    let door = Door::new(registry, audit.clone(), approver)
        .with_recorded_arguments(global.audit.record_arguments);
    let id = match resume {
        Some(id) => {
            // Checked before the lease so a mistyped or foreign id gets
            // its own message; the state is read after it (below), so no
            // other run can save over what this one loaded.
            records.resume(id, agent_name, user)?;
            id.to_string()
        }
        None => uuid_like(),
    };
    // One process runs a session at a time: this one holds its lease from
    // here until `Prepared` is dropped. A worker takes none: the server
    // holds the lease for the conversation it serves.
    let (lease, conversations) = match records.database() {
        Some(store) => {
            let lease = match crate::session_lease::take(store, &*audit, &id, agent_name, user) {
                Ok(lease) => lease,
                Err(failure) => {
                    if let Some(checkpoints) = records.checkpoints {
                        checkpoints.finish();
                    }
                    return Err(failure);
                }
            };
            let leased: Arc<dyn ConversationStore> = Arc::new(
                crate::session_lease::LeasedConversations::new(store.clone(), lease.clone()),
            );
            (Some(lease), leased)
        }
        None => (None, records.conversations.clone()),
    };
    let kernel = Kernel::with_shared_store(door, conversations);

    let (saved, history) = match resume {
        Some(id) => {
            let state_json = records.resume(id, agent_name, user)?;
            let saved: Option<SessionState> = match state_json {
                Some(json) => Some(
                    serde_json::from_str(&json)
                        .context("the stored session state is unreadable")?,
                ),
                None => None,
            };
            let history = kernel.history(id).map_err(kernel_failure)?;
            (saved, history)
        }
        None => (None, Vec::new()),
    };
    let is_new = resume.is_none();
    let identity = SessionIdentity {
        id: id.clone(),
        agent: agent_name.into(),
        user: user.into(),
    };
    let mut session = build_session(home, identity, Arc::new(policy), limits, saved, &net)
        .map_err(kernel_failure)?;
    crate::session_credits::attach(
        &mut session,
        &records,
        &crate::session_credits::Payer {
            home,
            global: &global,
            access: &access,
            loaded: &loaded,
            model: &model,
            remote: matches!(origin, Origin::Remote(_)),
            approver: approver_for_children.clone(),
        },
    )?;
    // Only a session that could be built is stored: a failed setup leaves
    // no half-made session behind.
    if is_new {
        records.create(&id, agent_name, user)?;
    }
    audit
        .record(&AuditRecord {
            time_ms: now_ms(),
            session: id.clone(),
            agent: agent_name.into(),
            user: user.into(),
            action: "config_load".into(),
            tool: String::new(),
            operation: String::new(),
            args_digest: String::new(),
            decision: Decision::Allowed,
            reason: "config_load".into(),
            detail: loads.describe(),
            duration_us: 0,
        })
        .context("the audit log refused the configuration record")?;
    audit
        .record(&AuditRecord {
            time_ms: now_ms(),
            session: id,
            agent: agent_name.into(),
            user: user.into(),
            action: "session_start".into(),
            tool: String::new(),
            operation: String::new(),
            args_digest: String::new(),
            decision: Decision::Allowed,
            reason: "policy_load".into(),
            detail: format!(
                "model {}:{}; tools {}",
                resolved.provider,
                resolved.model,
                session
                    .policy
                    .tools
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            duration_us: 0,
        })
        .context("the audit log refused the session start record")?;
    let assistant_turns = history
        .iter()
        .filter(|m| m.role == bulwark_llm::Role::Assistant)
        .count();
    if assistant_turns > 0 {
        resolved.driver.resume_after(assistant_turns);
    }
    let manifest = &loaded.manifest.agent;
    let agent = AgentRuntime {
        name: agent_name.into(),
        system_prompt: loaded.system_prompt.clone(),
        model: resolved.model,
        driver: resolved.driver,
        max_turns: manifest.max_turns,
        max_tokens: manifest.max_tokens,
    };
    Ok(Prepared {
        kernel,
        session,
        history,
        agent,
        checkpoints: records.checkpoints,
        shutdown,
        lease,
    })
}

fn uuid_like() -> String {
    // Session ids only need to be unique and unguessable enough not to collide.
    format!("{:x}", uuid::Uuid::new_v4().as_u128())
}

fn report_end(end: &TurnEnd, session: &str) -> Result<(), Failure> {
    match end {
        TurnEnd::Completed => Ok(()),
        TurnEnd::Stopped(why) => Err(Failure {
            code: 3,
            error: anyhow!(
                "the session was stopped: {} (session {session})",
                why.strip_prefix("session stopped: ").unwrap_or(why)
            ),
        }),
        TurnEnd::Interrupted => Err(interrupted(session)),
        TurnEnd::Unfunded(why) => Err(Failure {
            code: 5,
            error: anyhow!(
                "{why} (fund the account with `bulwark credits transfer` or `bulwark credits mint`, then resume session {session})"
            ),
        }),
        TurnEnd::MaxTurns => Err(Failure {
            code: 4,
            error: anyhow!(
                "the agent used all its turns without finishing (max_turns in agent.toml; session {session})"
            ),
        }),
    }
}

pub async fn run(home: &Home, args: RunArgs) -> Result<(), Failure> {
    let pre = PreApproved::parse(&args.approve).map_err(|e| usage_error(anyhow!(e)))?;
    pre.validate(&ToolRegistry::builtin())
        .map_err(|e| usage_error(anyhow!(e)))?;
    let mut p = prepare(
        home,
        &args.agent,
        &args.user,
        args.model.as_deref(),
        args.session.as_deref(),
        Origin::Terminal,
        Arc::new(TerminalApprover::new(pre)),
    )?;
    eprintln!(
        "session {} · agent {} · model {}",
        p.session.identity.id, p.agent.name, p.agent.model
    );
    let mut printer = Printer::new();
    let turn = tokio::select! {
        turn = p.kernel.run_turn(
            &mut p.session,
            &mut p.history,
            &p.agent,
            &args.task,
            &mut printer,
        ) => turn,
        () = p.shutdown.requested() => {
            p.finish_checkpoints();
            return Err(interrupted(&p.session.identity.id));
        }
    };
    let outcome = turn.map_err(kernel_failure)?;
    println!();
    p.finish_checkpoints();
    eprintln!(
        "{} tool call(s) · {} input / {} output tokens · audit: bulwark audit tail --session {}",
        outcome.tool_calls,
        outcome.usage.input_tokens,
        outcome.usage.output_tokens,
        p.session.identity.id
    );
    report_end(&outcome.end, &p.session.identity.id)
}

/// Ctrl-C or SIGTERM: the run stops after signing its checkpoint; exit
/// 130 as shells report an interrupt.
fn interrupted(session: &str) -> Failure {
    Failure {
        code: 130,
        error: anyhow!("interrupted; the session can be resumed (session {session})"),
    }
}

fn read_line_blocking() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line),
    }
}

pub async fn chat(home: &Home, args: ChatArgs) -> Result<(), Failure> {
    let mut p = prepare(
        home,
        &args.agent,
        &args.user,
        args.model.as_deref(),
        args.resume.as_deref(),
        Origin::Terminal,
        Arc::new(TerminalApprover::new(PreApproved::default())),
    )?;
    eprintln!(
        "chatting with {} (session {}; resume with --resume {}). /exit to leave.",
        p.agent.name, p.session.identity.id, p.session.identity.id
    );
    if !p.history.is_empty() {
        eprintln!("resumed: {} earlier message(s)", p.history.len());
    }
    loop {
        eprint!("> ");
        let _ = std::io::stderr().flush();
        let read = tokio::select! {
            read = tokio::task::spawn_blocking(read_line_blocking) => read,
            () = p.shutdown.requested() => {
                p.finish_checkpoints();
                return Err(interrupted(&p.session.identity.id));
            }
        };
        let Some(line) = read.ok().flatten() else {
            eprintln!();
            p.finish_checkpoints();
            return Ok(());
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "/exit" || line == "/quit" {
            p.finish_checkpoints();
            return Ok(());
        }
        let mut printer = Printer::new();
        let turn = tokio::select! {
            turn = p.kernel.run_turn(&mut p.session, &mut p.history, &p.agent, line, &mut printer) => turn,
            () = p.shutdown.requested() => {
                p.finish_checkpoints();
                return Err(interrupted(&p.session.identity.id));
            }
        };
        match turn {
            Ok(outcome) => {
                println!();
                if let Err(failure) = report_end(&outcome.end, &p.session.identity.id) {
                    eprintln!("{:#}", failure.error);
                    if matches!(outcome.end, TurnEnd::Stopped(_)) {
                        return Err(failure);
                    }
                }
            }
            Err(err) => {
                // A provider failure ends the turn, not the conversation.
                eprintln!("\nerror: {err}");
            }
        }
    }
}
