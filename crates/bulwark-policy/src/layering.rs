//! Policy layering: the effective policy of a session is computed once from
//!
//! ```text
//! global config ∩ agent manifest ∩ remote sandbox (remote sessions only)
//!               ∩ user restrictions ∩ operation allowlists
//! ```
//!
//! Only the manifest grants; every other layer can only remove. Each removal
//! is recorded with the layer and the rule that caused it, so "why can't my
//! agent write files?" has an exact answer (`EffectivePolicy::explain`) and
//! every denial message can name its cause.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use serde::Serialize;

use crate::access::{UserEntry, user_may_use_agent};
use crate::call_limits::CallLimits;
use crate::capability::{Capability, CapabilitySet, Demand};
use crate::config::GlobalConfig;
use crate::loop_guard::LoopGuardConfig;
use crate::manifest::{ApprovalSection, Manifest, SandboxSection, ToolFilter};

/// The tools that exist: domain -> operations. Supplied by the kernel's
/// registry, since this crate knows no tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCatalog {
    domains: BTreeMap<String, Vec<String>>,
}

impl ToolCatalog {
    /// Build from (domain, operations); repeated domains are merged and
    /// operations deduplicated.
    pub fn new(entries: impl IntoIterator<Item = (String, Vec<String>)>) -> Self {
        let mut domains: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (d, ops) in entries {
            let slot = domains.entry(d).or_default();
            for op in ops {
                if !slot.contains(&op) {
                    slot.push(op);
                }
            }
        }
        ToolCatalog { domains }
    }

    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(String::as_str)
    }

    pub fn operations(&self, domain: &str) -> Option<&[String]> {
        self.domains.get(domain).map(Vec::as_slice)
    }

    pub fn contains(&self, domain: &str, op: &str) -> bool {
        self.domains
            .get(domain)
            .is_some_and(|ops| ops.iter().any(|o| o == op))
    }
}

/// Where a restriction came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    Global,
    Manifest,
    RemoteSandbox,
    User,
    Operations,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Global => "global config",
            Layer::Manifest => "agent manifest",
            Layer::RemoteSandbox => "remote sandbox policy",
            Layer::User => "user restrictions",
            Layer::Operations => "operation allowlist",
        })
    }
}

/// The inputs of one session's policy.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInputs<'a> {
    pub global: &'a GlobalConfig,
    pub manifest: &'a Manifest,
    /// A remote (server) session: the remote sandbox layer applies.
    pub remote: bool,
    /// The authenticated user and their access entry; `None` for the local
    /// operator.
    pub user: Option<(&'a str, &'a UserEntry)>,
}

/// Something the manifest granted that a layer took away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Removal {
    /// `tool shell`, `operation files:write`, `capability file_write **`.
    pub item: String,
    pub layer: Layer,
    /// The rule, e.g. `tools.deny contains "shell"`.
    pub rule: String,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DenyReason {
    Tool,
    Operation,
    Capability,
}

impl DenyReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            DenyReason::Tool => "tool",
            DenyReason::Operation => "operation",
            DenyReason::Capability => "capability",
        }
    }
}

/// A refusal with a message fit for the model and the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub reason: DenyReason,
    pub message: String,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Denial {}

/// The policy of one session, computed once by [`compute_effective`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EffectivePolicy {
    pub agent: String,
    /// domain -> allowed operations (never an empty set).
    pub tools: BTreeMap<String, BTreeSet<String>>,
    pub capabilities: CapabilitySet,
    /// Which models, how many output tokens and how many credits one of
    /// the agent's own calls may use (every layer narrows).
    pub call_limits: CallLimits,
    pub approval: ApprovalSection,
    /// The manifest's sandbox, narrowed to what survived: `shell` is off
    /// unless the `shell` tool domain survived every layer, and only hosts whose `net_connect`
    /// capability survived remain.
    pub sandbox: SandboxSection,
    /// The manifest's if set, else the global one.
    pub loop_guard: LoopGuardConfig,
    /// The `[taint]` sink rules: the defaults overlaid by the manifest.
    /// No other layer changes them (they can only make calls ask more, and
    /// a narrowing layer for them does not exist yet).
    pub taint: crate::taint::TaintPolicy,
    /// The MCP servers whose domain survived every layer, resolved
    /// (config.toml's definition narrowed by the manifest, each host
    /// narrowed like `[sandbox] allowed_domains`), by name.
    pub mcp: BTreeMap<String, crate::mcp::McpServer>,
    /// Operations taken away from a domain whose operation set is open
    /// (`"*"` in [`Self::tools`]): an MCP server's, whose tool names are
    /// known only when the session starts it.
    pub denied_operations: BTreeMap<String, BTreeSet<String>>,
    pub removed: Vec<Removal>,
    /// Removed capabilities with the index of their `Removal`, so a denied
    /// demand can say which layer took away the capability that would have
    /// covered it.
    #[serde(skip)]
    removed_caps: Vec<(Capability, usize)>,
}

