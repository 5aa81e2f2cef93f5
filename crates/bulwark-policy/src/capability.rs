//! Capabilities (what an agent is granted) and demands (what one tool call
//! concretely asks for), with matching (`covers`) and subsumption
//! (`is_subset_of`, used for child ⊆ parent and for ceilings).
//!
//! Every question here fails closed: an invalid pattern covers nothing and is
//! a subset of nothing, and subsumption answers "no" whenever it cannot prove
//! "yes".

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::glob::{PathGlob, segment_matches, segment_subset};
use crate::path::WorkspacePath;

/// One granted authority. The TOML form is a table with a `kind` tag, e.g.
/// `{ kind = "file_read", path = "notes/**" }`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Capability {
    /// Read files matching a workspace-relative glob.
    FileRead { path: String },
    /// Write (create, modify, delete) files matching a workspace-relative glob.
    FileWrite { path: String },
    /// Open connections to `host[:port]`; host exact, `*.suffix` or `*`.
    NetConnect { host: String },
    /// Use every operation of one tool domain, or `*` for every domain.
    ToolInvoke { tool: String },
    /// Use every tool domain.
    ToolAll,
    /// Run a command whose argv matches these element patterns.
    ShellExec { argv: Vec<String> },
    /// Read memory in scope `agent`, `user` or `*`.
    MemoryRead { scope: String },
    /// Write memory in scope `agent`, `user` or `*`.
    MemoryWrite { scope: String },
    /// Spawn child agents whose name matches a glob.
    AgentSpawn { agent: String },
    /// Send messages to agents whose name matches a glob.
    AgentMessage { agent: String },
    /// Stop agents whose name matches a glob.
    AgentKill { agent: String },
    /// Query models whose `provider:model` matches a glob: the session's
    /// own model calls (when any layer declares one) and a child's model.
    LlmQuery { model: String },
    /// Ask for at most this many output tokens per model call (the
    /// request's `max_tokens` is lowered to it).
    LlmMaxTokens { max: u32 },
    /// Reserve at most this many credits for one model call or priced
    /// tool call.
    EconSpend { max: u64 },
    /// Transfer at most this many credits per call.
    EconTransfer { max: u64 },
}

/// Every `kind` tag, for teaching error messages.
pub const CAPABILITY_KINDS: &[&str] = &[
    "file_read",
    "file_write",
    "net_connect",
    "tool_invoke",
    "tool_all",
    "shell_exec",
    "memory_read",
    "memory_write",
    "agent_spawn",
    "agent_message",
    "agent_kill",
    "llm_query",
    "llm_max_tokens",
    "econ_spend",
    "econ_transfer",
];

/// A concrete request derived from one tool call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Demand {
    FileRead(WorkspacePath),
    FileWrite(WorkspacePath),
    /// `host` is a lowercase host name or an IP literal (IPv6 without brackets).
    NetConnect {
        host: String,
        port: u16,
    },
    Tool {
        domain: String,
        operation: String,
    },
    ShellExec(Vec<String>),
    /// Scope `agent` or `user`.
    MemoryRead(String),
    MemoryWrite(String),
    AgentSpawn(String),
    AgentMessage(String),
    AgentKill(String),
    /// `provider:model`.
    LlmQuery(String),
    LlmTokens(u32),
    EconSpend(u64),
    EconTransfer(u64),
}

/// Parsed `host[:port]` pattern: `*`, `*.suffix` (the suffix and its
/// subdomains) or an exact host, with an optional port. Shared by
/// `net_connect` capabilities and credential grant hosts so both read a
/// pattern the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    host: HostPart,
    /// `None` = any port (`*` or omitted).
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPart {
    Any,
    /// `*.suffix`: the suffix itself and every subdomain of it (lowercase).
    Suffix(String),
    /// Exact host (lowercase).
    Exact(String),
}

