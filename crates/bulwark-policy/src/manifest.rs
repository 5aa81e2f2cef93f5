//! The agent manifest (`agents/<name>/agent.toml`): what an agent is, which
//! tools and capabilities it asks for, and how it is sandboxed.
//!
//! Unknown fields are errors everywhere: a typo like `alow = ["shell"]` must
//! not silently become "no restriction".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::capability::Capability;
use crate::credentials::{self, CredentialsSection};
use crate::error::{ConfigError, Located, Seg};
use crate::exec_policy::{ExecPolicy, ExecSection};
use crate::loop_guard::LoopGuardConfig;
use crate::taint::{TaintPolicy, TaintSection};
use crate::validate;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub agent: AgentSection,
    /// In a manifest, `allow` absent or empty means NO tools (fail closed).
    #[serde(default)]
    pub tools: ToolFilter,
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    #[serde(default)]
    pub sandbox: SandboxSection,
    #[serde(default)]
    pub credentials: CredentialsSection,
    #[serde(default)]
    pub access: AccessSection,
    #[serde(default)]
    pub approval: ApprovalSection,
    #[serde(default)]
    pub loop_guard: Option<LoopGuardConfig>,
    /// Which commands may run (`[exec]`). Absent: the `shell_exec`
    /// capabilities alone decide, with wrappers still seen through for
    /// escalators and uncheckable scripts (see [`Manifest::exec_policy`]).
    #[serde(default)]
    pub exec: Option<ExecSection>,
    /// Which sinks untrusted content may reach, per label (`[taint]`).
    /// Absent: the safe defaults ([`TaintPolicy::default`]).
    #[serde(default)]
    pub taint: TaintSection,
    /// MCP servers whose tools the agent may be granted (`[mcp.servers.*]`).
    #[serde(default)]
    pub mcp: crate::mcp::McpSection,
}

impl Manifest {
    /// The compiled exec policy. Without an `[exec]` section this is full
    /// mode: every command the capabilities allow, but never `sudo`-like
    /// escalators or shell scripts that cannot be checked. The capability
    /// check (argv globs) applies in every mode.
    pub fn exec_policy(&self) -> ExecPolicy {
        match &self.exec {
            // Validated by parse_manifest; a manifest built another way
            // that does not compile runs nothing.
            Some(section) => {
                ExecPolicy::from_section(section).unwrap_or_else(|_| ExecPolicy::deny())
            }
            None => Self::default_exec_policy(),
        }
    }

    /// The policy of a manifest without `[exec]`: full mode.
    pub fn default_exec_policy() -> ExecPolicy {
        let full = ExecSection {
            mode: crate::exec_policy::ExecMode::Full,
            allow: Vec::new(),
        };
        ExecPolicy::from_section(&full).unwrap_or_else(|_| ExecPolicy::deny())
    }
}

fn default_max_turns() -> u32 {
    20
}

fn default_max_tokens() -> u32 {
    4096
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// `[a-z0-9][a-z0-9_-]{0,63}`: it becomes a directory name and a log field.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// `provider:model`.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
}

/// Tool allow/deny lists. `deny` always wins over `allow`. What an absent
/// `allow` means depends on the layer: nothing in a manifest, no restriction
/// in the narrowing layers (global, remote, user).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFilter {
    /// Tool domains, or `"*"` for every domain.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// Tool domains (or `"*"`), or `"domain:operation"` to deny one operation.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Per-domain operation filters: `[tools.operations.files]`.
    #[serde(default)]
    pub operations: BTreeMap<String, OpFilter>,
}

/// Operation allow/deny for one domain; `allow` absent = every operation of
/// the (already granted) domain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpFilter {
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    #[serde(default)]
    pub deny: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// Hosts the agent may connect to (`host[:port]` patterns); each becomes
    /// a `net_connect` capability.
    #[serde(default)]
    pub allowed_domains: Vec<String>,
    /// Any host (`net_connect *`). The special-purpose address checks in the
    /// network layer still apply.
    #[serde(default)]
    pub allow_all: bool,
    /// Whether the `shell` domain and `shell_exec` capabilities are usable
    /// at all. Off by default.
    #[serde(default)]
    pub shell: bool,
    /// Hosts (`host[:port]` patterns) shell commands may reach through the
    /// egress proxy (`git clone` from `github.com`). Needs `shell = true`,
    /// and each must lie within the agent's own `net_connect` hosts. Empty:
    /// commands have no network at all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shell_hosts: Vec<String>,
}

/// Most `[sandbox] shell_hosts` entries.
pub const MAX_SHELL_HOSTS: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessSection {
    #[serde(default)]
    pub mode: AccessMode,
    /// Users allowed when `mode = "users"`.
    #[serde(default)]
    pub users: Vec<String>,
}

/// Who may start sessions with this agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessMode {
    /// Every authenticated user.
    Public,
    /// The users listed in `access.users` (and admins).
    Users,
    /// Admins and the local operator only.
    #[default]
    Private,
}

/// What needs a human's approval before it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSection {
    /// Whole domains (or `"*"`).
    #[serde(default)]
    pub tools: Vec<String>,
    /// `"domain:operation"`.
    #[serde(default)]
    pub operations: Vec<String>,
}

/// A parsed `provider:model` reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelRef {
    pub provider: String,
    pub model: String,
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.provider, self.model)
    }
}

