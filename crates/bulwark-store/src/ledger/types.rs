//! Public types of the ledger and its errors.

use crate::StoreError;
use serde::{Deserialize, Serialize};

/// Where minted credits come from. Not an account row: it has no balance.
pub const ISSUER: &str = "system:issuer";
/// The system account that settled holds pay (the cost of model calls).
pub const USAGE: &str = "system:usage";

/// What an account belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountKind {
    User,
    Agent,
    /// Created by the schema only ([`USAGE`]).
    System,
}

impl AccountKind {
    /// Whether `name` follows the rule for user and agent names (they
    /// become directory names and the part after `user:`/`agent:` of their
    /// account ids): 1-64 lowercase ASCII letters, digits, `-` or `_`,
    /// starting with a letter or digit. The one copy of the rule: the
    /// ledger refuses to open accounts with other names.
    pub fn valid_name(name: &str) -> bool {
        bulwark_policy::is_agent_name(name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AccountKind::User => "user",
            AccountKind::Agent => "agent",
            AccountKind::System => "system",
        }
    }

    pub(crate) fn parse(s: &str) -> Result<Self, StoreError> {
        Ok(match s {
            "user" => AccountKind::User,
            "agent" => AccountKind::Agent,
            "system" => AccountKind::System,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown ledger account kind {other:?}"
                )));
            }
        })
    }
}

/// Spending rules of an account, evaluated against the state at the
/// serialization point of each debit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// One transfer may move at most `num/den` of the spendable balance.
    pub max_fraction_num: u64,
    pub max_fraction_den: u64,
    /// The spendable balance after a transfer or hold must stay at or above.
    pub reserve_floor: u64,
    /// Outgoing transfers plus settled costs plus open holds per UTC day.
    pub daily_cap: Option<u64>,
    /// Accounts this one may transfer to; empty means any.
    pub counterparties: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_fraction_num: 1,
            max_fraction_den: 2,
            reserve_floor: 0,
            daily_cap: None,
            counterparties: Vec::new(),
        }
    }
}

/// Who asked for a ledger operation, for its audit record. Not part of the
/// idempotency check: a retry by the same logical caller may come from
/// another process of the same session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub user: String,
    pub agent: String,
    pub session: String,
}

/// A transfer to make. `key` makes it idempotent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferRequest {
    pub key: String,
    pub from: String,
    pub to: String,
    pub amount: u64,
    pub memo: String,
    pub actor: Actor,
}

/// A user's spending limits (access.toml `credits_per_*`), checked and
/// counted by holds in the same transaction as the reservation. What a hold
/// reserves counts against each limit until it is settled (the charge
/// stays counted) or released (it is given back).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub user: String,
    pub session: String,
    pub per_session: Option<u64>,
    pub per_day: Option<u64>,
    pub per_month: Option<u64>,
}

/// A reservation to make. `key` makes it idempotent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldRequest {
    pub key: String,
    pub account: String,
    pub amount: u64,
    /// Counted (and limited) per user, session, UTC day and UTC month.
    pub budget: Option<Budget>,
    pub actor: Actor,
}

/// What a user's holds have counted so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetUse {
    pub session: u64,
    pub day: u64,
    pub month: u64,
}

/// One account as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountSummary {
    pub id: String,
    pub kind: AccountKind,
    pub balance: Balance,
    pub policy: Policy,
}

/// The result of a transfer; a repeated key returns the original one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferReceipt {
    pub id: i64,
    pub time_ms: i64,
    pub key: String,
    pub from: String,
    pub to: String,
    pub amount: u64,
    /// Spendable balance of `from` right before the debit.
    pub balance_before: u64,
    pub memo: String,
}

/// An open reservation of credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HoldId(pub i64);

/// The result of settling or releasing a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleReceipt {
    pub id: i64,
    pub hold: HoldId,
    /// Paid to [`USAGE`].
    pub charged: u64,
    /// Returned to the account's spendable balance.
    pub released: u64,
}

/// An account's money: `balance` is spendable, `held` is reserved by holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    pub balance: u64,
    pub held: u64,
}

