//! User budgets on holds, audit identity, policy changes, and child-agent
//! records with their accounts.

use bulwark_store::{
    AccountKind, Actor, AuditQuery, Budget, ChildRecord, ChildState, HoldRequest, LedgerError,
    Policy, Store, TransferRequest, USAGE,
};

fn alice() -> Actor {
    Actor {
        user: "alice".into(),
        agent: "tools".into(),
        session: "s1".into(),
    }
}

fn funded(ids: &[&str], funds: u64) -> Store {
    let store = Store::open_in_memory().unwrap();
    for id in ids {
        store.ensure_account(id, AccountKind::Agent).unwrap();
        store
            .mint(&Actor::default(), &format!("mint-{id}"), id, funds, "")
            .unwrap();
    }
    store
}

fn hold(key: &str, amount: u64, session: &str, budget: &Budget) -> HoldRequest {
    HoldRequest {
        key: key.into(),
        account: "agent:tools".into(),
        amount,
        budget: Some(Budget {
            session: session.into(),
            ..budget.clone()
        }),
        actor: alice(),
    }
}

#[test]
fn session_budget_counts_holds_and_gives_back_what_was_not_charged() {
    let store = funded(&["agent:tools"], 1_000);
    let budget = Budget {
        user: "alice".into(),
        per_session: Some(100),
        ..Budget::default()
    };
    let h1 = store.reserve(&hold("h1", 60, "s1", &budget)).unwrap();
    // 60 reserved: 41 more would exceed the session budget of 100.
    let err = store.reserve(&hold("h2", 41, "s1", &budget)).unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::Budget {
                period: "session",
                limit: 100,
                used: 60,
                amount: 41,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_denial());
    assert!(err.to_string().contains("credits_per_session"), "{err}");
    // Settling 10 of the 60 gives 50 back to the budget.
    store.settle("st1", h1, 10).unwrap();
    store.reserve(&hold("h3", 90, "s1", &budget)).unwrap();
    // Another session of the same user has its own session budget.
    store.reserve(&hold("h4", 100, "s2", &budget)).unwrap();
    let used = store.budget_use("alice", "s1").unwrap();
    assert_eq!((used.session, used.day, used.month), (100, 200, 200));
}

#[test]
fn day_and_month_budgets_span_sessions() {
    let store = funded(&["agent:tools"], 10_000);
    let day = Budget {
        user: "alice".into(),
        per_day: Some(150),
        ..Budget::default()
    };
    store.reserve(&hold("h1", 100, "s1", &day)).unwrap();
    let err = store.reserve(&hold("h2", 51, "s2", &day)).unwrap_err();
    assert!(
        matches!(err, LedgerError::Budget { period: "day", .. }),
        "{err}"
    );
    store.reserve(&hold("h3", 50, "s2", &day)).unwrap();
    let month = Budget {
        user: "alice".into(),
        per_month: Some(200),
        ..Budget::default()
    };
    let err = store.reserve(&hold("h4", 51, "s3", &month)).unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::Budget {
                period: "month",
                ..
            }
        ),
        "{err}"
    );
    // Another user is not affected.
    let bob = Budget {
        user: "bob".into(),
        per_month: Some(200),
        ..Budget::default()
    };
    store.reserve(&hold("h5", 200, "s9", &bob)).unwrap();
}

#[test]
fn a_refused_hold_changes_no_balance_and_is_audited_with_who_asked() {
    let store = funded(&["agent:tools"], 100);
    let budget = Budget {
        user: "alice".into(),
        per_session: Some(10),
        ..Budget::default()
    };
    assert!(store.reserve(&hold("h1", 11, "s1", &budget)).is_err());
    let b = store.balance("agent:tools").unwrap();
    assert_eq!((b.balance, b.held), (100, 0));
    let records = store
        .audit_sink()
        .query(&AuditQuery {
            session: Some("s1".into()),
            since_seq: None,
            limit: 100,
        })
        .unwrap();
    let denied: Vec<_> = records
        .iter()
        .filter(|r| {
            r.record.action == bulwark_audit::Action::Ledger && r.record.operation == "hold"
        })
        .collect();
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0].record.user, "alice");
    assert_eq!(denied[0].record.agent, "tools");
    assert!(
        denied[0].record.reason.as_str().contains("session budget"),
        "{:?}",
        denied[0].record.reason
    );
}

