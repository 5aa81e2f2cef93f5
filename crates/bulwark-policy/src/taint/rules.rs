//! `[taint]`: which sinks untrusted content may reach, per label, as data.
//!
//! A *sink* is a side effect that untrusted text can turn into harm: running
//! a command, storing text that is read back later as trusted, sending a
//! request, moving credits, or handing text to another agent. Each sink has
//! a rule per label (`allow < approve < deny`); the door asks
//! [`TaintPolicy::decide`] with the labels that reach a call and acts on the
//! strictest rule any of them meets. The defaults ([`TaintPolicy::default`])
//! make every untrusted label ask a person at every built-in sink; a
//! manifest's `[taint.sinks]` overrides them label by label, which is how an
//! operator loosens (their explicit choice) or tightens a rule.

use super::TaintLabel;
use super::check::{self, TaintError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What a sink does with content of one label. Ordered by strictness, so
/// `max` is "the stricter" and narrowing compares with `>=`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum SinkRule {
    /// The call runs without asking (and is not audited as a taint decision).
    #[default]
    Allow,
    /// The call runs only after a person approves it.
    Approve,
    /// The call is refused.
    Deny,
}

impl SinkRule {
    /// Every rule, loosest first.
    pub const ALL: [SinkRule; 3] = [SinkRule::Allow, SinkRule::Approve, SinkRule::Deny];

    /// The rule's name as written in manifests and audit records.
    pub fn name(self) -> &'static str {
        match self {
            SinkRule::Allow => "allow",
            SinkRule::Approve => "approve",
            SinkRule::Deny => "deny",
        }
    }

    /// The rule named `name`, if any.
    pub fn parse(name: &str) -> Option<SinkRule> {
        SinkRule::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// Deserializing goes through the name, so a misspelt rule is refused with
/// the three rules and what they do.
impl TryFrom<String> for SinkRule {
    type Error = String;
    fn try_from(name: String) -> Result<Self, String> {
        SinkRule::parse(&name).ok_or_else(|| {
            format!(
                "unknown sink rule {name:?}: write \"allow\" (run), \"approve\" (ask a person first) or \"deny\" (refuse)"
            )
        })
    }
}

/// Which labels a call is judged by. `Value` is looser than `Session`: it
/// lets more calls through without a person, so a child may not use it
/// under a parent that uses `Session`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaintMode {
    /// Every label that entered the session (strict).
    #[default]
    Session,
    /// Only the labels of untrusted text copied into the call's arguments
    /// (plus the session's, when the scanner found an injection).
    Value,
}

impl TaintMode {
    /// The mode's name as written in manifests.
    pub fn name(self) -> &'static str {
        match self {
            TaintMode::Session => "session",
            TaintMode::Value => "value",
        }
    }
}

/// How a workspace file without provenance (changed outside Bulwark)
/// counts when it is read. `Trusted` is the looser: such a file carries no
/// label, where `Untrusted` gives it [`TaintLabel::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceTrust {
    #[default]
    Trusted,
    Untrusted,
}

impl WorkspaceTrust {
    /// The setting's name as written in manifests.
    pub fn name(self) -> &'static str {
        match self {
            WorkspaceTrust::Trusted => "trusted",
            WorkspaceTrust::Untrusted => "untrusted",
        }
    }
}

/// Sink name to label to rule, as written under `[taint.sinks]`.
pub type SinkRules = BTreeMap<String, BTreeMap<TaintLabel, SinkRule>>;

/// `[taint]` as written in a manifest. Unknown labels and rules are refused
/// when it is deserialized; sink names and rules that could not take effect
/// by [`TaintPolicy::from_section`] (which `parse_manifest` runs).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintSection {
    #[serde(default)]
    pub mode: TaintMode,
    #[serde(default)]
    pub workspace: WorkspaceTrust,
    /// Sink (`shell`, `files:write`, `agents:message`, `dojo:send_money`)
    /// to label to rule; each entry replaces the default for that sink and
    /// label only.
    #[serde(default)]
    pub sinks: SinkRules,
    /// Whether a scanner finding raises `allow` to `approve` (absent: on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scanner_raises: Option<bool>,
}

/// One decision: the strictest rule any of the labels meets at the sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintDecision {
    /// The sink as [`TaintPolicy::sink`] named it (`shell`, `files:write`).
    pub sink: String,
    /// The label that met `rule`; the first in [`TaintLabel::ALL`] order
    /// when several meet it.
    pub label: TaintLabel,
    /// Never `Allow`: an allowed call has no decision.
    pub rule: SinkRule,
}

/// The compiled rules: safe defaults overlaid by the manifest.
///
/// A call `domain:operation` meets both the rule of its operation's sink
/// (`files:write`) and that of its domain's (`files`), and the stricter
/// wins: a domain-wide rule can tighten every operation at once, and a
/// loosening must name the entry it loosens. A label absent from a sink's
/// map is allowed there: the defaults name only the untrusted labels, so
/// content from the workspace, memory or a process flows freely unless a
/// manifest says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaintPolicy {
    pub mode: TaintMode,
    pub workspace: WorkspaceTrust,
    pub scanner_raises: bool,
    /// Sink to label to rule.
    pub rules: SinkRules,
}

/// The sinks every policy has: each built-in operation with a side effect
/// untrusted text could steer. Reading, listing, searching, the time, a
/// balance and recalling a child (which returns credits) are not sinks.
pub const DEFAULT_SINKS: [&str; 9] = [
    "shell",
    "files:write",
    "files:edit",
    "memory:write",
    "web:fetch",
    "agents:message",
    "agents:spawn",
    "agents:fund",
    "credits:transfer",
];

