//! The rules as `policy explain` prints them: one row per sink, one column
//! per untrusted label (and per trusted label a rule names), each row
//! marked when the manifest changed it from the defaults.

use std::fmt::Write as _;

use super::TaintLabel;
use super::rules::{SinkRule, TaintMode, TaintPolicy, WorkspaceTrust};

impl TaintPolicy {
    /// The rules as a small table, each line ending in a newline.
    pub fn explain(&self) -> String {
        let defaults = TaintPolicy::default();
        let mut s = String::new();
        let _ = writeln!(
            s,
            "taint: {} mode ({}); workspace files without provenance: {}; scanner findings {}",
            self.mode.name(),
            match self.mode {
                TaintMode::Session => "every label in the session counts",
                TaintMode::Value =>
                    "only labels of untrusted text copied into a call's arguments count",
            },
            match self.workspace {
                WorkspaceTrust::Trusted => "trusted",
                WorkspaceTrust::Untrusted => "untrusted (label unknown)",
            },
            if self.scanner_raises {
                "raise allow to approve"
            } else {
                "are audited only"
            }
        );
        let columns: Vec<TaintLabel> = TaintLabel::ALL
            .into_iter()
            .filter(|&l| {
                l.is_untrusted()
                    || self
                        .rules
                        .values()
                        .any(|m| m.get(&l).is_some_and(|r| *r != SinkRule::Allow))
            })
            .collect();
        let width = self
            .rules
            .keys()
            .map(String::len)
            .chain([4, super::rules::MCP_SINK_ROW.len()])
            .max()
            .unwrap_or(4);
        let mut header = format!("  {:width$}", "sink");
        for l in &columns {
            let _ = write!(header, "  {:9}", l.name());
        }
        let _ = writeln!(s, "{}", header.trim_end());
        for sink in self.rules.keys() {
            let mut line = format!("  {sink:width$}");
            for &l in &columns {
                let _ = write!(line, "  {:9}", self.rule(sink, l).name());
            }
            let changed = TaintLabel::ALL
                .into_iter()
                .any(|l| self.rule(sink, l) != defaults.rule(sink, l));
            if !defaults.rules.contains_key(sink) {
                line.push_str("  (added by the manifest)");
            } else if changed {
                line.push_str("  (changed by the manifest)");
            }
            let _ = writeln!(s, "{}", line.trim_end());
        }
        // The rule of every MCP domain the rows above do not name.
        let mut line = format!("  {:width$}", super::rules::MCP_SINK_ROW);
        for &l in &columns {
            let rule = if l.is_untrusted() {
                SinkRule::Approve
            } else {
                SinkRule::Allow
            };
            let _ = write!(line, "  {:9}", rule.name());
        }
        let _ = writeln!(s, "{}", line.trim_end());
        s
    }
}
