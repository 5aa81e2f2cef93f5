//! From `[mcp.servers.*]` to the servers a session may start.
//!
//! Only the manifest grants a server, and only when its domain survived
//! every tool layer. A manifest entry without `command` or `url` takes
//! config.toml's definition, and its `allowed_domains` can only narrow
//! config.toml's. Every host then passes the same narrowing as `[sandbox]
//! allowed_domains` (the capability ceilings of config.toml and of the
//! user): a server must never reach a host the agent itself could not be
//! granted. A server's hosts are its own; they grant the agent nothing.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    DEFAULT_MCP_TIMEOUT_SECS, McpSection, McpServer, McpServerConfig, McpTransport, mcp_domain,
};
use crate::capability::HostPattern;
use crate::layering::{Layer, Removal};

/// The outcome of resolution: the servers, what was taken away (hosts and
/// whole servers) and the domains of servers that did not resolve, which
/// the caller removes from the tool map so no call can reach them.
pub(crate) struct Resolved {
    pub servers: BTreeMap<String, McpServer>,
    pub removed: Vec<Removal>,
    pub dropped: Vec<(String, Layer, String)>,
}

/// Why a host may not be reached, by the layer that says so; `Ok` when
/// every layer lets it through.
pub(crate) type HostCheck<'a> = &'a dyn Fn(&str) -> Result<(), (Layer, String)>;

/// [`resolve_with`] without capability ceilings: config.toml's definitions
/// narrowed by the manifest, for the servers whose domain is in `tools`.
/// What was removed is not reported here; [`crate::compute_effective`]
/// applies every layer and records each removal in
/// [`crate::EffectivePolicy::removed`].
pub fn resolve_servers(
    global: &McpSection,
    manifest: &McpSection,
    tools: &BTreeMap<String, BTreeSet<String>>,
) -> BTreeMap<String, McpServer> {
    resolve_with(global, manifest, tools, &|_| Ok(())).servers
}

pub(crate) fn resolve_with(
    global: &McpSection,
    manifest: &McpSection,
    tools: &BTreeMap<String, BTreeSet<String>>,
    host_ok: HostCheck<'_>,
) -> Resolved {
    let mut out = Resolved {
        servers: BTreeMap::new(),
        removed: Vec::new(),
        dropped: Vec::new(),
    };
    for (name, entry) in &manifest.servers {
        let domain = mcp_domain(name);
        if !tools.contains_key(&domain) {
            continue;
        }
        match resolve_one(
            name,
            entry,
            global.servers.get(name),
            host_ok,
            &mut out.removed,
        ) {
            Ok(server) => {
                out.servers.insert(name.clone(), server);
            }
            Err((layer, rule)) => {
                out.removed.push(Removal {
                    item: format!("mcp server {name}"),
                    layer,
                    rule: rule.clone(),
                });
                out.dropped.push((domain, layer, rule));
            }
        }
    }
    out
}

fn resolve_one(
    name: &str,
    entry: &McpServerConfig,
    operator: Option<&McpServerConfig>,
    host_ok: HostCheck<'_>,
    removed: &mut Vec<Removal>,
) -> Result<McpServer, (Layer, String)> {
    let bare = entry.command.is_none() && entry.url.is_none();
    let host_item = |h: &str| format!("mcp server {name} host {h}");
    let (def, mut hosts, timeout) = if bare {
        let Some(op) = operator else {
            return Err((
                Layer::Global,
                format!(
                    "the manifest's [mcp.servers.{name}] names no command or url, so it uses config.toml's server of that name, and config.toml defines none; define it in config.toml, or give command or url in the manifest"
                ),
            ));
        };
        let wide: Vec<HostPattern> = op
            .allowed_domains
            .iter()
            .filter_map(|h| HostPattern::parse(h).ok())
            .collect();
        let hosts = if entry.allowed_domains.is_empty() {
            op.allowed_domains.clone()
        } else {
            let mut kept = Vec::new();
            for h in &entry.allowed_domains {
                let within =
                    HostPattern::parse(h).is_ok_and(|p| wide.iter().any(|w| p.is_subset_of(w)));
                if within {
                    kept.push(h.clone());
                } else {
                    removed.push(Removal {
                        item: host_item(h),
                        layer: Layer::Global,
                        rule: format!(
                            "not within config.toml's [mcp.servers.{name}] allowed_domains (a manifest can only narrow an operator's server)"
                        ),
                    });
                }
            }
            kept
        };
        let timeout = match (entry.timeout_secs, op.timeout_secs) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        (op, hosts, timeout)
    } else {
        (entry, entry.allowed_domains.clone(), entry.timeout_secs)
    };
    let mut cut_by = None;
    hosts.retain(|h| {
        let verdict = match HostPattern::parse(h) {
            Ok(_) => host_ok(h),
            Err(e) => Err((Layer::Manifest, format!("invalid: {e}"))),
        };
        match verdict {
            Ok(()) => true,
            Err((layer, rule)) => {
                cut_by = Some(layer);
                removed.push(Removal {
                    item: host_item(h),
                    layer,
                    rule,
                });
                false
            }
        }
    });
    let transport = match (&def.command, &def.url) {
        (Some(cmd), None) if cmd.first().is_some_and(|a| !a.is_empty()) => McpTransport::Stdio {
            command: cmd.clone(),
        },
        (None, Some(url)) => {
            let patterns: Vec<HostPattern> = hosts
                .iter()
                .filter_map(|h| HostPattern::parse(h).ok())
                .collect();
            if let Err(e) = super::check::check_url(url, &patterns) {
                return Err((
                    cut_by.unwrap_or(Layer::Manifest),
                    format!("its url cannot be reached: {e} (after narrowing)"),
                ));
            }
            McpTransport::Http { url: url.clone() }
        }
        _ => {
            return Err((
                Layer::Manifest,
                "invalid: needs exactly one of a non-empty command and a url".into(),
            ));
        }
    };
    Ok(McpServer {
        name: name.to_string(),
        transport,
        allowed_domains: hosts,
        env: def.env.clone(),
        read_only: def.read_only.clone(),
        timeout_secs: timeout
            .unwrap_or(DEFAULT_MCP_TIMEOUT_SECS)
            .clamp(1, super::MAX_MCP_TIMEOUT_SECS),
    })
}
