//! The credits ledger: accounts, an append-only double-entry journal, holds.
//!
//! Every operation is one `BEGIN IMMEDIATE` transaction: the idempotency
//! check, the policy evaluation, the balance updates, the journal row and the
//! audit record all happen while this connection holds SQLite's write lock,
//! so no other thread *or process* can interleave between "check" and
//! "debit". The read-check-then-write bug (two concurrent transfers both
//! passing "at most half") cannot happen: the second transaction starts only
//! after the first committed and sees its debit.
//!
//! Amounts are integer minor units: `u64` in the API, stored as SQLite's
//! signed 64-bit integers; anything that does not fit is refused, and every
//! addition is checked.
//!
//! Refusals by policy (and for insufficient funds) are audited *in the same
//! transaction* that evaluated them, which is then committed with only the
//! audit row: the record describes exactly the state the decision saw, and a
//! crash cannot leave a refusal unrecorded after the caller saw it. It costs
//! nothing extra, the write lock is held anyway. Refusals are not journaled
//! (the journal holds movements only), so retrying a refused key evaluates
//! the request again against the then-current state.

mod accounts;
mod budget;
mod rows;
mod types;

pub(crate) use accounts::insert_account;
pub use rows::within_fraction;
pub use types::{
    AccountKind, AccountSummary, Actor, Balance, Budget, BudgetUse, HoldId, HoldRequest, ISSUER,
    JournalEntry, LedgerError, Policy, SettleReceipt, TransferReceipt, TransferRequest, USAGE,
};

