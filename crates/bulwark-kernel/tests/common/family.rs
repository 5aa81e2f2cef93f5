//! A `$BULWARK_HOME` with a parent agent and candidate children, sessions
//! that pay from the ledger, and a child host: for the credits and spawn
//! tests.

use bulwark_audit::AuditSink;
use bulwark_kernel::{
    ChildHost, Door, Home, LOCAL_USER, PolicyContext, Session, SessionCredits, SessionIdentity,
    ToolLimits, ToolRegistry, agent_wallet, build_session, effective_policy,
};
use bulwark_policy::{AccessFile, CreditsSection, GlobalConfig, parse_model_ref};
use bulwark_store::{AccountKind, Actor, Budget, NewSession, Store};
use std::path::Path;
use std::sync::Arc;

/// The parent: credits and agents tools, transfers of up to 1,000,000, may
/// spawn, message and recall `kid*`; files read-only; one credential grant.
pub const BOSS: &str = r#"
[agent]
name = "NAME"
model = "script:script.jsonl"
[tools]
allow = ["credits", "agents", "files", "time"]
[[capabilities]]
kind = "econ_transfer"
max = 1000000
[[capabilities]]
kind = "agent_spawn"
agent = "kid*"
[[capabilities]]
kind = "agent_message"
agent = "kid*"
[[capabilities]]
kind = "agent_kill"
agent = "kid*"
[[capabilities]]
kind = "file_read"
path = "**"
[credentials.grants.api]
keys = ["API_TOKEN"]
tools = ["web"]
hosts = ["api.example.com"]
[loop_guard]
warn_threshold = 100000
block_threshold = 100000
outcome_repeat_block = 100000
ping_pong_cycles = 100000
max_tool_calls = 100000
"#;

/// A child within the parent's grants: time and files read, same model.
pub const KID: &str = r#"
[agent]
name = "NAME"
model = "script:script.jsonl"
[tools]
allow = ["time", "files"]
[[capabilities]]
kind = "file_read"
path = "docs/**"
[credentials.grants.api]
keys = ["API_TOKEN"]
tools = ["web"]
hosts = ["api.example.com"]
"#;

/// Children that ask for more than the parent holds.
pub const KID_WITH_SHELL: &str = r#"
[agent]
name = "NAME"
model = "script:script.jsonl"
[tools]
allow = ["time", "shell"]
[sandbox]
shell = true
[[capabilities]]
kind = "shell_exec"
argv = ["ls", "**"]
[credentials.grants.api]
keys = ["API_TOKEN"]
tools = ["web"]
hosts = ["api.example.com"]
"#;

pub const KID_OTHER_MODEL: &str = r#"
[agent]
name = "NAME"
model = "anthropic:claude-sonnet-4-5"
[tools]
allow = ["time"]
[credentials.grants.api]
keys = ["API_TOKEN"]
tools = ["web"]
hosts = ["api.example.com"]
"#;

pub const KID_OTHER_CREDENTIAL: &str = r#"
[agent]
name = "NAME"
model = "script:script.jsonl"
[tools]
allow = ["time"]
[credentials.grants.api]
keys = ["API_TOKEN"]
tools = ["web"]
hosts = ["api.example.com"]
[credentials.grants.bank]
keys = ["BANK_TOKEN"]
tools = ["web"]
hosts = ["bank.example.com"]
"#;

/// Writes `agents/<name>/agent.toml` (and an empty model script).
pub fn add_agent(home: &Path, name: &str, manifest: &str, script: &str) {
    use bulwark_test_support::home::{for_agent, write_agent};
    write_agent(
        home,
        name,
        &for_agent(manifest, name),
        &[("script.jsonl", script)],
    );
}

pub fn prices() -> CreditsSection {
    CreditsSection {
        input_per_mtok: 1_000,
        output_per_mtok: 2_000,
        tool_costs: [("time".to_string(), 3)].into_iter().collect(),
    }
}

/// A session of `agent` (an agent of `home`) for the local user, paying
/// from `agent:<agent>` at [`prices`], with a child host.
pub fn paying_session(
    home: &Path,
    store: &Store,
    audit: Arc<dyn AuditSink>,
    agent: &str,
    session_id: &str,
) -> Session {
    paying_session_under(
        home,
        store,
        audit,
        agent,
        session_id,
        GlobalConfig::default(),
    )
}

/// [`paying_session`] under `global` (its `[credits]` set to [`prices`]):
/// the configuration its children are opened under too.
pub fn paying_session_under(
    home: &Path,
    store: &Store,
    audit: Arc<dyn AuditSink>,
    agent: &str,
    session_id: &str,
    global: GlobalConfig,
) -> Session {
    let home_dir = Home::new(home);
    let loaded = home_dir.load_agent(agent).unwrap();
    let global = GlobalConfig {
        credits: Some(prices()),
        ..global
    };
    let access = AccessFile::default();
    let policy = effective_policy(
        &PolicyContext {
            global: &global,
            access: &access,
            agent: &loaded,
            user: LOCAL_USER,
            remote: false,
        },
        &ToolRegistry::builtin(),
    )
    .unwrap();
    let identity = SessionIdentity {
        id: session_id.into(),
        agent: agent.into(),
        user: LOCAL_USER.into(),
    };
    store
        .create_session(&NewSession {
            id: session_id.into(),
            agent: agent.into(),
            user: LOCAL_USER.into(),
        })
        .unwrap();
    let wallet = agent_wallet(agent);
    store.ensure_account(&wallet, AccountKind::Agent).unwrap();
    let mut session = build_session(
        &home_dir,
        identity,
        Arc::new(policy),
        ToolLimits::default(),
        None,
        &super::unconfined(),
    )
    .unwrap();
    session = session.with_credits(Some(SessionCredits {
        ledger: Arc::new(store.clone()),
        wallet,
        prices: prices(),
        budget: Some(Budget {
            user: LOCAL_USER.into(),
            session: session_id.into(),
            ..Budget::default()
        }),
        actor: Actor {
            user: LOCAL_USER.into(),
            agent: agent.into(),
            session: session_id.into(),
        },
    }));
    session.with_children(Arc::new(ChildHost {
        home: home_dir,
        global: Arc::new(global),
        access: Arc::new(access),
        remote: false,
        store: store.clone(),
        audit: audit.clone(),
        approver: super::deny_all(),
        parent_model: parse_model_ref(loaded.manifest.agent.model.as_deref().unwrap()).unwrap(),
        parent_credentials: loaded.manifest.credentials.clone(),
        max_children: 8,
    }))
}

pub fn door(audit: Arc<dyn AuditSink>) -> Door {
    Door::new(ToolRegistry::builtin(), audit, super::deny_all())
}
