//! What a tool is, and the scoped context it runs with.
//!
//! A tool never holds ambient authority. The door builds a [`ToolContext`] for
//! each call that contains only handles narrowed to the demands the door has
//! just approved: the file handle refuses any path the door did not check, the
//! process handle runs only the argv the door checked, the HTTP handle reaches
//! only the hosts the door checked. A tool whose `demands` under-reports what it
//! does therefore fails instead of escaping.

use crate::mcp_hub::ScopedMcp;
use crate::scoped::{ScopedFiles, ScopedHttp, ScopedMemory, ScopedProcess};
use crate::scoped_credits::ScopedCredits;
use bulwark_policy::{Demand, TaintLabel};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::borrow::Cow;

/// Static description of one tool operation as the model and the policy see it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The name the model calls (`file_read`).
    pub name: Cow<'static, str>,
    /// The policy domain (`files`, `mcp:<server>`).
    pub domain: Cow<'static, str>,
    /// The operation within the domain (`read`, an MCP tool's own name).
    pub operation: Cow<'static, str>,
    pub description: Cow<'static, str>,
}

impl ToolSpec {
    /// A built-in tool's spec: every part known at compile time.
    pub const fn fixed(
        name: &'static str,
        domain: &'static str,
        operation: &'static str,
        description: &'static str,
    ) -> Self {
        Self {
            name: Cow::Borrowed(name),
            domain: Cow::Borrowed(domain),
            operation: Cow::Borrowed(operation),
            description: Cow::Borrowed(description),
        }
    }
}

/// A top-level argument of a tool that names a workspace path, so the
/// kernel can tell a constraining driver which paths exist there and may
/// be named ([`crate::path_choices`]). A declaration is a hint for the
/// model only: the door checks the call's demands as for any other tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathParam {
    /// The property name in the tool's input object.
    pub argument: &'static str,
    pub kind: bulwark_llm::PathKind,
    pub access: PathAccess,
}

/// What a call does with the path it is given: decides which grants an
/// offered path must pass ([`bulwark_policy::Demand::FileRead`],
/// [`bulwark_policy::Demand::FileWrite`] or both) and whether it must
/// already exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathAccess {
    /// An existing entry, read.
    Read,
    /// A target that need not exist yet.
    Write,
    /// An existing file, read and then written.
    ReadWrite,
}

/// What a tool returns to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: String,
    /// Where the content came from; decides which sinks it may flow into.
    pub taint: Vec<TaintLabel>,
    /// An audit-safe summary of the outcome (an exit status, a byte count;
    /// never argument values or content), recorded with the call.
    pub audit_note: String,
    /// What the injection scanner found in what the model never sees
    /// verbatim (the raw HTML behind a rendered page: comments, text hidden
    /// by CSS), audited by the door with its own findings in the content.
    pub findings: Vec<bulwark_policy::injection::Finding>,
}

impl ToolOutput {
    pub fn with_audit_note(mut self, note: impl Into<String>) -> Self {
        self.audit_note = note.into();
        self
    }
    pub fn with_findings(mut self, findings: Vec<bulwark_policy::injection::Finding>) -> Self {
        self.findings = findings;
        self
    }
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            taint: Vec::new(),
            audit_note: String::new(),
            findings: Vec::new(),
        }
    }
    pub fn tainted(content: impl Into<String>, label: TaintLabel) -> Self {
        Self {
            content: content.into(),
            taint: vec![label],
            audit_note: String::new(),
            findings: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool's schema.
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),
    /// A path argument was refused before anything was touched.
    #[error("path refused: {0}")]
    Path(String),
    /// The tool asked its context for something the door did not grant.
    #[error("not granted: {0}")]
    NotGranted(String),
    /// The process sandbox could not be set up (strict mode): the command
    /// did not run.
    #[error("sandbox unavailable: {0}")]
    Sandbox(String),
    /// The request carried a secret value to a host no grant sends it to.
    /// Holds the key's name, never its value.
    #[error("{message}")]
    Exfiltration { key: String, message: String },
    /// The egress client refused the request (scheme, address, allowlist,
    /// redirect); nothing was sent to the refused destination.
    #[error("egress refused: {0}")]
    Egress(String),
    /// A child agent would hold more than its parent; nothing was created.
    #[error("{0}")]
    SpawnRefused(String),
    /// The credits ledger refused the movement (balance, policy, budget);
    /// nothing moved.
    #[error("{0}")]
    Credits(String),
    /// An MCP server's tools changed since they were pinned: nothing was
    /// sent to it.
    #[error("{0}")]
    PinDrift(String),
    /// The operation ran and failed.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// Short reason class for the audit record.
    pub fn reason(&self) -> &'static str {
        match self {
            ToolError::InvalidArgs(_) => "invalid_args",
            ToolError::Path(_) => "path",
            ToolError::NotGranted(_) => "scope",
            ToolError::Egress(_) => "egress",
            ToolError::Exfiltration { .. } => "exfiltration",
            ToolError::Sandbox(_) => "sandbox",
            ToolError::Credits(_) => "credits",
            ToolError::SpawnRefused(_) => "spawn_check",
            ToolError::PinDrift(_) => "pin_drift",
            ToolError::Failed(_) => "tool_error",
        }
    }
}

