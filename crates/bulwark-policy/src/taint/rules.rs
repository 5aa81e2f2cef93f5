//! `[taint]`: which sinks untrusted content may reach, per label, as data.
//!
//! SKELETON: the types are the contract between helpers; the rules helper
//! fills in validation, narrowing and `explain`.

use super::TaintLabel;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What a sink does with content of one label. Ordered by strictness.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum SinkRule {
    #[default]
    Allow,
    Approve,
    Deny,
}

/// Which labels a call is judged by.
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

/// How a workspace file without provenance counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceTrust {
    #[default]
    Trusted,
    Untrusted,
}

/// `[taint]` as written in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintSection {
    #[serde(default)]
    pub mode: TaintMode,
    #[serde(default)]
    pub workspace: WorkspaceTrust,
    /// Sink (`shell`, `files:write`, `agents:message`, ...) to label to rule;
    /// overrides the defaults for the labels it names.
    #[serde(default)]
    pub sinks: BTreeMap<String, BTreeMap<TaintLabel, SinkRule>>,
    /// Whether a scanner finding raises `allow` to `approve` (default on).
    #[serde(default)]
    pub scanner_raises: Option<bool>,
}

/// One decision: the strictest rule any of the labels meets at the sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintDecision {
    pub sink: String,
    pub label: TaintLabel,
    pub rule: SinkRule,
}

/// The compiled rules: safe defaults overlaid by the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaintPolicy {
    pub mode: TaintMode,
    pub workspace: WorkspaceTrust,
    pub scanner_raises: bool,
    /// Sink to label to rule; a label absent from a sink's map is allowed.
    pub rules: BTreeMap<String, BTreeMap<TaintLabel, SinkRule>>,
}

/// The sinks every policy has (defaults: each untrusted label asks).
pub const DEFAULT_SINKS: [&str; 9] = [
    "shell",
    "files:write",
    "memory:write",
    "web:fetch",
    "agents:message",
    "agents:spawn",
    "agents:fund",
    "credits:transfer",
    "files:edit",
];

impl Default for TaintPolicy {
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
    /// The defaults overlaid by `section`.
    pub fn from_section(section: &TaintSection) -> Self {
        let mut policy = Self {
            mode: section.mode,
            workspace: section.workspace,
            scanner_raises: section.scanner_raises.unwrap_or(true),
            ..Self::default()
        };
        for (sink, labels) in &section.sinks {
            let entry = policy.rules.entry(sink.clone()).or_default();
            for (label, rule) in labels {
                entry.insert(*label, *rule);
            }
        }
        policy
    }

    /// The sink `domain:operation` is, if any: `domain:operation` itself,
    /// else the whole `domain`.
    pub fn sink(&self, domain: &str, operation: &str) -> Option<String> {
        let exact = format!("{domain}:{operation}");
        if self.rules.contains_key(&exact) {
            Some(exact)
        } else if self.rules.contains_key(domain) {
            Some(domain.to_string())
        } else {
            None
        }
    }

    /// The strictest rule `labels` meet at `sink`; `None` when every label
    /// is allowed there (or `sink` is not one).
    pub fn decide(&self, sink: &str, labels: &BTreeSet<TaintLabel>) -> Option<TaintDecision> {
        let rules = self.rules.get(sink)?;
        labels
            .iter()
            .filter_map(|l| rules.get(l).map(|r| (*l, *r)))
            .filter(|(_, r)| *r != SinkRule::Allow)
            .max_by_key(|(_, r)| *r)
            .map(|(label, rule)| TaintDecision {
                sink: sink.to_string(),
                label,
                rule,
            })
    }
}
