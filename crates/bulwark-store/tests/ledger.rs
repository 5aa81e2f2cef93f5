//! The credits ledger: each policy rule refuses the attack and allows the
//! work, idempotency, holds, and a many-connection stress test.
//!
//! The stress test runs twice: threads with a connection each, and child
//! processes (this test binary re-run with an environment variable).

use bulwark_store::{
    AccountKind, Actor, HoldId, LedgerError, Policy, Store, TransferReceipt, TransferRequest,
    USAGE, within_fraction,
};
use proptest::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::Duration;

fn store_with(accounts: &[(&str, Policy, u64)]) -> Store {
    let store = Store::open_in_memory().unwrap();
    for (id, policy, funds) in accounts {
        store.open_account(id, AccountKind::Agent, policy).unwrap();
        if *funds > 0 {
            store
                .mint(&Actor::default(), &format!("mint-{id}"), id, *funds, "seed")
                .unwrap();
        }
    }
    store
}

fn req(key: &str, from: &str, to: &str, amount: u64) -> TransferRequest {
    TransferRequest {
        key: key.into(),
        from: from.into(),
        to: to.into(),
        amount,
        memo: String::new(),
        actor: Actor::default(),
    }
}

fn bal(store: &Store, id: &str) -> (u64, u64) {
    let b = store.balance(id).unwrap();
    (b.balance, b.held)
}

#[test]
fn at_most_half_per_transfer_by_default() {
    let store = store_with(&[
        ("agent:a", Policy::default(), 100),
        ("agent:b", Policy::default(), 0),
    ]);
    let err = store
        .transfer(&req("k1", "agent:a", "agent:b", 51))
        .unwrap_err();
    assert!(matches!(err, LedgerError::FractionExceeded { .. }), "{err}");
    assert!(err.to_string().contains("\"agent:a\""), "{err}");
    assert_eq!(bal(&store, "agent:a"), (100, 0));
    let r = store
        .transfer(&req("k2", "agent:a", "agent:b", 50))
        .unwrap();
    assert_eq!((r.amount, r.balance_before), (50, 100));
    // Half of what is left now, not of the original balance.
    assert!(
        store
            .transfer(&req("k3", "agent:a", "agent:b", 26))
            .is_err()
    );
    store
        .transfer(&req("k4", "agent:a", "agent:b", 25))
        .unwrap();
    assert_eq!(bal(&store, "agent:a"), (25, 0));
    assert_eq!(bal(&store, "agent:b"), (75, 0));
    // The refusals are audited, as denied, next to the movements.
    let sink = store.audit_sink();
    let ledger: Vec<_> = sink
        .newest(100)
        .unwrap()
        .into_iter()
        .filter(|r| r.record.action == bulwark_audit::Action::Ledger)
        .collect();
    let denied = ledger
        .iter()
        .filter(|r| r.record.decision == bulwark_audit::Decision::Denied)
        .count();
    assert_eq!((ledger.len(), denied), (5, 2));
    assert!(sink.verify().unwrap().is_ok());
}

#[test]
fn reserve_floor() {
    let policy = Policy {
        max_fraction_num: 1,
        max_fraction_den: 1,
        reserve_floor: 40,
        ..Policy::default()
    };
    let store = store_with(&[("agent:a", policy, 100), ("agent:b", Policy::default(), 0)]);
    let err = store
        .transfer(&req("k1", "agent:a", "agent:b", 61))
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::BelowReserve { left: 39, .. }),
        "{err}"
    );
    store
        .transfer(&req("k2", "agent:a", "agent:b", 60))
        .unwrap();
    // A hold may not dig into the reserve either.
    assert!(matches!(
        store.hold("h", "agent:a", 1).unwrap_err(),
        LedgerError::BelowReserve { .. }
    ));
    assert_eq!(bal(&store, "agent:a"), (40, 0));
}

