//! The agent loop, the one door every tool call passes, built-in tools and
//! approvals.
#![forbid(unsafe_code)]

mod agent;
mod agent_load;
mod approval;
mod boundary;
mod children;
mod conversation;
mod credits;
mod door;
mod environment;
mod factory;
mod home;
pub mod mcp_host;
mod mcp_hub;
pub mod path_choices;
mod provenance;
mod providers;
mod registry;
mod scoped;
mod scoped_credits;
mod session;
mod session_records;
mod setup;
mod tool;
mod tool_args;
mod tools;

pub use agent::{
    AgentRuntime, Kernel, KernelError, NOT_RUN_INTERRUPTED, Silent, TurnEnd, TurnObserver,
    TurnOutcome,
};
pub use agent_load::{
    REQUIRE_SIGNED_POLICY, SignatureCheck, SignatureStatus, Warn, check_signature,
    require_signature,
};
pub use approval::{ApprovalAnswer, ApprovalRequest, Approver, PreApproved};
pub use boundary::Boundary;
pub use children::{Caller, ChildError, ChildHost, ChildReply, agent_wallet, child_agent_of};
pub use conversation::ConversationStore;
pub use credits::{Ledger, Reserved, SessionCredits, max_input_tokens};
pub use door::{DispatchResult, Door, ToolCall};
pub use environment::{Environment, KEPT_VARIABLES, environment};
pub use factory::{
    FrontEnd, MAX_CHILDREN, OpenError, OpenRecords, OpenSession, Origin, ParentGrant,
    SessionFactory, SessionRecords, SessionSpec, StoreRecords,
};
pub use home::{DEFAULT_SYSTEM_PROMPT, Home, LoadedAgent};
pub use mcp_hub::{McpHub, PinConnection, ScopedMcp, mcp_connect_for_pin};
pub use path_choices::{WalkBounds, path_choices, path_choices_with};
pub use provenance::{
    LabelRoot, MemoryProvenance, ProvenanceError, ProvenanceStore, StoreProvenance, content_digest,
    labels_from_names, root_key,
};
pub use providers::{
    LocalModelFile, MODEL_CATALOGUE_VAR, ModelFiles, ResolvedModel, WORKSPACE_LISTING_VAR,
    check_model, default_model, model_catalogue, provider_key_env, resolve_model,
    resolve_model_cached, resolve_model_with,
};
pub use registry::ToolRegistry;
pub use scoped::{ScopedFiles, ScopedHttp, ScopedMemory, ScopedProcess};
pub use scoped_credits::ScopedCredits;
pub use session::{Session, SessionIdentity, SessionResources, SessionState, ToolLimits};
pub use setup::{
    AgentSetup, LOCAL_USER, PolicyContext, ProcessSandbox, build_session, effective_policy,
    egress_client, load_secrets,
};
pub use tokio_util::sync::CancellationToken;
pub use tool::{
    CallTaint, ParsedCall, PathAccess, PathParam, Tool, ToolContext, ToolError, ToolOutput,
    ToolSpec, TypedTool,
};
pub use tool_args::{parse_args, schema_for};