/// What reaching each default sink can do, for `policy explain` and the
/// README's table.
pub const DEFAULT_SINK_EFFECTS: [(&str, &str); 9] = [
    ("shell", "runs a command"),
    ("files:write", "stores text a later session reads"),
    ("files:edit", "changes text a later session reads"),
    ("memory:write", "stores a note another session reads"),
    (
        "web:fetch",
        "sends data out (a body, or a host the content named)",
    ),
    ("agents:message", "instructs a child agent"),
    ("agents:spawn", "starts a child agent"),
    ("agents:fund", "moves credits to a child"),
    ("credits:transfer", "moves credits"),
];

/// How `policy explain` and the README name the rule every MCP server's
/// domain has unless the manifest writes one: the server's tools are known
/// only at run time, any of them may have a side effect, and a third
/// party's program decides what they do, so each `mcp:<server>` domain is
/// a sink where every untrusted label asks a person (as at the built-in
/// sinks). `[taint.sinks] "mcp:fs" = { mcp = "allow" }` loosens one server.
pub const MCP_SINK_ROW: &str = "mcp:<server>";

/// The rule `label` meets at MCP domain `domain` when the manifest names
/// neither: `approve` for untrusted labels.
fn mcp_default(domain: &str, label: TaintLabel) -> Option<SinkRule> {
    (crate::mcp::is_mcp_domain(domain) && label.is_untrusted()).then_some(SinkRule::Approve)
}

impl Default for TaintPolicy {
    /// Every untrusted label (`external`, `peer`, `unknown`) asks a person
    /// at every default sink; session mode; a trusted workspace; scanner
    /// findings raise `allow` to `approve`.
    fn default() -> Self {
        let untrusted: BTreeMap<TaintLabel, SinkRule> = TaintLabel::ALL
            .into_iter()
            .filter(|l| l.is_untrusted())
            .map(|l| (l, SinkRule::Approve))
            .collect();
        Self {
            mode: TaintMode::Session,
            workspace: WorkspaceTrust::Trusted,
            scanner_raises: true,
            rules: DEFAULT_SINKS
                .iter()
                .map(|s| (s.to_string(), untrusted.clone()))
                .collect(),
        }
    }
}

impl TaintPolicy {
    /// The defaults overlaid by `section`, refusing sink names that are not
    /// `domain` or `domain:operation` and overrides that could not take
    /// effect (see [`TaintError`]).
    pub fn from_section(section: &TaintSection) -> Result<Self, TaintError> {
        check::sink_names(section)?;
        let policy = Self::compile(section);
        check::overrides_take_effect(section, &policy)?;
        Ok(policy)
    }

    /// The defaults overlaid by `section`, for a section
    /// [`TaintPolicy::from_section`] accepted (`parse_manifest` runs it).
    /// Never fails: an entry with a malformed sink name, reachable only by
    /// building a manifest without parsing it, is skipped, so the default
    /// rules stand for it.
    pub fn compile(section: &TaintSection) -> Self {
        let mut policy = Self {
            mode: section.mode,
            workspace: section.workspace,
            scanner_raises: section.scanner_raises.unwrap_or(true),
            ..Self::default()
        };
        for (sink, labels) in &section.sinks {
            if !check::is_sink_name(sink) {
                continue;
            }
            let entry = policy.rules.entry(sink.clone()).or_default();
            for (label, rule) in labels {
                entry.insert(*label, *rule);
            }
        }
        policy
    }

    /// The sink a call of `domain:operation` reaches, if any:
    /// `domain:operation` itself when it has rules, else the whole `domain`.
    /// Every MCP domain is a sink (see [`MCP_SINK_ROW`]).
    pub fn sink(&self, domain: &str, operation: &str) -> Option<String> {
        let exact = format!("{domain}:{operation}");
        if self.rules.contains_key(&exact) {
            Some(exact)
        } else if self.rules.contains_key(domain) || crate::mcp::is_mcp_domain(domain) {
            Some(domain.to_string())
        } else {
            None
        }
    }

    /// The rule `label` meets at `sink`: the stricter of the sink's own
    /// entry and, for `domain:operation`, its domain's; `Allow` when
    /// neither names the label (`Approve` for an untrusted label at an MCP
    /// domain whose entry does not name it).
    pub fn rule(&self, sink: &str, label: TaintLabel) -> SinkRule {
        let own = |key: &str| {
            self.rules
                .get(key)
                .and_then(|m| m.get(&label))
                .copied()
                .or_else(|| mcp_default(key, label))
                .unwrap_or_default()
        };
        match crate::mcp::split_domain_operation(sink) {
            Some((domain, _)) => own(sink).max(own(domain)),
            None => own(sink),
        }
    }

    /// The strictest rule `labels` meet at `sink`; `None` when every label
    /// is allowed there (or `sink` has no rules). Adding labels never
    /// lowers the result.
    pub fn decide(&self, sink: &str, labels: &BTreeSet<TaintLabel>) -> Option<TaintDecision> {
        let mut best: Option<(TaintLabel, SinkRule)> = None;
        for &label in labels {
            let rule = self.rule(sink, label);
            if rule > best.map_or(SinkRule::Allow, |(_, r)| r) {
                best = Some((label, rule));
            }
        }
        best.map(|(label, rule)| TaintDecision {
            sink: sink.to_string(),
            label,
            rule,
        })
    }

    /// [`TaintPolicy::decide`] for a call of `domain:operation`.
    pub fn decide_call(
        &self,
        domain: &str,
        operation: &str,
        labels: &BTreeSet<TaintLabel>,
    ) -> Option<TaintDecision> {
        self.decide(&self.sink(domain, operation)?, labels)
    }
}
