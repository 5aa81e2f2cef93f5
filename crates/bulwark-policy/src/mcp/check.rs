//! Parse-time validation of `[mcp.servers.*]`, and of every place a
//! manifest names an `mcp:<server>` domain: a server that cannot be
//! started, an endpoint its own host list does not allow, or a tool rule
//! for a server the manifest never declared is refused at its line, where
//! silently ignoring it would leave the operator believing a rule holds.

use super::{
    MAX_MCP_ARGS, MAX_MCP_ENV, MAX_MCP_HOSTS, MAX_MCP_READ_ONLY, MAX_MCP_SERVERS, MAX_MCP_TEXT,
    MAX_MCP_TIMEOUT_SECS, McpSection, McpServerConfig, is_server_name, mcp_server_of,
    split_domain_operation,
};
use crate::capability::{Capability, HostPattern};
use crate::error::{ConfigError, Located, Seg};
use crate::manifest::Manifest;

/// Variables a server's `env` may not set: the runtime's own, the egress
/// proxy's (the sandbox sets them to its relay; a server pointed elsewhere
/// would only fail, or talk to a proxy of its choosing on the host's
/// loopback if one were reachable), and the dynamic loader's, which run
/// code of the setter's choosing inside every program of the server.
pub const RESERVED_ENV_PREFIXES: &[&str] = &["BULWARK_", "LD_", "DYLD_"];
/// Exact names reserved in any letter case (see [`RESERVED_ENV_PREFIXES`]).
pub const RESERVED_ENV_NAMES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "FTP_PROXY",
];

/// Is `name` one of the variables an MCP server's `env` may not set?
pub fn is_reserved_env(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    RESERVED_ENV_NAMES.contains(&upper.as_str())
        || RESERVED_ENV_PREFIXES.iter().any(|p| upper.starts_with(p))
}

fn is_env_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && !b[0].is_ascii_digit()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// Which file a section is in: config.toml defines servers, a manifest may
/// also name one of config.toml's by leaving out `command` and `url`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    Config,
    Manifest,
}

/// Validate `[mcp]` of a manifest or config.toml.
pub(crate) fn validate_section(
    loc: &Located<'_>,
    section: &McpSection,
    source: Source,
) -> Result<(), ConfigError> {
    use Seg::Key;
    if section.servers.len() > MAX_MCP_SERVERS {
        return Err(loc.at(
            &[Key("mcp"), Key("servers")],
            format_args!(
                "declares {} servers; at most {MAX_MCP_SERVERS} (split the agent, or remove servers it does not use)",
                section.servers.len()
            ),
        ));
    }
    for (name, server) in &section.servers {
        let base = [Key("mcp"), Key("servers"), Key(name.as_str())];
        if !is_server_name(name) {
            return Err(loc.at(
                &base,
                format_args!(
                    "{name:?} is not a server name: use 1-32 characters [a-z0-9_-], starting with a letter or digit (it becomes the tool domain \"mcp:<name>\")"
                ),
            ));
        }
        validate_server(loc, &base, server, source)?;
    }
    Ok(())
}