#[test]
fn daily_cap_counts_transfers_settlements_and_open_holds() {
    let policy = Policy {
        max_fraction_num: 1,
        max_fraction_den: 1,
        daily_cap: Some(30),
        ..Policy::default()
    };
    let store = store_with(&[("agent:a", policy, 1000), ("agent:b", Policy::default(), 0)]);
    store
        .transfer(&req("k1", "agent:a", "agent:b", 10))
        .unwrap();
    let h = store.hold("h1", "agent:a", 10).unwrap();
    let err = store
        .transfer(&req("k2", "agent:a", "agent:b", 11))
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::DailyCap { spent: 20, .. }),
        "{err}"
    );
    store.settle("s1", h, 4).unwrap();
    // 10 transferred + 4 charged: 16 left today.
    assert!(
        store
            .transfer(&req("k3", "agent:a", "agent:b", 17))
            .is_err()
    );
    store
        .transfer(&req("k4", "agent:a", "agent:b", 16))
        .unwrap();
    assert!(store.hold("h2", "agent:a", 1).is_err());
}

#[test]
fn allowed_counterparties() {
    let policy = Policy {
        counterparties: vec!["agent:b".into()],
        ..Policy::default()
    };
    let store = store_with(&[
        ("agent:a", policy, 100),
        ("agent:b", Policy::default(), 0),
        ("agent:c", Policy::default(), 0),
    ]);
    let err = store
        .transfer(&req("k1", "agent:a", "agent:c", 1))
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::CounterpartyNotAllowed { .. }),
        "{err}"
    );
    store.transfer(&req("k2", "agent:a", "agent:b", 1)).unwrap();
    assert_eq!(bal(&store, "agent:c"), (0, 0));
}

#[test]
fn malformed_requests_are_refused() {
    let store = store_with(&[
        ("agent:a", Policy::default(), 100),
        ("agent:b", Policy::default(), 0),
    ]);
    assert!(matches!(
        store
            .transfer(&req("k", "agent:a", "agent:b", 0))
            .unwrap_err(),
        LedgerError::InvalidAmount { .. }
    ));
    assert!(matches!(
        store
            .transfer(&req("k", "agent:a", "agent:b", u64::MAX))
            .unwrap_err(),
        LedgerError::InvalidAmount { .. }
    ));
    assert!(matches!(
        store
            .transfer(&req("k", "agent:a", "agent:a", 1))
            .unwrap_err(),
        LedgerError::SameAccount(_)
    ));
    assert!(matches!(
        store
            .transfer(&req("k", "agent:a", "nobody", 1))
            .unwrap_err(),
        LedgerError::UnknownAccount(_)
    ));
    assert!(matches!(
        store
            .transfer(&req("k", "agent:a", "agent:b", 101))
            .unwrap_err(),
        LedgerError::InsufficientFunds { .. }
    ));
    assert!(matches!(
        store
            .open_account("agent:a", AccountKind::Agent, &Policy::default())
            .unwrap_err(),
        LedgerError::AccountExists(_)
    ));
    assert!(matches!(
        store
            .open_account("system:x", AccountKind::User, &Policy::default())
            .unwrap_err(),
        LedgerError::InvalidAccount { .. }
    ));
    let bad = Policy {
        max_fraction_num: 3,
        max_fraction_den: 2,
        ..Policy::default()
    };
    assert!(matches!(
        store
            .open_account("user:z", AccountKind::User, &bad)
            .unwrap_err(),
        LedgerError::InvalidPolicy { .. }
    ));
}

#[test]
fn no_overflow() {
    let store = store_with(&[("agent:a", Policy::default(), i64::MAX as u64)]);
    let err = store
        .mint(&Actor::default(), "m2", "agent:a", 1, "")
        .unwrap_err();
    assert!(matches!(err, LedgerError::SupplyLimit { .. }), "{err}");
    assert_eq!(bal(&store, "agent:a"), (i64::MAX as u64, 0));
}

const MAX: u64 = i64::MAX as u64;

