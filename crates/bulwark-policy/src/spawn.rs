//! The child-agent spawn check: a child may hold at most its parent's
//! authority.
//!
//! The seed bug: an agent allowed to spawn children could spawn one with
//! more authority than it has itself (a shell it was denied, a model
//! endpoint it was not granted, a credential it does not hold, a tool
//! without the approval the parent needs) and then ask that child to do what
//! it may not. That is privilege escalation by delegation, and it is as
//! easy to trigger from a prompt injection as from a mistaken manifest.
//!
//! So every spawn path, whether the model asks for it with a tool call or an
//! operator starts a child on an agent's behalf, must call
//! [`spawn_violations`] and refuse the spawn unless it returns nothing. One
//! function means one rule: a second, hand-written check elsewhere would
//! drift from this one, and the drift would be the hole.
//!
//! Both sides are *effective* policies computed with the same layers (same
//! global config, remote flag and user): what a child's manifest asks for
//! does not matter, only what the child would get, compared with what the
//! parent actually has.
//!
//! Every comparison fails closed: a pattern that cannot be parsed covers
//! nothing, and wherever "the child's item is within the parent's" cannot
//! be proved, it is reported as a violation.

use std::fmt;

use serde::Serialize;

use crate::capability::{Demand, HostPattern};
use crate::credentials::{CredentialGrant, CredentialsSection};
use crate::layering::EffectivePolicy;
use crate::manifest::{ModelRef, is_agent_name};

/// The authority of one agent, as far as spawning is concerned.
#[derive(Debug, Clone, Copy)]
pub struct SpawnGrant<'a> {
    /// The effective policy (tools, capabilities, sandbox, approvals).
    pub policy: &'a EffectivePolicy,
    /// The model the agent runs on: its manifest's, else the global default.
    /// Separate because the effective policy does not carry it.
    pub model: &'a ModelRef,
    /// The manifest's credential grants (not part of the effective policy
    /// either: they are compiled by the network layer).
    pub credentials: &'a CredentialsSection,
}

/// One way a child would exceed its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpawnViolation {
    /// What the child would have: `tool shell:exec`, `capability file_write
    /// **`, `model openai:gpt-4o`, `credential grant github`, `sandbox.shell`.
    pub item: String,
    /// Why the parent cannot give it, and what to change.
    pub why: String,
}

impl fmt::Display for SpawnViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.item, self.why)
    }
}

/// Everything `child` would hold that `parent` does not, or that `parent`
/// may not hand on; empty = the spawn is allowed.
///
/// `child_name` is the name the child is spawned under; the parent needs an
/// `agent_spawn` capability covering it, and it must be the agent whose
/// policy `child.policy` is. `child.policy` must be computed with the same
/// layers as `parent.policy`.
///
/// All violations are reported, in a stable order: spawn name, tools,
/// capabilities, sandbox, model, credentials, approvals, taint rules.
pub fn spawn_violations(
    parent: &SpawnGrant<'_>,
    child_name: &str,
    child: &SpawnGrant<'_>,
) -> Vec<SpawnViolation> {
    let mut out = Vec::new();
    check_name(parent, child_name, child, &mut out);
    check_tools(parent, child, &mut out);
    check_capabilities(parent, child, &mut out);
    check_sandbox(parent, child, &mut out);
    check_mcp(parent, child, &mut out);
    check_model(parent, child, &mut out);
    check_credentials(parent, child, &mut out);
    check_approvals(parent, child, &mut out);
    check_taint(parent, child, &mut out);
    out
}

fn push(out: &mut Vec<SpawnViolation>, item: String, why: String) {
    out.push(SpawnViolation { item, why });
}