fn with<'a>(base: &[Seg<'a>], more: &[Seg<'a>]) -> Vec<Seg<'a>> {
    base.iter().chain(more).copied().collect()
}

fn validate_server(
    loc: &Located<'_>,
    base: &[Seg<'_>],
    s: &McpServerConfig,
    source: Source,
) -> Result<(), ConfigError> {
    use Seg::{Idx, Key};
    match (&s.command, &s.url, source) {
        (Some(_), Some(_), _) => {
            return Err(loc.at(
                &with(base, &[Key("url")]),
                "a server is either a stdio `command` or a Streamable HTTP `url`, not both; remove one",
            ));
        }
        (None, None, Source::Config) => {
            return Err(loc.at(
                base,
                "needs command = [\"program\", \"arg\"] (a stdio server run in the sandbox) or url = \"https://...\" (a Streamable HTTP server)",
            ));
        }
        (None, None, Source::Manifest) => {
            // Uses config.toml's definition: only narrowing fields apply.
            if !s.env.is_empty() {
                return Err(loc.at(
                    &with(base, &[Key("env")]),
                    "this entry has no command or url, so it uses config.toml's definition of the server, and only config.toml may set its environment; move env there, or define the server here with command or url",
                ));
            }
            if !s.read_only.is_empty() {
                return Err(loc.at(
                    &with(base, &[Key("read_only")]),
                    "this entry has no command or url, so it uses config.toml's definition of the server, and only config.toml may widen what it reads; move read_only there, or define the server here with command or url",
                ));
            }
        }
        _ => {}
    }
    if let Some(cmd) = &s.command {
        let cmd_at = with(base, &[Key("command")]);
        if cmd.first().is_none_or(|a| a.is_empty()) {
            return Err(loc.at(
                &cmd_at,
                "is empty; give the program and its arguments, e.g. [\"npx\", \"-y\", \"@modelcontextprotocol/server-filesystem\", \"{workspace}\"]",
            ));
        }
        if cmd.len() > MAX_MCP_ARGS {
            return Err(loc.at(
                &cmd_at,
                format_args!("has {} words; at most {MAX_MCP_ARGS}", cmd.len()),
            ));
        }
        for (i, word) in cmd.iter().enumerate() {
            if word.contains('\0') || word.len() > MAX_MCP_TEXT {
                return Err(loc.at(
                    &with(base, &[Key("command"), Idx(i)]),
                    format_args!(
                        "contains a NUL byte or is longer than {MAX_MCP_TEXT} bytes; no program can receive it"
                    ),
                ));
            }
        }
    }
    let hosts_at = with(base, &[Key("allowed_domains")]);
    if s.allowed_domains.len() > MAX_MCP_HOSTS {
        return Err(loc.at(
            &hosts_at,
            format_args!(
                "lists {} hosts; at most {MAX_MCP_HOSTS} (use a \"*.domain\" pattern)",
                s.allowed_domains.len()
            ),
        ));
    }
    let mut patterns = Vec::new();
    for (i, h) in s.allowed_domains.iter().enumerate() {
        patterns.push(
            HostPattern::parse(h)
                .map_err(|e| loc.at(&with(base, &[Key("allowed_domains"), Idx(i)]), e))?,
        );
    }
    if let Some(url) = &s.url {
        check_url(url, &patterns).map_err(|e| loc.at(&with(base, &[Key("url")]), e))?;
    }
    if s.env.len() > MAX_MCP_ENV {
        return Err(loc.at(
            &with(base, &[Key("env")]),
            format_args!("sets {} variables; at most {MAX_MCP_ENV}", s.env.len()),
        ));
    }
    for (var, value) in &s.env {
        let var_at = with(base, &[Key("env"), Key(var.as_str())]);
        if !is_env_name(var) {
            return Err(loc.at(
                &var_at,
                format_args!(
                    "{var:?} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128)"
                ),
            ));
        }
        if is_reserved_env(var) {
            return Err(loc.at(
                &var_at,
                format_args!(
                    "{var} is reserved: the runtime sets BULWARK_* and the proxy variables itself, and LD_*/DYLD_* would load code into every program of the server; remove it"
                ),
            ));
        }
        if value.contains('\0') || value.len() > MAX_MCP_TEXT {
            return Err(loc.at(
                &var_at,
                format_args!("contains a NUL byte or is longer than {MAX_MCP_TEXT} bytes"),
            ));
        }
    }
    if s.read_only.len() > MAX_MCP_READ_ONLY {
        return Err(loc.at(
            &with(base, &[Key("read_only")]),
            format_args!(
                "lists {} directories; at most {MAX_MCP_READ_ONLY}",
                s.read_only.len()
            ),
        ));
    }
    for (i, dir) in s.read_only.iter().enumerate() {
        let text = dir.to_string_lossy();
        if !dir.is_absolute() || text.contains('\0') || text.len() > MAX_MCP_TEXT {
            return Err(loc.at(
                &with(base, &[Key("read_only"), Idx(i)]),
                format_args!(
                    "{text:?} must be an absolute path, e.g. \"/usr/lib/node_modules\" (relative paths would depend on where Bulwark runs)"
                ),
            ));
        }
    }
    if let Some(t) = s.timeout_secs
        && !(1..=MAX_MCP_TIMEOUT_SECS).contains(&t)
    {
        return Err(loc.at(
            &with(base, &[Key("timeout_secs")]),
            format_args!("{t} is out of range; use 1 to {MAX_MCP_TIMEOUT_SECS} seconds"),
        ));
    }
    Ok(())
}

/// An HTTP server's endpoint: http(s), no credentials in it, and a host
/// and port its own `allowed_domains` cover (the session's client refuses
/// any other, so a URL outside them could never be reached).
pub(crate) fn check_url(url: &str, hosts: &[HostPattern]) -> Result<(), String> {
    if url.len() > MAX_MCP_TEXT {
        return Err(format!("is longer than {MAX_MCP_TEXT} bytes"));
    }
    let parsed = url::Url::parse(url).map_err(|e| {
        format!("{url:?} is not a URL ({e}); write it whole, e.g. \"https://mcp.example.com/mcp\"")
    })?;
    if !matches!(parsed.scheme(), "https" | "http") {
        return Err(format!(
            "{url:?} must be an https:// (or http://) URL: a Streamable HTTP endpoint"
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "{url:?} carries a user name or password; keep secrets out of manifests and send them with a credential grant with tools = [\"mcp:<server>\"]"
        ));
    }
    let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) else {
        return Err(format!("{url:?} names no host"));
    };
    if !hosts.iter().any(|p| p.covers(host, port)) {
        return Err(format!(
            "{host}:{port} is not in this server's allowed_domains; add \"{host}\" to its allowed_domains"
        ));
    }
    Ok(())
}

/// Every `mcp:<server>` the manifest names (tools, operations, approvals,
/// credential grants, taint sinks, `tool_invoke` capabilities) must be a
/// server it declares: a rule for an undeclared one would be ignored, and a
/// misspelt deny or approval would silently not hold.
pub(crate) fn check_manifest_refs(loc: &Located<'_>, m: &Manifest) -> Result<(), ConfigError> {
    use Seg::{Idx, Key};
    let check = |text: &str, at: &[Seg<'_>]| -> Result<(), ConfigError> {
        let domain = split_domain_operation(text).map_or(text, |(d, _)| d);
        match mcp_server_of(domain) {
            Some(server) if !m.mcp.servers.contains_key(server) => Err(loc.at(
                at,
                format_args!(
                    "{domain:?} names MCP server {server:?}, which this manifest does not declare: add [mcp.servers.{server}] (with command or url, or empty to use config.toml's server of that name), or correct the name"
                ),
            )),
            _ => Ok(()),
        }
    };
    for (i, d) in m.tools.allow.iter().flatten().enumerate() {
        check(d, &[Key("tools"), Key("allow"), Idx(i)])?;
    }
    for (i, d) in m.tools.deny.iter().enumerate() {
        check(d, &[Key("tools"), Key("deny"), Idx(i)])?;
    }
    for d in m.tools.operations.keys() {
        check(d, &[Key("tools"), Key("operations"), Key(d.as_str())])?;
    }
    for (i, d) in m.approval.tools.iter().enumerate() {
        check(d, &[Key("approval"), Key("tools"), Idx(i)])?;
    }
    for (i, d) in m.approval.operations.iter().enumerate() {
        check(d, &[Key("approval"), Key("operations"), Idx(i)])?;
    }
    for (name, grant) in &m.credentials.grants {
        for (i, d) in grant.tools.iter().enumerate() {
            check(
                d,
                &[
                    Key("credentials"),
                    Key("grants"),
                    Key(name.as_str()),
                    Key("tools"),
                    Idx(i),
                ],
            )?;
        }
    }
    for sink in m.taint.sinks.keys() {
        check(sink, &[Key("taint"), Key("sinks"), Key(sink.as_str())])?;
    }
    for (i, cap) in m.capabilities.iter().enumerate() {
        if let Capability::ToolInvoke { tool } = cap {
            check(tool, &[Key("capabilities"), Idx(i), Key("tool")])?;
        }
    }
    Ok(())
}