/// Issue 17 item 12: two mints of 2^63 - 1 were both accepted, and then the
/// conservation check failed with "integer overflow" for good.
#[test]
fn a_mint_past_the_supply_limit_is_refused_in_another_account_too() {
    let store = store_with(&[
        ("agent:a", Policy::default(), MAX),
        ("agent:b", Policy::default(), 0),
    ]);
    let journal = store.history("agent:b", 10).unwrap().len();
    let err = store
        .mint(&Actor::default(), "m-b", "agent:b", 1, "")
        .unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::SupplyLimit {
                amount: 1,
                room: 0,
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("9223372036854775807") && msg.contains("mint at most 0"),
        "the refusal names the limit and what to do: {msg}"
    );
    assert!(!err.is_denial());
    // Nothing changed, and everything still reads.
    assert_eq!(bal(&store, "agent:b"), (0, 0));
    assert_eq!(bal(&store, "agent:a"), (MAX, 0));
    assert_eq!(store.history("agent:b", 10).unwrap().len(), journal);
    assert_eq!(
        store.ledger_totals().unwrap(),
        (u128::from(MAX), u128::from(MAX))
    );
    assert_eq!(store.accounts().unwrap().len(), 3, "a, b and system:usage");
    // A bigger mint into a new account opened by the mint opens nothing.
    let err = store
        .mint_opening(
            &Actor::default(),
            "m-c",
            "agent:c",
            AccountKind::Agent,
            MAX,
            "",
        )
        .unwrap_err();
    assert!(matches!(err, LedgerError::SupplyLimit { .. }), "{err}");
    assert!(matches!(
        store.balance("agent:c").unwrap_err(),
        LedgerError::UnknownAccount(_)
    ));
    // Moving credits is not minting: still fine at the limit.
    let wide = Policy {
        max_fraction_num: 1,
        max_fraction_den: 1,
        ..Policy::default()
    };
    store
        .set_policy(&Actor::default(), "agent:a", &wide)
        .unwrap();
    store
        .transfer(&req("t", "agent:a", "agent:b", MAX))
        .unwrap();
    assert_eq!(bal(&store, "agent:b"), (MAX, 0));
    assert_eq!(
        store.ledger_totals().unwrap(),
        (u128::from(MAX), u128::from(MAX))
    );
}

#[test]
fn minting_up_to_the_supply_limit_works() {
    let store = store_with(&[
        ("agent:a", Policy::default(), MAX - 10),
        ("agent:b", Policy::default(), 0),
    ]);
    let err = store
        .mint(&Actor::default(), "m1", "agent:b", 11, "")
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::SupplyLimit { room: 10, .. }),
        "{err}"
    );
    store
        .mint(&Actor::default(), "m2", "agent:b", 10, "")
        .unwrap();
    let err = store
        .mint_opening(&Actor::default(), "m3", "user:c", AccountKind::User, 1, "")
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::SupplyLimit { room: 0, .. }),
        "the supply is full: {err}"
    );
    assert!(
        matches!(
            store.balance("user:c").unwrap_err(),
            LedgerError::UnknownAccount(_)
        ),
        "and nothing was opened"
    );
    assert_eq!(bal(&store, "agent:b"), (10, 0));
    assert_eq!(
        store.ledger_totals().unwrap(),
        (u128::from(MAX), u128::from(MAX))
    );
    // Under the limit, mint_opening opens the account once.
    let store = Store::open_in_memory().unwrap();
    let first = store
        .mint_opening(&Actor::default(), "k1", "user:c", AccountKind::User, 5, "")
        .unwrap();
    assert!(first.1);
    let second = store
        .mint_opening(
            &Actor::default(),
            "k2",
            "user:c",
            AccountKind::User,
            MAX - 5,
            "",
        )
        .unwrap();
    assert!(!second.1);
    assert_eq!(bal(&store, "user:c"), (MAX, 0));
}

