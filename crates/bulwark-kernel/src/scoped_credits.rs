//! The handle a `credits` or `agents` tool call gets: the calling session's
//! account and child host, usable only for the demands the door approved.

use crate::children::{Caller, ChildError, ChildHost};
use crate::tool::ToolError;
use bulwark_policy::Demand;
use bulwark_store::{Balance, LedgerError, TransferReceipt, TransferRequest};
use std::sync::Arc;

pub struct ScopedCredits {
    pub(crate) caller: Caller,
    pub(crate) host: Option<Arc<ChildHost>>,
    /// The demands the door checked for this call.
    pub(crate) approved: Vec<Demand>,
    /// The model's id of this call: the default idempotency key.
    pub(crate) call_id: String,
}

/// A ledger refusal is a denial the agent should read; anything else is a
/// failure.
pub(crate) fn ledger_error(err: LedgerError) -> ToolError {
    if err.is_denial() {
        ToolError::Credits(err.to_string())
    } else {
        match err {
            LedgerError::Store(e) => ToolError::Failed(format!("the ledger failed: {e}")),
            other => ToolError::InvalidArgs(other.to_string()),
        }
    }
}

pub(crate) fn child_error(err: ChildError) -> ToolError {
    match err {
        ChildError::Ledger(e) => ledger_error(e),
        ChildError::Refused { .. } => ToolError::SpawnRefused(err.to_string()),
        ChildError::Invalid(m) => ToolError::InvalidArgs(m),
        other => ToolError::Failed(other.to_string()),
    }
}

impl ScopedCredits {
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    fn require(&self, demand: &Demand) -> Result<(), ToolError> {
        if self.approved.contains(demand) {
            Ok(())
        } else {
            Err(ToolError::NotGranted(format!(
                "the door did not approve {demand} for this call"
            )))
        }
    }

    /// The idempotency key: the model's own (`key`), or this call's id,
    /// scoped to the session so one session can never replay (or read the
    /// receipt of) another's.
    pub fn key(&self, key: Option<&str>) -> String {
        format!(
            "{}:{}",
            self.caller.identity.id,
            key.unwrap_or(&self.call_id)
        )
    }

    pub fn balance(&self) -> Result<Balance, ToolError> {
        let wallet = self.caller.wallet();
        let ledger = self
            .caller
            .credits
            .as_ref()
            .map(|c| c.ledger.clone())
            .ok_or_else(|| {
                ToolError::NotGranted(
                    "credits are not enabled (config.toml has no [credits] section)".into(),
                )
            })?;
        ledger.balance(&wallet).map_err(ledger_error)
    }

    pub fn transfer(
        &self,
        to: &str,
        amount: u64,
        memo: &str,
        key: Option<&str>,
    ) -> Result<TransferReceipt, ToolError> {
        self.require(&Demand::EconTransfer(amount))?;
        let credits = self.caller.credits.as_ref().ok_or_else(|| {
            ToolError::NotGranted(
                "credits are not enabled (config.toml has no [credits] section)".into(),
            )
        })?;
        credits
            .ledger
            .transfer(&TransferRequest {
                key: self.key(key),
                from: credits.wallet.clone(),
                to: to.to_owned(),
                amount,
                memo: memo.to_owned(),
                actor: self.caller.actor(),
            })
            .map_err(ledger_error)
    }

    /// The child host, once the door approved `demand`.
    pub fn children(&self, demand: Option<&Demand>) -> Result<&ChildHost, ToolError> {
        if let Some(d) = demand {
            self.require(d)?;
        }
        self.host.as_deref().ok_or_else(|| {
            ToolError::NotGranted(
                "child agents are not available in this session (served sessions and child agents cannot spawn)".into(),
            )
        })
    }
}