use crate::audit::append_in_tx;
use crate::{Store, StoreError, now_ms, sql_limit, sqlite, to_u64};
use bulwark_audit::{Action, AuditRecord, Decision, Event, Identity, Reason};
use rows::{
    JOURNAL_COLUMNS, NewEntry, account, add_spent, adjust, credit, entry_from_row, evaluate,
    finish_entry, journal, receipt, replay,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::json;

/// What an operation decided inside its transaction.
pub(crate) enum Step<T> {
    /// Write the audit record and commit.
    Commit(T, AuditRecord),
    /// Idempotent replay: nothing to write.
    Replay(T),
    /// Refused: commit only the audit record, then return the error.
    Deny(LedgerError, AuditRecord),
}

fn amount_i64(what: &'static str, amount: u64, zero_ok: bool) -> Result<i64, LedgerError> {
    if amount == 0 && !zero_ok {
        return Err(LedgerError::InvalidAmount {
            what,
            amount,
            why: "must be positive",
        });
    }
    i64::try_from(amount).map_err(|_| LedgerError::InvalidAmount {
        what,
        amount,
        why: "exceeds the largest storable amount (2^63 - 1)",
    })
}

pub(crate) fn record(
    actor: &Actor,
    now: i64,
    op: &str,
    request: &serde_json::Value,
    decision: Decision,
    reason: String,
) -> AuditRecord {
    // Ledger reasons are descriptive text ("minted 5 into ..."), not a
    // class: they are kept as `Reason::Other`, as they always were stored.
    AuditRecord::at(
        now,
        Identity::new(&actor.session, &actor.agent, &actor.user),
        Event::new(Action::Ledger, decision, Reason::from(reason))
            .tool("credits")
            .operation(op)
            .args(request)
            .detail(request.to_string()),
    )
}
impl Store {
    /// Runs one ledger operation in an IMMEDIATE transaction.
    pub(crate) fn ledger_write<T>(
        &self,
        what: &str,
        op: impl FnOnce(&Connection, i64) -> Result<Step<T>, LedgerError>,
    ) -> Result<T, LedgerError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite(format!("starting ledger {what}")))?;
        // Inside the lock, so journal times never go backwards in id order
        // by more than the clock does.
        let now = now_ms();
        match op(&tx, now)? {
            Step::Replay(t) => Ok(t),
            Step::Commit(t, audit) => {
                append_in_tx(&tx, std::slice::from_ref(&audit))?;
                tx.commit()
                    .map_err(sqlite(format!("committing ledger {what}")))?;
                Ok(t)
            }
            Step::Deny(err, audit) => {
                append_in_tx(&tx, std::slice::from_ref(&audit))?;
                tx.commit()
                    .map_err(sqlite(format!("committing ledger {what} refusal")))?;
                Err(err)
            }
        }
    }

    /// The account's kind.
    pub fn account_kind(&self, id: &str) -> Result<AccountKind, LedgerError> {
        let conn = self.lock()?;
        let kind: Option<String> = conn
            .prepare_cached("SELECT kind FROM ledger_accounts WHERE id = ?1")
            .map_err(sqlite("preparing account kind read"))?
            .query_row([id], |r| r.get(0))
            .optional()
            .map_err(sqlite("reading account kind"))?;
        let kind = kind.ok_or_else(|| LedgerError::UnknownAccount(id.to_owned()))?;
        Ok(AccountKind::parse(&kind)?)
    }

    /// Spendable and held credits of an account.
    pub fn balance(&self, id: &str) -> Result<Balance, LedgerError> {
        let conn = self.lock()?;
        let a = account(&conn, id)?;
        Ok(Balance {
            balance: a.balance,
            held: a.held,
        })
    }

    /// Creates `amount` new credits in account `to` (from [`ISSUER`]).
    /// Refused ([`LedgerError::SupplyLimit`]) if the total supply would
    /// pass 2^63 - 1, the most every balance and sum can count.
    pub fn mint(
        &self,
        actor: &Actor,
        key: &str,
        to: &str,
        amount: u64,
        memo: &str,
    ) -> Result<TransferReceipt, LedgerError> {
        self.mint_in(actor, key, to, None, amount, memo)
            .map(|(r, _)| r)
    }

    /// [`Store::mint`], opening `to` as a `kind` account with the default
    /// policy if it does not exist, in the mint's transaction: a refused
    /// mint opens nothing. Also returns whether it opened the account.
    pub fn mint_opening(
        &self,
        actor: &Actor,
        key: &str,
        to: &str,
        kind: AccountKind,
        amount: u64,
        memo: &str,
    ) -> Result<(TransferReceipt, bool), LedgerError> {
        self.mint_in(actor, key, to, Some(kind), amount, memo)
    }

    fn mint_in(
        &self,
        actor: &Actor,
        key: &str,
        to: &str,
        open: Option<AccountKind>,
        amount: u64,
        memo: &str,
    ) -> Result<(TransferReceipt, bool), LedgerError> {
        let sql_amount = amount_i64("mint", amount, false)?;
        let request = json!({"op": "mint", "to": to, "amount": amount, "memo": memo});
        let canonical = request.to_string();
        self.ledger_write("mint", |tx, now| {
            if let Some(e) = replay(tx, key, &canonical)? {
                return Ok(Step::Replay((receipt(e), false)));
            }
            let (target, opened) = match (account(tx, to), open) {
                (Err(LedgerError::UnknownAccount(_)), Some(kind)) => {
                    insert_account(tx, to, kind, &Policy::default())?;
                    (account(tx, to)?, true)
                }
                (found, _) => (found?, false),
            };
            // Every balance and every sum the conservation check makes must
            // stay countable: refuse a mint that would take the supply (as
            // the accounts add up, and as the mints do) past 2^63 - 1.
            let (held, minted) = accounts::totals(tx)?;
            let supply = held.max(minted);
            let limit = i64::MAX as u64;
            if supply + u128::from(amount) > u128::from(limit) {
                return Err(LedgerError::SupplyLimit {
                    amount,
                    supply,
                    limit,
                    room: u64::try_from(u128::from(limit).saturating_sub(supply)).unwrap_or(0),
                });
            }
            credit(tx, &target, sql_amount)?;
            let e = NewEntry {
                key,
                kind: "mint",
                from: ISSUER,
                to,
                amount: sql_amount,
                released: 0,
                balance_before: 0,
                hold: None,
                memo,
                request: &canonical,
            };
            let id = journal(tx, now, &e)?;
            let r = TransferReceipt {
                id,
                time_ms: now,
                key: key.to_owned(),
                from: ISSUER.to_owned(),
                to: to.to_owned(),
                amount,
                balance_before: 0,
                memo: memo.to_owned(),
            };
            let audit = record(
                actor,
                now,
                "mint",
                &request,
                Decision::Allowed,
                format!("minted {amount} into {to:?}"),
            );
            Ok(Step::Commit((r, opened), audit))
        })
    }

    /// Moves credits, evaluating `from`'s policy and debiting in one
    /// serialized transaction. A repeated key returns the original receipt.
    pub fn transfer(&self, req: &TransferRequest) -> Result<TransferReceipt, LedgerError> {
        let amount = amount_i64("transfer", req.amount, false)?;
        if req.from == req.to {
            return Err(LedgerError::SameAccount(req.from.clone()));
        }
        let request = json!({"op": "transfer", "from": req.from, "to": req.to,
            "amount": req.amount, "memo": req.memo});
        let canonical = request.to_string();
        self.ledger_write("transfer", |tx, now| {
            if let Some(e) = replay(tx, &req.key, &canonical)? {
                if e.kind != "transfer" {
                    return Err(LedgerError::KeyConflict {
                        key: req.key.clone(),
                        kind: e.kind,
                    });
                }
                return Ok(Step::Replay(receipt(e)));
            }
            let from = account(tx, &req.from)?;
            let to = account(tx, &req.to)?;
            if let Err(denial) = evaluate(tx, &from, Some(&req.to), req.amount, now)? {
                let audit = record(
                    &req.actor,
                    now,
                    "transfer",
                    &request,
                    Decision::Denied,
                    denial.to_string(),
                );
                return Ok(Step::Deny(denial, audit));
            }
            adjust(tx, &from.id, -amount, 0)?;
            credit(tx, &to, amount)?;
            add_spent(tx, &from.id, now, amount)?;
            let e = NewEntry {
                key: &req.key,
                kind: "transfer",
                from: &req.from,
                to: &req.to,
                amount,
                released: 0,
                balance_before: from.balance,
                hold: None,
                memo: &req.memo,
                request: &canonical,
            };
            let id = journal(tx, now, &e)?;
            let r = TransferReceipt {
                id,
                time_ms: now,
                key: req.key.clone(),
                from: req.from.clone(),
                to: req.to.clone(),
                amount: req.amount,
                balance_before: from.balance,
                memo: req.memo.clone(),
            };
            let reason = format!(
                "transferred {} of {} from {:?} to {:?}",
                req.amount, from.balance, req.from, req.to
            );
            Ok(Step::Commit(
                r,
                record(
                    &req.actor,
                    now,
                    "transfer",
                    &request,
                    Decision::Allowed,
                    reason,
                ),
            ))
        })
    }

    /// A hold without a user budget or caller identity (tests, tools).
    pub fn hold(&self, key: &str, account_id: &str, amount: u64) -> Result<HoldId, LedgerError> {
        self.reserve(&HoldRequest {
            key: key.to_owned(),
            account: account_id.to_owned(),
            amount,
            ..HoldRequest::default()
        })
    }

    /// Reserves `amount` of an account's spendable credits (the estimated
    /// maximum cost of a model call), subject to its reserve floor and daily
    /// cap and to the user's budget. Settle or release it afterwards.
    ///
    /// Holds are spends, not transfers: the per-transfer fraction and the
    /// counterparty list do not apply (a model call may use all that is
    /// left above the reserve floor).
    pub fn reserve(&self, req: &HoldRequest) -> Result<HoldId, LedgerError> {
        let (key, account_id, amount) = (req.key.as_str(), req.account.as_str(), req.amount);
        let sql_amount = amount_i64("hold", amount, false)?;
        let request = json!({"op": "hold", "account": account_id, "amount": amount,
            "budget": req.budget.as_ref().map(|b| json!({"user": b.user, "session": b.session}))});
        let canonical = request.to_string();
        let actor_json = serde_json::to_string(&req.actor)
            .map_err(|e| StoreError::Corrupt(format!("encoding the hold's actor: {e}")))?;
        self.ledger_write("hold", |tx, now| {
            if let Some(e) = replay(tx, key, &canonical)? {
                let hold = e.hold.ok_or_else(|| {
                    StoreError::Corrupt(format!("hold journal row {} has no hold id", e.id))
                })?;
                return Ok(Step::Replay(hold));
            }
            let a = account(tx, account_id)?;
            let deny = |denial: LedgerError| {
                let audit = record(
                    &req.actor,
                    now,
                    "hold",
                    &request,
                    Decision::Denied,
                    denial.to_string(),
                );
                Ok(Step::Deny(denial, audit))
            };
            if let Err(denial) = evaluate(tx, &a, None, amount, now)? {
                return deny(denial);
            }
            let periods = match &req.budget {
                Some(b) => match budget::check(tx, b, amount, now)? {
                    Ok(periods) => periods,
                    Err(denial) => return deny(denial),
                },
                None => Vec::new(),
            };
            let periods_json = serde_json::to_string(&periods)
                .map_err(|e| StoreError::Corrupt(format!("encoding budget periods: {e}")))?;
            tx.prepare_cached(
                "INSERT INTO ledger_holds (account, amount, state, created_ms, actor, \
                 budget_user, budget_periods) VALUES (?1, ?2, 'open', ?3, ?4, ?5, ?6)",
            )
            .map_err(sqlite("preparing hold insert"))?
            .execute(params![
                account_id,
                sql_amount,
                now,
                actor_json,
                req.budget.as_ref().map(|b| b.user.as_str()),
                periods_json
            ])
            .map_err(sqlite("inserting hold"))?;
            let hold = tx.last_insert_rowid();
            if let Some(b) = &req.budget {
                budget::add(tx, &b.user, &periods, sql_amount)?;
            }
            adjust(tx, account_id, -sql_amount, sql_amount)?;
            let e = NewEntry {
                key,
                kind: "hold",
                from: account_id,
                to: account_id,
                amount: sql_amount,
                released: 0,
                balance_before: a.balance,
                hold: Some(hold),
                memo: "",
                request: &canonical,
            };
            journal(tx, now, &e)?;
            let reason = format!(
                "held {amount} of {} in {account_id:?} as hold {hold}",
                a.balance
            );
            Ok(Step::Commit(
                HoldId(hold),
                record(&req.actor, now, "hold", &request, Decision::Allowed, reason),
            ))
        })
    }

    /// Charges `actual` (at most the held amount) of a hold to [`USAGE`] and
    /// returns the rest to the account.
    pub fn settle(
        &self,
        key: &str,
        hold: HoldId,
        actual: u64,
    ) -> Result<SettleReceipt, LedgerError> {
        amount_i64("settle", actual, true)?;
        self.close_hold(key, hold, Some(actual))
    }

    /// Returns a hold's whole amount to the account (the call was not made).
    pub fn release(&self, key: &str, hold: HoldId) -> Result<SettleReceipt, LedgerError> {
        self.close_hold(key, hold, None)
    }

    fn close_hold(
        &self,
        key: &str,
        hold: HoldId,
        actual: Option<u64>,
    ) -> Result<SettleReceipt, LedgerError> {
        let op = if actual.is_some() {
            "settle"
        } else {
            "release"
        };
        let request = json!({"op": op, "hold": hold.0, "actual": actual});
        let canonical = request.to_string();
        self.ledger_write(op, |tx, now| {
            if let Some(e) = replay(tx, key, &canonical)? {
                return Ok(Step::Replay(SettleReceipt {
                    id: e.id,
                    hold,
                    charged: e.amount,
                    released: e.released,
                }));
            }
            type HoldRow = (String, i64, String, String, Option<String>, String);
            let row: Option<HoldRow> = tx
                .prepare_cached(
                    "SELECT account, amount, state, actor, budget_user, budget_periods \
                     FROM ledger_holds WHERE id = ?1",
                )
                .map_err(sqlite("preparing hold read"))?
                .query_row([hold.0], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                })
                .optional()
                .map_err(sqlite("reading hold"))?;
            let (account_id, held, state, actor_json, budget_user, periods_json) =
                row.ok_or(LedgerError::UnknownHold(hold.0))?;
            let actor: Actor = serde_json::from_str(&actor_json)
                .map_err(|e| StoreError::Corrupt(format!("actor of hold {}: {e}", hold.0)))?;
            let periods: Vec<String> = serde_json::from_str(&periods_json).map_err(|e| {
                StoreError::Corrupt(format!("budget periods of hold {}: {e}", hold.0))
            })?;
            if state != "open" {
                return Err(LedgerError::HoldClosed {
                    hold: hold.0,
                    state,
                });
            }
            let held_u = to_u64(held, "hold amount")?;
            let charged = actual.unwrap_or(0);
            if charged > held_u {
                return Err(LedgerError::SettleExceedsHold {
                    hold: hold.0,
                    held: held_u,
                    actual: charged,
                });
            }
            // Both fit: charged <= held <= i64::MAX.
            let (charged_sql, rest) = (charged as i64, held - charged as i64);
            let a = account(tx, &account_id)?;
            if a.held < held_u {
                return Err(StoreError::Corrupt(format!(
                    "account {account_id:?} holds less than hold {}",
                    hold.0
                ))
                .into());
            }
            tx.prepare_cached(&format!(
                "UPDATE ledger_holds SET state = '{}' WHERE id = ?1",
                if actual.is_some() {
                    "settled"
                } else {
                    "released"
                }
            ))
            .map_err(sqlite("preparing hold close"))?
            .execute([hold.0])
            .map_err(sqlite("closing hold"))?;
            adjust(tx, &account_id, rest, -held)?;
            add_spent(tx, &account_id, now, charged_sql)?;
            if let Some(user) = &budget_user {
                budget::give_back(tx, user, &periods, rest)?;
            }
            if charged_sql > 0 {
                let usage = account(tx, USAGE)?;
                credit(tx, &usage, charged_sql)?;
            }
            let e = NewEntry {
                key,
                kind: op,
                from: &account_id,
                to: if actual.is_some() { USAGE } else { &account_id },
                amount: charged_sql,
                released: rest,
                balance_before: a.balance,
                hold: Some(hold.0),
                memo: "",
                request: &canonical,
            };
            let id = journal(tx, now, &e)?;
            let reason = format!(
                "hold {} of {account_id:?}: charged {charged}, released {rest}",
                hold.0
            );
            let r = SettleReceipt {
                id,
                hold,
                charged,
                released: rest as u64,
            };
            Ok(Step::Commit(
                r,
                record(&actor, now, op, &request, Decision::Allowed, reason),
            ))
        })
    }

    /// The newest `limit` journal rows touching `account`, newest first.
    pub fn history(
        &self,
        account_id: &str,
        limit: usize,
    ) -> Result<Vec<JournalEntry>, LedgerError> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {JOURNAL_COLUMNS} FROM ledger_journal \
                 WHERE from_account = ?1 OR to_account = ?1 ORDER BY id DESC LIMIT ?2"
            ))
            .map_err(sqlite("preparing ledger history"))?;
        let rows = stmt
            .query_map(params![account_id, sql_limit(limit)], entry_from_row)
            .map_err(sqlite("reading ledger history"))?;
        let mut out = Vec::new();
        for r in rows {
            out.push(finish_entry(r.map_err(sqlite("reading journal row"))?)?);
        }
        Ok(out)
    }
}