/// A ledger that older versions let past the limit still reads: the totals
/// are exact, and nothing more can be minted.
#[test]
fn the_totals_of_a_ledger_already_past_the_limit_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.db");
    let store = Store::open(&path).unwrap();
    for id in ["agent:a", "agent:b"] {
        store.ensure_account(id, AccountKind::Agent).unwrap();
    }
    store
        .mint(&Actor::default(), "m-a", "agent:a", MAX, "")
        .unwrap();
    {
        // What two accepted mints of 2^63 - 1 left behind.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE ledger_accounts SET balance = 9223372036854775807 WHERE id = 'agent:b'",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO ledger_journal (time_ms, idempotency_key, kind, from_account, \
             to_account, amount, released, balance_before, hold_id, memo, request) \
             SELECT time_ms, 'm-b', kind, from_account, 'agent:b', amount, released, \
             balance_before, hold_id, memo, request FROM ledger_journal WHERE kind = 'mint'",
            [],
        )
        .unwrap();
    }
    let twice = 2 * u128::from(MAX);
    assert_eq!(store.ledger_totals().unwrap(), (twice, twice));
    assert_eq!(store.accounts().unwrap().len(), 3);
    let err = store
        .mint(&Actor::default(), "m-c", "agent:a", 1, "")
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::SupplyLimit { room: 0, supply, .. } if supply == twice),
        "{err}"
    );
}

#[test]
fn repeated_key_moves_credits_once() {
    let store = store_with(&[
        ("agent:a", Policy::default(), 100),
        ("agent:b", Policy::default(), 0),
    ]);
    let first = store.transfer(&req("k", "agent:a", "agent:b", 10)).unwrap();
    let again = store.transfer(&req("k", "agent:a", "agent:b", 10)).unwrap();
    assert_eq!(first, again);
    assert_eq!(bal(&store, "agent:a"), (90, 0));
    let err = store
        .transfer(&req("k", "agent:a", "agent:b", 11))
        .unwrap_err();
    assert!(matches!(err, LedgerError::KeyConflict { .. }), "{err}");
    assert!(err.to_string().contains("new key"), "{err}");
    // A key is one request of any kind.
    assert!(matches!(
        store.hold("k", "agent:a", 1).unwrap_err(),
        LedgerError::KeyConflict { .. }
    ));
    assert!(matches!(
        store
            .mint(&Actor::default(), "k", "agent:a", 10, "")
            .unwrap_err(),
        LedgerError::KeyConflict { .. }
    ));
    assert_eq!(bal(&store, "agent:a"), (90, 0));
    assert_eq!(store.history("agent:a", 10).unwrap().len(), 2);
}

#[test]
fn holds_settle_and_release() {
    let store = store_with(&[("agent:a", Policy::default(), 100)]);
    let h = store.hold("h1", "agent:a", 30).unwrap();
    assert_eq!(store.hold("h1", "agent:a", 30).unwrap(), h);
    assert_eq!(bal(&store, "agent:a"), (70, 30));
    assert!(matches!(
        store.settle("s1", h, 31).unwrap_err(),
        LedgerError::SettleExceedsHold { .. }
    ));
    let s = store.settle("s1", h, 12).unwrap();
    assert_eq!((s.charged, s.released), (12, 18));
    assert_eq!(store.settle("s1", h, 12).unwrap(), s);
    assert_eq!(bal(&store, "agent:a"), (88, 0));
    assert_eq!(bal(&store, USAGE), (12, 0));
    // Settled once: neither a second settlement nor a release.
    assert!(matches!(
        store.settle("s2", h, 1).unwrap_err(),
        LedgerError::HoldClosed { .. }
    ));
    assert!(matches!(
        store.release("r1", h).unwrap_err(),
        LedgerError::HoldClosed { .. }
    ));
    let h2 = store.hold("h2", "agent:a", 50).unwrap();
    let r = store.release("r2", h2).unwrap();
    assert_eq!((r.charged, r.released), (0, 50));
    assert_eq!(bal(&store, "agent:a"), (88, 0));
    assert!(matches!(
        store.release("r3", HoldId(999)).unwrap_err(),
        LedgerError::UnknownHold(999)
    ));
    assert!(matches!(
        store.hold("h3", "agent:a", 89).unwrap_err(),
        LedgerError::InsufficientFunds { .. }
    ));
}