/// The handles one call may use. Fields are `None` unless the door approved a
/// demand that needs them.
#[derive(Default)]
pub struct ToolContext {
    pub(crate) files: Option<ScopedFiles>,
    pub(crate) memory: Option<ScopedMemory>,
    pub(crate) process: Option<ScopedProcess>,
    pub(crate) http: Option<ScopedHttp>,
    pub(crate) credits: Option<ScopedCredits>,
    /// The one MCP server and tool the door approved (`mcp:<server>`
    /// calls only).
    pub(crate) mcp: Option<ScopedMcp>,
    /// What the call's writes are labelled with, and where labels are
    /// kept and read back.
    pub(crate) taint: Option<CallTaint>,
}

/// The taint a call carries into what it stores.
#[derive(Clone)]
pub struct CallTaint {
    /// The session's labels when the call ran: what it writes carries them.
    pub labels: std::collections::BTreeSet<TaintLabel>,
    /// The tool call id, recorded as the source of the labels it writes.
    pub source: String,
    pub provenance: std::sync::Arc<dyn crate::provenance::ProvenanceStore>,
    /// How a workspace file without provenance counts.
    pub workspace: bulwark_policy::WorkspaceTrust,
}

impl ToolContext {
    pub fn files(&self) -> Result<&ScopedFiles, ToolError> {
        self.files
            .as_ref()
            .ok_or_else(|| ToolError::NotGranted("no workspace handle for this call".into()))
    }
    pub fn memory(&self) -> Result<&ScopedMemory, ToolError> {
        self.memory
            .as_ref()
            .ok_or_else(|| ToolError::NotGranted("no memory handle for this call".into()))
    }
    pub fn process(&self) -> Result<&ScopedProcess, ToolError> {
        self.process
            .as_ref()
            .ok_or_else(|| ToolError::NotGranted("no process handle for this call".into()))
    }
    pub fn credits(&self) -> Result<&ScopedCredits, ToolError> {
        self.credits
            .as_ref()
            .ok_or_else(|| ToolError::NotGranted("no credits handle for this call".into()))
    }
    /// The call's labels and provenance store: a tool that stores or
    /// returns stored content cannot run without them.
    pub fn taint(&self) -> Result<&CallTaint, ToolError> {
        self.taint
            .as_ref()
            .ok_or_else(|| ToolError::NotGranted("no provenance context for this call".into()))
    }
    pub fn mcp(&self) -> Result<&ScopedMcp, ToolError> {
        self.mcp
            .as_ref()
            .ok_or_else(|| ToolError::NotGranted("no MCP server handle for this call".into()))
    }
    pub fn http(&self) -> Result<&ScopedHttp, ToolError> {
        self.http
            .as_ref()
            .ok_or_else(|| ToolError::NotGranted("no HTTP handle for this call".into()))
    }
}