impl HostPattern {
    pub fn parse(pattern: &str) -> Result<HostPattern, String> {
        let bad = |why: &str| Err(format!("host pattern {pattern:?} {why}"));
        if pattern.is_empty() {
            return bad("is empty");
        }
        if pattern.chars().any(|c| {
            c.is_control() || c.is_whitespace() || matches!(c, '/' | '@' | '\\' | '?' | '#')
        }) {
            return bad("must be a bare host[:port] (no scheme, path, user or whitespace)");
        }
        let (host, port) = if let Some(rest) = pattern.strip_prefix('[') {
            let Some((h, after)) = rest.split_once(']') else {
                return bad("has an unclosed '['");
            };
            match after {
                "" => (h, None),
                a => match a.strip_prefix(':') {
                    Some(p) => (h, Some(p)),
                    None => return bad("has text after ']' that is not ':port'"),
                },
            }
        } else if pattern.matches(':').count() > 1 {
            // A bare IPv6 literal: no port can be given without brackets.
            (pattern, None)
        } else {
            match pattern.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (pattern, None),
            }
        };
        let port = match port {
            None | Some("*") => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return bad("has a port that is not 1-65535 or '*'"),
            },
        };
        let host = host.to_ascii_lowercase();
        let host = if host == "*" {
            HostPart::Any
        } else if let Some(suffix) = host.strip_prefix("*.") {
            if suffix.is_empty() || suffix.contains('*') || suffix.starts_with('.') {
                return bad("must be \"*.domain\" with a non-empty domain");
            }
            HostPart::Suffix(suffix.to_string())
        } else if host.is_empty() || host.contains('*') {
            return bad("may use '*' only as \"*\" or as a leading \"*.\"");
        } else if host.starts_with('.') || host.ends_with('.') || host.contains("..") {
            return bad("has an empty label");
        } else {
            HostPart::Exact(canonical_ip(&host).unwrap_or(host))
        };
        Ok(HostPattern { host, port })
    }

    /// Whether the host part is the bare `*` (any host, whatever the port).
    pub(crate) fn is_any_host(&self) -> bool {
        self.host == HostPart::Any
    }

    /// Whether `host:port` matches. `host` should be in the `url` crate's
    /// normalized form; a trailing dot and IPv6 brackets are ignored.
    pub fn covers(&self, host: &str, port: u16) -> bool {
        let host = host
            .trim_end_matches('.')
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let host = canonical_ip(&host).unwrap_or(host);
        let host_ok = match &self.host {
            HostPart::Any => true,
            HostPart::Suffix(s) => {
                host == *s
                    || host
                        .strip_suffix(s.as_str())
                        .is_some_and(|p| p.ends_with('.'))
            }
            HostPart::Exact(h) => host == *h,
        };
        host_ok && self.port.is_none_or(|p| p == port)
    }

    /// Is every `host:port` this pattern covers also covered by `wide`?
    /// Used for child ⊆ parent checks (capabilities, credential grant
    /// hosts). Conservative: answers `false` whenever it cannot prove
    /// `true`, so a caller refusing on `false` fails closed.
    pub fn is_subset_of(&self, wide: &HostPattern) -> bool {
        let port_ok = match (self.port, wide.port) {
            (_, None) => true,
            (Some(a), Some(b)) => a == b,
            (None, Some(_)) => false,
        };
        let in_suffix =
            |h: &str, s: &str| h == s || h.strip_suffix(s).is_some_and(|p| p.ends_with('.'));
        let host_ok = match (&self.host, &wide.host) {
            (_, HostPart::Any) => true,
            (HostPart::Any, _) => false,
            (HostPart::Suffix(a), HostPart::Suffix(b)) => in_suffix(a, b),
            (HostPart::Exact(h), HostPart::Suffix(s)) => in_suffix(h, s),
            (HostPart::Exact(a), HostPart::Exact(b)) => a == b,
            (HostPart::Suffix(_), HostPart::Exact(_)) => false,
        };
        port_ok && host_ok
    }
}

/// An IPv6 literal in its one canonical spelling (`0:0::1` and `::1` are
/// the same address; the URL parser and `Ipv6Addr` print the short form),
/// so a grant and a URL naming the same address always compare equal.
fn canonical_ip(host: &str) -> Option<String> {
    host.parse::<std::net::Ipv6Addr>()
        .ok()
        .map(|ip| ip.to_string())
}

/// Validate a single-string glob (agent names, models).
fn check_name_glob(what: &str, pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err(format!("{what} pattern is empty; use \"*\" for any"));
    }
    if pattern.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "{what} pattern {pattern:?} contains whitespace or a control character"
        ));
    }
    Ok(())
}

fn check_scope(scope: &str) -> Result<(), String> {
    match scope {
        "agent" | "user" | "*" => Ok(()),
        other => Err(format!(
            "memory scope {other:?} is not one of \"agent\", \"user\", \"*\""
        )),
    }
}

/// Is `name` a valid tool domain name (also used for agent-facing names)?
pub(crate) fn is_domain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

