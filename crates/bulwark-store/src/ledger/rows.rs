//! Rows of the ledger tables: reading accounts, moving balances, the
//! journal and idempotency lookups, and the policy evaluation. Everything
//! here runs inside the caller's write transaction.

use super::types::{HoldId, JournalEntry, LedgerError, Policy, TransferReceipt};
use crate::{StoreError, sqlite, to_u64};
use rusqlite::{Connection, OptionalExtension, params};

const DAY_MS: i64 = 86_400_000;

pub(super) struct Account {
    pub(super) id: String,
    pub(super) balance: u64,
    pub(super) held: u64,
    pub(super) policy: Policy,
}

pub(super) fn account(conn: &Connection, id: &str) -> Result<Account, LedgerError> {
    let row = conn
        .prepare_cached(
            "SELECT balance, held, max_num, max_den, reserve_floor, daily_cap, counterparties \
             FROM ledger_accounts WHERE id = ?1",
        )
        .map_err(sqlite("preparing ledger account read"))?
        .query_row([id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, String>(6)?,
            ))
        })
        .optional()
        .map_err(sqlite("reading ledger account"))?;
    let Some((balance, held, num, den, floor, cap, parties)) = row else {
        return Err(LedgerError::UnknownAccount(id.to_owned()));
    };
    let counterparties = serde_json::from_str(&parties).map_err(|e| {
        StoreError::Corrupt(format!("counterparties of ledger account {id:?}: {e}"))
    })?;
    Ok(Account {
        id: id.to_owned(),
        balance: to_u64(balance, "ledger balance")?,
        held: to_u64(held, "ledger held amount")?,
        policy: Policy {
            max_fraction_num: to_u64(num, "ledger policy fraction")?,
            max_fraction_den: to_u64(den, "ledger policy fraction")?,
            reserve_floor: to_u64(floor, "ledger reserve floor")?,
            daily_cap: cap.map(|c| to_u64(c, "ledger daily cap")).transpose()?,
            counterparties,
        },
    })
}

/// Adds `delta` (may be negative) to the account's balance and held amount.
/// The caller has checked the results are in range.
pub(super) fn adjust(
    conn: &Connection,
    id: &str,
    balance: i64,
    held: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE ledger_accounts SET balance = balance + ?2, held = held + ?3 WHERE id = ?1",
    )
    .map_err(sqlite("preparing ledger balance update"))?
    .execute(params![id, balance, held])
    .map_err(sqlite("updating ledger balance"))?;
    Ok(())
}

/// Credits `amount` to `to`'s spendable balance, refusing an overflow.
pub(super) fn credit(conn: &Connection, to: &Account, amount: i64) -> Result<(), LedgerError> {
    let total = (to.balance as u128) + (to.held as u128) + (amount as u128);
    if total > i64::MAX as u128 {
        return Err(LedgerError::Overflow {
            account: to.id.clone(),
            amount: amount as u64,
        });
    }
    Ok(adjust(conn, &to.id, amount, 0)?)
}

/// Outgoing today (UTC): transfers and settled charges.
pub(super) fn spent_today(conn: &Connection, id: &str, now: i64) -> Result<u64, StoreError> {
    let spent: Option<i64> = conn
        .prepare_cached("SELECT spent FROM ledger_daily WHERE account = ?1 AND day = ?2")
        .map_err(sqlite("preparing ledger daily read"))?
        .query_row(params![id, now.div_euclid(DAY_MS)], |r| r.get(0))
        .optional()
        .map_err(sqlite("reading today's ledger debits"))?;
    to_u64(spent.unwrap_or(0), "ledger daily sum")
}

/// Adds `amount` to what `id` paid out today (saturating: the sum only
/// feeds the cap comparison).
pub(super) fn add_spent(
    conn: &Connection,
    id: &str,
    now: i64,
    amount: i64,
) -> Result<(), StoreError> {
    if amount == 0 {
        return Ok(());
    }
    conn.prepare_cached(
        "INSERT INTO ledger_daily (account, day, spent) VALUES (?1, ?2, ?3) \
         ON CONFLICT (account, day) DO UPDATE SET spent = CASE \
             WHEN spent > 9223372036854775807 - excluded.spent THEN 9223372036854775807 \
             ELSE spent + excluded.spent END",
    )
    .map_err(sqlite("preparing ledger daily update"))?
    .execute(params![id, now.div_euclid(DAY_MS), amount])
    .map_err(sqlite("updating today's ledger debits"))?;
    Ok(())
}

