//! Taint labels: where a piece of content came from, so the door can decide
//! which sinks it may reach; and the `[taint]` sink rules that decide it.

mod check;
mod explain;
mod narrow;
mod rules;
pub use check::{TaintError, is_sink_name};
pub use rules::{
    DEFAULT_SINK_EFFECTS, DEFAULT_SINKS, MCP_SINK_ROW, SinkRule, SinkRules, TaintDecision,
    TaintMode, TaintPolicy, TaintSection, WorkspaceTrust,
};

use serde::{Deserialize, Serialize};

/// Where a piece of content came from. `external`, `peer` and `unknown`
/// are untrusted (see [`TaintLabel::is_untrusted`]); the others record
/// provenance a manifest may still write rules for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum TaintLabel {
    /// Fetched from the network (web pages, API responses).
    External,
    /// Read from the agent's or user's memory written in an earlier session.
    Memory,
    /// Produced by a child process (shell output).
    Process,
    /// Read from the workspace filesystem.
    Workspace,
    /// Sent by another agent or peer.
    Peer,
    /// Read from a workspace file that has no provenance (changed outside
    /// Bulwark) in a workspace whose manifest says `workspace = "untrusted"`.
    Unknown,
    /// Returned by a tool of an MCP server (`mcp:<server>` domains): a
    /// third party's program decides what it says.
    Mcp,
}

impl TaintLabel {
    /// Every label, in order.
    pub const ALL: [TaintLabel; 7] = [
        TaintLabel::External,
        TaintLabel::Memory,
        TaintLabel::Process,
        TaintLabel::Workspace,
        TaintLabel::Peer,
        TaintLabel::Unknown,
        TaintLabel::Mcp,
    ];

    /// The label's name as written in manifests and audit records.
    pub fn name(self) -> &'static str {
        match self {
            TaintLabel::External => "external",
            TaintLabel::Memory => "memory",
            TaintLabel::Process => "process",
            TaintLabel::Workspace => "workspace",
            TaintLabel::Peer => "peer",
            TaintLabel::Unknown => "unknown",
            TaintLabel::Mcp => "mcp",
        }
    }

    /// The label named `name`, if any.
    pub fn parse(name: &str) -> Option<TaintLabel> {
        TaintLabel::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Content from outside the operator's control: the labels the
    /// default rules ask a person about.
    pub fn is_untrusted(self) -> bool {
        matches!(
            self,
            TaintLabel::External | TaintLabel::Peer | TaintLabel::Unknown | TaintLabel::Mcp
        )
    }
}

/// Deserializing goes through the name, so a misspelt label in a manifest
/// is refused with the list of labels rather than serde's wording.
impl TryFrom<String> for TaintLabel {
    type Error = String;
    fn try_from(name: String) -> Result<Self, String> {
        TaintLabel::parse(&name).ok_or_else(|| {
            format!(
                "unknown taint label {name:?}: the labels are external, peer, unknown and mcp (untrusted) and workspace, memory and process"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Labels and rules are stored as their names (session state, audit
    /// details): deserializing through the name keeps that format.
    #[test]
    fn labels_and_rules_round_trip_by_name() {
        for label in TaintLabel::ALL {
            let json = serde_json::to_string(&label).unwrap();
            assert_eq!(json, format!("\"{}\"", label.name()));
            assert_eq!(serde_json::from_str::<TaintLabel>(&json).unwrap(), label);
        }
        let set = BTreeSet::from([TaintLabel::Peer, TaintLabel::External]);
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(json, r#"["external","peer"]"#);
        assert_eq!(
            serde_json::from_str::<BTreeSet<TaintLabel>>(&json).unwrap(),
            set
        );
        for rule in SinkRule::ALL {
            let json = serde_json::to_string(&rule).unwrap();
            assert_eq!(serde_json::from_str::<SinkRule>(&json).unwrap(), rule);
        }
        let e = serde_json::from_str::<TaintLabel>("\"External\"").unwrap_err();
        assert!(e.to_string().contains("unknown taint label"), "{e}");
    }
}