/// `llm_max_tokens` and `econ_spend`: limits every layer narrows.
fn is_call_limit(cap: &Capability) -> bool {
    matches!(
        cap,
        Capability::LlmMaxTokens { .. } | Capability::EconSpend { .. }
    )
}

/// Working state while layers are applied.
struct Builder {
    tools: BTreeMap<String, BTreeSet<String>>,
    /// See [`EffectivePolicy::denied_operations`].
    denied: BTreeMap<String, BTreeSet<String>>,
    caps: Vec<Capability>,
    removed: Vec<Removal>,
    removed_caps: Vec<(Capability, usize)>,
}

impl Builder {
    fn remove(&mut self, item: String, layer: Layer, rule: String) {
        self.removed.push(Removal { item, layer, rule });
    }

    fn remove_domain(&mut self, domain: &str, layer: Layer, rule: &str) {
        if self.tools.remove(domain).is_some() {
            self.denied.remove(domain);
            self.remove(format!("tool {domain}"), layer, rule.to_string());
        }
    }

    fn remove_op(&mut self, domain: &str, op: &str, layer: Layer, rule: &str) {
        let Some(ops) = self.tools.get_mut(domain) else {
            return;
        };
        if ops.remove(op) {
            if ops.is_empty() {
                self.tools.remove(domain);
                self.denied.remove(domain);
            }
            self.remove(format!("operation {domain}:{op}"), layer, rule.to_string());
        } else if op != "*"
            && ops.contains("*")
            && self
                .denied
                .entry(domain.to_string())
                .or_default()
                .insert(op.to_string())
        {
            // An open domain (an MCP server's): the operation is named
            // before it exists, and stays refused whatever the server lists.
            self.remove(format!("operation {domain}:{op}"), layer, rule.to_string());
        }
    }

    /// `[<prefix>.operations.<domain>]` on an open domain: the deny list
    /// is remembered by name, and an allow list replaces "every operation"
    /// with the operations it names.
    fn apply_open_filter(
        &mut self,
        domain: &str,
        f: &crate::manifest::OpFilter,
        layer: Layer,
        base: &str,
    ) {
        if let Some(hit) = f.deny.iter().find(|d| *d == "*") {
            self.remove_domain(domain, layer, &format!("{base}.deny contains {hit:?}"));
            return;
        }
        for op in &f.deny {
            self.remove_op(domain, op, layer, &format!("{base}.deny contains {op:?}"));
        }
        let Some(allow) = &f.allow else { return };
        if allow.iter().any(|a| a == "*") {
            return;
        }
        let denied = self.denied.get(domain).cloned().unwrap_or_default();
        let Some(ops) = self.tools.get_mut(domain) else {
            return;
        };
        ops.remove("*");
        ops.extend(allow.iter().filter(|a| !denied.contains(*a)).cloned());
        if ops.is_empty() {
            self.tools.remove(domain);
            self.denied.remove(domain);
        }
        self.remove(
            format!("operation {domain}:*"),
            layer,
            format!("{base}.allow lists only {allow:?}"),
        );
    }

    fn remove_caps_where(&mut self, layer: Layer, rule: &dyn Fn(&Capability) -> Option<String>) {
        let caps = std::mem::take(&mut self.caps);
        for cap in caps {
            match rule(&cap) {
                Some(why) => {
                    self.remove(format!("capability {cap}"), layer, why);
                    self.removed_caps.push((cap, self.removed.len() - 1));
                }
                None => self.caps.push(cap),
            }
        }
    }

    /// Keep only capabilities within some capability of `ceiling`. The
    /// per-call limits (`llm_max_tokens`, `econ_spend`) are not grants a
    /// ceiling can take away (that would lift the limit): they are
    /// narrowed afterwards, in [`CallLimits`].
    fn apply_ceiling(&mut self, ceiling: &[Capability], layer: Layer, name: &str) {
        self.remove_caps_where(layer, &|cap| {
            (!is_call_limit(cap) && !ceiling.iter().any(|c| cap.is_subset_of(c)))
                .then(|| format!("not within {name}"))
        });
    }