#[test]
fn settlement_is_audited_as_the_actor_of_its_hold() {
    let store = funded(&["agent:tools"], 100);
    let h = store
        .reserve(&HoldRequest {
            key: "h".into(),
            account: "agent:tools".into(),
            amount: 10,
            budget: None,
            actor: alice(),
        })
        .unwrap();
    store.settle("s", h, 7).unwrap();
    assert_eq!(store.balance(USAGE).unwrap().balance, 7);
    let records = store
        .audit_sink()
        .query(&AuditQuery {
            session: Some("s1".into()),
            since_seq: None,
            limit: 100,
        })
        .unwrap();
    let ops: Vec<&str> = records
        .iter()
        .map(|r| r.record.operation.as_str())
        .collect();
    assert_eq!(ops, ["hold", "settle"]);
}

#[test]
fn policy_changes_apply_at_once_and_are_audited() {
    let store = funded(&["agent:a", "agent:b"], 100);
    let transfer = |key: &str, amount| {
        store.transfer(&TransferRequest {
            key: key.into(),
            from: "agent:a".into(),
            to: "agent:b".into(),
            amount,
            actor: alice(),
            ..TransferRequest::default()
        })
    };
    assert!(transfer("k1", 60).is_err());
    let wide = Policy {
        max_fraction_num: 1,
        max_fraction_den: 1,
        ..Policy::default()
    };
    store.set_policy(&alice(), "agent:a", &wide).unwrap();
    assert_eq!(store.policy("agent:a").unwrap(), wide);
    transfer("k2", 60).unwrap();
    let bad = Policy {
        max_fraction_num: 3,
        max_fraction_den: 2,
        ..Policy::default()
    };
    assert!(matches!(
        store.set_policy(&alice(), "agent:a", &bad).unwrap_err(),
        LedgerError::InvalidPolicy { .. }
    ));
    assert!(matches!(
        store.set_policy(&alice(), "nobody", &wide).unwrap_err(),
        LedgerError::UnknownAccount(_)
    ));
    let records = store
        .audit_sink()
        .query(&AuditQuery {
            session: Some("s1".into()),
            since_seq: None,
            limit: 100,
        })
        .unwrap();
    assert!(records.iter().any(
        |r| r.record.operation == "policy" && r.record.reason.as_str().contains("changed from")
    ));
    let (total, minted) = store.ledger_totals().unwrap();
    assert_eq!((total, minted), (200, 200));
}