#[test]
fn journal_is_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.db");
    let store = Store::open(&path).unwrap();
    store
        .open_account("user:a", AccountKind::User, &Policy::default())
        .unwrap();
    store.mint(&Actor::default(), "m", "user:a", 5, "").unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    for sql in [
        "UPDATE ledger_journal SET amount = 500",
        "DELETE FROM ledger_journal",
        "UPDATE ledger_accounts SET balance = -1",
        "DELETE FROM ledger_accounts",
    ] {
        assert!(conn.execute(sql, []).is_err(), "{sql}");
    }
}

/// A small deterministic generator, so a failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // test bookkeeping; size does not matter
enum Done {
    Transfer(TransferRequest, TransferReceipt),
    Settle(String, HoldId, u64, bulwark_store::SettleReceipt),
}

const OPS: u64 = 250;
const ACCOUNTS: [&str; 4] = ["agent:a", "agent:b", "agent:c", "agent:d"];
const FUNDS: u64 = 1_000_000;

fn setup_shared(path: &Path) {
    let store = Store::open(path).unwrap();
    for id in ACCOUNTS {
        store
            .open_account(id, AccountKind::Agent, &Policy::default())
            .unwrap();
        store
            .mint(&Actor::default(), &format!("mint-{id}"), id, FUNDS, "")
            .unwrap();
    }
}