fn check_argv(argv: &[String]) -> Result<(), String> {
    if argv.is_empty() {
        return Err("shell_exec argv is empty; give the command and argument patterns, e.g. [\"git\", \"status\"]".into());
    }
    if argv.first().is_some_and(|a| a == "**") {
        return Err("shell_exec argv must start with a command pattern, not \"**\"".into());
    }
    for (i, a) in argv.iter().enumerate() {
        if a.contains('\0') {
            return Err(format!("shell_exec argv[{i}] contains NUL"));
        }
        if a == "**" && i + 1 != argv.len() {
            return Err(format!(
                "shell_exec argv[{i}] is \"**\", which is only allowed as the last element"
            ));
        }
    }
    Ok(())
}

/// Element-wise argv matching; a final `**` matches any remaining args.
fn argv_covers(pat: &[String], argv: &[String]) -> bool {
    let (fixed, rest) = match pat.split_last() {
        Some((last, init)) if last == "**" => (init, true),
        _ => (pat, false),
    };
    let len_ok = if rest {
        argv.len() >= fixed.len()
    } else {
        argv.len() == fixed.len()
    };
    len_ok && fixed.iter().zip(argv).all(|(p, a)| segment_matches(p, a))
}

fn argv_subset(a: &[String], b: &[String]) -> bool {
    let split = |v: &[String]| -> (Vec<String>, bool) {
        match v.split_last() {
            Some((last, init)) if last == "**" => (init.to_vec(), true),
            _ => (v.to_vec(), false),
        }
    };
    let (af, at) = split(a);
    let (bf, bt) = split(b);
    let len_ok = if bt {
        af.len() >= bf.len()
    } else {
        !at && af.len() == bf.len()
    };
    len_ok && af.iter().zip(&bf).all(|(x, y)| segment_subset(x, y))
}

impl Capability {
    /// Check patterns for things that are empty, ambiguous or could reach
    /// outside what the author meant. Invalid capabilities cover nothing.
    pub fn validate(&self) -> Result<(), String> {
        use Capability::*;
        match self {
            FileRead { path } | FileWrite { path } => PathGlob::parse(path).map(|_| ()),
            NetConnect { host } => HostPattern::parse(host).map(|_| ()),
            ToolInvoke { tool } => {
                if tool == "*" || crate::mcp::is_tool_domain(tool) {
                    Ok(())
                } else {
                    Err(format!(
                        "tool {tool:?} is not a tool domain name ([a-z0-9_-]) or \"*\""
                    ))
                }
            }
            LlmMaxTokens { max: 0 } => Err(
                "llm_max_tokens max is 0, which would refuse every model call; give the largest max_tokens one call may ask for (at least 1)"
                    .into(),
            ),
            ToolAll | LlmMaxTokens { .. } | EconSpend { .. } | EconTransfer { .. } => Ok(()),
            ShellExec { argv } => check_argv(argv),
            MemoryRead { scope } | MemoryWrite { scope } => check_scope(scope),
            AgentSpawn { agent } | AgentMessage { agent } | AgentKill { agent } => {
                check_name_glob("agent", agent)
            }
            LlmQuery { model } => check_name_glob("model", model),
        }
    }

    /// Does this capability authorize `demand`?
    pub fn covers(&self, demand: &Demand) -> bool {
        use Capability as C;
        use Demand as D;
        if self.validate().is_err() {
            return false;
        }
        match (self, demand) {
            (C::FileRead { path: p }, D::FileRead(w)) => {
                PathGlob::parse(p).is_ok_and(|g| g.matches(w.components()))
            }
            // Writes must name dotfiles and repository configuration.
            (C::FileWrite { path: p }, D::FileWrite(w)) => {
                PathGlob::parse(p).is_ok_and(|g| g.matches_for_write(w.components()))
            }
            (C::NetConnect { host: pat }, D::NetConnect { host, port }) => {
                HostPattern::parse(pat).is_ok_and(|h| h.covers(host, *port))
            }
            (C::ToolInvoke { tool }, D::Tool { domain, .. }) => tool == "*" || tool == domain,
            (C::ToolAll, D::Tool { .. }) => true,
            (C::ShellExec { argv: p }, D::ShellExec(argv)) => argv_covers(p, argv),
            (C::MemoryRead { scope: s }, D::MemoryRead(d))
            | (C::MemoryWrite { scope: s }, D::MemoryWrite(d)) => s == "*" || s == d,
            (C::AgentSpawn { agent: p }, D::AgentSpawn(a))
            | (C::AgentMessage { agent: p }, D::AgentMessage(a))
            | (C::AgentKill { agent: p }, D::AgentKill(a)) => segment_matches(p, a),
            (C::LlmQuery { model: p }, D::LlmQuery(m)) => segment_matches(p, m),
            (C::LlmMaxTokens { max }, D::LlmTokens(n)) => n <= max,
            (C::EconSpend { max }, D::EconSpend(n))
            | (C::EconTransfer { max }, D::EconTransfer(n)) => n <= max,
            _ => false,
        }
    }

