//! `bulwark run` and `bulwark chat`: one task, or a conversation.

use crate::approver::TerminalApprover;
use crate::checkpoints::{Checkpointer, Shutdown};
use crate::printer::Printer;
use crate::records::Records;
use crate::{ChatArgs, Failure, RunArgs, usage_error};
use anyhow::{Context, anyhow};
use bulwark_kernel::{
    AgentRuntime, Approver, FrontEnd, Home, Kernel, KernelError, OpenError, OpenSession, Origin,
    PreApproved, Session, SessionFactory, SessionRecords, SessionSpec, ToolRegistry, TurnEnd,
};
use bulwark_llm::Message;
use bulwark_policy::{AgentName, UserName};
use std::io::{BufRead, Write};
use std::sync::{Arc, OnceLock};

/// Setup failures are the user's to fix (exit 2); everything else is 1.
pub(crate) fn kernel_failure(err: KernelError) -> Failure {
    match err {
        KernelError::Setup(_) => usage_error(err),
        other => Failure::from(other),
    }
}

/// A session that could not be opened, as an exit status: the operator's
/// to fix (exit 2), or refused / failed (exit 1).
pub(crate) fn open_failure(err: OpenError) -> Failure {
    let code = match err {
        OpenError::Usage(_) => 2,
        _ => 1,
    };
    Failure {
        code,
        error: anyhow!("{err}"),
    }
}

/// A front end's failure, for the session factory (which hands it back).
pub(crate) fn open_error(failure: Failure) -> OpenError {
    let message = format!("{:#}", failure.error);
    match failure.code {
        2 => OpenError::Usage(message),
        _ => OpenError::Failed(message),
    }
}

/// A session ready to take turns (shared by `run` and `chat`).
pub(crate) struct Prepared {
    pub(crate) kernel: Kernel,
    pub(crate) session: Session,
    pub(crate) history: Vec<Message>,
    pub(crate) agent: AgentRuntime,
    /// Signs checkpoints while the run lasts, and the last one at its end.
    pub(crate) checkpoints: Option<Checkpointer>,
    /// Ctrl-C / SIGTERM, listened for from before the session starts.
    pub(crate) shutdown: Shutdown,
    /// This process's lease on the session, given up when this is
    /// dropped.
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
    /// Signs the final checkpoint (once).
    pub(crate) fn finish_checkpoints(&mut self) {
        if let Some(checkpoints) = self.checkpoints.take() {
            checkpoints.finish();
        }
    }
}

/// Opens a session of the operator at this machine's terminal
/// ([`Origin::Terminal`]: this process opens the database, checks the
/// audit log and signs checkpoints) through the kernel's session factory,
/// with the database's records, `approver` (the terminal) and warnings
/// printed. A served worker opens its own in `bulwark-worker`.
fn prepare(
    home: &Home,
    agent_name: &str,
    user: &str,
    model_override: Option<&str>,
    resume: Option<&str>,
    approver: Arc<dyn Approver>,
) -> Result<Prepared, Failure> {
    let shutdown = Shutdown::listen().context("cannot install the Ctrl-C / SIGTERM handlers")?;
    let origin = Origin::Terminal;
    let spec = SessionSpec {
        agent: AgentName::new(agent_name).map_err(|e| usage_error(anyhow!("{e}")))?,
        user: UserName::new(user).map_err(|e| usage_error(anyhow!("{e}")))?,
        origin: origin.clone(),
        model: model_override.map(str::to_owned),
        resume: resume.map(str::to_owned),
        tools_only: false,
    };
    // The records are opened by the factory when it needs them (after the
    // names and the signature are checked); the CLI keeps a handle for
    // the checkpoints and the lease.
    let opened: Arc<OnceLock<Arc<Records>>> = Arc::new(OnceLock::new());
    let slot = opened.clone();
    let records_home = home.clone();
    let front = FrontEnd {
        approver,
        records: Box::new(move |global| {
            let records =
                Arc::new(Records::open(&records_home, &origin, global).map_err(open_error)?);
            let _ = slot.set(records.clone());
            Ok(records as Arc<dyn SessionRecords>)
        }),
        warn: Arc::new(|warning: &str| eprintln!("warning: {warning}")),
    };
    let result = SessionFactory::new(home.clone()).open(spec, front);
    let records = opened.get().cloned();
    let checkpoints = records.as_ref().and_then(|r| r.take_checkpoints());
    match result {
        Ok(OpenSession {
            kernel,
            session,
            history,
            agent,
            ..
        }) => Ok(Prepared {
            kernel,
            session,
            history,
            agent,
            checkpoints,
            shutdown,
            lease: records.as_ref().and_then(|r| r.lease()),
        }),
        Err(err) => {
            if let Some(checkpoints) = checkpoints {
                checkpoints.finish();
            }
            if let Some(lease) = records.as_ref().and_then(|r| r.lease()) {
                lease.release();
            }
            Err(open_failure(err))
        }
    }
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
    pre.validate_builtin(&ToolRegistry::builtin())
        .map_err(|e| usage_error(anyhow!(e)))?;
    let mut p = prepare(
        home,
        &args.agent,
        &args.user,
        args.model.as_deref(),
        args.session.as_deref(),
        Arc::new(TerminalApprover::new(pre.clone())),
    )?;
    // MCP tools exist only in the session's registry (from its pins).
    pre.validate(p.kernel.door.registry())
        .map_err(|e| usage_error(anyhow!(e)))?;
    eprintln!(
        "session {} · agent {} · model {}",
        p.session.identity().id,
        p.agent.name,
        p.agent.model
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
            return Err(interrupted(&p.session.identity().id));
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
        p.session.identity().id
    );
    report_end(&outcome.end, &p.session.identity().id)
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
        Arc::new(TerminalApprover::new(PreApproved::default())),
    )?;
    eprintln!(
        "chatting with {} (session {}; resume with --resume {}). /exit to leave.",
        p.agent.name,
        p.session.identity().id,
        p.session.identity().id
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
                return Err(interrupted(&p.session.identity().id));
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
                return Err(interrupted(&p.session.identity().id));
            }
        };
        match turn {
            Ok(outcome) => {
                println!();
                if let Err(failure) = report_end(&outcome.end, &p.session.identity().id) {
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
