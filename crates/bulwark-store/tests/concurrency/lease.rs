//! Session leases: one process runs a session at a time (issue 17 item 15).

use bulwark_store::{LeaseHolder, NewSession, SessionLease, Store, StoreError};
use proptest::prelude::*;
use std::sync::{Arc, Barrier};
use std::time::Duration;

const TTL: Duration = Duration::from_secs(30);
const TTL_MS: i64 = 30_000;

fn with_session(store: &Store, id: &str) {
    store
        .create_session(&NewSession {
            id: id.into(),
            agent: "a".into(),
            user: "u".into(),
        })
        .unwrap();
}

fn state(store: &Store, id: &str) -> Option<String> {
    store.session(id).unwrap().unwrap().state_json
}

/// Eight connections on one file (as eight processes would have) race for
/// one session, round after round: exactly one wins each round, and every
/// other is told who holds it.
#[test]
fn racing_acquirers_exactly_one_wins() {
    const RACERS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bulwark.db");
    let stores: Vec<Store> = (0..RACERS).map(|_| Store::open(&path).unwrap()).collect();
    for round in 0..5 {
        let barrier = Arc::new(Barrier::new(RACERS));
        let session = format!("s{round}");
        let handles: Vec<_> = stores
            .iter()
            .cloned()
            .map(|store| {
                let (barrier, session) = (barrier.clone(), session.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    SessionLease::acquire(&store, &session)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<&SessionLease> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let held = stores[0].lease(&session).unwrap().unwrap();
        assert_eq!(held.holder, winners[0].holder().id);
        for refused in results.iter().filter_map(|r| r.as_ref().err()) {
            let StoreError::LeaseHeld(conflict) = refused else {
                panic!("round {round}: not a lease refusal: {refused:?}");
            };
            assert_eq!(conflict.session, session);
            assert_eq!(conflict.pid, std::process::id());
            assert_eq!(
                (conflict.since_ms, conflict.expires_ms),
                (held.acquired_ms, held.expires_ms)
            );
            let message = refused.to_string();
            assert!(
                message.contains(&format!(
                    "session `{session}` is being run by another process (pid {}",
                    std::process::id()
                )),
                "{message}"
            );
        }
    }
}

/// A holder that died without releasing keeps the session only until its
/// lease expires; then anyone may take it, and the dead holder's late
/// writes are refused.
#[test]
fn an_expired_lease_of_a_dead_holder_is_taken_over() {
    let store = Store::open_in_memory().unwrap();
    with_session(&store, "s");
    let (dead, next) = (LeaseHolder::new(), LeaseHolder::new());
    store.acquire_lease("s", &dead, 1_000, TTL).unwrap();
    let err = store
        .acquire_lease("s", &next, 1_000 + TTL_MS - 1, TTL)
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::LeaseHeld(c) if c.since_ms == 1_000 && c.expires_ms == 1_000 + TTL_MS),
        "{err:?}"
    );
    let taken = store
        .acquire_lease("s", &next, 1_000 + TTL_MS, TTL)
        .unwrap();
    assert_eq!(
        (taken.holder, taken.acquired_ms),
        (next.id.clone(), 1_000 + TTL_MS)
    );
    let err = store
        .renew_lease("s", &dead, 1_000 + TTL_MS, TTL)
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    assert!(
        !store.release_lease("s", &dead).unwrap(),
        "not the dead holder's to release"
    );
    assert_eq!(store.lease("s").unwrap().unwrap().holder, next.id);
}

/// The guard's thread renews its lease, so a session longer than the TTL
/// stays its holder's. Deterministic: it waits for a renewal to be stored,
/// then asks at the time the first lease would have expired.
#[test]
fn renewal_keeps_a_long_sessions_lease() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("bulwark.db")).unwrap();
    let ttl = Duration::from_secs(5);
    let lease = SessionLease::acquire_with(&store, "s", ttl, Duration::from_millis(20)).unwrap();
    let first = store.lease("s").unwrap().unwrap();
    let renewed = (0..1_000)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            let now = store.lease("s").unwrap().unwrap();
            (now.expires_ms > first.expires_ms).then_some(now)
        })
        .expect("the lease is renewed");
    assert_eq!(
        (renewed.holder.as_str(), renewed.acquired_ms),
        (lease.holder().id.as_str(), first.acquired_ms)
    );
    let other = LeaseHolder::new();
    let err = store
        .acquire_lease("s", &other, first.expires_ms, ttl)
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseHeld(_)), "{err:?}");
    assert!(!lease.is_lost());
}

