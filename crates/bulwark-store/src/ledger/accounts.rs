//! Opening accounts, reading and changing their policy, listing them.

use super::rows::account;
use super::types::{AccountKind, AccountSummary, Actor, Balance, BudgetUse, LedgerError, Policy};
use super::{Step, budget, record};
use crate::{Store, now_ms, sqlite, to_u64};
use bulwark_audit::Decision;
use rusqlite::{Connection, ErrorCode, params};
use serde_json::json;

/// A policy in its stored form, validated.
struct SqlPolicy {
    num: i64,
    den: i64,
    floor: i64,
    cap: Option<i64>,
    parties: String,
}

fn to_sql(id: &str, policy: &Policy) -> Result<SqlPolicy, LedgerError> {
    let bad = |why| LedgerError::InvalidPolicy {
        id: id.to_owned(),
        why,
    };
    if policy.max_fraction_den == 0 || policy.max_fraction_num > policy.max_fraction_den {
        return Err(bad(
            "the maximum fraction must be num/den with 0 <= num <= den and den > 0",
        ));
    }
    let int = |v: u64| i64::try_from(v).map_err(|_| bad("a limit exceeds 2^63 - 1"));
    if policy.counterparties.iter().any(|c| c.is_empty()) {
        return Err(bad("a counterparty is empty"));
    }
    Ok(SqlPolicy {
        num: int(policy.max_fraction_num)?,
        den: int(policy.max_fraction_den)?,
        floor: int(policy.reserve_floor)?,
        cap: policy.daily_cap.map(int).transpose()?,
        parties: serde_json::to_string(&policy.counterparties)
            .map_err(|_| bad("counterparties cannot be encoded"))?,
    })
}

/// An account id is `<kind>:<name>`: `user:<user name>` (kind user),
/// `agent:<agent name>` or `child:<agent name>.<hex>` (kind agent), with
/// names following [`AccountKind::valid_name`]. `system:` accounts are the
/// store's own.
fn check_id(id: &str, kind: AccountKind) -> Result<(), LedgerError> {
    let invalid = |why| {
        Err(LedgerError::InvalidAccount {
            id: id.to_owned(),
            why,
        })
    };
    if id.is_empty() {
        return invalid("the id is empty");
    }
    if id.starts_with("system:") || kind == AccountKind::System {
        return invalid("system accounts are created by the store itself");
    }
    match kind {
        AccountKind::User => match id.strip_prefix("user:") {
            Some(name) if AccountKind::valid_name(name) => Ok(()),
            Some(_) => invalid(
                "the user name after `user:` must be 1-64 lowercase letters, digits, `-` or `_`, \
                 starting with a letter or digit (the rule for user names)",
            ),
            None => invalid("a user's account id is `user:<name>`, e.g. user:alice"),
        },
        AccountKind::Agent => {
            if let Some(name) = id.strip_prefix("agent:") {
                if AccountKind::valid_name(name) {
                    return Ok(());
                }
                return invalid(
                    "the agent name after `agent:` must be 1-64 lowercase letters, digits, `-` \
                     or `_`, starting with a letter or digit (the rule for agent names)",
                );
            }
            if let Some(child) = id.strip_prefix("child:") {
                // The kernel names children `<agent>.<16 hex digits>`.
                let valid = match child.split_once('.') {
                    Some((agent, hex)) => {
                        AccountKind::valid_name(agent)
                            && (1..=32).contains(&hex.len())
                            && hex.bytes().all(|b| b.is_ascii_hexdigit())
                    }
                    None => AccountKind::valid_name(child),
                };
                if valid {
                    return Ok(());
                }
                return invalid(
                    "a child's account id is `child:<agent>.<hex>`, the agent name 1-64 lowercase \
                     letters, digits, `-` or `_`, starting with a letter or digit",
                );
            }
            invalid(
                "an agent's account id is `agent:<name>` (or `child:<agent>.<hex>` for a spawned \
                 child), e.g. agent:researcher",
            )
        }
        AccountKind::System => invalid("system accounts are created by the store itself"),
    }
}