/// Issue 17 item 13: account names follow the rule for user and agent
/// names, for every kind of account the ledger opens.
#[test]
fn account_names_follow_the_user_and_agent_name_rule() {
    let store = Store::open_in_memory().unwrap();
    let long = format!("user:{}", "a".repeat(65));
    for (bad, kind) in [
        ("user:../x", AccountKind::User),
        ("agent:X", AccountKind::Agent),
        ("user:", AccountKind::User),
        ("agent:", AccountKind::Agent),
        (long.as_str(), AccountKind::User),
        ("user:a\u{7}b", AccountKind::User),
        ("agent:a\nb", AccountKind::Agent),
        ("user:\u{1b}[31m", AccountKind::User),
        ("user:-a", AccountKind::User),
        ("agent:a/b", AccountKind::Agent),
        ("child:../x", AccountKind::Agent),
        ("child:boss.xyz", AccountKind::Agent),
        ("child:Boss.00ff", AccountKind::Agent),
    ] {
        let err = store.ensure_account(bad, kind).unwrap_err();
        assert!(
            matches!(err, LedgerError::InvalidAccount { .. }),
            "{bad:?}: {err}"
        );
        assert!(
            err.to_string().contains(
                "1-64 lowercase letters, digits, `-` or `_`, starting with a letter or digit"
            ),
            "{bad:?}: the refusal names the rule: {err}"
        );
    }
    // The prefix says the kind, and every id has one.
    for (bad, kind, want) in [
        ("user:alice", AccountKind::Agent, "agent:<name>"),
        ("agent:bot", AccountKind::User, "user:<name>"),
        ("../x", AccountKind::Agent, "agent:<name>"),
        ("alice", AccountKind::User, "user:<name>"),
    ] {
        let err = store.ensure_account(bad, kind).unwrap_err();
        assert!(
            matches!(err, LedgerError::InvalidAccount { .. }) && err.to_string().contains(want),
            "{bad:?}: {err}"
        );
    }
    assert!(store.accounts().unwrap().iter().all(|a| a.id == USAGE));
    let longest = format!("user:{}", "a".repeat(64));
    for (good, kind) in [
        ("user:alice", AccountKind::User),
        (longest.as_str(), AccountKind::User),
        ("user:0", AccountKind::User),
        ("agent:researcher", AccountKind::Agent),
        ("agent:a-b_c9", AccountKind::Agent),
        ("child:boss.0123456789abcdef", AccountKind::Agent),
    ] {
        assert!(store.ensure_account(good, kind).unwrap(), "{good:?}");
        assert_eq!(store.account_kind(good).unwrap(), kind);
    }
    assert!(
        AccountKind::valid_name("alice") && !AccountKind::valid_name("Alice"),
        "the rule is public, for the other validators"
    );
}

#[test]
fn account_ids_are_checked() {
    let store = Store::open_in_memory().unwrap();
    for bad in ["", "system:usage", "has space", "tab\t", &"x".repeat(201)] {
        assert!(
            matches!(
                store.ensure_account(bad, AccountKind::Agent).unwrap_err(),
                LedgerError::InvalidAccount { .. }
            ),
            "{bad:?}"
        );
    }
    assert!(
        store
            .ensure_account("agent:tools", AccountKind::Agent)
            .unwrap()
    );
    assert!(
        !store
            .ensure_account("agent:tools", AccountKind::Agent)
            .unwrap()
    );
    let list = store.accounts().unwrap();
    let ids: Vec<&str> = list.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["agent:tools", USAGE]);
}

#[test]
fn children_have_an_account_and_a_lifecycle() {
    let store = funded(&["agent:boss"], 100);
    let child = ChildRecord {
        id: "c1".into(),
        parent_session: "s1".into(),
        parent_account: "agent:boss".into(),
        user: "alice".into(),
        agent: "helper".into(),
        account: "child:c1".into(),
        state: ChildState::Running,
        created_ms: 0,
    };
    let policy = Policy {
        max_fraction_num: 1,
        max_fraction_den: 1,
        counterparties: vec!["agent:boss".into()],
        ..Policy::default()
    };
    store.create_child(&alice(), &child, &policy).unwrap();
    // The id and the account are unique; a failed creation leaves nothing.
    let twin = ChildRecord {
        account: "child:c1-twin".into(),
        ..child.clone()
    };
    assert!(store.create_child(&alice(), &twin, &policy).is_err());
    assert!(store.balance("child:c1-twin").is_err());
    assert_eq!(store.balance("child:c1").unwrap().balance, 0);
    assert_eq!(store.policy("child:c1").unwrap(), policy);
    let listed = store.children_of("s1").unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, ChildState::Running);
    store.set_child_state("c1", ChildState::Exhausted).unwrap();
    store.set_child_state("c1", ChildState::Running).unwrap();
    store.set_child_state("c1", ChildState::Stopped).unwrap();
    assert!(store.set_child_state("c1", ChildState::Running).is_err());
    assert_eq!(
        store.child("c1").unwrap().unwrap().state,
        ChildState::Stopped
    );
    assert!(store.child("nope").unwrap().is_none());
    assert!(store.set_child_state("nope", ChildState::Stopped).is_err());
}
