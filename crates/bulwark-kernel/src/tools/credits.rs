//! `credits` domain: the session's balance and transfers. Every movement is
//! one ledger transfer.

use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool};
use crate::tool_args::{Amount, NoArgs};
use bulwark_policy::Demand;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// An optional idempotency key, shared by the tools that move credits.
pub(super) type IdempotencyKey = Option<String>;

pub struct CreditsBalance {
    spec: ToolSpec,
}

impl CreditsBalance {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "credits_balance",
                "credits",
                "balance",
                "This agent's spendable and reserved credits.",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for CreditsBalance {
    type Args = NoArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, _args: &NoArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(Vec::new())
    }
    async fn call(&self, ctx: &ToolContext, _args: NoArgs) -> Result<ToolOutput, ToolError> {
        let credits = ctx.credits()?;
        let b = credits.balance()?;
        Ok(ToolOutput::text(format!(
            "account {}: {} credits spendable, {} reserved by calls in flight",
            credits.caller().wallet(),
            b.balance,
            b.held
        )))
    }
    fn example_args(&self) -> Value {
        json!({})
    }
}

/// `transfer_credits`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferArgs {
    /// the receiving account, e.g. `agent:<name>` or `user:<name>`
    to: String,
    /// credits to move, a positive integer
    amount: Amount,
    /// a note kept with the transfer
    memo: Option<String>,
    /// Optional idempotency key: a retried call with the same key moves credits once.
    key: IdempotencyKey,
}

pub struct TransferCredits {
    spec: ToolSpec,
}

impl TransferCredits {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "transfer_credits",
                "credits",
                "transfer",
                "Transfer credits from this agent's account to another account. The account's policy limits each transfer (by default to half of the balance).",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for TransferCredits {
    type Args = TransferArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &TransferArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(vec![Demand::EconTransfer(args.amount.get())])
    }
    async fn call(&self, ctx: &ToolContext, args: TransferArgs) -> Result<ToolOutput, ToolError> {
        let r = ctx.credits()?.transfer(
            &args.to,
            args.amount.get(),
            args.memo.as_deref().unwrap_or(""),
            args.key.as_deref(),
        )?;
        Ok(ToolOutput::text(format!(
            "transferred {} credits from {} to {} (receipt {}; the balance was {})",
            r.amount, r.from, r.to, r.id, r.balance_before
        ))
        .with_audit_note(format!("receipt {}", r.id)))
    }
    fn example_args(&self) -> Value {
        json!({"to": "agent:other", "amount": 1})
    }
}
