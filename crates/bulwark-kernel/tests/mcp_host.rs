//! `SessionToolHost`: a tools-only session of a real home behind an MCP
//! server. The client gets the agent's grants and nothing more, every call
//! through the door and audited, approvals asked through the call's
//! `Approvals`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bulwark_audit::{Action, AuditSink, Decision};
use bulwark_kernel::mcp_host::SessionToolHost;
use bulwark_kernel::{Home, Origin, SessionFactory, SessionRecords, StoreRecords};
use bulwark_mcp::server::{ApprovalQuestion, ApprovalReply, Approvals, ToolHost};
use bulwark_policy::{AgentName, GlobalConfig, UserName};
use bulwark_store::{AuditQuery, Store};
use serde_json::json;

/// No model at all: a tools-only session needs none. Files read anywhere
/// in the workspace, writes only after approval; child agents granted
/// (they need a model, so an MCP client is not offered them).
const MANIFEST: &str = r#"
[agent]
name = "NAME"
[tools]
allow = ["files", "time", "agents"]
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "file_write"
path = "out/**"
[[capabilities]]
kind = "agent_spawn"
agent = "*"
[approval]
operations = ["files:write"]
"#;

struct Fixture {
    _dir: tempfile::TempDir,
    home: Home,
    store: Store,
    audit: Arc<dyn AuditSink>,
    host: SessionToolHost,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    bulwark_test_support::home::write_agent(
        root,
        "helper",
        &bulwark_test_support::home::for_agent(MANIFEST, "helper"),
        &[],
    );
    let store = Store::open(&root.join("bulwark.db")).unwrap();
    let audit: Arc<dyn AuditSink> = Arc::new(store.audit_sink());
    let records = StoreRecords {
        store: store.clone(),
        audit: audit.clone(),
    };
    let home = Home::new(root);
    let host = SessionToolHost::open(
        &SessionFactory::new(home.clone()),
        AgentName::new("helper").unwrap(),
        UserName::local(),
        Origin::Terminal,
        Box::new(move |_: &GlobalConfig| Ok(Arc::new(records) as Arc<dyn SessionRecords>)),
        Arc::new(|_: &str| {}),
    )
    .expect("a tools-only session opens without a model");
    let workspace = home.workspace_dir("local", "helper").unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "hello from the workspace").unwrap();
    Fixture {
        _dir: dir,
        home,
        store,
        audit,
        host,
    }
}

impl Fixture {
    fn records(&self) -> Vec<bulwark_audit::AuditRecord> {
        self.audit.flush().unwrap();
        self.store
            .audit_sink()
            .query(&AuditQuery {
                session: Some(self.host.session_id().into()),
                since_seq: None,
                limit: 1000,
            })
            .unwrap()
            .into_iter()
            .map(|r| r.record)
            .collect()
    }

    fn tool_calls(&self) -> Vec<(Decision, String)> {
        self.records()
            .into_iter()
            .filter(|r| r.action == Action::ToolCall)
            .map(|r| (r.decision, r.tool))
            .collect()
    }
}

/// Answers every question with `reply`, keeping the questions.
struct Scripted {
    reply: ApprovalReply,
    asked: Mutex<Vec<ApprovalQuestion>>,
    count: AtomicUsize,
}

impl Scripted {
    fn new(reply: ApprovalReply) -> Arc<Self> {
        Arc::new(Self {
            reply,
            asked: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
        })
    }
}

#[async_trait::async_trait]
impl Approvals for Scripted {
    async fn ask(&self, question: ApprovalQuestion) -> ApprovalReply {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.asked.lock().unwrap().push(question);
        self.reply
    }
}

#[tokio::test]
async fn only_granted_tools_are_listed_and_agents_tools_are_not_offered() {
    let f = fixture();
    let names: Vec<String> = f.host.tools().await.into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"file_read".to_string()), "{names:?}");
    assert!(names.contains(&"time_now".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("shell")), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("web")), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("agent")),
        "child agents need a model: {names:?}"
    );
    // The opening is audited like any session's.
    let actions: Vec<_> = f.records().into_iter().map(|r| r.action).collect();
    assert_eq!(actions, [Action::ConfigLoad, Action::SessionStart]);
    let start = f
        .records()
        .into_iter()
        .find(|r| r.action == Action::SessionStart)
        .unwrap();
    assert!(start.detail.contains("tools only"), "{}", start.detail);
}

