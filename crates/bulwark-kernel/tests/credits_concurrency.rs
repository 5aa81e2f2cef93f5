//! The ledger under concurrency, through the paths agents use: many
//! threads and several OS processes, each a session of one of four parent
//! agents (so sessions share accounts), issue randomized `transfer_credits`
//! and `fund_child` tool calls through the door, model-call holds through
//! the session's credits, and retries of earlier idempotency keys.
//!
//! Afterwards, from the journal and the balances: the total is conserved,
//! no balance went negative, no transfer moved more than its payer's policy
//! fraction (one half for the parents) of the balance it saw at its own
//! serialization point (and that balance is exactly what every earlier
//! commit left), every retried key returned its first result and moved
//! credits once, and every movement has its audit record.

use crate::common;

use bulwark_audit::{AuditSink, Decision};
use bulwark_kernel::{Session, ToolCall};
use bulwark_store::{Actor, AuditQuery, Store};
use common::family::*;
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::Duration;

const PARENTS: usize = 4;
const FUNDS: u64 = 1_000_000;
const OPS: u64 = 300;

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

/// A third of the amounts are likely more than half of the payer's
/// balance (refused), the rest small (moved).
fn amount(rng: &mut Rng) -> u64 {
    if rng.below(3) == 0 {
        1 + rng.below(FUNDS)
    } else {
        1 + rng.below(FUNDS / 50)
    }
}

fn parent(i: usize) -> String {
    format!("boss{i}")
}

fn setup(home: &Path) {
    for i in 0..PARENTS {
        add_agent(home, &parent(i), BOSS, "");
    }
    add_agent(home, "kid", KID, "");
    let store = Store::open(&home.join("bulwark.db")).unwrap();
    for i in 0..PARENTS {
        let wallet = format!("agent:{}", parent(i));
        store
            .ensure_account(&wallet, bulwark_store::AccountKind::Agent)
            .unwrap();
        store
            .mint(&Actor::default(), &format!("mint-{i}"), &wallet, FUNDS, "")
            .unwrap();
    }
}

/// What one writer did, for the checks after.
#[derive(Default)]
struct Tally {
    moved: u64,
    refused: u64,
    retried: u64,
}

/// One writer: a session of `boss{t % 4}` with its own connection, its
/// own child, and `OPS` randomized operations.
async fn writer(home: PathBuf, t: u64, barrier: Option<Arc<Barrier>>) -> Tally {
    let store = Store::open(&home.join("bulwark.db")).unwrap();
    let audit: Arc<dyn AuditSink> = Arc::new(store.audit_sink());
    let agent = parent(t as usize % PARENTS);
    let session_id = format!("w{t}");
    let mut session: Session = paying_session(&home, &store, audit.clone(), &agent, &session_id);
    let door = door(audit.clone());
    if let Some(b) = barrier {
        b.wait();
    }
    let call = async |session: &mut Session, id: String, name: &str, input: serde_json::Value| {
        door.dispatch(
            session,
            ToolCall {
                id: &id,
                name,
                input: &input,
            },
        )
        .await
    };
    let spawned = call(
        &mut session,
        format!("{session_id}-spawn"),
        "spawn_agent",
        json!({"agent": "kid"}),
    )
    .await;
    assert!(!spawned.is_error, "{}", spawned.content);
    let child = store.children_of(&session_id).unwrap().remove(0).id;

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((t + 1) * 0x1234_5678));
    let mut tally = Tally::default();
    let mut done: Vec<(String, serde_json::Value, String)> = Vec::new();
    let mut open: Vec<bulwark_kernel::Reserved> = Vec::new();
    for i in 0..OPS {
        // Outside any transaction: gives a waiting writer a chance at the
        // lock, which SQLite otherwise hands back to whoever released it.
        tokio::time::sleep(Duration::from_micros(300)).await;
        let roll = rng.below(100);
        if roll < 15 && !done.is_empty() {
            // Retry an earlier successful call with the same key.
            let (name, input, first) = done[rng.below(done.len() as u64) as usize].clone();
            let again = call(&mut session, format!("{session_id}-r{i}"), &name, input).await;
            assert_eq!(
                again.content, first,
                "a retried key must return its first result"
            );
            tally.retried += 1;
        } else if roll < 70 {
            // A transfer to another parent, or a funding of this session's
            // child: both are one ledger transfer under the parent's policy.
            let (name, input) = if roll < 50 {
                let mut to = (t as usize + 1 + rng.below(PARENTS as u64 - 1) as usize) % PARENTS;
                if parent(to) == agent {
                    to = (t as usize + 1) % PARENTS;
                }
                let to = format!("agent:{}", parent(to));
                let input = json!({"to": to, "amount": amount(&mut rng), "key": format!("x{i}")});
                ("transfer_credits", input)
            } else {
                let input =
                    json!({"child": child, "amount": amount(&mut rng), "key": format!("f{i}")});
                ("fund_child", input)
            };
            let r = call(
                &mut session,
                format!("{session_id}-m{i}"),
                name,
                input.clone(),
            )
            .await;
            if r.is_error {
                assert_eq!(
                    (r.decision, &r.reason),
                    (Decision::Denied, &bulwark_audit::Reason::Credits),
                    "{}",
                    r.content
                );
                tally.refused += 1;
            } else {
                tally.moved += 1;
                done.push((name.into(), input, r.content));
            }
        } else if roll < 85 || open.is_empty() {
            let credits = session.credits().unwrap();
            match credits.reserve("model", 1 + rng.below(FUNDS / 8)) {
                Ok(Some(hold)) => open.push(hold),
                Ok(None) => unreachable!("a positive amount is reserved"),
                Err(e) => {
                    assert!(e.is_denial(), "{e}");
                    tally.refused += 1;
                }
            }
        } else {
            let credits = session.credits().unwrap();
            let hold = open.swap_remove(rng.below(open.len() as u64) as usize);
            if rng.below(4) == 0 {
                credits.release(hold).unwrap();
            } else {
                let actual = rng.below(hold.amount() + 1);
                credits.settle(hold, actual).unwrap();
            }
        }
    }
    let credits = session.credits().unwrap();
    for hold in open {
        credits.release(hold).unwrap();
    }
    audit.flush().unwrap();
    tally
}

