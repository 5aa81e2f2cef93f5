//! `bulwark mcp pin`: connect to each of an agent's MCP servers, show and
//! vet their tools, and pin the ones the operator accepts.
//!
//! A server is started exactly as a session would start it (the kernel's
//! launch code: sandbox, cleared environment, granted keys, egress proxy),
//! so what is pinned is what a session will see. Tools whose description
//! fails the checks are skipped unless `--allow-flagged` names them; each
//! pinned server leaves one `mcp_pin` record in the audit log.

use crate::{Failure, usage_error};
use anyhow::anyhow;
use bulwark_audit::{Action, AuditRecord, AuditSink, Decision, Event, Identity, Reason};
use bulwark_kernel::{
    AgentSetup, Home, LOCAL_USER, PolicyContext, ToolRegistry, effective_policy, load_secrets,
    mcp_connect_for_pin,
};
use bulwark_mcp::client::LiveTool;
use bulwark_mcp::pins::{PinFile, ServerPins, ToolPin, pin_path, tool_digest};
use bulwark_mcp::vet::{model_tool_name, vet_tool_among};
use bulwark_policy::mcp::McpServer;
use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct PinArgs {
    /// The agent's name (a directory under agents/).
    #[arg(value_parser = crate::agent_arg)]
    pub agent: String,
    /// Pin only this server (default: every server the agent may use).
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// Pin without asking (for scripts). Flagged tools are still skipped.
    #[arg(long)]
    pub yes: bool,
    /// Pin this tool although its description was flagged (repeatable;
    /// the server's name for the tool).
    #[arg(long = "allow-flagged", value_name = "TOOL")]
    pub allow_flagged: Vec<String>,
}

/// An agent's MCP servers as a local session would get them.
pub(super) struct AgentServers {
    pub servers: BTreeMap<String, McpServer>,
    pub setup: AgentSetup,
}

/// Loads `agent` and its effective policy for the local operator, with the
/// secrets its grants name (a server gets the keys a session would give it).
pub(super) fn agent_servers(home: &Home, agent: &str) -> Result<AgentServers, Failure> {
    let global = home.load_global().map_err(usage_error)?;
    let access = home.load_access().map_err(usage_error)?;
    let loaded = home.load_agent(agent).map_err(usage_error)?;
    let ctx = PolicyContext {
        global: &global,
        access: &access,
        agent: &loaded,
        user: LOCAL_USER,
        remote: false,
    };
    let policy = effective_policy(&ctx, &ToolRegistry::builtin()).map_err(usage_error)?;
    let (secrets, _missing) = load_secrets(&global, &loaded);
    let setup = AgentSetup::for_agent(&global, &loaded, Arc::new(secrets));
    Ok(AgentServers {
        servers: policy.mcp,
        setup,
    })
}

/// The servers `only` picks (all without it); a clear error when there are
/// none or `only` is not one of them.
pub(super) fn pick<'a>(
    agent: &str,
    servers: &'a BTreeMap<String, McpServer>,
    only: Option<&str>,
) -> Result<Vec<&'a McpServer>, Failure> {
    if servers.is_empty() {
        return Err(usage_error(anyhow!(
            "agent `{agent}` may use no MCP server: add [mcp.servers.NAME] to agents/{agent}/agent.toml and `mcp:NAME` to its tools.allow"
        )));
    }
    match only {
        None => Ok(servers.values().collect()),
        Some(name) => servers.get(name).map(|s| vec![s]).ok_or_else(|| {
            usage_error(anyhow!(
                "agent `{agent}` has no MCP server `{name}` it may use; its servers: {}",
                servers.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        }),
    }
}

/// Starts `server` and lists its tools and protocol version.
pub(super) async fn live_tools(
    home: &Home,
    agent: &str,
    server: &McpServer,
    setup: &AgentSetup,
    audit: Arc<dyn AuditSink>,
) -> Result<(Vec<LiveTool>, String), Failure> {
    let name = &server.name;
    let conn = mcp_connect_for_pin(home, LOCAL_USER, agent, server, setup, audit)
        .await
        .map_err(|e| Failure {
            code: 1,
            error: anyhow!("MCP server `{name}` of agent `{agent}` failed to start: {e}"),
        })?;
    let listed = conn.client().list_tools().await;
    let version = conn.client().protocol_version().to_string();
    conn.close().await;
    let tools = listed.map_err(|e| Failure {
        code: 1,
        error: anyhow!("MCP server `{name}` did not list its tools: {e}"),
    })?;
    Ok((tools, version))
}

/// The home's audit log (made with its key when fresh, as `run` would).
pub(super) fn open_audit(home: &Home) -> Result<bulwark_store::SqliteAuditSink, Failure> {
    std::fs::create_dir_all(home.root())
        .map_err(|e| anyhow!("cannot create {}: {e}", home.root().display()))?;
    let db = home.db_path();
    let store = bulwark_store::Store::open(&db).map_err(|e| Failure {
        code: 1,
        error: anyhow!(
            "cannot open the audit log in {}: {e}; nothing was pinned, because pins must be recorded there",
            db.display()
        ),
    })?;
    let sink = store.audit_sink();
    crate::cmd_audit::ensure_key_of_fresh_log(home, &sink)?;
    Ok(sink)
}

/// Text from a server, shown on one line: control characters escaped,
/// clipped to `max` characters.
pub(super) fn excerpt(text: &str, max: usize) -> String {
    let escaped: String = text.escape_debug().collect();
    if escaped.chars().count() <= max {
        return escaped;
    }
    let mut out: String = escaped.chars().take(max).collect();
    out.push('…');
    out
}

fn confirm(question: &str) -> Result<bool, Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(usage_error(anyhow!(
            "{question}: there is no terminal to ask on; review the tools above and pass --yes to pin them"
        )));
    }
    print!("{question} [y/N] ");
    std::io::stdout().flush().ok();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| anyhow!("cannot read the answer: {e}"))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

