//! Labels that cross seams (issue 19, item 1): what a tainted session
//! stores in a file or a memory note keeps its labels for whoever reads it
//! back, and a child agent inherits its parent's labels with every message
//! and hands its own back with its reply. Each laundering route of the
//! issue has a test here that failed before labels crossed the seam.
//!
//! The workspace and memory routes run against both provenance stores:
//! [`MemoryProvenance`] (this process) and the store's label table
//! through [`StoreProvenance`].

mod children;
mod memory;
mod workspace;

use crate::common;
use bulwark_audit::{AuditSink, MemorySink};
use bulwark_kernel::{
    ApprovalAnswer, ApprovalRequest, Approver, DispatchResult, Door, Home, MemoryProvenance,
    ProvenanceStore, Session, SessionIdentity, StoreProvenance, ToolCall, ToolLimits, ToolRegistry,
    build_session,
};
use bulwark_net::{EgressPolicy, HttpLimits, SafeHttp};
use bulwark_store::Store;
use bulwark_test_support::http;
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Where the labels of stored content are kept in a test.
#[derive(Clone, Copy, Debug)]
pub enum Backend {
    /// One [`MemoryProvenance`] shared by every session of the test.
    Memory,
    /// The store's label table (`bulwark.db` in the test's home), bound
    /// per agent and user as the factory binds it.
    Store,
}

/// The provenance stores of one test home.
pub struct Labels {
    backend: Backend,
    memory: Arc<MemoryProvenance>,
    store: Store,
}

impl Labels {
    pub fn new(backend: Backend, home: &Path) -> Self {
        Labels {
            backend,
            memory: Arc::new(MemoryProvenance::default()),
            store: Store::open(&home.join("bulwark.db")).unwrap(),
        }
    }

    /// The store a session of `agent` for the local user is given.
    pub fn for_agent(&self, agent: &str) -> Arc<dyn ProvenanceStore> {
        match self.backend {
            Backend::Memory => self.memory.clone(),
            Backend::Store => Arc::new(StoreProvenance {
                store: self.store.clone(),
                agent: agent.to_string(),
                user: bulwark_kernel::LOCAL_USER.to_string(),
            }),
        }
    }
}

/// Serves one canned plain-text page per connection, `count` times, on a
/// loopback port.
pub fn serve(count: usize, body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .unwrap_or_else(|e| panic!("cannot listen on loopback ({e}); this test needs it"));
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(count) {
            let Ok(mut stream) = stream else { continue };
            http::read_head(&mut stream);
            let reply =
                http::response("200 OK", &[("content-type", "text/plain")], body.as_bytes());
            let _ = stream.write_all(&reply);
        }
    });
    port
}

/// The egress client of a test session: the one loopback `port` stands in
/// for a public host.
pub fn loopback_http(port: u16) -> Arc<SafeHttp> {
    let mut http = SafeHttp::new(EgressPolicy::default(), HttpLimits::default()).unwrap();
    http.allow_loopback_port_for_tests(port);
    Arc::new(http)
}

/// Session `id` of `agent` (the local user) under `manifest`, in `home`,
/// keeping labels in `provenance`; reaches loopback `port` if given.
pub fn agent_session(
    home: &Path,
    agent: &str,
    id: &str,
    manifest: &str,
    provenance: Arc<dyn ProvenanceStore>,
    port: Option<u16>,
) -> Session {
    let registry = ToolRegistry::builtin();
    let identity = SessionIdentity {
        id: id.into(),
        agent: agent.into(),
        user: bulwark_kernel::LOCAL_USER.into(),
    };
    let session = build_session(
        &Home::new(home),
        identity,
        Arc::new(common::policy(&registry, manifest)),
        ToolLimits::default(),
        None,
        &common::unconfined(),
    )
    .unwrap()
    .with_provenance(provenance);
    match port {
        Some(port) => session.with_http(Some(loopback_http(port))),
        None => session,
    }
}

/// Answers no, and keeps every question it was asked.
#[derive(Default)]
pub struct Recording {
    pub asked: Mutex<Vec<ApprovalRequest>>,
}

impl Recording {
    /// The (session, tool) of every question asked.
    pub fn questions(&self) -> Vec<(String, String)> {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .map(|r| (r.session.clone(), r.tool.clone()))
            .collect()
    }
}

#[async_trait::async_trait]
impl Approver for Recording {
    async fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked.lock().unwrap().push(request.clone());
        ApprovalAnswer::Deny
    }
}

/// Dispatches one call through a door asking `approver`.
pub async fn call(
    session: &mut Session,
    approver: Arc<dyn Approver>,
    id: &str,
    name: &str,
    input: serde_json::Value,
) -> DispatchResult {
    let audit: Arc<dyn AuditSink> = Arc::new(MemorySink::new());
    Door::new(ToolRegistry::builtin(), audit, approver)
        .dispatch(
            session,
            ToolCall {
                id,
                name,
                input: &input,
            },
        )
        .await
}