/// One tool operation as the model and the policy see it.
///
/// Object-safe, so the registry holds built-in tools beside tools whose
/// schema is only known at run time (MCP servers, WASM skills). The door
/// parses a call's arguments exactly once, with [`Tool::parse`]: the
/// [`ParsedCall`] it gets back carries the demands derived from the parsed
/// value and is then the only way to run the call, so what the policy
/// checked is what the tool receives. Built-in tools implement
/// [`TypedTool`] and get this trait from it.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;
    /// The JSON schema of the arguments, as shown to the model (and turned
    /// into the local model's grammar): a subset every provider accepts, see
    /// [`crate::tool_args::schema_for`].
    fn input_schema(&self) -> Value;
    /// Parses the arguments once and derives the call's demands from the
    /// parsed value. Malformed arguments are [`ToolError::InvalidArgs`]
    /// naming the field.
    fn parse<'t>(&'t self, args: &Value) -> Result<Box<dyn ParsedCall + 't>, ToolError>;
    /// Arguments that exercise the tool, for tests that enumerate every tool.
    fn example_args(&self) -> Value;
    /// The top-level arguments that name workspace paths (none by default:
    /// MCP, shell and web tools take no workspace path).
    fn path_params(&self) -> &'static [PathParam] {
        &[]
    }
}

/// A call whose arguments were parsed and whose demands are known: the
/// door checks [`ParsedCall::demands`], scopes the context to them and runs
/// [`ParsedCall::call`] with the same parsed arguments.
#[async_trait::async_trait]
pub trait ParsedCall: Send {
    /// The concrete capabilities this call needs, derived from its parsed
    /// arguments alone. The door checks each against the session's
    /// effective set and scopes the context to exactly these.
    fn demands(&self) -> &[Demand];
    /// Whether the call sends a body (a web request with one): such a call
    /// is a taint sink even to a host the session already fetched.
    fn sends_body(&self) -> bool {
        false
    }
    async fn call(self: Box<Self>, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

/// A tool with one argument struct. Its JSON schema is derived from the
/// struct (so the schema, the accepted keys and the parsed fields cannot
/// drift apart), `deny_unknown_fields` refuses options the tool would
/// silently ignore, and `demands` sees the same value `call` receives.
#[async_trait::async_trait]
pub trait TypedTool: Send + Sync {
    type Args: DeserializeOwned + JsonSchema + Send + Sync + 'static;
    fn spec(&self) -> &ToolSpec;
    /// The concrete capabilities a call with `args` needs. Refusals that are
    /// not about the arguments' shape (a path outside the workspace, a
    /// scheme egress refuses) are returned here with their own class.
    fn demands(&self, args: &Self::Args) -> Result<Vec<Demand>, ToolError>;
    /// [`ParsedCall::sends_body`] for a call with `args`.
    fn sends_body(&self, _args: &Self::Args) -> bool {
        false
    }
    async fn call(&self, ctx: &ToolContext, args: Self::Args) -> Result<ToolOutput, ToolError>;
    /// Arguments that exercise the tool, for tests that enumerate every tool.
    fn example_args(&self) -> Value;
    /// [`Tool::path_params`].
    fn path_params(&self) -> &'static [PathParam] {
        &[]
    }
}

/// A [`TypedTool`] call after parsing: its arguments and their demands.
struct TypedCall<'t, T: TypedTool> {
    tool: &'t T,
    args: T::Args,
    demands: Vec<Demand>,
}

#[async_trait::async_trait]
impl<T: TypedTool> ParsedCall for TypedCall<'_, T> {
    fn demands(&self) -> &[Demand] {
        &self.demands
    }
    fn sends_body(&self) -> bool {
        self.tool.sends_body(&self.args)
    }
    async fn call(self: Box<Self>, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let this = *self;
        this.tool.call(ctx, this.args).await
    }
}

#[async_trait::async_trait]
impl<T: TypedTool> Tool for T {
    fn spec(&self) -> &ToolSpec {
        TypedTool::spec(self)
    }
    fn input_schema(&self) -> Value {
        crate::tool_args::schema_for::<T::Args>()
    }
    fn parse<'t>(&'t self, args: &Value) -> Result<Box<dyn ParsedCall + 't>, ToolError> {
        let args: T::Args = crate::tool_args::parse_args(args)?;
        let demands = self.demands(&args)?;
        Ok(Box::new(TypedCall {
            tool: self,
            args,
            demands,
        }))
    }
    fn example_args(&self) -> Value {
        TypedTool::example_args(self)
    }
    fn path_params(&self) -> &'static [PathParam] {
        TypedTool::path_params(self)
    }
}