    /// Apply a narrowing filter's `allow` (None = no restriction) and `deny`.
    fn apply_domain_filter(&mut self, filter: &ToolFilter, layer: Layer, prefix: &str) {
        if let Some(allow) = &filter.allow
            && !allow.iter().any(|a| a == "*")
        {
            let present: Vec<String> = self.tools.keys().cloned().collect();
            for d in present {
                if !allow.contains(&d) {
                    self.remove_domain(&d, layer, &format!("{prefix}.allow does not list {d:?}"));
                }
            }
        }
        self.apply_deny(filter, layer, prefix);
    }

    fn apply_deny(&mut self, filter: &ToolFilter, layer: Layer, prefix: &str) {
        for entry in &filter.deny {
            let rule = format!("{prefix}.deny contains {entry:?}");
            match crate::mcp::split_domain_operation(entry) {
                Some((d, "*")) => self.remove_domain(d, layer, &rule),
                Some((d, op)) => self.remove_op(d, op, layer, &rule),
                None if entry == "*" => {
                    let present: Vec<String> = self.tools.keys().cloned().collect();
                    for d in present {
                        self.remove_domain(&d, layer, &rule);
                    }
                }
                None => self.remove_domain(entry, layer, &rule),
            }
        }
    }

    /// Apply `[<prefix>.operations.<domain>]` filters.
    fn apply_op_filters(&mut self, filter: &ToolFilter, layer: Layer, prefix: &str) {
        for (domain, f) in &filter.operations {
            let Some(ops) = self.tools.get(domain) else {
                continue;
            };
            let base = format!("{prefix}.operations.{domain}");
            if ops.contains("*") {
                self.apply_open_filter(domain, f, layer, &base);
                continue;
            }
            let ops: Vec<String> = ops.iter().cloned().collect();
            for op in ops {
                let rule = if f.deny.iter().any(|d| d == "*" || *d == op) {
                    let hit = f
                        .deny
                        .iter()
                        .find(|d| *d == "*" || **d == op)
                        .map_or("*", String::as_str);
                    Some(format!("{base}.deny contains {hit:?}"))
                } else if let Some(allow) = &f.allow
                    && !allow.iter().any(|a| a == "*" || *a == op)
                {
                    Some(format!("{base}.allow does not list {op:?}"))
                } else {
                    None
                };
                if let Some(rule) = rule {
                    self.remove_op(domain, &op, layer, &rule);
                }
            }
        }
    }
}