/// Replays the journal in commit order and checks it against the balances:
/// credits conserved, nothing negative, each transfer saw the balance every
/// earlier commit left and moved at most half of it.
fn verify(path: &Path) {
    // Replay the journal in commit order and compare with the balances.
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut spendable: HashMap<String, i128> = HashMap::new();
    let mut held: HashMap<String, i128> = HashMap::new();
    let mut minted: i128 = 0;
    let mut transfers = 0;
    let mut stmt = conn
        .prepare(
            "SELECT kind, from_account, to_account, amount, released, balance_before \
             FROM ledger_journal ORDER BY id",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)? as i128,
                r.get::<_, i64>(4)? as i128,
                r.get::<_, i64>(5)? as i128,
            ))
        })
        .unwrap();
    for row in rows {
        let (kind, from, to, amount, released, before) = row.unwrap();
        let from_before = *spendable.get(&from).unwrap_or(&0);
        match kind.as_str() {
            "mint" => {
                minted += amount;
                *spendable.entry(to).or_default() += amount;
            }
            "transfer" => {
                transfers += 1;
                // Each transfer saw the balance every earlier commit left,
                // and moved at most half of it.
                assert_eq!(before, from_before, "{from}");
                assert!(amount * 2 <= before, "{amount} of {before}");
                *spendable.get_mut(&from).unwrap() -= amount;
                *spendable.entry(to).or_default() += amount;
            }
            "hold" => {
                assert_eq!(before, from_before);
                *spendable.get_mut(&from).unwrap() -= amount;
                *held.entry(from).or_default() += amount;
            }
            "settle" | "release" => {
                *held.get_mut(&from).unwrap() -= amount + released;
                *spendable.get_mut(&from).unwrap() += released;
                *spendable.entry(to).or_default() += amount;
            }
            other => panic!("unexpected journal kind {other}"),
        }
        assert!(spendable.values().chain(held.values()).all(|v| *v >= 0));
    }
    assert!(transfers > 100, "only {transfers} transfers succeeded");
    let store = Store::open(path).unwrap();
    let mut total: i128 = 0;
    for id in ACCOUNTS.iter().copied().chain([USAGE]) {
        let b = store.balance(id).unwrap();
        assert_eq!(b.balance as i128, *spendable.get(id).unwrap_or(&0), "{id}");
        assert_eq!(b.held, 0, "{id}: every hold was closed");
        assert_eq!(*held.get(id).unwrap_or(&0), 0, "{id}");
        total += b.balance as i128 + b.held as i128;
    }
    assert_eq!(minted, (FUNDS * ACCOUNTS.len() as u64) as i128);
    assert_eq!(total, minted, "credits conserved");
    let negative: i64 = conn
        .query_row(
            "SELECT count(*) FROM ledger_accounts WHERE balance < 0 OR held < 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(negative, 0);
    // The per-day counters the daily cap reads agree with the journal.
    let mismatched: i64 = conn
        .query_row(
            "SELECT count(*) FROM (SELECT from_account, sum(amount) AS paid FROM ledger_journal \
             WHERE kind IN ('transfer', 'settle') GROUP BY from_account) j \
             LEFT JOIN (SELECT account, sum(spent) AS spent FROM ledger_daily GROUP BY account) d \
             ON d.account = j.from_account WHERE d.spent IS NOT j.paid",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(mismatched, 0);
    assert!(store.audit_sink().verify().unwrap().is_ok());
}

/// One writer of the stress tests: `OPS` randomized transfers, holds,
/// settlements and retries of earlier keys, on its own connection. Returns
/// how many retries it made.
fn worker(path: &Path, t: u64, barrier: Option<&Barrier>, pause: Duration) -> u64 {
    let store = Store::open(path).unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((t + 1) * 0x1234_5678));
    let mut done: Vec<Done> = Vec::new();
    let mut open_holds: Vec<(HoldId, u64)> = Vec::new();
    let mut retried = 0;
    if let Some(b) = barrier {
        b.wait();
    }
    for i in 0..OPS {
        // Outside any transaction: gives a waiting writer (whose busy
        // handler polls every few ms) a chance at the lock, which SQLite
        // otherwise hands back to whoever released it.
        std::thread::sleep(pause);
        let roll = rng.below(100);
        if roll < 15 && !done.is_empty() {
            // Retry an earlier successful request: same result,
            // nothing moves.
            let pick = done[rng.below(done.len() as u64) as usize].clone();
            match pick {
                Done::Transfer(r, receipt) => {
                    assert_eq!(store.transfer(&r).unwrap(), receipt)
                }
                Done::Settle(key, hold, actual, receipt) => {
                    assert_eq!(store.settle(&key, hold, actual).unwrap(), receipt)
                }
            }
            retried += 1;
        } else if roll < 30 {
            let account = ACCOUNTS[rng.below(4) as usize];
            let amount = 1 + rng.below(20_000);
            match store.hold(&format!("t{t}-h{i}"), account, amount) {
                Ok(h) => open_holds.push((h, amount)),
                Err(e) => assert!(e.is_denial(), "{e}"),
            }
        } else if roll < 45 && !open_holds.is_empty() {
            let (h, amount) = open_holds.swap_remove(rng.below(open_holds.len() as u64) as usize);
            if rng.below(4) == 0 {
                store.release(&format!("t{t}-r{i}"), h).unwrap();
            } else {
                let key = format!("t{t}-s{i}");
                let actual = rng.below(amount + 1);
                let receipt = store.settle(&key, h, actual).unwrap();
                done.push(Done::Settle(key, h, actual, receipt));
            }
        } else {
            let from = rng.below(4) as usize;
            let to = (from + 1 + rng.below(3) as usize) % 4;
            // Often more than half of a typical balance.
            let amount = 1 + rng.below(FUNDS);
            let r = req(&format!("t{t}-x{i}"), ACCOUNTS[from], ACCOUNTS[to], amount);
            match store.transfer(&r) {
                Ok(receipt) => done.push(Done::Transfer(r, receipt)),
                Err(e) => assert!(e.is_denial(), "{e}"),
            }
        }
    }
    for (h, _) in open_holds {
        store.release(&format!("t{t}-end-{}", h.0), h).unwrap();
    }
    retried
}

#[test]
fn concurrent_connections_never_overspend() {
    const THREADS: u64 = 8;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    setup_shared(&path);
    let barrier = Arc::new(Barrier::new(THREADS as usize));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let path = path.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || worker(&path, t, Some(&barrier), Duration::from_micros(300)))
        })
        .collect();
    let retried: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(retried > 0);
    verify(&path);
    assert_interleaved(&path, THREADS);
}