/// A name as it appears in an item: bare when it is a plain agent name,
/// quoted otherwise (the name may come from a model and must not be able to
/// forge the rest of a message or log line).
fn shown(name: &str) -> String {
    if is_agent_name(name) {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

fn check_name(
    parent: &SpawnGrant<'_>,
    child_name: &str,
    child: &SpawnGrant<'_>,
    out: &mut Vec<SpawnViolation>,
) {
    if !is_agent_name(child_name) {
        // A glob such as `helper*` would match it, but no agent can have
        // this name, and it may be built to confuse what reads it later.
        push(
            out,
            format!("agent_spawn {}", shown(child_name)),
            "not a valid agent name: use 1-64 characters [a-z0-9_-], starting with a letter or digit".into(),
        );
    } else if !parent
        .policy
        .capabilities
        .permits(&Demand::AgentSpawn(child_name.to_string()))
    {
        push(
            out,
            format!("agent_spawn {}", shown(child_name)),
            format!(
                "agent {} has no agent_spawn capability covering this name; to allow it, add {{ kind = \"agent_spawn\", agent = {child_name:?} }} (or a glob covering it) to the parent's capabilities",
                parent.policy.agent
            ),
        );
    }
    // Otherwise a permitted name could be used to launch another agent's
    // policy under it.
    if child.policy.agent != child_name {
        push(
            out,
            format!("agent {}", shown(&child.policy.agent)),
            format!(
                "the child's policy is agent {:?}'s but it is spawned as {child_name:?}; spawn it under its own name so agent_spawn checks the agent that runs",
                child.policy.agent
            ),
        );
    }
}

fn check_tools(parent: &SpawnGrant<'_>, child: &SpawnGrant<'_>, out: &mut Vec<SpawnViolation>) {
    for (domain, ops) in &child.policy.tools {
        for op in ops {
            let held = if op == "*" {
                // An open domain (an MCP server's): the parent must hold it
                // open too, and every operation it took away must be taken
                // away from the child as well.
                let none = Default::default();
                let child_denied = child.policy.denied_operations.get(domain).unwrap_or(&none);
                parent
                    .policy
                    .tools
                    .get(domain)
                    .is_some_and(|p| p.contains("*"))
                    && parent
                        .policy
                        .denied_operations
                        .get(domain)
                        .is_none_or(|d| d.is_subset(child_denied))
            } else {
                parent.policy.permits_operation(domain, op)
            };
            if !held {
                push(
                    out,
                    format!("tool {domain}:{op}"),
                    format!(
                        "agent {} may not use this operation, so it cannot give it to a child; remove it from the child's tools",
                        parent.policy.agent
                    ),
                );
            }
        }
    }
}

fn check_capabilities(
    parent: &SpawnGrant<'_>,
    child: &SpawnGrant<'_>,
    out: &mut Vec<SpawnViolation>,
) {
    for cap in child
        .policy
        .capabilities
        .not_within(&parent.policy.capabilities)
    {
        push(
            out,
            format!("capability {cap}"),
            format!(
                "not within any capability of agent {}; narrow it to lie within one the parent holds, or remove it",
                parent.policy.agent
            ),
        );
    }
    // A limit the child lacks is a limit lifted: the child must be held at
    // least as tightly per call as its parent.
    for (kind, why) in child
        .policy
        .call_limits
        .wider_than(&parent.policy.call_limits)
    {
        push(out, format!("limit {kind}"), why);
    }
}

fn check_sandbox(parent: &SpawnGrant<'_>, child: &SpawnGrant<'_>, out: &mut Vec<SpawnViolation>) {
    let (p, c) = (&parent.policy.sandbox, &child.policy.sandbox);
    if c.shell && !p.shell {
        push(
            out,
            "sandbox.shell".into(),
            format!(
                "the child would have a shell and agent {} has none; set sandbox.shell = false in the child's manifest",
                parent.policy.agent
            ),
        );
    }
    if c.allow_all && !p.allow_all {
        push(
            out,
            "sandbox.allow_all".into(),
            format!(
                "the child could connect to any host and agent {} may not; list only hosts the parent may reach in the child's sandbox.allowed_domains",
                parent.policy.agent
            ),
        );
    }
}

fn check_model(parent: &SpawnGrant<'_>, child: &SpawnGrant<'_>, out: &mut Vec<SpawnViolation>) {
    if child.model == parent.model {
        return;
    }
    let wanted = child.model.to_string();
    if parent
        .policy
        .capabilities
        .permits(&Demand::LlmQuery(wanted.clone()))
        && parent.policy.call_limits.model_allowed(&wanted)
    {
        return;
    }
    push(
        out,
        format!("model {wanted}"),
        format!(
            "a model endpoint the parent was not granted: agent {} runs on {} and no llm_query capability of it covers {wanted}; give the child the parent's model, or grant the parent llm_query for this one",
            parent.policy.agent, parent.model
        ),
    );
}

fn check_credentials(
    parent: &SpawnGrant<'_>,
    child: &SpawnGrant<'_>,
    out: &mut Vec<SpawnViolation>,
) {
    let (pg, cg) = (&parent.credentials.grants, &child.credentials.grants);
    // A manifest without grants runs in legacy mode, where any secret may
    // go to any reachable host: far wider than a parent held to its grants.
    if cg.is_empty() && !pg.is_empty() {
        push(
            out,
            "credentials (legacy mode)".into(),
            format!(
                "the child declares no credential grants, so it would run in legacy mode (any secret to any reachable host) while agent {} is limited to its grants; give the child grants within the parent's",
                parent.policy.agent
            ),
        );
    }
    for (name, grant) in cg {
        if pg.values().any(|p| grant_gaps(grant, p).is_empty()) {
            continue;
        }
        let why = match pg.get(name) {
            Some(same) => format!(
                "exceeds the parent's grant {name:?}: {}; a child may only receive credentials its parent holds",
                grant_gaps(grant, same).join("; ")
            ),
            None => format!(
                "no credential grant of agent {} covers keys {:?} for tools {:?} and hosts {:?}; a child may only receive credentials its parent holds",
                parent.policy.agent, grant.keys, grant.tools, grant.hosts
            ),
        };
        push(out, format!("credential grant {}", shown(name)), why);
    }
}

/// How `child` exceeds `parent`; empty = `child` is within `parent`.
fn grant_gaps(child: &CredentialGrant, parent: &CredentialGrant) -> Vec<String> {
    let mut gaps = Vec::new();
    let missing = |wanted: &[String], held: &[String]| -> Vec<String> {
        wanted
            .iter()
            .filter(|w| !held.contains(w))
            .cloned()
            .collect()
    };
    let keys = missing(&child.keys, &parent.keys);
    if !keys.is_empty() {
        gaps.push(format!("keys {keys:?} are not among its keys"));
    }
    let tools = missing(&child.tools, &parent.tools);
    if !tools.is_empty() {
        gaps.push(format!("tools {tools:?} are not among its tools"));
    }
    // A parent pattern that does not parse covers nothing.
    let wide: Vec<HostPattern> = parent
        .hosts
        .iter()
        .filter_map(|h| HostPattern::parse(h).ok())
        .collect();
    for host in &child.hosts {
        let within = HostPattern::parse(host)
            .is_ok_and(|narrow| wide.iter().any(|w| narrow.is_subset_of(w)));
        if !within {
            gaps.push(format!(
                "host {host:?} is not within its hosts {:?}",
                parent.hosts
            ));
        }
    }
    // Injections decide where a secret is placed in a request; a different
    // list could move it somewhere the parent's never puts it.
    if child.inject != parent.inject {
        gaps.push("its inject list differs (a child's injections must be identical)".into());
    }
    // Compared whole so that a future, weaker approval kind cannot pass.
    if parent.approval.is_some() && child.approval != parent.approval {
        gaps.push(
            "it requires approval before each use and the child's does not; add approval = \"required\""
                .into(),
        );
    }
    gaps
}

fn check_approvals(parent: &SpawnGrant<'_>, child: &SpawnGrant<'_>, out: &mut Vec<SpawnViolation>) {
    for (domain, ops) in &child.policy.tools {
        // An open domain stands for operations not known yet: each one the
        // parent's approvals name must need approval in the child too.
        let mut ops: Vec<&str> = ops.iter().map(String::as_str).collect();
        if ops.contains(&"*") {
            ops.extend(parent.policy.approval.operations.iter().filter_map(|o| {
                crate::mcp::split_domain_operation(o)
                    .filter(|(d, op)| d == domain && *op != "*")
                    .map(|(_, op)| op)
            }));
        }
        for op in ops {
            if parent.policy.needs_approval(domain, op) && !child.policy.needs_approval(domain, op)
            {
                push(
                    out,
                    format!("approval {domain}:{op}"),
                    format!(
                        "agent {} needs a person's approval for it and the child would not; add \"{domain}:{op}\" to the child's approval.operations (or {domain:?} to approval.tools)",
                        parent.policy.agent
                    ),
                );
            }
        }
    }
}

/// A child's `[taint]` must be at least as strict as its parent's: it is
/// handed the parent's labels, and looser rules would let it act on
/// untrusted text where the parent would have asked a person.
fn check_taint(parent: &SpawnGrant<'_>, child: &SpawnGrant<'_>, out: &mut Vec<SpawnViolation>) {
    for (item, why) in child.policy.taint.wider_than(&parent.policy.taint) {
        push(out, item, format!("agent {}: {why}", parent.policy.agent));
    }
}

/// A child may use only MCP servers its parent has, started the same way
/// (same transport, environment and readable directories) and reaching no
/// host the parent's server may not; and its shell may reach only hosts
/// the parent's shell may.
fn check_mcp(parent: &SpawnGrant<'_>, child: &SpawnGrant<'_>, out: &mut Vec<SpawnViolation>) {
    let agent = &parent.policy.agent;
    for (name, server) in &child.policy.mcp {
        let item = format!("mcp server {name}");
        let Some(held) = parent.policy.mcp.get(name) else {
            push(
                out,
                item,
                format!(
                    "agent {agent} has no MCP server {name:?}, so it cannot give it to a child; remove it from the child's manifest"
                ),
            );
            continue;
        };
        if server.transport != held.transport
            || server.env != held.env
            || !server.read_only.iter().all(|d| held.read_only.contains(d))
        {
            push(
                out,
                item.clone(),
                format!(
                    "the child's server {name:?} is not started the way agent {agent}'s is (command or url, env, read_only differ); use the parent's definition"
                ),
            );
        }
        for host in &server.allowed_domains {
            if !within_hosts(host, &held.allowed_domains) {
                push(
                    out,
                    format!("{item} host {host}"),
                    format!(
                        "not within agent {agent}'s server {name:?} hosts {:?}; remove it from the child's allowed_domains",
                        held.allowed_domains
                    ),
                );
            }
        }
    }
    for host in &child.policy.sandbox.shell_hosts {
        if !within_hosts(host, &parent.policy.sandbox.shell_hosts) {
            push(
                out,
                format!("sandbox.shell_hosts {host}"),
                format!(
                    "agent {agent}'s shell may not reach it, so a child's may not either; remove it from the child's sandbox.shell_hosts"
                ),
            );
        }
    }
}

/// Is `host` within one of `wide`? A pattern that does not parse covers
/// nothing and is covered by nothing.
fn within_hosts(host: &str, wide: &[String]) -> bool {
    HostPattern::parse(host).is_ok_and(|narrow| {
        wide.iter()
            .filter_map(|w| HostPattern::parse(w).ok())
            .any(|w| narrow.is_subset_of(&w))
    })
}
