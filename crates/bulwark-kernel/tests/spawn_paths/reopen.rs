//! A child's session is opened by the same factory as its parent's, every
//! time it is given work: it records its arguments as its parent's door
//! does, it is run from its verified bytes or not at all, and it is held
//! to its parent's effective policy again (issue 18's child drift bugs).

use super::common::family::*;
use bulwark_audit::{AuditSink, Decision};
use bulwark_kernel::{Caller, ChildError, ChildHost, Session};
use bulwark_policy::GlobalConfig;
use bulwark_store::{Actor, AuditQuery, ChildRecord, Store};
use std::path::Path;
use std::sync::Arc;

/// A kid that reads a file named by a marker, then answers.
const READING_KID: &str = r#"{"tool_calls":[{"name":"file_read","input":{"path":"docs/marker-4711.txt"}}]}
{"text":"kid done"}
"#;

struct Family {
    dir: tempfile::TempDir,
    store: Store,
    audit: Arc<dyn AuditSink>,
    session: Session,
}

impl Family {
    /// `boss` (session `s1`, 10,000 credits) and `kid` (running
    /// `kid_script`) under `global`.
    fn new(global: GlobalConfig, kid_script: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        add_agent(home, "boss", BOSS, "");
        add_agent(home, "kid", KID, kid_script);
        let store = Store::open(&home.join("bulwark.db")).unwrap();
        let audit: Arc<dyn AuditSink> = Arc::new(store.audit_sink());
        let session = paying_session_under(home, &store, audit.clone(), "boss", "s1", global);
        store
            .mint(&Actor::default(), "seed", "agent:boss", 10_000, "")
            .unwrap();
        Family {
            dir,
            store,
            audit,
            session,
        }
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }

    fn caller(&self) -> Caller {
        Caller {
            identity: self.session.identity().clone(),
            policy: self.session.policy().clone(),
            credits: self.session.credits().cloned(),
            taint: self.session.state().taint.clone(),
        }
    }

    fn host(&self) -> Arc<ChildHost> {
        self.session.children().cloned().unwrap()
    }

    /// Spawns `kid` and funds it.
    fn spawn_funded_kid(&self) -> ChildRecord {
        let caller = self.caller();
        let child = self.host().spawn(&caller, "kid").unwrap();
        self.host()
            .fund(&caller, &child.id, 1_000, "fund-1")
            .unwrap();
        child
    }

    /// Every record of session `session`, as (action, decision, operation,
    /// detail).
    fn records(&self, session: &str) -> Vec<(String, Decision, String, String)> {
        self.audit.flush().unwrap();
        self.store
            .audit_sink()
            .query(&AuditQuery {
                session: Some(session.into()),
                since_seq: None,
                limit: 1000,
            })
            .unwrap()
            .into_iter()
            .map(|r| {
                (
                    r.record.action.to_string(),
                    r.record.decision,
                    r.record.operation,
                    r.record.detail,
                )
            })
            .collect()
    }

    /// The text of every stored message of session `session`.
    fn messages(&self, session: &str) -> String {
        bulwark_kernel::ConversationStore::messages(&self.store, session)
            .unwrap()
            .join("\n")
    }
}

#[tokio::test]
async fn a_child_records_its_arguments_like_its_parent() {
    let mut global = GlobalConfig::default();
    global.audit.record_arguments = true;
    let f = Family::new(global, READING_KID);
    let child = f.spawn_funded_kid();
    let reply = f
        .host()
        .message(&f.caller(), &child.id, "read the marker")
        .await
        .unwrap();
    assert!(reply.text.contains("kid done"), "{reply:?}");
    let records = f.records(&child.id);
    let arguments: Vec<_> = records
        .iter()
        .filter(|(action, ..)| action == "arguments")
        .collect();
    assert_eq!(arguments.len(), 1, "{records:#?}");
    assert!(
        arguments[0].3.contains("docs/marker-4711.txt"),
        "{records:#?}"
    );
    assert!(
        records
            .iter()
            .any(|(action, _, operation, _)| action == "tool_call" && operation == "files:read"),
        "{records:#?}"
    );
}

/// Signs `agents/<agent>` with a key `signer` that `home` trusts.
fn sign(home: &Path, agent: &str) {
    let keyring = bulwark_trust::Keyring::in_home(home);
    if keyring.load("signer").is_err() {
        keyring.generate("signer").unwrap();
        let mut store = bulwark_trust::TrustStore::load_from_home(home).unwrap();
        store
            .trust(keyring.public_path("signer").to_str().unwrap())
            .unwrap();
    }
    let key = keyring.load("signer").unwrap();
    bulwark_trust::sign_agent(&home.join("agents").join(agent), agent, &key).unwrap();
}