/// Parse `provider:model`. The split is at the first ':'; the model part may
/// itself contain ':' and '/' (`ollama:qwen2.5:0.5b`,
/// `script:agents/a/script.jsonl`).
pub fn parse_model_ref(s: &str) -> Result<ModelRef, String> {
    let Some((provider, model)) = s.split_once(':') else {
        return Err(format!(
            "model {s:?} must be \"provider:model\", e.g. \"anthropic:claude-sonnet-4-5\""
        ));
    };
    if provider.is_empty()
        || !provider
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        return Err(format!(
            "model {s:?}: provider {provider:?} must be non-empty lowercase [a-z0-9_-]"
        ));
    }
    if model.is_empty() {
        return Err(format!("model {s:?}: the model name after ':' is empty"));
    }
    if model.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "model {s:?} contains whitespace or a control character"
        ));
    }
    Ok(ModelRef {
        provider: provider.to_string(),
        model: model.to_string(),
    })
}

pub use crate::names::is_agent_name;

/// Parse and validate an agent manifest. `origin` names the file in errors.
pub fn parse_manifest(src: &str, origin: &str) -> Result<Manifest, ConfigError> {
    let loc = Located::new(src, origin);
    let m: Manifest = toml::from_str(src).map_err(|e| loc.toml_error(&e))?;
    use Seg::Key;

    if !is_agent_name(&m.agent.name) {
        return Err(loc.at(
            &[Key("agent"), Key("name")],
            format_args!(
                "{:?} is not a valid agent name: use 1-64 characters [a-z0-9_-], starting with a letter or digit",
                m.agent.name
            ),
        ));
    }
    if let Some(model) = &m.agent.model {
        parse_model_ref(model).map_err(|e| loc.at(&[Key("agent"), Key("model")], e))?;
    }
    if m.agent.max_turns == 0 {
        return Err(loc.at(
            &[Key("agent"), Key("max_turns")],
            "must be at least 1 (0 turns would never run)",
        ));
    }
    if m.agent.max_tokens == 0 {
        return Err(loc.at(&[Key("agent"), Key("max_tokens")], "must be at least 1"));
    }
    validate::tool_filter(&loc, &[Key("tools")], &m.tools)?;
    validate::capabilities(&loc, &[Key("capabilities")], &m.capabilities)?;
    validate::host_patterns(
        &loc,
        &[Key("sandbox"), Key("allowed_domains")],
        &m.sandbox.allowed_domains,
    )?;
    validate_shell_hosts(&loc, &m)?;
    credentials::validate_credentials(&loc, &m.credentials)?;
    crate::mcp::validate_section(&loc, &m.mcp, crate::mcp::Source::Manifest)?;
    crate::mcp::check_manifest_refs(&loc, &m)?;
    for (i, user) in m.access.users.iter().enumerate() {
        if user.trim().is_empty() {
            return Err(loc.at(
                &[Key("access"), Key("users"), Seg::Idx(i)],
                "user name is empty",
            ));
        }
    }
    validate::domains(
        &loc,
        &[Key("approval"), Key("tools")],
        &m.approval.tools,
        true,
    )?;
    for (i, op) in m.approval.operations.iter().enumerate() {
        validate::domain_op(op)
            .map_err(|e| loc.at(&[Key("approval"), Key("operations"), Seg::Idx(i)], e))?;
    }
    if let Some(lg) = &m.loop_guard {
        lg.validate()
            .map_err(|(field, msg)| loc.at(&[Key("loop_guard"), Key(field)], msg))?;
    }
    if let Some(exec) = &m.exec {
        ExecPolicy::from_section(exec).map_err(|e| loc.at(&e.field(), e))?;
    }
    TaintPolicy::from_section(&m.taint).map_err(|e| loc.at(&e.field(), &e))?;
    Ok(m)
}

/// `[sandbox] shell_hosts`: only with a shell, and only hosts the agent
/// itself may reach (the shell must not be a way around its own list).
fn validate_shell_hosts(loc: &Located<'_>, m: &Manifest) -> Result<(), ConfigError> {
    use Seg::{Idx, Key};
    let hosts = &m.sandbox.shell_hosts;
    let at = [Key("sandbox"), Key("shell_hosts")];
    if hosts.is_empty() {
        return Ok(());
    }
    if !m.sandbox.shell {
        return Err(loc.at(
            &at,
            "shell_hosts are hosts shell commands may reach, and this agent has no shell: set sandbox.shell = true, or remove shell_hosts",
        ));
    }
    if hosts.len() > MAX_SHELL_HOSTS {
        return Err(loc.at(
            &at,
            format_args!(
                "lists {} hosts; at most {MAX_SHELL_HOSTS} (use a \"*.domain\" pattern)",
                hosts.len()
            ),
        ));
    }
    validate::host_patterns(loc, &at, hosts)?;
    let own: Vec<Capability> = m
        .capabilities
        .iter()
        .filter(|c| matches!(c, Capability::NetConnect { .. }))
        .cloned()
        .chain(
            m.sandbox
                .allowed_domains
                .iter()
                .map(|h| Capability::NetConnect { host: h.clone() }),
        )
        .chain(
            m.sandbox
                .allow_all
                .then(|| Capability::NetConnect { host: "*".into() }),
        )
        .collect();
    for (i, h) in hosts.iter().enumerate() {
        let cap = Capability::NetConnect { host: h.clone() };
        if !own.iter().any(|c| cap.is_subset_of(c)) {
            return Err(loc.at(
                &[at[0], at[1], Idx(i)],
                format_args!(
                    "{h:?} is not within the agent's own hosts: add it to sandbox.allowed_domains (or a net_connect capability) too; shell commands may reach only hosts the agent may"
                ),
            ));
        }
    }
    Ok(())
}