/// Compute a session's effective policy. Pure and deterministic; call it
/// once per session and keep the result.
pub fn compute_effective(inputs: &PolicyInputs, catalog: &ToolCatalog) -> EffectivePolicy {
    let m = inputs.manifest;
    let g = inputs.global;
    let mut b = Builder {
        tools: BTreeMap::new(),
        denied: BTreeMap::new(),
        caps: Vec::new(),
        removed: Vec::new(),
        removed_caps: Vec::new(),
    };
    let user_denied = inputs
        .user
        .and_then(|(name, entry)| user_may_use_agent(m, name, entry).err());
    let user_prefix = inputs.user.map(|(name, _)| format!("users.{name}.tools"));

    // ---- capabilities: the manifest grants, the ceilings narrow ----
    let mut granted: Vec<Capability> = Vec::new();
    let derived = m
        .sandbox
        .allowed_domains
        .iter()
        .map(|h| Capability::NetConnect { host: h.clone() })
        .chain(
            m.sandbox
                .allow_all
                .then(|| Capability::NetConnect { host: "*".into() }),
        );
    for cap in m.capabilities.iter().cloned().chain(derived) {
        if !granted.contains(&cap) {
            granted.push(cap);
        }
    }
    b.caps = granted;
    b.remove_caps_where(Layer::Manifest, &|c| {
        c.validate().err().map(|e| format!("invalid: {e}"))
    });
    if !m.sandbox.shell {
        b.remove_caps_where(Layer::Manifest, &|c| {
            matches!(c, Capability::ShellExec { .. }).then(|| "sandbox.shell = false".to_string())
        });
    }
    if let Some(ceiling) = &g.capabilities {
        b.apply_ceiling(ceiling, Layer::Global, "the global capabilities ceiling");
    }
    if inputs.remote && !g.remote.shell {
        b.remove_caps_where(Layer::RemoteSandbox, &|c| {
            matches!(c, Capability::ShellExec { .. }).then(|| "remote.shell = false".to_string())
        });
    }
    if let Some(why) = &user_denied {
        b.remove_caps_where(Layer::User, &|_| Some(why.clone()));
    }
    if let Some((_, entry)) = inputs.user
        && let Some(ceiling) = &entry.capabilities
    {
        b.apply_ceiling(ceiling, Layer::User, "the user's capabilities ceiling");
    }

    // ---- per-call limits: the narrowest of every layer that sets one ----
    let mut limit_layers: Vec<&[Capability]> = vec![m.capabilities.as_slice()];
    if let Some(ceiling) = &g.capabilities {
        limit_layers.push(ceiling.as_slice());
    }
    if let Some((_, entry)) = inputs.user
        && let Some(ceiling) = &entry.capabilities
    {
        limit_layers.push(ceiling.as_slice());
    }
    let call_limits = CallLimits::from_layers(limit_layers);
    // The capability set states the limits in force, one of each kind, so
    // `permits` and the spawn subset check read the same numbers.
    b.caps.retain(|c| !is_call_limit(c));
    if let Some(max) = call_limits.max_tokens {
        b.caps.push(Capability::LlmMaxTokens { max });
    }
    if let Some(max) = call_limits.max_spend {
        b.caps.push(Capability::EconSpend { max });
    }

    // ---- tools: grant from tools.allow and surviving tool capabilities ----
    // An MCP server's domain is granted when the manifest declares the
    // server, whatever the registry holds (it knows only built-ins when
    // the policy is computed): its operations are the tools the server
    // lists at run time, so the set is open ("*").
    let grant_domain = |b: &mut Builder, d: &str, via: &str| match catalog.operations(d) {
        _ if crate::mcp::mcp_server_of(d).is_some() => {
            if crate::mcp::mcp_server_of(d).is_some_and(|s| m.mcp.servers.contains_key(s)) {
                b.tools
                    .entry(d.to_string())
                    .or_default()
                    .insert("*".to_string());
            } else {
                let item = format!("tool {d}");
                if !b.removed.iter().any(|r| r.item == item) {
                    b.remove(
                        item,
                        Layer::Manifest,
                        format!("the manifest declares no [mcp.servers] entry for it (in {via})"),
                    );
                }
            }
        }
        Some(ops) if !ops.is_empty() => {
            b.tools
                .entry(d.to_string())
                .or_default()
                .extend(ops.iter().cloned());
        }
        Some(_) => {}
        None => {
            let item = format!("tool {d}");
            if !b.removed.iter().any(|r| r.item == item) {
                b.remove(
                    item,
                    Layer::Manifest,
                    format!("unknown tool domain (in {via})"),
                );
            }
        }
    };
    let all: Vec<String> = catalog
        .domains()
        .map(str::to_string)
        .chain(m.mcp.servers.keys().map(|s| crate::mcp::mcp_domain(s)))
        .collect();
    for entry in m.tools.allow.iter().flatten() {
        if entry == "*" {
            all.iter()
                .for_each(|d| grant_domain(&mut b, d, "tools.allow"));
        } else {
            grant_domain(&mut b, entry, "tools.allow");
        }
    }
    for cap in b.caps.clone() {
        match cap {
            Capability::ToolAll => all
                .iter()
                .for_each(|d| grant_domain(&mut b, d, "capabilities")),
            Capability::ToolInvoke { tool } if tool == "*" => all
                .iter()
                .for_each(|d| grant_domain(&mut b, d, "capabilities")),
            Capability::ToolInvoke { tool } => grant_domain(&mut b, &tool, "capabilities"),
            _ => {}
        }
    }
    b.apply_deny(&m.tools, Layer::Manifest, "tools");
    if !m.sandbox.shell {
        b.remove_domain("shell", Layer::Manifest, "sandbox.shell = false");
    }
    b.apply_domain_filter(&g.tools, Layer::Global, "tools");
    b.apply_op_filters(&g.tools, Layer::Global, "tools");
    if inputs.remote {
        if !g.remote.shell {
            b.remove_domain("shell", Layer::RemoteSandbox, "remote.shell = false");
        }
        b.apply_domain_filter(&g.remote.tools, Layer::RemoteSandbox, "remote.tools");
        b.apply_op_filters(&g.remote.tools, Layer::RemoteSandbox, "remote.tools");
    }
    if let Some(why) = &user_denied {
        let present: Vec<String> = b.tools.keys().cloned().collect();
        for d in present {
            b.remove_domain(&d, Layer::User, why);
        }
    }
    if let (Some((_, entry)), Some(prefix)) = (inputs.user, &user_prefix) {
        b.apply_domain_filter(&entry.tools, Layer::User, prefix);
        b.apply_op_filters(&entry.tools, Layer::User, prefix);
    }
    b.apply_op_filters(&m.tools, Layer::Operations, "tools");

    // ---- the sandbox section, narrowed to what survived ----
    let remote_ok = !inputs.remote || g.remote.shell;
    // Shell is on only if every layer left it on and the shell tool survived.
    let shell_ok =
        m.sandbox.shell && remote_ok && user_denied.is_none() && b.tools.contains_key("shell");
    let mut shell_hosts = Vec::new();
    for h in &m.sandbox.shell_hosts {
        let cap = Capability::NetConnect { host: h.clone() };
        let within = b
            .caps
            .iter()
            .any(|c| matches!(c, Capability::NetConnect { .. }) && cap.is_subset_of(c));
        if !shell_ok {
            let why = "the shell is off for this session (see tool shell)";
            let layer = if !remote_ok {
                Layer::RemoteSandbox
            } else {
                b.removed
                    .iter()
                    .find(|r| r.item == "tool shell")
                    .map_or(Layer::Manifest, |r| r.layer)
            };
            b.remove(format!("shell host {h}"), layer, why.to_string());
        } else if !within {
            let why = "no surviving net_connect capability of the agent covers it";
            let layer = b
                .removed_caps
                .iter()
                .find(|(c, _)| cap.is_subset_of(c))
                .and_then(|(_, i)| b.removed.get(*i))
                .map_or(Layer::Manifest, |r| r.layer);
            b.remove(format!("shell host {h}"), layer, why.to_string());
        } else {
            shell_hosts.push(h.clone());
        }
    }
    let survives = |host: &str| {
        b.caps
            .iter()
            .any(|c| matches!(c, Capability::NetConnect { host: h } if h == host))
    };
    let sandbox = SandboxSection {
        allowed_domains: m
            .sandbox
            .allowed_domains
            .iter()
            .filter(|h| survives(h))
            .cloned()
            .collect(),
        allow_all: m.sandbox.allow_all && survives("*"),
        shell: shell_ok,
        shell_hosts,
    };

    // ---- MCP servers: hosts narrowed like [sandbox] allowed_domains ----
    let user_ceiling = inputs.user.and_then(|(_, e)| e.capabilities.as_ref());
    let host_ok = |h: &str| -> Result<(), (Layer, String)> {
        let cap = Capability::NetConnect {
            host: h.to_string(),
        };
        if let Some(ceiling) = &g.capabilities
            && !ceiling.iter().any(|c| cap.is_subset_of(c))
        {
            return Err((
                Layer::Global,
                "not within the global capabilities ceiling".into(),
            ));
        }
        if let Some(why) = &user_denied {
            return Err((Layer::User, why.clone()));
        }
        if let Some(ceiling) = user_ceiling
            && !ceiling.iter().any(|c| cap.is_subset_of(c))
        {
            return Err((
                Layer::User,
                "not within the user's capabilities ceiling".into(),
            ));
        }
        Ok(())
    };
    let resolved = crate::mcp::resolve_with(&g.mcp, &m.mcp, &b.tools, &host_ok);
    b.removed.extend(resolved.removed);
    for (domain, layer, _) in resolved.dropped {
        b.remove_domain(
            &domain,
            layer,
            "its MCP server did not resolve (see mcp server)",
        );
    }
    let mcp = resolved.servers;
    EffectivePolicy {
        agent: m.agent.name.clone(),
        tools: b.tools,
        capabilities: CapabilitySet::new(b.caps),
        call_limits,
        approval: m.approval.clone(),
        sandbox,
        loop_guard: m.loop_guard.clone().unwrap_or_else(|| g.loop_guard.clone()),
        // Validated by parse_manifest; compiling cannot fail.
        taint: crate::taint::TaintPolicy::compile(&m.taint),
        mcp,
        denied_operations: b.denied,
        removed: b.removed,
        removed_caps: b.removed_caps,
    }
}

