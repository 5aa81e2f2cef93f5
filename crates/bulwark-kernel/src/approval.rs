//! Human-in-the-loop approval. The door asks an [`Approver`] whenever policy
//! (`[approval]`) or a `[taint]` rule says a call needs a person; the answer
//! is audited. An answer "for the session" holds for the label set it was
//! given under: a later call carrying a label outside it is asked again.

use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    pub session: String,
    pub agent: String,
    pub user: String,
    pub tool: String,
    pub domain: String,
    pub operation: String,
    /// Arguments as JSON, truncated for display.
    pub args_preview: String,
    /// Why approval is needed: for a taint rule, which label from which
    /// tool call reaches which sink.
    pub why: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    AllowOnce,
    AllowSession,
    Deny,
}

#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    async fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer;
}

/// For runs with nobody at the terminal: denies everything except the
/// `TOOL[:OP]` pairs given up front (`--approve shell:exec`, `--approve files`).
#[derive(Debug, Clone, Default)]
pub struct PreApproved {
    rules: BTreeSet<(String, Option<String>)>,
}

impl PreApproved {
    /// Parses `domain` or `domain:operation` rules (a tool name such as
    /// `shell_exec` is accepted too and matched against the tool name).
    pub fn parse(rules: &[String]) -> Result<Self, String> {
        let mut set = BTreeSet::new();
        for rule in rules {
            let rule = rule.trim();
            if rule.is_empty() {
                return Err("an --approve rule is empty; use TOOL or TOOL:OPERATION".into());
            }
            // `mcp:<server>:<tool>` is an operation of domain `mcp:<server>`.
            let split = match bulwark_policy::mcp::mcp_server_of(rule) {
                Some(_) => bulwark_policy::mcp::split_domain_operation(rule),
                None => rule.split_once(':'),
            };
            match split {
                Some((d, o)) if !d.is_empty() && !o.is_empty() => {
                    set.insert((d.to_string(), Some(o.to_string())));
                }
                Some(_) => {
                    return Err(format!(
                        "--approve `{rule}` is malformed; use TOOL or TOOL:OPERATION"
                    ));
                }
                None => {
                    set.insert((rule.to_string(), None));
                }
            }
        }
        Ok(Self { rules: set })
    }

    /// Refuses rules that name no tool, domain or operation of `registry`, so
    /// a typo (`files:wrte`) is an error instead of approving nothing.
    pub fn validate(&self, registry: &crate::ToolRegistry) -> Result<(), String> {
        let catalog = registry.catalog();
        for (name, op) in &self.rules {
            let domain = registry
                .get(name)
                .map(|t| t.spec().domain.to_string())
                .or_else(|| catalog.operations(name).map(|_| name.clone()));
            let Some(domain) = domain else {
                let domains: Vec<&str> = catalog.domains().collect();
                return Err(format!(
                    "--approve `{name}`: no such tool or domain; domains: {}",
                    domains.join(", ")
                ));
            };
            if let Some(op) = op
                && !catalog.contains(&domain, op)
            {
                let ops = catalog.operations(&domain).unwrap_or_default().join(", ");
                return Err(format!(
                    "--approve `{name}:{op}`: `{domain}` has no operation `{op}`; operations: {ops}"
                ));
            }
        }
        Ok(())
    }

    /// [`validate`](Self::validate) for the rules that do not name an MCP
    /// server's domain or tool: those exist only in a session's registry
    /// (from its pins), so they are checked once the session is open.
    pub fn validate_builtin(&self, registry: &crate::ToolRegistry) -> Result<(), String> {
        let builtin = Self {
            rules: self
                .rules
                .iter()
                .filter(|(name, _)| {
                    bulwark_policy::mcp::mcp_server_of(name).is_none() && !name.starts_with("mcp__")
                })
                .cloned()
                .collect(),
        };
        builtin.validate(registry)
    }

    pub fn allows(&self, request: &ApprovalRequest) -> bool {
        self.rules.iter().any(|(d, o)| {
            (d == &request.domain || d == &request.tool)
                && o.as_ref().is_none_or(|o| o == &request.operation)
        })
    }
}

#[async_trait::async_trait]
impl Approver for PreApproved {
    async fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        if self.allows(request) {
            ApprovalAnswer::AllowOnce
        } else {
            ApprovalAnswer::Deny
        }
    }
}
