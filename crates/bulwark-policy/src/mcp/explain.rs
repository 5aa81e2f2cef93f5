//! The MCP servers and shell hosts as `policy explain` prints them.

use std::fmt::Write as _;

use super::McpTransport;
use crate::layering::EffectivePolicy;

impl EffectivePolicy {
    /// `mcp servers:` and `shell hosts:`, each only when there is something
    /// to show (readers split the report at its section headers).
    pub(crate) fn explain_mcp(&self, s: &mut String) {
        let host_prefix = |name: &str| format!("mcp server {name} host ");
        if !self.mcp.is_empty() {
            let _ = writeln!(s, "mcp servers:");
        }
        for (name, server) in &self.mcp {
            let transport = match &server.transport {
                McpTransport::Stdio { command } => {
                    format!("stdio {}", command.first().map_or("", String::as_str))
                }
                McpTransport::Http { url } => format!("http {url}"),
            };
            let hosts = if server.allowed_domains.is_empty() {
                "(none)".to_string()
            } else {
                server.allowed_domains.join(", ")
            };
            let _ = writeln!(
                s,
                "  {name}: {transport}; hosts {hosts}; timeout {}s",
                server.timeout_secs
            );
            let prefix = host_prefix(name);
            let removed: Vec<&str> = self
                .removed
                .iter()
                .filter_map(|r| r.item.strip_prefix(prefix.as_str()))
                .collect();
            if !removed.is_empty() {
                let _ = writeln!(s, "    hosts removed: {}", removed.join(", "));
            }
        }
        if !self.sandbox.shell_hosts.is_empty() {
            let _ = writeln!(
                s,
                "shell hosts (through the egress proxy): {}",
                self.sandbox.shell_hosts.join(", ")
            );
        }
    }
}
