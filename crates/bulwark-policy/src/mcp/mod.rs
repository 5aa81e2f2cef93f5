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

mod check;
mod explain;
mod resolve;
pub use check::{RESERVED_ENV_NAMES, RESERVED_ENV_PREFIXES, is_reserved_env};
pub(crate) use check::{Source, check_manifest_refs, validate_section};

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
/// domain only. Every place that reads `domain:operation` goes through
/// this, so an MCP domain is never cut at its own colon.
pub fn split_domain_operation(text: &str) -> Option<(&str, &str)> {
    let rest = match text.strip_prefix(MCP_DOMAIN_PREFIX) {
        Some(rest) => rest,
        None => return text.split_once(':'),
    };
    let (server, operation) = rest.split_once(':')?;
    Some((&text[..MCP_DOMAIN_PREFIX.len() + server.len()], operation))
}

/// Most servers a manifest or config.toml may define.
pub const MAX_MCP_SERVERS: usize = 32;
/// Most `allowed_domains` entries of one server.
pub const MAX_MCP_HOSTS: usize = 64;
/// Most `env` entries of one server.
pub const MAX_MCP_ENV: usize = 64;
/// Most `read_only` directories of one server.
pub const MAX_MCP_READ_ONLY: usize = 32;
/// Most words of a server's `command`.
pub const MAX_MCP_ARGS: usize = 256;
/// Longest word of a `command`, `env` value or `url`, in bytes.
pub const MAX_MCP_TEXT: usize = 4096;
/// Longest accepted `timeout_secs`.
pub const MAX_MCP_TIMEOUT_SECS: u64 = 600;
/// Longest MCP tool name (the protocol's own bound).
pub const MAX_MCP_TOOL_NAME: usize = 128;

/// `[a-z0-9][a-z0-9_-]{0,31}`: a server name becomes part of a tool domain,
/// of file names (pins) and of model-facing tool names.
pub fn is_server_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

/// An MCP tool name as the protocol allows it (`[A-Za-z0-9_.-]`, 1-128):
/// the operations of an `mcp:<server>` domain. Anything else (a space, a
/// colon, a control character) is no operation a policy can name, so
/// [`EffectivePolicy::check_tool`](crate::EffectivePolicy::check_tool)
/// refuses it.
pub fn is_mcp_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_MCP_TOOL_NAME
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

/// `mcp:<server>` with a valid server name.
pub fn is_mcp_domain(domain: &str) -> bool {
    mcp_server_of(domain).is_some_and(is_server_name)
}

/// A tool domain a policy may name: a built-in-style name or an MCP one.
pub(crate) fn is_tool_domain(domain: &str) -> bool {
    crate::capability::is_domain_name(domain) || is_mcp_domain(domain)
}

/// An operation name of `domain`: MCP tool names for MCP domains, the
/// built-in spelling otherwise; `"*"` for every operation.
pub(crate) fn is_operation_of(domain: &str, op: &str) -> bool {
    op == "*"
        || if is_mcp_domain(domain) {
            is_mcp_tool_name(op)
        } else {
            crate::capability::is_domain_name(op)
        }
}

/// `domain:operation` with both parts valid.
pub(crate) fn is_domain_operation(text: &str) -> bool {
    split_domain_operation(text).is_some_and(|(d, o)| is_tool_domain(d) && is_operation_of(d, o))
}

pub use resolve::resolve_servers;
pub(crate) use resolve::resolve_with;