#[tokio::test]
async fn a_signed_child_changed_after_its_check_never_runs_the_change() {
    let mut global = GlobalConfig::default();
    global.trust.require_signed = true;
    let f = Family::new(global, "{\"text\":\"the signed kid reply\"}\n");
    sign(f.home(), "kid");
    // Checked at the spawn: signed, within the parent's grant.
    let child = f.spawn_funded_kid();
    // Changed on disk after that check, before the child is loaded to run.
    std::fs::write(
        f.home().join("agents/kid/script.jsonl"),
        "{\"text\":\"UNSIGNED kid reply\"}\n",
    )
    .unwrap();
    let result = f.host().message(&f.caller(), &child.id, "hi").await;
    match &result {
        Err(ChildError::Setup(why)) => assert!(why.contains("script.jsonl"), "{why}"),
        other => panic!("the changed child was not refused: {other:?}"),
    }
    assert!(!f.messages(&child.id).contains("UNSIGNED"));
    // The refusal is audited on the parent's session.
    let denied: Vec<_> = f
        .records("s1")
        .into_iter()
        .filter(|(action, decision, operation, _)| {
            action == "spawn_check"
                && *decision == Decision::Denied
                && operation == "agents:message"
        })
        .collect();
    assert_eq!(denied.len(), 1, "{denied:#?}");
}

#[tokio::test]
async fn a_child_widened_on_disk_after_its_spawn_is_refused_and_audited() {
    let f = Family::new(GlobalConfig::default(), READING_KID);
    let child = f.spawn_funded_kid();
    // The kid's manifest now asks for a shell its parent was never granted.
    add_agent(f.home(), "kid", KID_WITH_SHELL, READING_KID);
    let result = f.host().message(&f.caller(), &child.id, "go").await;
    match &result {
        Err(ChildError::Refused { violations, .. }) => assert!(
            violations.iter().any(|v| v.to_string().contains("shell")),
            "{violations:?}"
        ),
        other => panic!("the widened child was not refused: {other:?}"),
    }
    // Nothing ran: no message stored, no tool called, no credit spent.
    assert!(f.messages(&child.id).is_empty());
    assert!(
        f.records(&child.id)
            .iter()
            .all(|(action, ..)| action != "tool_call")
    );
    assert_eq!(f.store.balance(&child.account).unwrap().balance, 1_000);
    let denied: Vec<_> = f
        .records("s1")
        .into_iter()
        .filter(|(action, decision, operation, _)| {
            action == "spawn_check"
                && *decision == Decision::Denied
                && operation == "agents:message"
        })
        .collect();
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert!(denied[0].3.contains("shell"), "{denied:#?}");
}

/// The factory is the public way to open a session, for an embedding
/// program too: a terminal session of `boss`, its records in a store this
/// process holds, may spawn, and its opening is audited.
#[tokio::test]
async fn an_embedding_program_opens_a_session_through_the_factory() {
    use bulwark_kernel::{
        FrontEnd, Origin, SessionFactory, SessionRecords, SessionSpec, StoreRecords,
    };
    let f = Family::new(GlobalConfig::default(), READING_KID);
    let records = StoreRecords {
        store: f.store.clone(),
        audit: f.audit.clone(),
    };
    let front = FrontEnd {
        approver: super::common::deny_all(),
        records: Box::new(move |_: &GlobalConfig| Ok(Arc::new(records) as Arc<dyn SessionRecords>)),
        warn: Arc::new(|_: &str| {}),
    };
    let opened = SessionFactory::new(bulwark_kernel::Home::new(f.home()))
        .open(
            SessionSpec {
                agent: bulwark_policy::AgentName::new("boss").unwrap(),
                user: bulwark_policy::UserName::local(),
                origin: Origin::Terminal,
                model: None,
                resume: None,
                tools_only: false,
            },
            front,
        )
        .unwrap();
    let id = opened.session.identity().id.clone();
    assert!(opened.session.children().is_some());
    assert!(opened.session.policy().tools.contains_key("agents"));
    assert_eq!(opened.agent.name, "boss");
    let actions: Vec<_> = f.records(&id).into_iter().map(|r| r.0).collect();
    assert_eq!(actions, ["config_load", "session_start"]);
    assert!(f.store.session(&id).unwrap().is_some());
}
