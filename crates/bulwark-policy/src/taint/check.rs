//! Validation of `[taint]`: a rule that names no sink, or an override that
//! cannot take effect, is refused at its line rather than silently leaving
//! a default the operator believes they changed.
//!
//! Unknown label names and rule words never get here: `TaintLabel` and
//! `SinkRule` are enums, so deserializing the manifest refuses them with
//! the list of accepted names.

use super::TaintLabel;
use super::rules::{SinkRule, TaintPolicy, TaintSection};
use crate::capability::is_domain_name;
use crate::error::Seg;
use crate::mcp::{is_mcp_domain, is_mcp_tool_name, split_domain_operation};

/// Why a `[taint]` section was refused. Each names the sink (and label)
/// and says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaintError {
    #[error(
        "{sink:?} is not a sink name: write \"domain\" (every operation of a tool domain) or \"domain:operation\", each part lowercase [a-z0-9_-], or an MCP server's domain and tool (e.g. \"shell\", \"files:write\", \"dojo:send_money\", \"mcp:fs:write_file\"){hint}",
        hint = star_hint(sink)
    )]
    BadSinkName { sink: String },
    #[error(
        "{label} = \"{rule}\" has no effect: a call to {sink} also meets the domain-wide rule {domain:?}, which says \"{domain_rule}\" for {label}, and the stricter rule wins; to loosen it, change [taint.sinks] {domain:?} instead",
        label = label.name(),
        rule = rule.name(),
        domain_rule = domain_rule.name()
    )]
    ShadowedByDomain {
        sink: String,
        label: TaintLabel,
        rule: SinkRule,
        domain: String,
        domain_rule: SinkRule,
    },
    #[error(
        "{label} = \"{rule}\" does not reach {op_sink}, whose default rule for {label} is \"{op_rule}\" (an operation's rule and its domain's both apply, the stricter wins); to loosen it, add \"{op_sink}\" = {{ {label} = \"{rule}\" }}",
        label = label.name(),
        rule = rule.name(),
        op_rule = op_rule.name()
    )]
    MissesOperation {
        sink: String,
        label: TaintLabel,
        rule: SinkRule,
        op_sink: String,
        op_rule: SinkRule,
    },
}

fn star_hint(sink: &str) -> &'static str {
    if sink.ends_with(":*") {
        "; for every operation of a domain write the domain alone"
    } else if sink.chars().any(|c| c.is_ascii_uppercase()) {
        "; names are lowercase"
    } else {
        ""
    }
}

impl TaintError {
    /// The manifest field the error is about.
    pub(crate) fn field(&self) -> Vec<Seg<'_>> {
        use Seg::Key;
        fn base(sink: &str) -> Vec<Seg<'_>> {
            vec![Seg::Key("taint"), Seg::Key("sinks"), Seg::Key(sink)]
        }
        match self {
            Self::BadSinkName { sink } => base(sink),
            Self::ShadowedByDomain { sink, label, .. }
            | Self::MissesOperation { sink, label, .. } => {
                let mut at = base(sink);
                at.push(Key(label.name()));
                at
            }
        }
    }
}

/// `domain` or `domain:operation`, each part a tool domain name.
/// An MCP domain (`mcp:fs`) and its tools (`mcp:fs:write_file`, with the
/// protocol's tool-name characters) are sinks too.
pub fn is_sink_name(s: &str) -> bool {
    match split_domain_operation(s) {
        Some((domain, op)) if is_mcp_domain(domain) => is_mcp_tool_name(op),
        Some((domain, op)) => is_domain_name(domain) && is_domain_name(op),
        None => is_domain_name(s) || is_mcp_domain(s),
    }
}

pub(super) fn sink_names(section: &TaintSection) -> Result<(), TaintError> {
    match section.sinks.keys().find(|s| !is_sink_name(s)) {
        Some(sink) => Err(TaintError::BadSinkName { sink: sink.clone() }),
        None => Ok(()),
    }
}

/// Every rule the manifest wrote must be the one its calls meet: an
/// operation's rule looser than its domain's is shadowed, and a domain's
/// rule looser than a default operation rule the manifest left alone does
/// not reach that operation. (A domain rule looser than an operation rule
/// the manifest also wrote is a deliberate exception and stands.)
pub(super) fn overrides_take_effect(
    section: &TaintSection,
    policy: &TaintPolicy,
) -> Result<(), TaintError> {
    let written = |sink: &str, label: TaintLabel| {
        section
            .sinks
            .get(sink)
            .is_some_and(|m| m.contains_key(&label))
    };
    for (sink, labels) in &section.sinks {
        for (&label, &rule) in labels {
            if let Some((domain, _)) = split_domain_operation(sink) {
                let domain_rule = policy.rule(domain, label);
                if domain_rule > rule {
                    return Err(TaintError::ShadowedByDomain {
                        sink: sink.clone(),
                        label,
                        rule,
                        domain: domain.to_string(),
                        domain_rule,
                    });
                }
                continue;
            }
            for (op_sink, op_rules) in &policy.rules {
                let of_this = split_domain_operation(op_sink).is_some_and(|(d, _)| d == sink);
                if !of_this || written(op_sink, label) {
                    continue;
                }
                let op_rule = op_rules.get(&label).copied().unwrap_or_default();
                if op_rule > rule {
                    return Err(TaintError::MissesOperation {
                        sink: sink.clone(),
                        label,
                        rule,
                        op_sink: op_sink.clone(),
                        op_rule,
                    });
                }
            }
        }
    }
    Ok(())
}
