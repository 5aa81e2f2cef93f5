//! Per-user budgets (access.toml `credits_per_session|day|month`): what a
//! user's holds reserved and were charged, per period, checked and counted
//! inside the hold's transaction so concurrent sessions of one user cannot
//! both pass the check.

use super::types::{Budget, BudgetUse, LedgerError};
use crate::{StoreError, sqlite, to_u64};
use rusqlite::{Connection, OptionalExtension, params};

const DAY_MS: i64 = 86_400_000;

/// The period keys of a hold made at `now` for `session`.
fn periods(session: &str, now: i64) -> [String; 3] {
    let month = time::OffsetDateTime::from_unix_timestamp(now.div_euclid(1000))
        .map(|t| format!("{:04}-{:02}", t.year(), u8::from(t.month())))
        .unwrap_or_else(|_| "invalid".to_owned());
    [
        format!("s:{session}"),
        format!("d:{}", now.div_euclid(DAY_MS)),
        format!("m:{month}"),
    ]
}

fn used(conn: &Connection, user: &str, period: &str) -> Result<u64, StoreError> {
    let used: Option<i64> = conn
        .prepare_cached("SELECT used FROM ledger_budget_use WHERE user = ?1 AND period = ?2")
        .map_err(sqlite("preparing budget read"))?
        .query_row(params![user, period], |r| r.get(0))
        .optional()
        .map_err(sqlite("reading budget use"))?;
    to_u64(used.unwrap_or(0), "budget use")
}

/// Checks `amount` more against each limit; on success returns the period
/// keys the hold counts against.
pub(super) fn check(
    conn: &Connection,
    b: &Budget,
    amount: u64,
    now: i64,
) -> Result<Result<Vec<String>, LedgerError>, StoreError> {
    let keys = periods(&b.session, now);
    let limits = [
        ("session", b.per_session),
        ("day", b.per_day),
        ("month", b.per_month),
    ];
    for (key, (period, limit)) in keys.iter().zip(limits) {
        let Some(limit) = limit else { continue };
        let used = used(conn, &b.user, key)?;
        if used.saturating_add(amount) > limit {
            return Ok(Err(LedgerError::Budget {
                user: b.user.clone(),
                period,
                limit,
                used,
                amount,
            }));
        }
    }
    Ok(Ok(keys.to_vec()))
}

/// Counts `amount` against each period (saturating: the sums only feed
/// comparisons).
pub(super) fn add(
    conn: &Connection,
    user: &str,
    periods: &[String],
    amount: i64,
) -> Result<(), StoreError> {
    for period in periods {
        conn.prepare_cached(
            "INSERT INTO ledger_budget_use (user, period, used) VALUES (?1, ?2, ?3) \
             ON CONFLICT (user, period) DO UPDATE SET used = CASE \
                 WHEN used > 9223372036854775807 - excluded.used THEN 9223372036854775807 \
                 ELSE used + excluded.used END",
        )
        .map_err(sqlite("preparing budget update"))?
        .execute(params![user, period, amount])
        .map_err(sqlite("counting budget use"))?;
    }
    Ok(())
}

/// Takes back what a closed hold did not charge.
pub(super) fn give_back(
    conn: &Connection,
    user: &str,
    periods: &[String],
    amount: i64,
) -> Result<(), StoreError> {
    if amount == 0 {
        return Ok(());
    }
    for period in periods {
        conn.prepare_cached(
            "UPDATE ledger_budget_use SET used = MAX(used - ?3, 0) WHERE user = ?1 AND period = ?2",
        )
        .map_err(sqlite("preparing budget give-back"))?
        .execute(params![user, period, amount])
        .map_err(sqlite("giving back budget use"))?;
    }
    Ok(())
}

/// What `user` has used in `session`, today and this month (UTC).
pub(super) fn usage(
    conn: &Connection,
    user: &str,
    session: &str,
    now: i64,
) -> Result<BudgetUse, StoreError> {
    let [s, d, m] = periods(session, now);
    Ok(BudgetUse {
        session: used(conn, user, &s)?,
        day: used(conn, user, &d)?,
        month: used(conn, user, &m)?,
    })
}