/// The writers' commits interleaved (not one writer after another).
fn assert_interleaved(path: &Path, writers: u64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT idempotency_key FROM ledger_journal ORDER BY id")
        .unwrap();
    let keys: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let writer = |k: &String| k.split('-').next().unwrap_or("").to_owned();
    let switches = keys
        .windows(2)
        .filter(|w| writer(&w[0]) != writer(&w[1]))
        .count();
    assert!(
        switches > 2 * writers as usize,
        "only {switches} switches between writers"
    );
}

/// Environment variable naming the database a child process works on.
const CHILD_DB: &str = "BULWARK_LEDGER_CHILD_DB";
/// A file whose appearance starts the children.
const CHILD_GO: &str = "BULWARK_LEDGER_CHILD_GO";

/// Separate processes, each with its own connection: the serialization is
/// SQLite's file lock, not anything in this process.
#[test]
fn concurrent_processes_never_overspend() {
    const PROCESSES: u64 = 4;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    setup_shared(&path);
    let go = dir.path().join("go");
    let children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            bulwark_test_support::process::rerun_test(module_path!(), "ledger_child_process")
                .arg("--ignored")
                .env(CHILD_GO, &go)
                .stdout(std::process::Stdio::null())
                .env(CHILD_DB, &path)
                .env("BULWARK_LEDGER_CHILD_ID", (100 + p).to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    // Start them together, once all are loaded.
    std::fs::write(&go, b"").unwrap();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    verify(&path);
    assert_interleaved(&path, PROCESSES);
    // Every child did its share (none exited early without working).
    let conn = rusqlite::Connection::open(&path).unwrap();
    for p in 0..PROCESSES {
        let moved: i64 = conn
            .query_row(
                "SELECT count(*) FROM ledger_journal WHERE idempotency_key LIKE ?1",
                [format!("t{}-%", 100 + p)],
                |r| r.get(0),
            )
            .unwrap();
        assert!(moved > 0, "child {p} moved nothing");
    }
}

/// The body of a child of [`concurrent_processes_never_overspend`], which
/// runs it (with `--ignored`) in separate processes; on its own it has
/// nothing to work on.
#[test]
#[ignore = "a child process of concurrent_processes_never_overspend, which runs it"]
fn ledger_child_process() {
    let path = std::env::var_os(CHILD_DB)
        .expect("run by concurrent_processes_never_overspend, which names the database");
    let t: u64 = std::env::var("BULWARK_LEDGER_CHILD_ID")
        .unwrap()
        .parse()
        .unwrap();
    let go = std::env::var_os(CHILD_GO).unwrap();
    let started = std::time::Instant::now();
    while !Path::new(&go).exists() {
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    worker(Path::new(&path), t, None, Duration::from_micros(300));
}

proptest! {
    /// The largest amount the fraction rule allows is floor(balance * num / den).
    #[test]
    fn fraction_boundary(balance in 0u64..=i64::MAX as u64, num in 0u64..=1000, extra in 0u64..=1000) {
        let den = num + extra + 1;
        let max = ((balance as u128 * num as u128) / den as u128) as u64;
        prop_assert!(within_fraction(max, balance, num, den));
        prop_assert!(!within_fraction(max + 1, balance, num, den));
    }

    /// Through the store: whatever the sequence, no transfer moves more than
    /// half of the balance it saw, and credits are conserved.
    #[test]
    fn default_policy_sequence(amounts in proptest::collection::vec(1u64..2_000, 1..20)) {
        let store = store_with(&[("agent:a", Policy::default(), 1000), ("agent:b", Policy::default(), 0)]);
        for (i, amount) in amounts.iter().enumerate() {
            let before = store.balance("agent:a").unwrap().balance;
            match store.transfer(&req(&format!("k{i}"), "agent:a", "agent:b", *amount)) {
                Ok(r) => prop_assert!(r.amount * 2 <= before && r.balance_before == before),
                Err(e) => prop_assert!(e.is_denial() && amount * 2 > before),
            }
            let (a, b) = (store.balance("agent:a").unwrap(), store.balance("agent:b").unwrap());
            prop_assert_eq!(a.balance + b.balance, 1000);
        }
    }
}
