//! `[mcp.servers.<name>]`: the MCP servers an agent's tools may come from.
//!
//! A server's tools form the tool domain `mcp:<name>`; each tool is one
//! operation of it, so `tools.allow = ["mcp:fs"]`, `[approval] operations
//! = ["mcp:fs:write_file"]` and credential grants with `tools =
//! ["mcp:fs"]` read like those of built-in domains. A server is either a
//! stdio `command`, run in the process sandbox with an egress proxy for the
//! hosts in its `allowed_domains`, or a Streamable HTTP `url`, reached
//! through the session's egress client.
//!
//! A manifest entry with neither `command` nor `url` uses config.toml's
//! entry of the same name (the operator's definition) and may only narrow
//! it; config.toml's servers reach no agent whose manifest does not name
//! them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The tool-domain prefix of MCP servers.
pub const MCP_DOMAIN_PREFIX: &str = "mcp:";

/// `[mcp]` of a manifest or config.toml.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// Server name (`[a-z0-9][a-z0-9_-]{0,31}`) -> how to reach it.
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// One MCP server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// A stdio server: program and arguments, run in the process sandbox
    /// with the agent's workspace as its working directory. `{workspace}`
    /// in an argument is replaced by the workspace's path.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// A Streamable HTTP server's endpoint (`https://`, or `http://` to an
    /// operator-allowed internal service), reached through the egress
    /// client: its host must be in this entry's `allowed_domains`.
    #[serde(default)]
    pub url: Option<String>,
    /// Hosts (`host[:port]` patterns) the server may reach: through the
    /// egress proxy for a stdio server, the endpoint's host for an HTTP one.
    #[serde(default)]
    pub allowed_domains: Vec<String>,
    /// Plain, non-secret environment of a stdio server. Secrets reach it
    /// only through a credential grant with `tools = ["mcp:<name>"]`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Directories a stdio server may read and execute beyond the system
    /// ones (where its interpreter's packages live). Absolute paths.
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Seconds one call (and the start-up) may take; default 60.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// A resolved server as a session uses it: config.toml's definition
/// narrowed by the manifest, or the manifest's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServer {
    pub name: String,
    pub transport: McpTransport,
    pub allowed_domains: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub read_only: Vec<PathBuf>,
    pub timeout_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpTransport {
    Stdio { command: Vec<String> },
    Http { url: String },
}

/// Default per-call deadline of an MCP server.
pub const DEFAULT_MCP_TIMEOUT_SECS: u64 = 60;

/// The tool domain of server `name`.
pub fn mcp_domain(server: &str) -> String {
    format!("{MCP_DOMAIN_PREFIX}{server}")
}

/// The server a domain belongs to, if it is an MCP domain.
pub fn mcp_server_of(domain: &str) -> Option<&str> {
    domain.strip_prefix(MCP_DOMAIN_PREFIX)
}

/// Splits `domain:operation`, where an MCP domain is itself `mcp:<server>`:
/// `mcp:fs:read_file` is (`mcp:fs`, `read_file`), `mcp:fs` is a domain
/// alone, `files:read` is (`files`, `read`). `None` when `text` names a
/// domain only.
pub fn split_domain_operation(text: &str) -> Option<(&str, &str)> {
    let rest = match text.strip_prefix(MCP_DOMAIN_PREFIX) {
        Some(rest) => rest,
        None => return text.split_once(':'),
    };
    let (server, operation) = rest.split_once(':')?;
    Some((&text[..MCP_DOMAIN_PREFIX.len() + server.len()], operation))
}

/// The servers a session may use: each of the manifest's entries whose
/// domain `mcp:<name>` is in `tools` (what survived every layer), with a
/// bare entry filled from config.toml's and narrowed by the manifest.
/// Entries that do not resolve (validated at parse time, so only a
/// manifest built another way) are left out: fail closed.
pub fn resolve_servers(
    global: &McpSection,
    manifest: &McpSection,
    tools: &BTreeMap<String, std::collections::BTreeSet<String>>,
) -> BTreeMap<String, McpServer> {
    // Skeleton: the policy helper fills in narrowing and validation.
    let _ = (global, manifest, tools);
    BTreeMap::new()
}
