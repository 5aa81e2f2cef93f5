//! `policy explain`: what an agent may do, and why anything it asked for
//! is missing, as one report.

use std::fmt::Write as _;

use crate::layering::EffectivePolicy;

impl EffectivePolicy {
    /// A human-readable report of what the agent may do and why anything
    /// it asked for is missing.
    pub fn explain(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "effective policy for agent {}", self.agent);
        // Before `tools:`, so readers that split the report at its section
        // headers (`tools:`, `capabilities:`, `removed:`) are not confused.
        s.push_str(&self.taint.explain());
        let _ = writeln!(s, "tools:");
        if self.tools.is_empty() {
            let _ = writeln!(s, "  (none)");
        }
        for (d, ops) in &self.tools {
            let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
            match self.denied_operations.get(d) {
                Some(denied) if !denied.is_empty() => {
                    let denied: Vec<&str> = denied.iter().map(String::as_str).collect();
                    let _ = writeln!(
                        s,
                        "  {d}: {} (except {})",
                        ops.join(", "),
                        denied.join(", ")
                    );
                }
                _ => {
                    let _ = writeln!(s, "  {d}: {}", ops.join(", "));
                }
            }
        }
        let _ = writeln!(s, "capabilities:");
        if self.capabilities.is_empty() {
            let _ = writeln!(s, "  (none)");
        }
        for c in self.capabilities.iter() {
            let _ = writeln!(s, "  {c}");
        }
        let limits = &self.call_limits;
        if !limits.models.is_empty() || limits.max_tokens.is_some() || limits.max_spend.is_some() {
            let _ = writeln!(s, "per-call limits (every layer narrows):");
            for layer in &limits.models {
                let _ = writeln!(s, "  models: one of {}", layer.join(", "));
            }
            if let Some(max) = limits.max_tokens {
                let _ = writeln!(s, "  max_tokens per model call: {max}");
            }
            if let Some(max) = limits.max_spend {
                let _ = writeln!(s, "  credits reserved per call: at most {max}");
            }
        }
        self.explain_mcp(&mut s);
        if !self.approval.tools.is_empty() || !self.approval.operations.is_empty() {
            let items: Vec<&str> = self
                .approval
                .tools
                .iter()
                .chain(&self.approval.operations)
                .map(String::as_str)
                .collect();
            let _ = writeln!(s, "approval required: {}", items.join(", "));
        }
        let _ = writeln!(s, "removed:");
        if self.removed.is_empty() {
            let _ = writeln!(s, "  (nothing)");
        }
        for r in &self.removed {
            let _ = writeln!(s, "- {}: removed by {} ({})", r.item, r.layer, r.rule);
        }
        s
    }
}