    /// Conservative: true only when every demand self covers is covered by `other`.
    pub fn is_subset_of(&self, other: &Capability) -> bool {
        use Capability as C;
        if self.validate().is_err() || other.validate().is_err() {
            return false;
        }
        match (self, other) {
            (C::FileRead { path: a }, C::FileRead { path: b }) => {
                match (PathGlob::parse(a), PathGlob::parse(b)) {
                    (Ok(ga), Ok(gb)) => ga.is_subset_of(&gb),
                    _ => false,
                }
            }
            (C::FileWrite { path: a }, C::FileWrite { path: b }) => {
                match (PathGlob::parse(a), PathGlob::parse(b)) {
                    (Ok(ga), Ok(gb)) => ga.is_write_subset_of(&gb),
                    _ => false,
                }
            }
            (C::NetConnect { host: a }, C::NetConnect { host: b }) => {
                match (HostPattern::parse(a), HostPattern::parse(b)) {
                    (Ok(ha), Ok(hb)) => ha.is_subset_of(&hb),
                    _ => false,
                }
            }
            (C::ToolInvoke { .. } | C::ToolAll, C::ToolAll) => true,
            (C::ToolInvoke { .. } | C::ToolAll, C::ToolInvoke { tool: b }) if b == "*" => true,
            (C::ToolInvoke { tool: a }, C::ToolInvoke { tool: b }) => a == b,
            (C::ShellExec { argv: a }, C::ShellExec { argv: b }) => argv_subset(a, b),
            (C::AgentSpawn { agent: a }, C::AgentSpawn { agent: b })
            | (C::AgentMessage { agent: a }, C::AgentMessage { agent: b })
            | (C::AgentKill { agent: a }, C::AgentKill { agent: b })
            | (C::LlmQuery { model: a }, C::LlmQuery { model: b }) => segment_subset(a, b),
            (C::MemoryRead { scope: a }, C::MemoryRead { scope: b })
            | (C::MemoryWrite { scope: a }, C::MemoryWrite { scope: b }) => b == "*" || a == b,
            (C::LlmMaxTokens { max: a }, C::LlmMaxTokens { max: b }) => a <= b,
            (C::EconSpend { max: a }, C::EconSpend { max: b })
            | (C::EconTransfer { max: a }, C::EconTransfer { max: b }) => a <= b,
            _ => false,
        }
    }

    /// The `kind` tag.
    pub fn kind(&self) -> &'static str {
        use Capability::*;
        match self {
            FileRead { .. } => "file_read",
            FileWrite { .. } => "file_write",
            NetConnect { .. } => "net_connect",
            ToolInvoke { .. } => "tool_invoke",
            ToolAll => "tool_all",
            ShellExec { .. } => "shell_exec",
            MemoryRead { .. } => "memory_read",
            MemoryWrite { .. } => "memory_write",
            AgentSpawn { .. } => "agent_spawn",
            AgentMessage { .. } => "agent_message",
            AgentKill { .. } => "agent_kill",
            LlmQuery { .. } => "llm_query",
            LlmMaxTokens { .. } => "llm_max_tokens",
            EconSpend { .. } => "econ_spend",
            EconTransfer { .. } => "econ_transfer",
        }
    }

    /// The name of the field holding the pattern, for located errors.
    pub(crate) fn pattern_field(&self) -> Option<&'static str> {
        use Capability::*;
        Some(match self {
            FileRead { .. } | FileWrite { .. } => "path",
            NetConnect { .. } => "host",
            ToolInvoke { .. } => "tool",
            ShellExec { .. } => "argv",
            MemoryRead { .. } | MemoryWrite { .. } => "scope",
            AgentSpawn { .. } | AgentMessage { .. } | AgentKill { .. } => "agent",
            LlmQuery { .. } => "model",
            LlmMaxTokens { .. } | EconSpend { .. } | EconTransfer { .. } => "max",
            ToolAll => return None,
        })
    }
}

