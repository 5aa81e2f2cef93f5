//! Ledger costs on a file-backed store (WAL, `synchronous=NORMAL`, as in
//! production): every iteration is one committed `BEGIN IMMEDIATE`
//! transaction with its idempotency lookup, policy evaluation, balance
//! updates, journal row and audit record.
//! - `ledger_transfer`: one transfer under the default policy (at most half);
//! - `ledger_transfer_daily_cap`: the same with a daily cap (one lookup of
//!   the account's per-day counter);
//! - `ledger_hold_settle`: a hold then its settlement (two transactions).

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bulwark_store::{AccountKind, Actor, Policy, Store, TransferRequest};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn setup(policy: &Policy) -> (tempfile::TempDir, Store) {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    };
    let store = match Store::open(&dir.path().join("bench.db")) {
        Ok(s) => s,
        Err(e) => panic!("open: {e}"),
    };
    for id in ["agent:a", "agent:b"] {
        if let Err(e) = store.open_account(id, AccountKind::Agent, policy) {
            panic!("open account: {e}");
        }
        if let Err(e) = store.mint(
            &Actor::default(),
            &format!("mint-{id}"),
            id,
            1_000_000_000_000,
            "",
        ) {
            panic!("mint: {e}");
        }
    }
    (dir, store)
}

fn bench_transfer(c: &mut Criterion, name: &str, policy: &Policy) {
    let (_dir, store) = setup(policy);
    let mut n: u64 = 0;
    let mut group = c.benchmark_group("ledger");
    group.throughput(Throughput::Elements(1));
    group.bench_function(name, |b| {
        b.iter(|| {
            n += 1;
            let (from, to) = if n.is_multiple_of(2) {
                ("agent:a", "agent:b")
            } else {
                ("agent:b", "agent:a")
            };
            let r = TransferRequest {
                key: format!("k{n}"),
                from: from.into(),
                to: to.into(),
                amount: 1 + n % 100,
                memo: String::new(),
                actor: Actor::default(),
            };
            black_box(store.transfer(black_box(&r)))
        })
    });
    group.finish();
}

fn bench_all(c: &mut Criterion) {
    bench_transfer(c, "ledger_transfer", &Policy::default());
    let capped = Policy {
        daily_cap: Some(u64::MAX / 4),
        ..Policy::default()
    };
    bench_transfer(c, "ledger_transfer_daily_cap", &capped);

    let (_dir, store) = setup(&Policy::default());
    let mut n: u64 = 0;
    c.bench_function("ledger_hold_settle", |b| {
        b.iter(|| {
            n += 1;
            let hold = match store.hold(&format!("h{n}"), "agent:a", 1000) {
                Ok(h) => h,
                Err(e) => panic!("hold: {e}"),
            };
            black_box(store.settle(&format!("s{n}"), hold, 1 + n % 1000))
        })
    });
}

criterion_group!(benches, bench_all);
criterion_main!(benches);
