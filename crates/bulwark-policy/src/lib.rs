//! Bulwark's policy core: capabilities and their matching, the manifest /
//! config / access schemas (with located, teaching errors), policy layering
//! with an explanation of every removal, taint labels and sink rules, the
//! child-agent spawn check, credit prices, and the loop guard.
//!
//! This crate is pure: it never touches the filesystem, the network or the
//! clock. Parsers take the source text plus an origin name for messages, so
//! every decision here can be tested exhaustively and reused by the kernel,
//! the CLI (`bulwark preflight`, `explain`) and the server alike.
#![forbid(unsafe_code)]

mod access;
mod call_limits;
mod capability;
mod config;
mod credentials;
mod credits;
mod egress;
mod error;
mod exec_policy;
mod exec_script;
pub use exec_script::{SETTABLE_PREFIXES, SETTABLE_VARIABLES};
mod exec_wrappers;
mod explain;
mod glob;
pub mod injection;
mod layering;
mod loop_guard;
mod manifest;
pub mod mcp;
mod names;
mod path;
mod spawn;
mod taint;
mod template;
mod validate;
pub mod value_taint;

pub use access::{AccessFile, UserEntry, UserLimits, UserRole, parse_access, user_may_use_agent};
pub use call_limits::CallLimits;
pub use capability::{CAPABILITY_KINDS, Capability, CapabilitySet, Demand, HostPattern};
pub use config::{
    AuditSection, GlobalConfig, GlobalSandbox, ProviderConfig, ProviderKind, RemoteSection,
    SandboxEnforcement, TrustSection, WitnessEntry, parse_global_config,
};
pub use credentials::{
    CredentialGrant, CredentialMode, CredentialsSection, FORBIDDEN_INJECTION_HEADERS,
    GrantApproval, Injection, InjectionTarget, SecretsSection, is_http_token,
};
pub use credits::CreditsSection;
pub use egress::{EgressSection, InternalService};
pub use error::ConfigError;
pub use exec_policy::{
    ExecApproval, ExecDenial, ExecDenyReason, ExecMode, ExecPolicy, ExecPolicyError, ExecRule,
    ExecSection, MAX_EXEC_DEPTH,
};
pub use layering::{
    Denial, DenyReason, EffectivePolicy, Layer, PolicyInputs, Removal, ToolCatalog,
    compute_effective,
};
pub use loop_guard::{LoopGuard, LoopGuardConfig, Verdict, call_hash};
pub use manifest::{
    AccessMode, AccessSection, AgentSection, ApprovalSection, Manifest, ModelRef, OpFilter,
    SandboxSection, ToolFilter, is_agent_name, parse_manifest, parse_model_ref,
};
pub use names::{AgentName, MAX_NAME_LEN, NAME_RULE, NameError, UserName};
pub use path::{MAX_COMPONENT_BYTES, MAX_PATH_BYTES, PathError, WorkspacePath};
pub use spawn::{SpawnGrant, SpawnViolation, spawn_violations};
pub use taint::{
    DEFAULT_SINK_EFFECTS, DEFAULT_SINKS, MCP_SINK_ROW, SinkRule, SinkRules, TaintDecision,
    TaintError, TaintLabel, TaintMode, TaintPolicy, TaintSection, WorkspaceTrust, is_sink_name,
};
pub use template::{MAX_KEY_NAME_LEN, Template, TemplateError, TemplatePart, is_key_name};
