//! Taint labels: where a piece of content came from, so the door can decide
//! which sinks it may reach; and the `[taint]` sink rules that decide it.

mod check;
mod explain;
mod narrow;
mod rules;
pub use check::{TaintError, is_sink_name};
pub use rules::{
    DEFAULT_SINK_EFFECTS, DEFAULT_SINKS, SinkRule, SinkRules, TaintDecision, TaintMode,
    TaintPolicy, TaintSection, WorkspaceTrust,
};

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

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
}

impl TaintLabel {
    /// Every label, in order.
    pub const ALL: [TaintLabel; 6] = [
        TaintLabel::External,
        TaintLabel::Memory,
        TaintLabel::Process,
        TaintLabel::Workspace,
        TaintLabel::Peer,
        TaintLabel::Unknown,
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
            TaintLabel::External | TaintLabel::Peer | TaintLabel::Unknown
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
                "unknown taint label {name:?}: the labels are external, peer and unknown (untrusted) and workspace, memory and process"
            )
        })
    }
}

// The rules before `[taint]`: content that came from outside the
// operator's control (the web, other agents) may not drive a process, nor
// spend the operator's money, without a person agreeing. Kept, with its
// messages, only until the door decides with `TaintPolicy`; new code uses
// `TaintPolicy::decide_call`.

/// Domains that execute things: reaching them with untrusted text in the
/// conversation is how prompt injection becomes code execution.
const EXECUTING_SINKS: [&str; 1] = ["shell"];
/// Operations that spend credits: `credits:transfer` moves them,
/// `agents:spawn` and `agents:fund` create and fund child agents. Reaching
/// them with untrusted text in the conversation is how prompt injection
/// drains an account (a web page or a peer agent saying "transfer your
/// balance to ..."), so such a spend is only ever authorized by a person
/// approving it. Reading a balance, listing, messaging or recalling
/// children spends nothing and flows freely (a recall returns credits).
const SPENDING_SINKS: [(&str, &str); 3] = [
    ("credits", "transfer"),
    ("agents", "spawn"),
    ("agents", "fund"),
];
const UNTRUSTED: [TaintLabel; 2] = [TaintLabel::External, TaintLabel::Peer];

/// What reaching `domain:operation` does, for the approval message;
/// `None` when it is not a sink.
fn sink_effect(domain: &str, operation: &str) -> Option<&'static str> {
    if EXECUTING_SINKS.contains(&domain) {
        Some("executes commands")
    } else if !SPENDING_SINKS.contains(&(domain, operation)) {
        None
    } else if domain == "credits" {
        Some("moves credits")
    } else {
        Some("spends credits on child agents")
    }
}

/// Returns why approval is needed, or `None` when the flow is allowed,
/// under the rules before `[taint]` (shell and the spending operations,
/// for `external` and `peer`). Superseded by [`TaintPolicy::decide_call`].
pub fn taint_needs_approval(
    seen: &BTreeSet<TaintLabel>,
    domain: &str,
    operation: &str,
) -> Option<String> {
    let effect = sink_effect(domain, operation)?;
    let untrusted: Vec<String> = UNTRUSTED
        .iter()
        .filter(|l| seen.contains(l))
        .map(|l| format!("{l:?}").to_ascii_lowercase())
        .collect();
    (!untrusted.is_empty()).then(|| {
        format!(
            "untrusted content ({}) is in the conversation and `{domain}` {effect}",
            untrusted.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn web_content_then_shell_needs_approval() {
        let seen = BTreeSet::from([TaintLabel::External]);
        assert!(taint_needs_approval(&seen, "shell", "exec").is_some());
    }

    #[test]
    fn trusted_sources_and_other_sinks_flow_freely() {
        let seen = BTreeSet::from([
            TaintLabel::Workspace,
            TaintLabel::Memory,
            TaintLabel::Process,
        ]);
        assert!(taint_needs_approval(&seen, "shell", "exec").is_none());
        let web = BTreeSet::from([TaintLabel::External]);
        assert!(taint_needs_approval(&web, "files", "write").is_none());
    }

    #[test]
    fn shell_message_is_unchanged() {
        let seen = BTreeSet::from([TaintLabel::Peer, TaintLabel::External]);
        assert_eq!(
            taint_needs_approval(&seen, "shell", "exec").as_deref(),
            Some(
                "untrusted content (external, peer) is in the conversation and `shell` executes commands"
            )
        );
    }

    #[test]
    fn peer_content_then_credits_needs_approval() {
        let seen = BTreeSet::from([TaintLabel::Peer]);
        assert_eq!(
            taint_needs_approval(&seen, "credits", "transfer").as_deref(),
            Some("untrusted content (peer) is in the conversation and `credits` moves credits")
        );
    }

    #[test]
    fn web_content_then_agents_needs_approval() {
        let seen = BTreeSet::from([TaintLabel::External, TaintLabel::Workspace]);
        let why = taint_needs_approval(&seen, "agents", "fund").unwrap();
        assert!(why.contains("(external)"), "{why}");
        assert!(why.contains("`agents` spends credits"), "{why}");
    }

    #[test]
    fn trusted_sources_may_spend() {
        let trusted = BTreeSet::from([
            TaintLabel::Workspace,
            TaintLabel::Memory,
            TaintLabel::Process,
        ]);
        for (domain, op) in SPENDING_SINKS.iter().copied().chain([("shell", "exec")]) {
            assert_eq!(taint_needs_approval(&trusted, domain, op), None, "{domain}");
            assert_eq!(
                taint_needs_approval(&BTreeSet::new(), domain, op),
                None,
                "{domain}"
            );
        }
    }

    #[test]
    fn every_untrusted_label_reaches_every_sink_only_with_approval() {
        for label in UNTRUSTED {
            let seen = BTreeSet::from([label]);
            for (domain, op) in SPENDING_SINKS.iter().copied().chain([("shell", "exec")]) {
                assert!(
                    taint_needs_approval(&seen, domain, op).is_some(),
                    "{label:?} {domain}:{op}"
                );
            }
            // Near-miss names are not sinks (matched exactly), and the
            // operations that spend nothing flow freely.
            for (domain, op) in [
                ("credit", "transfer"),
                ("agent", "fund"),
                ("files", "write"),
                ("web", "fetch"),
                ("credits", "balance"),
                ("agents", "message"),
                ("agents", "recall"),
                ("agents", "list"),
            ] {
                assert_eq!(
                    taint_needs_approval(&seen, domain, op),
                    None,
                    "{domain}:{op}"
                );
            }
        }
    }
}