/// The policy decision for debiting `amount` from `from`'s spendable
/// balance, towards `to` (a transfer) or into a hold (`to == None`).
/// `Ok(Err(_))` is a refusal; `Err(_)` a failure to evaluate.
pub(super) fn evaluate(
    conn: &Connection,
    from: &Account,
    to: Option<&str>,
    amount: u64,
    now: i64,
) -> Result<Result<(), LedgerError>, LedgerError> {
    let p = &from.policy;
    let account = from.id.clone();
    if amount > from.balance {
        return Ok(Err(LedgerError::InsufficientFunds {
            account,
            available: from.balance,
            requested: amount,
        }));
    }
    if let Some(to) = to {
        if !p.counterparties.is_empty() && !p.counterparties.iter().any(|c| c == to) {
            return Ok(Err(LedgerError::CounterpartyNotAllowed {
                account,
                to: to.to_owned(),
            }));
        }
        if !within_fraction(amount, from.balance, p.max_fraction_num, p.max_fraction_den) {
            return Ok(Err(LedgerError::FractionExceeded {
                account,
                amount,
                balance: from.balance,
                num: p.max_fraction_num,
                den: p.max_fraction_den,
            }));
        }
    }
    let left = from.balance - amount;
    if left < p.reserve_floor {
        return Ok(Err(LedgerError::BelowReserve {
            account,
            amount,
            balance: from.balance,
            floor: p.reserve_floor,
            left,
        }));
    }
    if let Some(cap) = p.daily_cap {
        let spent = spent_today(conn, &from.id, now)?.saturating_add(from.held);
        if spent.saturating_add(amount) > cap {
            return Ok(Err(LedgerError::DailyCap {
                account,
                cap,
                spent,
                amount,
            }));
        }
    }
    Ok(Ok(()))
}

/// `amount <= balance * num / den`, exactly (no rounding, no overflow).
pub fn within_fraction(amount: u64, balance: u64, num: u64, den: u64) -> bool {
    den != 0 && (amount as u128) * (den as u128) <= (balance as u128) * (num as u128)
}

pub(super) const JOURNAL_COLUMNS: &str = "id, time_ms, idempotency_key, kind, from_account, to_account, \
     amount, released, balance_before, hold_id, memo";

pub(super) fn entry_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(JournalEntry, [i64; 3])> {
    Ok((
        JournalEntry {
            id: r.get(0)?,
            time_ms: r.get(1)?,
            key: r.get(2)?,
            kind: r.get(3)?,
            from: r.get(4)?,
            to: r.get(5)?,
            amount: 0,
            released: 0,
            balance_before: 0,
            hold: r.get::<_, Option<i64>>(9)?.map(HoldId),
            memo: r.get(10)?,
        },
        [r.get(6)?, r.get(7)?, r.get(8)?],
    ))
}

pub(super) fn finish_entry(
    (mut e, [amount, released, before]): (JournalEntry, [i64; 3]),
) -> Result<JournalEntry, StoreError> {
    e.amount = to_u64(amount, "journal amount")?;
    e.released = to_u64(released, "journal released amount")?;
    e.balance_before = to_u64(before, "journal balance")?;
    Ok(e)
}

/// The journal row of `key`, if it was made by the same `request`; a
/// different request under the same key is a conflict.
pub(super) fn replay(
    conn: &Connection,
    key: &str,
    request: &str,
) -> Result<Option<JournalEntry>, LedgerError> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {JOURNAL_COLUMNS}, request FROM ledger_journal WHERE idempotency_key = ?1"
        ))
        .map_err(sqlite("preparing idempotency lookup"))?
        .query_row([key], |r| Ok((entry_from_row(r)?, r.get::<_, String>(11)?)))
        .optional()
        .map_err(sqlite("looking up idempotency key"))?;
    let Some((raw, stored)) = row else {
        return Ok(None);
    };
    let entry = finish_entry(raw)?;
    if stored != request {
        return Err(LedgerError::KeyConflict {
            key: key.to_owned(),
            kind: entry.kind,
        });
    }
    Ok(Some(entry))
}

pub(super) struct NewEntry<'a> {
    pub(super) key: &'a str,
    pub(super) kind: &'a str,
    pub(super) from: &'a str,
    pub(super) to: &'a str,
    pub(super) amount: i64,
    pub(super) released: i64,
    pub(super) balance_before: u64,
    pub(super) hold: Option<i64>,
    pub(super) memo: &'a str,
    pub(super) request: &'a str,
}

pub(super) fn journal(conn: &Connection, now: i64, e: &NewEntry<'_>) -> Result<i64, StoreError> {
    conn.prepare_cached(
        "INSERT INTO ledger_journal (time_ms, idempotency_key, kind, from_account, to_account, \
         amount, released, balance_before, hold_id, memo, request) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )
    .map_err(sqlite("preparing journal insert"))?
    .execute(params![
        now,
        e.key,
        e.kind,
        e.from,
        e.to,
        e.amount,
        e.released,
        // Spendable balances fit in i64 (the column is INTEGER).
        e.balance_before as i64,
        e.hold,
        e.memo,
        e.request
    ])
    .map_err(sqlite("appending to the ledger journal"))?;
    Ok(conn.last_insert_rowid())
}

pub(super) fn receipt(e: JournalEntry) -> TransferReceipt {
    TransferReceipt {
        id: e.id,
        time_ms: e.time_ms,
        key: e.key,
        from: e.from,
        to: e.to,
        amount: e.amount,
        balance_before: e.balance_before,
        memo: e.memo,
    }
}