pub async fn pin(home: &Home, args: PinArgs) -> Result<(), Failure> {
    let agent = args.agent.as_str();
    let AgentServers { servers, setup } = agent_servers(home, agent)?;
    let chosen = pick(agent, &servers, args.server.as_deref())?;
    let sink = open_audit(home)?;
    let audit: Arc<dyn AuditSink> = Arc::new(sink.clone());
    let path = pin_path(home.root(), agent);
    let mut file = PinFile::load(&path)
        .map_err(|e| anyhow!("{e}; move it away to pin afresh"))?
        .unwrap_or_else(|| PinFile {
            agent: agent.to_string(),
            servers: BTreeMap::new(),
        });
    for server in chosen {
        let name = &server.name;
        let (tools, version) = live_tools(home, agent, server, &setup, audit.clone()).await?;
        println!(
            "MCP server `{name}` ({} tool(s), protocol {version}):",
            tools.len()
        );
        let mut pinned = BTreeMap::new();
        let mut skipped = Vec::new();
        let mut withheld = BTreeMap::new();
        let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        let siblings: Vec<&str> = names.iter().map(String::as_str).collect();
        for tool in tools {
            let mut problems =
                vet_tool_among(&tool.name, &tool.description, &tool.input_schema, &siblings);
            let shown = match model_tool_name(name, &tool.name) {
                Some(model) => model,
                None => {
                    problems.push(bulwark_mcp::vet::Problem {
                        kind: "name".into(),
                        detail: "no model tool name can be made from it".into(),
                    });
                    format!("(tool {})", excerpt(&tool.name, 64))
                }
            };
            println!("  {shown}  {}", excerpt(&tool.description, 120));
            for p in &problems {
                println!("      ! {}: {}", p.kind, excerpt(&p.detail, 200));
            }
            let allowed = args.allow_flagged.contains(&tool.name);
            let digest = tool_digest(&tool.name, &tool.description, &tool.input_schema);
            if !problems.is_empty() && !allowed {
                withheld.insert(tool.name.clone(), digest);
                skipped.push(tool.name);
                continue;
            }
            pinned.insert(
                tool.name,
                ToolPin {
                    description: tool.description,
                    input_schema: tool.input_schema,
                    digest,
                },
            );
        }
        if !skipped.is_empty() {
            println!(
                "  skipped {} flagged tool(s): {} (pass --allow-flagged TOOL to pin one anyway)",
                skipped.len(),
                skipped
                    .iter()
                    .map(|t| excerpt(t, 64))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let question = format!("pin these {} tool(s) of server `{name}`?", pinned.len());
        if !args.yes && !confirm(&question)? {
            println!("server `{name}`: not pinned");
            continue;
        }
        let before = std::fs::read(&path).ok();
        let pinned_at = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let digests: BTreeMap<&String, &String> =
            pinned.iter().map(|(k, v)| (k, &v.digest)).collect();
        let what = serde_json::json!({"agent": agent, "server": name, "tools": digests});
        let count = pinned.len();
        file.servers.insert(
            name.clone(),
            ServerPins {
                pinned_at,
                protocol_version: version,
                tools: pinned,
                withheld,
            },
        );
        file.save(&path).map_err(|e| anyhow!("{e}"))?;
        let record = AuditRecord::new(
            Identity::new("", agent, LOCAL_USER),
            Event::new(Action::McpPin, Decision::Allowed, Reason::Pinned)
                .tool(bulwark_policy::mcp::mcp_domain(name))
                .operation("pin")
                .args(&what)
                .detail(format!(
                    "pinned {count} tool(s) of MCP server {name:?}; {} flagged tool(s) skipped",
                    skipped.len()
                )),
        );
        if let Err(err) = sink.record(&record).and_then(|()| sink.flush()) {
            // A pin is never in effect without its record.
            let undone = match &before {
                Some(bytes) => std::fs::write(&path, bytes),
                None => std::fs::remove_file(&path),
            };
            let undone = match undone {
                Ok(()) => "the pin file was put back".to_string(),
                Err(e) => format!("and putting {} back FAILED ({e})", path.display()),
            };
            return Err(anyhow!(
                "could not record the pins of server `{name}` in the audit log ({err}); {undone}"
            )
            .into());
        }
        println!(
            "server `{name}`: pinned {count} tool(s) in {}",
            path.display()
        );
    }
    Ok(())
}