impl EffectivePolicy {
    fn why(&self, item: &str) -> Option<&Removal> {
        self.removed.iter().find(|r| r.item == item)
    }

    fn because(r: &Removal) -> String {
        format!("removed by {} ({})", r.layer, r.rule)
    }

    /// May the agent use `domain:operation` at all?
    pub fn check_tool(&self, domain: &str, operation: &str) -> Result<(), Denial> {
        let agent = &self.agent;
        if let Some(server) = crate::mcp::mcp_server_of(domain) {
            // Fail closed: an MCP domain needs its resolved server, and an
            // operation must be a tool name a rule could have named.
            if !self.mcp.contains_key(server) && self.tools.contains_key(domain) {
                return Err(Denial {
                    reason: DenyReason::Tool,
                    message: format!(
                        "tool {domain} is not available to agent {agent}: its MCP server is not configured for this session"
                    ),
                });
            }
            if !crate::mcp::is_mcp_tool_name(operation) {
                return Err(Denial {
                    reason: DenyReason::Operation,
                    message: format!(
                        "operation {domain}:{operation:?} is not a valid MCP tool name ([A-Za-z0-9_.-], at most 128), so no policy can allow it"
                    ),
                });
            }
        }
        match self.tools.get(domain) {
            Some(_) if self.permits_operation(domain, operation) => Ok(()),
            Some(_) => Err(Denial {
                reason: DenyReason::Operation,
                message: match self
                    .why(&format!("operation {domain}:{operation}"))
                    .or_else(|| self.why(&format!("operation {domain}:*")))
                {
                    Some(r) => format!(
                        "operation {domain}:{operation} is not allowed for agent {agent}: {}",
                        Self::because(r)
                    ),
                    None => {
                        format!("operation {domain}:{operation} is not available to agent {agent}")
                    }
                },
            }),
            None => {
                let op_removal = self.why(&format!("operation {domain}:{operation}"));
                let message = match (op_removal, self.why(&format!("tool {domain}"))) {
                    (Some(r), _) => format!(
                        "operation {domain}:{operation} is not allowed for agent {agent}: {}",
                        Self::because(r)
                    ),
                    (None, Some(r)) => format!(
                        "tool {domain} is not allowed for agent {agent}: {}",
                        Self::because(r)
                    ),
                    (None, None) => format!(
                        "tool {domain} is not granted to agent {agent}; the agent manifest must list it in tools.allow"
                    ),
                };
                let reason = if op_removal.is_some() {
                    DenyReason::Operation
                } else {
                    DenyReason::Tool
                };
                Err(Denial { reason, message })
            }
        }
    }