/// The sum of every account's spendable and held credits, and of every
/// mint, exactly: read row by row, so no sum can overflow (SQLite's `SUM`
/// fails past 2^63 - 1, which older versions let the ledger reach).
pub(super) fn totals(conn: &Connection) -> Result<(u128, u128), LedgerError> {
    let mut held: u128 = 0;
    let mut stmt = conn
        .prepare_cached("SELECT balance, held FROM ledger_accounts")
        .map_err(sqlite("preparing the ledger sum"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
        .map_err(sqlite("summing the ledger"))?;
    for row in rows {
        let (balance, on_hold) = row.map_err(sqlite("reading a ledger balance"))?;
        held += u128::from(to_u64(balance, "ledger balance")?)
            + u128::from(to_u64(on_hold, "ledger held amount")?);
    }
    let mut minted: u128 = 0;
    let mut stmt = conn
        .prepare_cached("SELECT amount FROM ledger_journal WHERE kind = 'mint'")
        .map_err(sqlite("preparing the mint sum"))?;
    let rows = stmt
        .query_map([], |r| r.get::<_, i64>(0))
        .map_err(sqlite("summing the mints"))?;
    for row in rows {
        minted += u128::from(to_u64(
            row.map_err(sqlite("reading a mint"))?,
            "minted amount",
        )?);
    }
    Ok((held, minted))
}

/// Inserts an account row inside the caller's transaction.
pub(crate) fn insert_account(
    conn: &Connection,
    id: &str,
    kind: AccountKind,
    policy: &Policy,
) -> Result<(), LedgerError> {
    check_id(id, kind)?;
    let p = to_sql(id, policy)?;
    let result = conn
        .prepare_cached(
            "INSERT INTO ledger_accounts (id, kind, balance, held, max_num, max_den, \
             reserve_floor, daily_cap, counterparties, created_ms) \
             VALUES (?1, ?2, 0, 0, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(sqlite("preparing account insert"))?
        .execute(params![
            id,
            kind.as_str(),
            p.num,
            p.den,
            p.floor,
            p.cap,
            p.parties,
            now_ms()
        ]);
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
            Err(LedgerError::AccountExists(id.to_owned()))
        }
        Err(e) => Err(sqlite("inserting ledger account")(e).into()),
    }
}

impl Store {
    /// Opens an account with a zero balance.
    pub fn open_account(
        &self,
        id: &str,
        kind: AccountKind,
        policy: &Policy,
    ) -> Result<(), LedgerError> {
        let conn = self.lock()?;
        insert_account(&conn, id, kind, policy)
    }

    /// Opens the account with the default policy unless it exists; whether
    /// it was created.
    pub fn ensure_account(&self, id: &str, kind: AccountKind) -> Result<bool, LedgerError> {
        match self.open_account(id, kind, &Policy::default()) {
            Ok(()) => Ok(true),
            Err(LedgerError::AccountExists(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The account's spending rules.
    pub fn policy(&self, id: &str) -> Result<Policy, LedgerError> {
        let conn = self.lock()?;
        Ok(account(&conn, id)?.policy)
    }

    /// Replaces an account's spending rules, audited. The new rules apply
    /// from the next operation's serialization point on.
    pub fn set_policy(&self, actor: &Actor, id: &str, policy: &Policy) -> Result<(), LedgerError> {
        let p = to_sql(id, policy)?;
        let request = json!({"op": "policy", "account": id, "policy": policy});
        self.ledger_write("policy change", |tx, now| {
            let before = account(tx, id)?.policy;
            tx.prepare_cached(
                "UPDATE ledger_accounts SET max_num = ?2, max_den = ?3, reserve_floor = ?4, \
                 daily_cap = ?5, counterparties = ?6 WHERE id = ?1",
            )
            .map_err(sqlite("preparing policy update"))?
            .execute(params![id, p.num, p.den, p.floor, p.cap, p.parties])
            .map_err(sqlite("updating ledger policy"))?;
            let reason = format!(
                "policy of {id:?} changed from {}",
                serde_json::to_string(&before).unwrap_or_default()
            );
            Ok(Step::Commit(
                (),
                record(actor, now, "policy", &request, Decision::Allowed, reason),
            ))
        })
    }

    /// Every account, by id.
    pub fn accounts(&self) -> Result<Vec<AccountSummary>, LedgerError> {
        let conn = self.lock()?;
        let ids: Vec<(String, String)> = conn
            .prepare_cached("SELECT id, kind FROM ledger_accounts ORDER BY id")
            .map_err(sqlite("preparing account list"))?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(sqlite("listing accounts"))?
            .collect::<Result<_, _>>()
            .map_err(sqlite("reading account row"))?;
        let mut out = Vec::with_capacity(ids.len());
        for (id, kind) in ids {
            let a = account(&conn, &id)?;
            out.push(AccountSummary {
                id,
                kind: AccountKind::parse(&kind)?,
                balance: Balance {
                    balance: a.balance,
                    held: a.held,
                },
                policy: a.policy,
            });
        }
        Ok(out)
    }

    /// What `user`'s holds have counted in `session`, today and this month.
    pub fn budget_use(&self, user: &str, session: &str) -> Result<BudgetUse, LedgerError> {
        let conn = self.lock()?;
        Ok(budget::usage(&conn, user, session, now_ms())?)
    }

    /// The sum of every account's spendable and held credits, and of every
    /// mint: equal, unless the ledger is corrupt. Exact for any data (a
    /// ledger cannot hold more than 2^64 rows of at most 2^63 - 1 each).
    pub fn ledger_totals(&self) -> Result<(u128, u128), LedgerError> {
        let conn = self.lock()?;
        totals(&conn)
    }
}