/// Replays the journal in commit order against the balances.
fn verify(home: &Path, writers: u64) {
    let db = home.join("bulwark.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let store = Store::open(&db).unwrap();
    let mut spendable: HashMap<String, i128> = HashMap::new();
    let mut held: HashMap<String, i128> = HashMap::new();
    let mut minted: i128 = 0;
    let (mut transfers, mut funds, mut holds) = (0, 0, 0);
    let mut stmt = conn
        .prepare(
            "SELECT kind, from_account, to_account, amount, released, balance_before, memo \
             FROM ledger_journal ORDER BY id",
        )
        .unwrap();
    let rows: Vec<(String, String, String, i128, i128, i128, String)> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get::<_, i64>(3)? as i128,
                r.get::<_, i64>(4)? as i128,
                r.get::<_, i64>(5)? as i128,
                r.get(6)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (kind, from, to, amount, released, before, memo) in &rows {
        let from_before = *spendable.get(from).unwrap_or(&0);
        match kind.as_str() {
            "mint" => {
                minted += amount;
                *spendable.entry(to.clone()).or_default() += amount;
            }
            "transfer" => {
                // The balance it saw is what every earlier commit left, and
                // it moved at most its payer's fraction of it.
                assert_eq!(*before, from_before, "{from}");
                let p = store.policy(from).unwrap();
                assert!(
                    amount * p.max_fraction_den as i128 <= before * p.max_fraction_num as i128,
                    "{from} moved {amount} of {before}"
                );
                assert!(
                    from.starts_with("agent:boss"),
                    "only parents pay here: {from}"
                );
                assert_eq!(
                    p.max_fraction_num * 2,
                    p.max_fraction_den,
                    "parents: one half"
                );
                if memo.starts_with("fund child") {
                    assert!(to.starts_with("child:"), "{to}");
                    funds += 1;
                } else {
                    transfers += 1;
                }
                *spendable.get_mut(from).unwrap() -= amount;
                *spendable.entry(to.clone()).or_default() += amount;
            }
            "hold" => {
                assert_eq!(*before, from_before);
                holds += 1;
                *spendable.get_mut(from).unwrap() -= amount;
                *held.entry(from.clone()).or_default() += amount;
            }
            "settle" | "release" => {
                *held.get_mut(from).unwrap() -= amount + released;
                *spendable.get_mut(from).unwrap() += released;
                *spendable.entry(to.clone()).or_default() += amount;
            }
            other => panic!("unexpected journal kind {other}"),
        }
        assert!(
            spendable.values().chain(held.values()).all(|v| *v >= 0),
            "a balance went negative"
        );
    }
    assert!(
        transfers > 100 && funds > 100 && holds > 100,
        "{transfers} transfers, {funds} fundings, {holds} holds"
    );
    eprintln!(
        "journal: {} rows: {transfers} transfers, {funds} fundings, {holds} holds",
        rows.len()
    );
    let mut total: i128 = 0;
    for account in store.accounts().unwrap() {
        let b = account.balance;
        assert_eq!(
            b.balance as i128,
            *spendable.get(&account.id).unwrap_or(&0),
            "{}",
            account.id
        );
        assert_eq!(b.held, 0, "{}: every hold was closed", account.id);
        total += b.balance as i128 + b.held as i128;
    }
    assert_eq!(minted, (FUNDS * PARENTS as u64) as i128);
    assert_eq!(total, minted, "credits conserved");
    let (sum, mints) = store.ledger_totals().unwrap();
    assert_eq!(sum, mints);
    // Every movement has its ledger audit record, committed with it.
    let records = store
        .audit_sink()
        .query(&AuditQuery {
            session: None,
            since_seq: None,
            limit: 1_000_000,
        })
        .unwrap();
    let audited = records
        .iter()
        .filter(|r| {
            r.record.action == bulwark_audit::Action::Ledger
                && r.record.decision == Decision::Allowed
        })
        .filter(|r| {
            ["mint", "transfer", "hold", "settle", "release"].contains(&r.record.operation.as_str())
        })
        .count();
    assert_eq!(
        audited,
        rows.len(),
        "one ledger audit record per journal row"
    );
    assert!(store.audit_sink().verify().unwrap().is_ok());
    // Every writer spawned its child and moved credits.
    for t in 0..writers {
        assert_eq!(store.children_of(&format!("w{t}")).unwrap().len(), 1);
        let moved: i64 = conn
            .query_row(
                "SELECT count(*) FROM ledger_journal WHERE idempotency_key LIKE ?1",
                [format!("w{t}:%")],
                |r| r.get(0),
            )
            .unwrap();
        assert!(moved > 0, "writer {t} moved nothing");
    }
}

#[test]
fn threads_never_overspend_through_the_tools() {
    const THREADS: u64 = 8;
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let barrier = Arc::new(Barrier::new(THREADS as usize));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let home = dir.path().to_path_buf();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(writer(home, t, Some(barrier)))
            })
        })
        .collect();
    let tallies: Vec<Tally> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(tallies.iter().map(|t| t.retried).sum::<u64>() > 20);
    assert!(
        tallies.iter().map(|t| t.refused).sum::<u64>() > 20,
        "the policy was exercised"
    );
    assert!(tallies.iter().all(|t| t.moved > 0));
    eprintln!(
        "{THREADS} threads: {} operations, {} refused by policy, {} retries",
        THREADS * OPS,
        tallies.iter().map(|t| t.refused).sum::<u64>(),
        tallies.iter().map(|t| t.retried).sum::<u64>()
    );
    verify(dir.path(), THREADS);
}

