//! Read-only commands: agents list, sessions list, preflight, policy explain, audit tail.

use crate::terminal::sanitize;
use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use bulwark_audit::AuditSink;
use bulwark_kernel::{
    Home, KernelError, PolicyContext, ToolRegistry, effective_policy, resolve_model,
};
use bulwark_store::{AuditQuery, Store};

fn setup(err: KernelError) -> Failure {
    usage_error(err)
}

pub fn agents_list(home: &Home) -> Result<(), Failure> {
    let names = home.list_agents().map_err(setup)?;
    if names.is_empty() {
        println!(
            "no agents in {} (run `bulwark init`)",
            home.agents_dir().display()
        );
        return Ok(());
    }
    for name in names {
        match home.load_agent(&name) {
            Ok(agent) => println!(
                "{name:<20} {:<36} {}",
                agent
                    .manifest
                    .agent
                    .model
                    .as_deref()
                    .unwrap_or("(no model)"),
                agent.manifest.agent.description
            ),
            Err(err) => println!("{name:<20} INVALID: {err}"),
        }
    }
    Ok(())
}

fn open_store(home: &Home) -> Result<Store, Failure> {
    let path = home.db_path();
    if !path.exists() {
        return Err(usage_error(anyhow!(
            "no database at {} yet: run an agent first (`bulwark run demo \"show me\"`)",
            path.display()
        )));
    }
    Ok(Store::open(&path).with_context(|| format!("cannot open {}", path.display()))?)
}

pub fn sessions_list(home: &Home, agent: Option<&str>, limit: usize) -> Result<(), Failure> {
    let store = open_store(home)?;
    let rows = store.list_sessions(agent, limit)?;
    if rows.is_empty() {
        println!("no sessions");
    }
    for row in rows {
        println!(
            "{}  {:<16} {:<12} {:>4} messages",
            row.id, row.agent, row.user, row.message_count
        );
    }
    Ok(())
}

pub async fn preflight(home: &Home, agent_name: &str, model: Option<&str>) -> Result<(), Failure> {
    let mut problems = 0;
    let global = home.load_global().map_err(setup)?;
    println!("ok    config       {}", home.config_path().display());
    let _access = home.load_access().map_err(setup)?;
    let loaded = home.load_agent(agent_name).map_err(setup)?;
    println!(
        "ok    manifest     {}",
        loaded.dir.join("agent.toml").display()
    );
    {
        use crate::cmd_keys::SignatureStatus;
        let required = global.trust.require_signed;
        match crate::cmd_keys::check_agent_signature(home, agent_name, false)? {
            SignatureStatus::Valid { signer, key_id, .. } => {
                println!("ok    signature    signed by {signer} ({key_id:08x}), a trusted key");
            }
            SignatureStatus::Unsigned if required => {
                problems += 1;
                println!(
                    "FAIL  signature    unsigned, and config.toml requires signed agents: `bulwark sign {agent_name}`"
                );
            }
            SignatureStatus::Unsigned => {
                println!("ok    signature    unsigned (config.toml does not require signatures)");
            }
            SignatureStatus::Invalid { reason } => {
                problems += 1;
                println!("FAIL  signature    {reason}");
            }
        }
    }
    let named = model
        .map(str::to_string)
        .or_else(|| loaded.manifest.agent.model.clone());
    let chosen_by_default = named.is_none();
    let model = named.or_else(|| bulwark_kernel::default_model(&global));
    if chosen_by_default {
        match (&model, &global.default_model) {
            (Some(_), Some(_)) => {
                println!("info  model        the agent names none: config.toml default_model")
            }
            (Some(m), None) => println!(
                "info  model        the agent names none and no provider key is set: the offline default {m}"
            ),
            _ => {}
        }
    }
    match model {
        None => {
            problems += 1;
            println!(
                "FAIL  model        none set and a provider key is configured: add [agent] model or config.toml default_model"
            );
        }
        Some(model) => match resolve_model(&model, &global, &loaded.dir) {
            Err(err) => {
                problems += 1;
                println!("FAIL  model        {model}: {err}");
            }
            Ok(resolved) => {
                let key = match &resolved.key_env {
                    Some(var) if bulwark_kernel::environment().is_set(var) => {
                        format!("key from {var}")
                    }
                    Some(var) => format!("no key ({var} unset)"),
                    None => "no key needed".into(),
                };
                println!("ok    model        {model} ({key})");
                if resolved.provider == "local" {
                    println!("ok    model file   {} (loaded)", resolved.endpoint);
                } else if resolved.provider != "script" {
                    match reachable(&resolved.endpoint).await {
                        Ok(()) => println!("ok    endpoint     {} reachable", resolved.endpoint),
                        Err(err) => {
                            problems += 1;
                            println!("FAIL  endpoint     {}: {err}", resolved.endpoint);
                        }
                    }
                }
            }
        },
    }
    for finding in crate::cmd_credentials::findings(&global, &loaded) {
        if finding.is_problem() {
            problems += 1;
        }
        println!("{:<5} credentials  {}", finding.status, finding.text);
    }
    if problems > 0 {
        return Err(Failure {
            code: 1,
            error: anyhow!("{problems} problem(s) found"),
        });
    }
    println!("\n{agent_name} is ready.");
    Ok(())
}

