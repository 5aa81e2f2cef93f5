//! Taint labels: where a piece of content came from, so the door can decide
//! which sinks it may reach.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
}

// Sink rules: content that came from outside the operator's control (the
// web, other agents) may not drive a process without a person agreeing.

/// Domains that execute things: reaching them with untrusted text in the
/// conversation is how prompt injection becomes code execution.
const EXECUTING_SINKS: [&str; 1] = ["shell"];
const UNTRUSTED: [TaintLabel; 2] = [TaintLabel::External, TaintLabel::Peer];

/// Returns why approval is needed, or `None` when the flow is allowed.
pub fn taint_needs_approval(seen: &BTreeSet<TaintLabel>, domain: &str) -> Option<String> {
    if !EXECUTING_SINKS.contains(&domain) {
        return None;
    }
    let untrusted: Vec<String> = UNTRUSTED
        .iter()
        .filter(|l| seen.contains(l))
        .map(|l| format!("{l:?}").to_ascii_lowercase())
        .collect();
    (!untrusted.is_empty()).then(|| {
        format!(
            "untrusted content ({}) is in the conversation and `{domain}` executes commands",
            untrusted.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_content_then_shell_needs_approval() {
        let seen = BTreeSet::from([TaintLabel::External]);
        assert!(taint_needs_approval(&seen, "shell").is_some());
    }

    #[test]
    fn trusted_sources_and_other_sinks_flow_freely() {
        let seen = BTreeSet::from([
            TaintLabel::Workspace,
            TaintLabel::Memory,
            TaintLabel::Process,
        ]);
        assert!(taint_needs_approval(&seen, "shell").is_none());
        let web = BTreeSet::from([TaintLabel::External]);
        assert!(taint_needs_approval(&web, "files").is_none());
    }
}
