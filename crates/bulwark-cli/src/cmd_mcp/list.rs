//! `bulwark mcp list`: an agent's MCP servers, how each is reached, and
//! its pinned tools; with `--live`, what each server lists now against
//! its pins.

use super::pin::{agent_servers, excerpt, live_tools, open_audit};
use crate::Failure;
use anyhow::anyhow;
use bulwark_audit::AuditSink;
use bulwark_kernel::Home;
use bulwark_mcp::pins::{Drift, PinFile, drift, pin_path};
use bulwark_mcp::vet::model_tool_name;
use bulwark_policy::mcp::McpTransport;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// The agent's name (a directory under agents/).
    #[arg(value_parser = crate::agent_arg)]
    pub agent: String,
    /// Start each server and compare what it lists now with its pins.
    #[arg(long)]
    pub live: bool,
}

pub async fn list(home: &Home, args: ListArgs) -> Result<(), Failure> {
    let agent = args.agent.as_str();
    let servers = agent_servers(home, agent)?;
    let path = pin_path(home.root(), agent);
    let pins = PinFile::load(&path)
        .map_err(|e| anyhow!("{e}"))?
        .unwrap_or_default();
    if servers.servers.is_empty() {
        println!("agent `{agent}` may use no MCP server");
    }
    let audit: Option<Arc<dyn AuditSink>> = if args.live {
        Some(Arc::new(open_audit(home)?))
    } else {
        None
    };
    for (name, server) in &servers.servers {
        let how = match &server.transport {
            McpTransport::Stdio { command } => format!(
                "stdio: {}",
                excerpt(command.first().map(String::as_str).unwrap_or(""), 80)
            ),
            McpTransport::Http { url } => format!("http: {}", excerpt(url, 120)),
        };
        let hosts = if server.allowed_domains.is_empty() {
            "no hosts".to_string()
        } else {
            format!("hosts {}", server.allowed_domains.join(", "))
        };
        println!("{name}  {how}  {hosts}");
        let pinned = pins.servers.get(name);
        match pinned {
            None => println!("  not pinned: run `bulwark mcp pin {agent}`"),
            Some(p) => {
                for (tool, pin) in &p.tools {
                    let shown = model_tool_name(name, tool)
                        .unwrap_or_else(|| format!("(tool {})", excerpt(tool, 64)));
                    let digest: String = pin.digest.chars().take(12).collect();
                    println!("  {shown}  {digest}  pinned {}", p.pinned_at);
                }
            }
        }
        if let Some(audit) = &audit {
            match live_tools(home, agent, server, &servers.setup, audit.clone()).await {
                Err(failure) => println!("  live: {}", failure.error),
                Ok((tools, version)) => {
                    let changes = pinned.map(|p| drift(p, &tools)).unwrap_or_default();
                    println!(
                        "  live: {} tool(s), protocol {version}; {}",
                        tools.len(),
                        if pinned.is_none() {
                            "nothing pinned to compare".to_string()
                        } else if changes.is_empty() {
                            "matches the pins".to_string()
                        } else {
                            format!("{} difference(s) from the pins", changes.len())
                        }
                    );
                    for change in changes {
                        let line = match change {
                            Drift::Changed { tool } => {
                                format!(
                                    "changed: {} (the server is refused until re-pinned)",
                                    excerpt(&tool, 64)
                                )
                            }
                            Drift::Added { tool } => {
                                format!(
                                    "added: {} (the server is refused until re-pinned)",
                                    excerpt(&tool, 64)
                                )
                            }
                            Drift::Removed { tool } => {
                                format!("removed: {} (its calls fail)", excerpt(&tool, 64))
                            }
                        };
                        println!("    {line}");
                    }
                }
            }
        }
    }
    for name in pins.servers.keys() {
        if !servers.servers.contains_key(name) {
            println!("{name}  pinned, but not a server the agent may use now");
        }
    }
    Ok(())
}