/// One journal row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub id: i64,
    pub time_ms: i64,
    pub key: String,
    /// `mint`, `transfer`, `hold`, `settle` or `release`.
    pub kind: String,
    pub from: String,
    pub to: String,
    /// Credits moved from `from` to `to` (for `hold`: spendable to held;
    /// for `settle`: the charge; 0 for `release`).
    pub amount: u64,
    /// For `settle`/`release`: the part of the hold returned.
    pub released: u64,
    /// Spendable balance of `from` before this row (0 for mints).
    pub balance_before: u64,
    pub hold: Option<HoldId>,
    pub memo: String,
}

/// Everything a ledger operation can refuse. Messages say what, on which
/// account, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("invalid amount {amount} for {what}: {why}")]
    InvalidAmount {
        what: &'static str,
        amount: u64,
        why: &'static str,
    },
    #[error("invalid account {id:?}: {why}")]
    InvalidAccount { id: String, why: &'static str },
    #[error("invalid policy for account {id:?}: {why}")]
    InvalidPolicy { id: String, why: &'static str },
    #[error("account {0:?} does not exist; open it first")]
    UnknownAccount(String),
    #[error("account {0:?} already exists; pick another id")]
    AccountExists(String),
    #[error("account {0:?} cannot transfer to itself")]
    SameAccount(String),
    #[error(
        "account {account:?} has {available} spendable, {requested} requested; \
         fund it or ask for less"
    )]
    InsufficientFunds {
        account: String,
        available: u64,
        requested: u64,
    },
    #[error(
        "account {account:?} may move at most {num}/{den} of its balance {balance} \
         per transfer, {amount} requested; split it or ask for less"
    )]
    FractionExceeded {
        account: String,
        amount: u64,
        balance: u64,
        num: u64,
        den: u64,
    },
    #[error(
        "account {account:?} must keep a reserve of {floor}; moving {amount} of \
         {balance} would leave {left}"
    )]
    BelowReserve {
        account: String,
        amount: u64,
        balance: u64,
        floor: u64,
        left: u64,
    },
    #[error(
        "account {account:?} has a daily cap of {cap}; {spent} already spent or held \
         today, {amount} more requested; wait for the next UTC day"
    )]
    DailyCap {
        account: String,
        cap: u64,
        spent: u64,
        amount: u64,
    },
    #[error("account {account:?} may not pay {to:?}: not among its allowed counterparties")]
    CounterpartyNotAllowed { account: String, to: String },
    #[error("crediting {amount} would overflow account {account:?}")]
    Overflow { account: String, amount: u64 },
    #[error(
        "minting {amount} would raise the total supply of credits from {supply} above \
         {limit} (2^63 - 1), the most the ledger can count; mint at most {room}, or move \
         existing credits with a transfer instead"
    )]
    SupplyLimit {
        amount: u64,
        supply: u128,
        limit: u64,
        room: u64,
    },
    #[error(
        "idempotency key {key:?} was already used for a different {kind} request; \
         use a new key for a new request"
    )]
    KeyConflict { key: String, kind: String },
    #[error(
        "user {user:?} has a {period} budget of {limit} credits; {used} already spent or \
         reserved, {amount} more needed; ask the operator to raise `credits_per_{period}` \
         in access.toml or wait for the next {period}"
    )]
    Budget {
        user: String,
        period: &'static str,
        limit: u64,
        used: u64,
        amount: u64,
    },
    #[error("hold {0} does not exist")]
    UnknownHold(i64),
    #[error("hold {hold} is already {state}; it cannot be settled or released again")]
    HoldClosed { hold: i64, state: String },
    #[error("hold {hold} reserved {held}; cannot charge {actual} against it")]
    SettleExceedsHold { hold: i64, held: u64, actual: u64 },
    /// Refused or failed in the server, for a worker (the message is the
    /// server's; `denial` as [`LedgerError::is_denial`] there).
    #[error("{message}")]
    Remote { message: String, denial: bool },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl LedgerError {
    /// Whether this is a refusal of a well-formed request by the account's
    /// state or policy (audited as `denied`).
    pub fn is_denial(&self) -> bool {
        matches!(
            self,
            LedgerError::InsufficientFunds { .. }
                | LedgerError::FractionExceeded { .. }
                | LedgerError::BelowReserve { .. }
                | LedgerError::DailyCap { .. }
                | LedgerError::CounterpartyNotAllowed { .. }
                | LedgerError::Budget { .. }
                | LedgerError::Remote { denial: true, .. }
        )
    }
}