    /// Is this concrete demand allowed? Tool demands use the tool map; all
    /// others must be covered by a surviving capability.
    pub fn check_demand(&self, demand: &Demand) -> Result<(), Denial> {
        if let Demand::Tool { domain, operation } = demand {
            return self.check_tool(domain, operation);
        }
        if self.capabilities.permits(demand) {
            return Ok(());
        }
        let agent = &self.agent;
        let mut message = format!("{demand} is not covered by any capability of agent {agent}");
        if let Some((cap, idx)) = self.removed_caps.iter().find(|(c, _)| c.covers(demand))
            && let Some(r) = self.removed.get(*idx)
        {
            let _ = write!(message, "; capability {cap} was {}", Self::because(r));
        }
        Err(Denial {
            reason: DenyReason::Capability,
            message,
        })
    }

    /// Is `operation` of `domain` in the tool map: named there, or the
    /// domain is open (`"*"`) and the operation was not taken away.
    pub fn permits_operation(&self, domain: &str, operation: &str) -> bool {
        self.tools.get(domain).is_some_and(|ops| {
            ops.contains(operation)
                || (ops.contains("*")
                    && !self
                        .denied_operations
                        .get(domain)
                        .is_some_and(|d| d.contains(operation)))
        })
    }

    /// Does `domain:operation` need a human's approval before running?
    pub fn needs_approval(&self, domain: &str, operation: &str) -> bool {
        self.approval.tools.iter().any(|t| t == "*" || t == domain)
            || self.approval.operations.iter().any(|o| {
                crate::mcp::split_domain_operation(o)
                    .is_some_and(|(d, op)| d == domain && (op == "*" || op == operation))
            })
    }
}
