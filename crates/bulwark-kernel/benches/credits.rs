//! What credits cost on the agent's path:
//! - `credits/transfer_credits`: one `transfer_credits` tool call through
//!   the door (policy checks, scoped handle, one durable ledger
//!   transaction with its ledger audit record, then the door's own
//!   `tool_call` record), on a file-backed store as `run` uses it;
//! - `credits/model_hold_settle`: the reservation and settlement around
//!   one model call (two ledger transactions);
//! - `credits/spawn_check`: `spawn_violations` for a typical parent and
//!   child (pure: effective policies already computed).

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bulwark_kernel::{
    AgentSetup, Door, Home, PreApproved, SessionCredits, SessionIdentity, ToolCall, ToolLimits,
    ToolRegistry, build_session,
};
use bulwark_policy::{
    CreditsSection, GlobalConfig, PolicyInputs, SpawnGrant, compute_effective, parse_manifest,
    parse_model_ref, spawn_violations,
};
use bulwark_store::{AccountKind, Actor, Store};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::sync::Arc;

const PARENT: &str = r#"
[agent]
name = "bench"
[tools]
allow = ["credits", "agents", "files"]
[[capabilities]]
kind = "econ_transfer"
max = 1000000000
[[capabilities]]
kind = "agent_spawn"
agent = "kid*"
[[capabilities]]
kind = "file_read"
path = "**"
[credentials.grants.api]
keys = ["API_TOKEN"]
tools = ["web"]
hosts = ["api.example.com"]
[loop_guard]
warn_threshold = 4000000000
block_threshold = 4000000000
outcome_repeat_block = 4000000000
ping_pong_cycles = 4000000000
max_tool_calls = 4000000000
"#;

const CHILD: &str = r#"
[agent]
name = "kid"
[tools]
allow = ["files"]
[[capabilities]]
kind = "file_read"
path = "docs/**"
[credentials.grants.api]
keys = ["API_TOKEN"]
tools = ["web"]
hosts = ["api.example.com"]
"#;

fn fail<T>(what: &str, e: impl std::fmt::Display) -> T {
    panic!("{what}: {e}")
}

fn bench_credits(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail("tempdir", e));
    let registry = ToolRegistry::builtin();
    let global = GlobalConfig::default();
    let policy_of = |src: &str| {
        let manifest = parse_manifest(src, "bench.toml").unwrap_or_else(|e| fail("manifest", e));
        let policy = compute_effective(
            &PolicyInputs {
                global: &global,
                manifest: &manifest,
                remote: false,
                user: None,
            },
            &registry.catalog(),
        );
        (manifest, policy)
    };
    let (parent_manifest, parent_policy) = policy_of(PARENT);
    let store = Store::open(&dir.path().join("bench.db")).unwrap_or_else(|e| fail("store", e));
    for id in ["agent:bench", "agent:other"] {
        store
            .ensure_account(id, AccountKind::Agent)
            .unwrap_or_else(|e| fail("account", e));
        store
            .mint(&Actor::default(), &format!("mint-{id}"), id, 1 << 60, "")
            .unwrap_or_else(|e| fail("mint", e));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail("runtime", e));
    let door = Door::new(
        registry.clone(),
        Arc::new(store.audit_sink()),
        Arc::new(PreApproved::default()),
    );
    let mut session = build_session(
        &Home::new(dir.path()),
        SessionIdentity {
            id: "bench".into(),
            agent: "bench".into(),
            user: "local".into(),
        },
        Arc::new(parent_policy.clone()),
        ToolLimits::default(),
        None,
        &AgentSetup::default(),
    )
    .unwrap_or_else(|e| fail("session", e));
    let credits = SessionCredits {
        ledger: Arc::new(store.clone()),
        wallet: "agent:bench".into(),
        prices: CreditsSection::default(),
        budget: None,
        actor: Actor::default(),
    };
    session = session.with_credits(Some(credits.clone()));
    let mut n: u64 = 0;
    c.bench_function("credits/transfer_credits", |b| {
        b.iter(|| {
            n += 1;
            let input = json!({"to": "agent:other", "amount": 1, "key": format!("k{n}")});
            let r = runtime.block_on(door.dispatch(
                &mut session,
                ToolCall {
                    id: "c",
                    name: "transfer_credits",
                    input: &input,
                },
            ));
            assert!(!r.is_error, "{}", r.content);
        })
    });
    let _ = door.audit().flush();
    c.bench_function("credits/model_hold_settle", |b| {
        b.iter(|| {
            let hold = credits
                .reserve("model", 100)
                .unwrap_or_else(|e| fail("hold", e))
                .unwrap_or_else(|| fail("hold", "nothing reserved"));
            credits
                .settle(hold, 40)
                .unwrap_or_else(|e| fail("settle", e))
        })
    });
    let (child_manifest, child_policy) = policy_of(CHILD);
    let model = parse_model_ref("script:s.jsonl").unwrap_or_else(|e| fail("model", e));
    let parent = SpawnGrant {
        policy: &parent_policy,
        model: &model,
        credentials: &parent_manifest.credentials,
    };
    let child = SpawnGrant {
        policy: &child_policy,
        model: &model,
        credentials: &child_manifest.credentials,
    };
    assert!(spawn_violations(&parent, "kid", &child).is_empty());
    c.bench_function("credits/spawn_check", |b| {
        b.iter(|| spawn_violations(&parent, std::hint::black_box("kid"), &child))
    });
}

criterion_group!(benches, bench_credits);
criterion_main!(benches);