/// Show an argv with elements quoted only when needed, so the display is
/// unambiguous (`a b` vs `"a b"`).
fn show_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty()
                || a.chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == '"')
            {
                format!("{a:?}")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Capability::*;
        let k = self.kind();
        match self {
            FileRead { path } | FileWrite { path } => write!(f, "{k} {path}"),
            NetConnect { host } => write!(f, "{k} {host}"),
            ToolInvoke { tool } => write!(f, "{k} {tool}"),
            ToolAll => write!(f, "{k}"),
            ShellExec { argv } => write!(f, "{k} {}", show_argv(argv)),
            MemoryRead { scope } | MemoryWrite { scope } => write!(f, "{k} {scope}"),
            AgentSpawn { agent } | AgentMessage { agent } | AgentKill { agent } => {
                write!(f, "{k} {agent}")
            }
            LlmQuery { model } => write!(f, "{k} {model}"),
            LlmMaxTokens { max } => write!(f, "{k} {max}"),
            EconSpend { max } | EconTransfer { max } => write!(f, "{k} {max}"),
        }
    }
}

impl Demand {
    /// The demand's kind without its value (`file_read`, `net_connect`,
    /// ...): the word its [`Display`](fmt::Display) form starts with, safe to
    /// audit because it names no argument.
    pub fn kind(&self) -> &'static str {
        use Demand::*;
        match self {
            FileRead(_) => "file_read",
            FileWrite(_) => "file_write",
            NetConnect { .. } => "net_connect",
            Tool { .. } => "tool",
            ShellExec(_) => "shell_exec",
            MemoryRead(_) => "memory_read",
            MemoryWrite(_) => "memory_write",
            AgentSpawn(_) => "agent_spawn",
            AgentMessage(_) => "agent_message",
            AgentKill(_) => "agent_kill",
            LlmQuery(_) => "llm_query",
            LlmTokens(_) => "llm_tokens",
            EconSpend(_) => "econ_spend",
            EconTransfer(_) => "econ_transfer",
        }
    }
}

impl fmt::Display for Demand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Demand::*;
        match self {
            FileRead(p) => write!(f, "file_read {p}"),
            FileWrite(p) => write!(f, "file_write {p}"),
            NetConnect { host, port } if host.contains(':') => {
                write!(f, "net_connect [{host}]:{port}")
            }
            NetConnect { host, port } => write!(f, "net_connect {host}:{port}"),
            Tool { domain, operation } => write!(f, "tool {domain}:{operation}"),
            ShellExec(argv) => write!(f, "shell_exec {}", show_argv(argv)),
            MemoryRead(s) => write!(f, "memory_read {s}"),
            MemoryWrite(s) => write!(f, "memory_write {s}"),
            AgentSpawn(a) => write!(f, "agent_spawn {a}"),
            AgentMessage(a) => write!(f, "agent_message {a}"),
            AgentKill(a) => write!(f, "agent_kill {a}"),
            LlmQuery(m) => write!(f, "llm_query {m}"),
            LlmTokens(n) => write!(f, "llm_tokens {n}"),
            EconSpend(n) => write!(f, "econ_spend {n}"),
            EconTransfer(n) => write!(f, "econ_transfer {n}"),
        }
    }
}

/// A set of capabilities; a demand is permitted when any member covers it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilitySet(Vec<Capability>);

impl CapabilitySet {
    pub fn new(caps: Vec<Capability>) -> Self {
        CapabilitySet(caps)
    }

    pub fn permits(&self, demand: &Demand) -> bool {
        self.0.iter().any(|c| c.covers(demand))
    }

    /// Every capability of `self` is a subset of some capability of `parent`.
    /// (Conservative: a capability covered only by the union of several
    /// parent capabilities is reported as not a subset.)
    pub fn is_subset_of(&self, parent: &CapabilitySet) -> bool {
        self.0
            .iter()
            .all(|c| parent.0.iter().any(|p| c.is_subset_of(p)))
    }

    /// The capabilities of `self` that are not within `parent`, for error
    /// messages at spawn time.
    pub fn not_within<'a>(
        &'a self,
        parent: &'a CapabilitySet,
    ) -> impl Iterator<Item = &'a Capability> + 'a {
        self.0
            .iter()
            .filter(move |c| !parent.0.iter().any(|p| c.is_subset_of(p)))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Capability> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<Capability> for CapabilitySet {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        CapabilitySet(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a CapabilitySet {
    type Item = &'a Capability;
    type IntoIter = std::slice::Iter<'a, Capability>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
