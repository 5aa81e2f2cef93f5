//! `bulwark run` and `bulwark chat`: one task, or a conversation.

use crate::approver::TerminalApprover;
use crate::printer::Printer;
use crate::{ChatArgs, Failure, RunArgs, usage_error};
use anyhow::{Context, anyhow};
use bulwark_audit::{AuditRecord, AuditSink, Decision};
use bulwark_kernel::{
    AgentRuntime, AgentSetup, Door, Home, Kernel, KernelError, PolicyContext, PreApproved, Session,
    SessionIdentity, SessionState, ToolLimits, ToolRegistry, TurnEnd, build_session,
    effective_policy, load_secrets, resolve_model,
};
use bulwark_llm::Message;
use bulwark_store::{NewSession, Store};
use std::io::{BufRead, Write};
use std::sync::Arc;

/// Setup failures are the user's to fix (exit 2); everything else is 1.
fn kernel_failure(err: KernelError) -> Failure {
    match err {
        KernelError::Setup(_) => usage_error(err),
        other => Failure::from(other),
    }
}

struct Prepared {
    kernel: Kernel,
    session: Session,
    history: Vec<Message>,
    agent: AgentRuntime,
    store: Store,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn prepare(
    home: &Home,
    agent_name: &str,
    user: &str,
    model_override: Option<&str>,
    resume: Option<&str>,
    pre_approved: PreApproved,
) -> Result<Prepared, Failure> {
    // Both names become directory names: refuse bad ones before anything
    // (the database, a session row) is created.
    home.workspace_dir(user, agent_name)
        .map_err(kernel_failure)?;
    let global = home.load_global().map_err(kernel_failure)?;
    let access = home.load_access().map_err(kernel_failure)?;
    let loaded = home.load_agent(agent_name).map_err(kernel_failure)?;
    let registry = ToolRegistry::builtin();
    let policy = effective_policy(
        &PolicyContext {
            global: &global,
            access: &access,
            agent: &loaded,
            user,
            remote: false,
        },
        &registry,
    )
    .map_err(kernel_failure)?;
    let model = model_override
        .map(str::to_string)
        .or_else(|| loaded.manifest.agent.model.clone())
        .or_else(|| global.default_model.clone())
        .ok_or_else(|| {
            usage_error(anyhow!(
                "agent `{agent_name}` names no model and config.toml has no default_model; pass --model provider:model"
            ))
        })?;
    let resolved = resolve_model(&model, &global, &loaded.dir).map_err(kernel_failure)?;
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

    std::fs::create_dir_all(home.root())
        .with_context(|| format!("cannot create {}", home.root().display()))?;
    let store = Store::open(&home.db_path())
        .with_context(|| format!("cannot open {}", home.db_path().display()))?;
    // A log that does not verify stops agents until an operator looks.
    crate::cmd_audit::require_verified(home, &store.audit_sink())?;
    let audit: Arc<dyn AuditSink> = Arc::new(store.audit_sink());
    let door = Door::new(
        registry,
        audit.clone(),
        Arc::new(TerminalApprover::new(pre_approved)),
    );
    let kernel = Kernel::new(door, store.clone());

    let (id, saved, history) = match resume {
        Some(id) => {
            let row = store.session(id)?.ok_or_else(|| {
                usage_error(anyhow!("no session `{id}` (see `bulwark sessions list`)"))
            })?;
            if row.agent != agent_name || row.user != user {
                return Err(usage_error(anyhow!(
                    "session `{id}` belongs to agent `{}` and user `{}`, not `{agent_name}`/`{user}`",
                    row.agent,
                    row.user
                )));
            }
            let saved: Option<SessionState> = match row.state_json {
                Some(json) => Some(
                    serde_json::from_str(&json)
                        .context("the stored session state is unreadable")?,
                ),
                None => None,
            };
            let history = kernel.history(id).map_err(kernel_failure)?;
            (id.to_string(), saved, history)
        }
        None => (uuid_like(), None, Vec::new()),
    };
    let is_new = resume.is_none();
    let identity = SessionIdentity {
        id: id.clone(),
        agent: agent_name.into(),
        user: user.into(),
    };
    let session = build_session(home, identity, Arc::new(policy), limits, saved, &net)
        .map_err(kernel_failure)?;
    // Only a session that could be built is stored: a failed setup leaves
    // no half-made session behind.
    if is_new {
        store.create_session(&NewSession {
            id: id.clone(),
            agent: agent_name.into(),
            user: user.into(),
        })?;
    }
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
        store,
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
        pre,
    )?;
    eprintln!(
        "session {} · agent {} · model {}",
        p.session.identity.id, p.agent.name, p.agent.model
    );
    let mut printer = Printer::new();
    let outcome = p
        .kernel
        .run_turn(
            &mut p.session,
            &mut p.history,
            &p.agent,
            &args.task,
            &mut printer,
        )
        .await
        .map_err(kernel_failure)?;
    println!();
    crate::cmd_audit::checkpoint_at_exit(home, &p.store.audit_sink());
    eprintln!(
        "{} tool call(s) · {} input / {} output tokens · audit: bulwark audit tail --session {}",
        outcome.tool_calls,
        outcome.usage.input_tokens,
        outcome.usage.output_tokens,
        p.session.identity.id
    );
    report_end(&outcome.end, &p.session.identity.id)
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
        PreApproved::default(),
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
        let Some(line) = tokio::task::spawn_blocking(read_line_blocking)
            .await
            .ok()
            .flatten()
        else {
            eprintln!();
            crate::cmd_audit::checkpoint_at_exit(home, &p.store.audit_sink());
            return Ok(());
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "/exit" || line == "/quit" {
            crate::cmd_audit::checkpoint_at_exit(home, &p.store.audit_sink());
            return Ok(());
        }
        let mut printer = Printer::new();
        match p
            .kernel
            .run_turn(&mut p.session, &mut p.history, &p.agent, line, &mut printer)
            .await
        {
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
