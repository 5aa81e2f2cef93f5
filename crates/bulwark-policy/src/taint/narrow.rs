//! A child's taint rules must be at least as strict as its parent's, or a
//! parent holding untrusted text could hand it to a child that acts on it
//! without the person the parent would have had to ask.

use super::TaintLabel;
use super::rules::{TaintMode, TaintPolicy, WorkspaceTrust};

impl TaintPolicy {
    /// What of `self` (a child's rules) is looser than `parent`'s, as
    /// (item, why) pairs for the spawn check; empty = at least as strict.
    ///
    /// Per sink and label the child's rule must be at least the parent's,
    /// for every sink either names (a domain-wide entry is compared as
    /// such, so a child that covers a parent's domain rule only operation by
    /// operation is refused: it could not be proved to cover every
    /// operation). `value` mode is looser than `session`, a trusted
    /// workspace looser than an untrusted one, and a scanner that does not
    /// raise looser than one that does.
    pub fn wider_than(&self, parent: &TaintPolicy) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.mode == TaintMode::Value && parent.mode == TaintMode::Session {
            out.push((
                "taint.mode".to_owned(),
                "the child would judge calls only by the untrusted text in their arguments (value mode) and the parent by every label in its session; set [taint] mode = \"session\" in the child's manifest".to_owned(),
            ));
        }
        if self.workspace == WorkspaceTrust::Trusted
            && parent.workspace == WorkspaceTrust::Untrusted
        {
            out.push((
                "taint.workspace".to_owned(),
                "the child would trust workspace files changed outside Bulwark and the parent labels them `unknown`; set [taint] workspace = \"untrusted\" in the child's manifest".to_owned(),
            ));
        }
        if !self.scanner_raises && parent.scanner_raises {
            out.push((
                "taint.scanner_raises".to_owned(),
                "the parent asks a person when the injection scanner finds something and the child would not; remove scanner_raises = false from the child's manifest".to_owned(),
            ));
        }
        let sinks: std::collections::BTreeSet<&String> =
            self.rules.keys().chain(parent.rules.keys()).collect();
        for sink in sinks {
            for label in TaintLabel::ALL {
                let (child, held) = (self.rule(sink, label), parent.rule(sink, label));
                if child < held {
                    out.push((
                        format!("taint {sink} {}", label.name()),
                        format!(
                            "the parent's rule is \"{}\" and the child's would be \"{}\"; set [taint.sinks] {sink:?} = {{ {} = \"{}\" }} (or stricter) in the child's manifest",
                            held.name(),
                            child.name(),
                            label.name(),
                            held.name()
                        ),
                    ));
                }
            }
        }
        out
    }
}