/// A process whose lease lapsed and was taken over must not overwrite the
/// new holder's state or slip messages into its transcript, whether the new
/// holder still runs or has finished and released the session.
#[test]
fn a_holder_that_lost_its_lease_cannot_save() {
    let store = Store::open_in_memory().unwrap();
    with_session(&store, "s");
    let (paused, next) = (LeaseHolder::new(), LeaseHolder::new());
    store.acquire_lease("s", &paused, 0, TTL).unwrap();
    store
        .save_state_leased("s", &paused, r#"{"guard":1}"#)
        .unwrap();
    store.acquire_lease("s", &next, TTL_MS + 1, TTL).unwrap();
    store
        .save_state_leased("s", &next, r#"{"guard":7}"#)
        .unwrap();

    let err = store
        .save_state_leased("s", &paused, r#"{"guard":2}"#)
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    assert!(err.to_string().contains("nothing was saved"), "{err}");
    let err = store
        .append_message_leased("s", &paused, "user", "{}")
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    assert_eq!(state(&store, "s").as_deref(), Some(r#"{"guard":7}"#));
    assert_eq!(store.messages("s").unwrap().len(), 0);

    // The new holder finished: the row is gone, and still not the paused one's.
    assert!(store.release_lease("s", &next).unwrap());
    let err = store
        .save_state_leased("s", &paused, r#"{"guard":2}"#)
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    assert_eq!(state(&store, "s").as_deref(), Some(r#"{"guard":7}"#));
}

/// The same, through guards on the wall clock.
#[test]
fn a_guard_whose_lease_was_taken_cannot_save() {
    let store = Store::open_in_memory().unwrap();
    with_session(&store, "s");
    let short = SessionLease::acquire_with(
        &store,
        "s",
        Duration::from_millis(1),
        Duration::from_secs(3600),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let taker = SessionLease::acquire(&store, "s").unwrap();
    taker.save_state(r#"{"by":"taker"}"#).unwrap();
    let err = short.save_state(r#"{"by":"short"}"#).unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    drop(short);
    assert_eq!(
        store.lease("s").unwrap().unwrap().holder,
        taker.holder().id,
        "dropping the loser releases nothing of the taker's"
    );
    assert_eq!(state(&store, "s").as_deref(), Some(r#"{"by":"taker"}"#));
}

/// What must still work: resuming a session after its last run ended, the
/// same holder re-taking its own lease, and different sessions at once.
#[test]
fn sequential_runs_and_different_sessions_are_allowed() {
    let store = Store::open_in_memory().unwrap();
    with_session(&store, "s");
    with_session(&store, "t");
    for i in 0..3 {
        let lease = SessionLease::acquire(&store, "s").unwrap();
        lease.save_state(&format!("{{\"run\":{i}}}")).unwrap();
        lease.append_message("user", "{}").unwrap();
    }
    assert_eq!(store.lease("s").unwrap(), None, "released on drop");
    assert_eq!(store.messages("s").unwrap().len(), 3);
    assert_eq!(state(&store, "s").as_deref(), Some(r#"{"run":2}"#));

    let s = SessionLease::acquire(&store, "s").unwrap();
    let t = SessionLease::acquire(&store, "t").unwrap();
    s.save_state("1").unwrap();
    t.save_state("2").unwrap();

    let holder = LeaseHolder::new();
    let first = store.acquire_lease("u", &holder, 10, TTL).unwrap();
    let again = store.acquire_lease("u", &holder, 20, TTL).unwrap();
    assert_eq!(
        (again.acquired_ms, again.expires_ms),
        (first.acquired_ms, 20 + TTL_MS)
    );
}

#[derive(Debug, Clone)]
enum Op {
    Acquire(usize),
    Renew(usize),
    Release(usize),
    Save(usize),
    Advance(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize).prop_map(Op::Acquire),
        (0..3usize).prop_map(Op::Renew),
        (0..3usize).prop_map(Op::Release),
        (0..3usize).prop_map(Op::Save),
        (0..(2 * TTL_MS)).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Any interleaving of acquire, renew, release, save and the clock
    /// moving on agrees with a one-slot model: at most one holder, a
    /// held unexpired lease refuses others, and only the holder of the
    /// stored row saves.
    #[test]
    fn interleavings_agree_with_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        let store = Store::open_in_memory().unwrap();
        with_session(&store, "s");
        let holders: Vec<LeaseHolder> = (0..3).map(|_| LeaseHolder::new()).collect();
        let mut now = 0i64;
        // (holder index, expires_ms)
        let mut model: Option<(usize, i64)> = None;
        let mut saved: Option<String> = None;
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Advance(ms) => now += ms,
                Op::Acquire(h) => {
                    let got = store.acquire_lease("s", &holders[h], now, TTL);
                    let free = match model {
                        Some((owner, expires)) => owner == h || expires <= now,
                        None => true,
                    };
                    prop_assert_eq!(got.is_ok(), free, "step {}: {:?}", step, got);
                    if free {
                        model = Some((h, now + TTL_MS));
                    }
                }
                Op::Renew(h) => {
                    let got = store.renew_lease("s", &holders[h], now, TTL);
                    let ours = matches!(model, Some((owner, _)) if owner == h);
                    prop_assert_eq!(got.is_ok(), ours, "step {}: {:?}", step, got);
                    if ours {
                        model = Some((h, now + TTL_MS));
                    }
                }
                Op::Release(h) => {
                    let got = store.release_lease("s", &holders[h]).unwrap();
                    let ours = matches!(model, Some((owner, _)) if owner == h);
                    prop_assert_eq!(got, ours, "step {}", step);
                    if ours {
                        model = None;
                    }
                }
                Op::Save(h) => {
                    let json = format!("{step}");
                    let got = store.save_state_leased("s", &holders[h], &json);
                    let ours = matches!(model, Some((owner, _)) if owner == h);
                    prop_assert_eq!(got.is_ok(), ours, "step {}: {:?}", step, got);
                    if ours {
                        saved = Some(json);
                    }
                }
            }
            let stored = store.lease("s").unwrap();
            prop_assert_eq!(
                stored.map(|l| (l.holder, l.expires_ms)),
                model.map(|(h, e)| (holders[h].id.clone(), e))
            );
            prop_assert_eq!(state(&store, "s"), saved.clone());
        }
    }
}
