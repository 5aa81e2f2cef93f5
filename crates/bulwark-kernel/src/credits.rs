//! Credits in the kernel: the ledger a session spends from, the holds
//! around model calls and tool costs.
//!
//! Nothing here reads a balance to decide and writes later: every decision
//! is one ledger operation (transfer, hold, settle, release), which checks
//! and debits in a single serialized transaction. A model call reserves its
//! estimated *maximum* cost first and is not made if the reservation is
//! refused; afterwards the actual cost is charged and the rest given back.

use bulwark_llm::{ChatRequest, Usage};
use bulwark_policy::CreditsSection;
use bulwark_store::{
    Actor, Balance, Budget, HoldId, HoldRequest, LedgerError, SettleReceipt, Store,
    TransferReceipt, TransferRequest,
};
use std::sync::Arc;

/// The ledger operations a session may ask for. The SQLite [`Store`] in
/// `run`/`chat`; in a served worker, a client of the server, which decides
/// itself which account the worker's session spends from.
pub trait Ledger: Send + Sync {
    fn balance(&self, account: &str) -> Result<Balance, LedgerError>;
    fn transfer(&self, req: &TransferRequest) -> Result<TransferReceipt, LedgerError>;
    fn reserve(&self, req: &HoldRequest) -> Result<HoldId, LedgerError>;
    fn settle(&self, key: &str, hold: HoldId, actual: u64) -> Result<SettleReceipt, LedgerError>;
    fn release(&self, key: &str, hold: HoldId) -> Result<SettleReceipt, LedgerError>;
}

impl Ledger for Store {
    fn balance(&self, account: &str) -> Result<Balance, LedgerError> {
        Store::balance(self, account)
    }
    fn transfer(&self, req: &TransferRequest) -> Result<TransferReceipt, LedgerError> {
        Store::transfer(self, req)
    }
    fn reserve(&self, req: &HoldRequest) -> Result<HoldId, LedgerError> {
        Store::reserve(self, req)
    }
    fn settle(&self, key: &str, hold: HoldId, actual: u64) -> Result<SettleReceipt, LedgerError> {
        Store::settle(self, key, hold, actual)
    }
    fn release(&self, key: &str, hold: HoldId) -> Result<SettleReceipt, LedgerError> {
        Store::release(self, key, hold)
    }
}

/// How a session pays: which account, at which prices, under which user
/// budget.
#[derive(Clone)]
pub struct SessionCredits {
    pub ledger: Arc<dyn Ledger>,
    /// The account this session spends from (`agent:<name>`, or a child's).
    pub wallet: String,
    pub prices: CreditsSection,
    /// The user's access.toml limits, with the user and session filled in.
    pub budget: Option<Budget>,
    pub actor: Actor,
}

/// Per-message overhead of chat templates (role markers, separators), in
/// tokens; generous on purpose.
const TEMPLATE_TOKENS_PER_MESSAGE: u64 = 16;
const TEMPLATE_TOKENS: u64 = 64;

/// An upper bound on the input tokens of `request`: byte-level BPE
/// tokenizers emit at most one token per byte of text, plus the template's
/// own tokens. Overestimating only reserves more than is charged.
pub fn max_input_tokens(request: &ChatRequest) -> u64 {
    let messages: u64 = request
        .messages
        .iter()
        .map(|m| serde_json::to_vec(m).map_or(0, |v| v.len() as u64) + TEMPLATE_TOKENS_PER_MESSAGE)
        .sum();
    let tools: u64 = request
        .tools
        .iter()
        .map(|t| (t.name.len() + t.description.len() + t.input_schema.to_string().len()) as u64)
        .sum();
    TEMPLATE_TOKENS + request.system.len() as u64 + messages + tools
}

/// A reservation made for one model call or tool call.
pub struct Reserved {
    hold: HoldId,
    amount: u64,
    key: String,
}

impl Reserved {
    pub fn amount(&self) -> u64 {
        self.amount
    }
}

impl SessionCredits {
    fn key(&self, what: &str) -> String {
        format!(
            "{}:{what}:{:x}",
            self.actor.session,
            uuid::Uuid::new_v4().as_u128()
        )
    }

    /// Reserves `amount` for `what`; `Ok(None)` when it is free.
    pub fn reserve(&self, what: &str, amount: u64) -> Result<Option<Reserved>, LedgerError> {
        if amount == 0 {
            return Ok(None);
        }
        let key = self.key(what);
        let hold = self.ledger.reserve(&HoldRequest {
            key: format!("{key}:hold"),
            account: self.wallet.clone(),
            amount,
            budget: self.budget.clone(),
            actor: self.actor.clone(),
        })?;
        Ok(Some(Reserved { hold, amount, key }))
    }

    /// The most a model call for `request` can cost.
    pub fn model_call_maximum(&self, request: &ChatRequest) -> u64 {
        self.prices
            .llm_cost(max_input_tokens(request), u64::from(request.max_tokens))
    }

    /// What a model call that used `usage` costs.
    pub fn model_call_cost(&self, usage: &Usage) -> u64 {
        self.prices
            .llm_cost(usage.input_tokens, usage.output_tokens)
    }

    /// Charges `actual` against a reservation (at most what was reserved:
    /// the reservation is the promise the ledger checked) and returns the
    /// rest. Returns what was charged and what could not be.
    pub fn settle(&self, reserved: Reserved, actual: u64) -> Result<(u64, u64), LedgerError> {
        let charged = actual.min(reserved.amount);
        self.ledger
            .settle(&format!("{}:settle", reserved.key), reserved.hold, charged)?;
        Ok((charged, actual - charged))
    }

    /// Gives a reservation back whole (the call was not made or failed
    /// before the provider charged anything).
    pub fn release(&self, reserved: Reserved) -> Result<(), LedgerError> {
        self.ledger
            .release(&format!("{}:release", reserved.key), reserved.hold)
            .map(|_| ())
    }
}