#[tokio::test]
async fn a_file_in_the_workspace_is_read_through_the_door() {
    let f = fixture();
    let result = f
        .host
        .call(
            "file_read",
            json!({"path": "notes.txt"}),
            Scripted::new(ApprovalReply::Deny),
        )
        .await;
    assert!(!result.is_error, "{}", result.content);
    assert!(result.content.contains("hello from the workspace"));
    assert_eq!(f.tool_calls(), [(Decision::Allowed, "file_read".into())]);
    // The session's state is saved after the call (taint, loop guard).
    let row = f.store.session(f.host.session_id()).unwrap().unwrap();
    assert!(row.state_json.is_some());
}

#[tokio::test]
async fn a_path_outside_the_workspace_is_refused_and_audited() {
    let f = fixture();
    let outside = f.home.root().join("bulwark.db");
    for path in [
        "../../../../../etc/passwd".to_string(),
        "/etc/passwd".to_string(),
        outside.display().to_string(),
    ] {
        let result = f
            .host
            .call(
                "file_read",
                json!({ "path": path }),
                Scripted::new(ApprovalReply::Approve),
            )
            .await;
        assert!(result.is_error, "{path}: {}", result.content);
        assert!(!result.content.contains("root:"), "{}", result.content);
    }
    let calls = f.tool_calls();
    assert_eq!(calls.len(), 3);
    assert!(
        calls.iter().all(|(d, _)| *d == Decision::Denied),
        "{calls:?}"
    );
}

#[tokio::test]
async fn an_ungranted_or_model_only_tool_is_refused_and_audited() {
    let f = fixture();
    for (tool, args) in [
        ("shell_exec", json!({"argv": ["id"]})),
        ("agent_spawn", json!({"agent": "helper", "task": "x"})),
        ("no_such_tool", json!({})),
    ] {
        let result = f
            .host
            .call(tool, args, Scripted::new(ApprovalReply::Approve))
            .await;
        assert!(result.is_error, "{tool}: {}", result.content);
    }
    let calls = f.tool_calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(
        calls.iter().all(|(d, _)| *d == Decision::Denied),
        "{calls:?}"
    );
}

#[tokio::test]
async fn an_approval_is_asked_through_the_calls_approvals() {
    let f = fixture();
    let workspace = f.home.workspace_dir("local", "helper").unwrap();
    let write = json!({"path": "out/a.txt", "content": "x"});

    let deny = Scripted::new(ApprovalReply::Deny);
    let result = f.host.call("file_write", write.clone(), deny.clone()).await;
    assert!(result.is_error, "{}", result.content);
    assert_eq!(deny.count.load(Ordering::SeqCst), 1);
    let question = deny.asked.lock().unwrap()[0].clone();
    assert_eq!(question.tool, "file_write");
    assert!(question.args_preview.contains("out/a.txt"));
    assert!(!workspace.join("out/a.txt").exists());

    let unavailable = Scripted::new(ApprovalReply::Unavailable);
    let result = f.host.call("file_write", write.clone(), unavailable).await;
    assert!(result.is_error);
    assert!(
        result.content.contains("cannot be asked"),
        "the refusal says why: {}",
        result.content
    );
    assert!(!workspace.join("out/a.txt").exists());

    let approve = Scripted::new(ApprovalReply::Approve);
    let result = f
        .host
        .call("file_write", write.clone(), approve.clone())
        .await;
    assert!(!result.is_error, "{}", result.content);
    assert_eq!(
        std::fs::read_to_string(workspace.join("out/a.txt")).unwrap(),
        "x"
    );

    // Once: the next write is asked again.
    let again = Scripted::new(ApprovalReply::Deny);
    f.host.call("file_write", write, again.clone()).await;
    assert_eq!(again.count.load(Ordering::SeqCst), 1);

    let decisions: Vec<_> = f.tool_calls().into_iter().map(|c| c.0).collect();
    assert_eq!(
        decisions,
        [
            Decision::Denied,
            Decision::Denied,
            Decision::Allowed,
            Decision::Denied
        ]
    );
}
