//! Shared fixtures for kernel tests: sessions built from manifest text.
#![allow(dead_code)]

use bulwark_audit::{AuditSink, MemorySink};
use bulwark_kernel::{
    AgentSetup, Approver, Door, Home, PreApproved, ProcessSandbox, Session, SessionIdentity,
    ToolLimits, ToolRegistry, build_session,
};
use bulwark_policy::{
    EffectivePolicy, GlobalConfig, PolicyInputs, compute_effective, parse_manifest,
};
use std::path::Path;
use std::sync::Arc;

pub mod family;

pub fn policy(registry: &ToolRegistry, manifest: &str) -> EffectivePolicy {
    let manifest = parse_manifest(manifest, "test/agent.toml").expect("test manifest parses");
    let global = GlobalConfig::default();
    let inputs = PolicyInputs {
        global: &global,
        manifest: &manifest,
        remote: false,
        user: None,
    };
    compute_effective(&inputs, &registry.catalog())
}

pub fn session(home: &Path, policy: EffectivePolicy) -> Session {
    session_with(home, policy, &unconfined())
}

/// These tests exercise the door's policy; a test binary is no sandbox
/// helper. Confinement itself is tested in bulwark-sandbox and, through
/// the real binary, in bulwark-cli.
pub fn unconfined() -> AgentSetup {
    AgentSetup {
        sandbox: ProcessSandbox::Unconfined,
        ..AgentSetup::default()
    }
}

/// A session whose exec policy (and other setup) comes from `setup`.
pub fn session_with(home: &Path, policy: EffectivePolicy, setup: &AgentSetup) -> Session {
    let identity = SessionIdentity {
        id: "s1".into(),
        agent: "tester".into(),
        user: "local".into(),
    };
    build_session(
        &Home::new(home),
        identity,
        Arc::new(policy),
        ToolLimits::default(),
        None,
        setup,
    )
    .expect("session builds")
}

pub fn door(registry: ToolRegistry, sink: Arc<MemorySink>, approver: Arc<dyn Approver>) -> Door {
    let audit: Arc<dyn AuditSink> = sink;
    Door::new(registry, audit, approver)
}

pub fn deny_all() -> Arc<dyn Approver> {
    Arc::new(PreApproved::default())
}

pub fn approve(rules: &[&str]) -> Arc<dyn Approver> {
    let rules: Vec<String> = rules.iter().map(|s| s.to_string()).collect();
    Arc::new(PreApproved::parse(&rules).expect("rules parse"))
}

pub const FILES_READ_ONLY: &str = r#"
[agent]
name = "tester"
[tools]
allow = ["files", "time"]
[[capabilities]]
kind = "file_read"
path = "**"
"#;

/// An audit sink that keeps records in memory but fails where a test says:
/// it refuses the records `refuse` picks, and with `flush_fails` it cannot
/// make anything durable (a batching sink on a full disk).
pub struct FaultySink {
    pub inner: MemorySink,
    refuse: fn(&bulwark_audit::AuditRecord) -> bool,
    flush_fails: bool,
}

impl FaultySink {
    /// Refuses the records `refuse` picks, keeps everything else.
    pub fn refusing(refuse: fn(&bulwark_audit::AuditRecord) -> bool) -> Self {
        Self {
            inner: MemorySink::new(),
            refuse,
            flush_fails: false,
        }
    }

    /// Accepts every record into its queue, but every flush fails.
    pub fn unflushable() -> Self {
        Self {
            inner: MemorySink::new(),
            refuse: |_| false,
            flush_fails: true,
        }
    }
}

impl AuditSink for FaultySink {
    fn record(&self, record: &bulwark_audit::AuditRecord) -> Result<(), bulwark_audit::AuditError> {
        if (self.refuse)(record) {
            return Err(bulwark_audit::AuditError::Store("disk full".into()));
        }
        self.inner.record(record)
    }
    fn flush(&self) -> Result<(), bulwark_audit::AuditError> {
        if self.flush_fails {
            return Err(bulwark_audit::AuditError::Store("disk full".into()));
        }
        self.inner.flush()
    }
    fn tail(
        &self,
        limit: usize,
    ) -> Result<Vec<bulwark_audit::StoredRecord>, bulwark_audit::AuditError> {
        self.inner.tail(limit)
    }
}
