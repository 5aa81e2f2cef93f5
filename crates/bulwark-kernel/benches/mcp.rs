//! MCP call overhead through the door: a `tools/call` of `time_now` from
//! rmcp's client over an in-memory duplex, through `BulwarkMcpServer`,
//! `SessionToolHost` and the door of a tools-only session of a real home
//! (SQLite audit), against `Door::dispatch` of the same call directly and
//! `SessionToolHost::call` (dispatch, audit flush, state save) without the
//! protocol.

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use bulwark_audit::AuditSink;
use bulwark_kernel::mcp_host::SessionToolHost;
use bulwark_kernel::{
    FrontEnd, Home, Origin, PreApproved, SessionFactory, SessionRecords, SessionSpec, StoreRecords,
    ToolCall,
};
use bulwark_mcp::server::{
    ApprovalQuestion, ApprovalReply, Approvals, BulwarkMcpServer, ServerLimits, ToolHost, serve_io,
};
use bulwark_policy::{AgentName, GlobalConfig, UserName};
use bulwark_store::Store;
use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

const MANIFEST: &str = r#"
[agent]
name = "NAME"
[tools]
allow = ["time"]
[loop_guard]
warn_threshold = 4000000000
block_threshold = 4000000000
outcome_repeat_block = 4000000000
ping_pong_cycles = 4000000000
max_tool_calls = 4000000000
"#;

fn records(store: &Store) -> bulwark_kernel::OpenRecords {
    let audit: Arc<dyn AuditSink> = Arc::new(store.audit_sink());
    let records = StoreRecords {
        store: store.clone(),
        audit,
    };
    Box::new(move |_: &GlobalConfig| Ok(Arc::new(records) as Arc<dyn SessionRecords>))
}

struct Nobody;

#[async_trait::async_trait]
impl Approvals for Nobody {
    async fn ask(&self, _: ApprovalQuestion) -> ApprovalReply {
        ApprovalReply::Unavailable
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    bulwark_test_support::home::write_agent(
        root,
        "bench",
        &bulwark_test_support::home::for_agent(MANIFEST, "bench"),
        &[],
    );
    let store = Store::open(&root.join("bulwark.db")).unwrap();
    let factory = SessionFactory::new(Home::new(root));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let input = json!({});

    // The door alone.
    let mut open = factory
        .open(
            SessionSpec {
                agent: AgentName::new("bench").unwrap(),
                user: UserName::local(),
                origin: Origin::Terminal,
                model: None,
                resume: None,
                tools_only: true,
            },
            FrontEnd {
                approver: Arc::new(PreApproved::default()),
                records: records(&store),
                warn: Arc::new(|_: &str| {}),
            },
        )
        .unwrap();
    c.bench_function("mcp/door_dispatch_time_now", |b| {
        b.iter(|| {
            rt.block_on(async {
                let r = open
                    .kernel
                    .door
                    .dispatch(
                        &mut open.session,
                        ToolCall {
                            id: "c",
                            name: "time_now",
                            input: &input,
                        },
                    )
                    .await;
                assert!(!r.is_error, "{}", r.content);
            })
        })
    });

    // The host: dispatch, audit flush, state save.
    let host = Arc::new(
        SessionToolHost::open(
            &factory,
            AgentName::new("bench").unwrap(),
            UserName::local(),
            Origin::Terminal,
            records(&store),
            Arc::new(|_: &str| {}),
        )
        .unwrap(),
    );
    let nobody: Arc<dyn Approvals> = Arc::new(Nobody);
    c.bench_function("mcp/session_tool_host_call_time_now", |b| {
        b.iter(|| {
            rt.block_on(async {
                let r = host.call("time_now", json!({}), nobody.clone()).await;
                assert!(!r.is_error, "{}", r.content);
            })
        })
    });

    // The whole MCP round trip: client → JSON-RPC over a duplex → server →
    // host → door, and back.
    let client = rt.block_on(async {
        let (server_end, client_end) = tokio::io::duplex(256 * 1024);
        let (read, write) = tokio::io::split(server_end);
        let limits = ServerLimits::default();
        let server = BulwarkMcpServer::with_limits(host.clone(), limits);
        tokio::spawn(serve_io(server, read, write, limits));
        ().serve(client_end).await.unwrap()
    });
    c.bench_function("mcp/tools_call_time_now_over_duplex", |b| {
        b.iter(|| {
            rt.block_on(async {
                let r = client
                    .call_tool(CallToolRequestParams::new("time_now"))
                    .await
                    .unwrap();
                assert_eq!(r.is_error, Some(false));
            })
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