/// A TCP connect to the endpoint's host and port, with a short timeout.
async fn reachable(endpoint: &str) -> anyhow::Result<()> {
    let url = url::Url::parse(endpoint).context("the endpoint is not a valid URL")?;
    let host = url
        .host_str()
        .ok_or_else(|| anyhow!("the endpoint has no host"))?
        .to_string();
    let port = url
        .port_or_known_default()
        .ok_or_else(|| anyhow!("the endpoint has no port"))?;
    let connect = tokio::net::TcpStream::connect((host.as_str(), port));
    match tokio::time::timeout(std::time::Duration::from_secs(5), connect).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(anyhow!("cannot connect to {host}:{port}: {e}")),
        Err(_) => Err(anyhow!("no answer from {host}:{port} within 5 s")),
    }
}

pub fn policy_explain(
    home: &Home,
    agent_name: &str,
    user: &str,
    remote: bool,
) -> Result<(), Failure> {
    // The same name check `run` makes, so explain never describes a session
    // that could not start.
    home.workspace_dir(user, agent_name).map_err(setup)?;
    let global = home.load_global().map_err(setup)?;
    let access = home.load_access().map_err(setup)?;
    let loaded = home.load_agent(agent_name).map_err(setup)?;
    let registry = ToolRegistry::builtin();
    let policy = effective_policy(
        &PolicyContext {
            global: &global,
            access: &access,
            agent: &loaded,
            user,
            remote,
        },
        &registry,
    )
    .map_err(setup)?;
    println!(
        "agent {agent_name} · user {user} · {}",
        if remote {
            "remote session"
        } else {
            "local session"
        }
    );
    println!("{}", policy.explain());
    println!("egress:");
    let internal = global.internal_services();
    if internal.is_empty() {
        println!("  internal services: none ([egress] internal in config.toml)");
    } else {
        println!(
            "  internal services (operator overrides: these exact host:port pairs may resolve to private addresses; metadata endpoints stay refused):"
        );
        for s in internal {
            println!("    {s}");
        }
    }
    println!("credentials:");
    match loaded.manifest.credential_mode() {
        bulwark_policy::CredentialMode::Strict => println!(
            "  strict mode, {} grant(s) (bulwark credentials check {agent_name})",
            loaded.manifest.credentials.grants.len()
        ),
        bulwark_policy::CredentialMode::Legacy => println!(
            "  LEGACY mode, no grants: any [secrets] key may go to any reachable host (bulwark credentials check {agent_name})"
        ),
    }
    Ok(())
}

pub fn audit_tail(
    home: &Home,
    limit: usize,
    session: Option<&str>,
    json: bool,
    follow: bool,
) -> Result<(), Failure> {
    let store = open_store(home)?;
    let sink = store.audit_sink();
    let records = match session {
        Some(s) => sink.query(&AuditQuery {
            session: Some(s.to_string()),
            since_seq: None,
            limit,
        })?,
        None => sink.tail(limit)?,
    };
    let mut last = 0;
    for r in &records {
        print_record(r, json)?;
        last = last.max(r.seq);
    }
    if !follow {
        return Ok(());
    }
    if records.is_empty() {
        last = sink.newest(1)?.first().map_or(0, |r| r.seq);
    }
    // Poll for new records until interrupted (Ctrl-C ends the process).
    loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let new = sink.query(&AuditQuery {
            session: session.map(str::to_string),
            since_seq: Some(last),
            limit: 1000,
        })?;
        for r in &new {
            print_record(r, json)?;
            last = last.max(r.seq);
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
    }
}

/// Write every record after `since` as JSON lines to `out` (or stdout),
/// oldest first, in batches.
pub fn audit_export(home: &Home, since: u64, out: Option<&std::path::Path>) -> Result<(), Failure> {
    use std::io::Write;
    let store = open_store(home)?;
    let sink = store.audit_sink();
    let mut writer: Box<dyn Write> = match out {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let (mut last, mut count) = (since, 0u64);
    loop {
        let batch = sink.query(&AuditQuery {
            session: None,
            since_seq: Some(last),
            limit: 1000,
        })?;
        if batch.is_empty() {
            break;
        }
        for r in &batch {
            writeln!(writer, "{}", serde_json::to_string(r)?)?;
            last = r.seq;
            count += 1;
        }
    }
    writer.flush()?;
    eprintln!(
        "exported {count} record(s) after seq {since}; pair them with a checkpoint (bulwark audit checkpoint --out FILE) to make them verifiable"
    );
    Ok(())
}

fn print_record(r: &bulwark_audit::StoredRecord, json: bool) -> Result<(), Failure> {
    if json {
        println!("{}", serde_json::to_string(r)?);
    } else {
        println!(
            "{:>6}  {}  {:<8} {:<14} {:<16} {:<9} {:<12} {}",
            r.seq,
            &r.record.session[..8.min(r.record.session.len())],
            r.record.agent,
            r.record.action,
            if r.record.tool.is_empty() {
                "-".to_string()
            } else {
                sanitize(&r.record.tool, false)
            },
            r.record.decision.as_str(),
            r.record.reason,
            sanitize(&r.record.detail, false)
        );
    }
    Ok(())
}