const CHILD_HOME: &str = "BULWARK_CREDITS_CHILD_HOME";
const CHILD_ID: &str = "BULWARK_CREDITS_CHILD_ID";
const CHILD_GO: &str = "BULWARK_CREDITS_CHILD_GO";

/// Separate processes (this test binary re-run), each with two writer
/// threads: the serialization is SQLite's file lock, not anything in one
/// process.
#[test]
fn processes_never_overspend_through_the_tools() {
    const PROCESSES: u64 = 4;
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let go = dir.path().join("go");
    let children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            bulwark_test_support::process::rerun_test(module_path!(), "credits_child_process")
                .arg("--ignored")
                .env(CHILD_HOME, dir.path())
                .env(CHILD_ID, p.to_string())
                .env(CHILD_GO, &go)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::fs::write(&go, b"").unwrap();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a writer process failed");
    }
    verify(dir.path(), PROCESSES * 2);
}

/// The body of a process of [`processes_never_overspend_through_the_tools`],
/// which runs it with `--ignored`; alone it has no database to work on.
#[test]
#[ignore = "a child process of processes_never_overspend_through_the_tools, which runs it"]
fn credits_child_process() {
    let home = PathBuf::from(std::env::var_os(CHILD_HOME).expect("run by the parent test"));
    let p: u64 = std::env::var(CHILD_ID).unwrap().parse().unwrap();
    let go = PathBuf::from(std::env::var_os(CHILD_GO).unwrap());
    let started = std::time::Instant::now();
    while !go.exists() {
        assert!(started.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(1));
    }
    let handles: Vec<_> = (0..2)
        .map(|k| {
            let home = home.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(writer(home, p * 2 + k, None))
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap().moved > 0);
    }
}
