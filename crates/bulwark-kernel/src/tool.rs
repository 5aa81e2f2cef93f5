//! What a tool is, and the scoped context it runs with.
//!
//! A tool never holds ambient authority. The door builds a [`ToolContext`] for
//! each call that contains only handles narrowed to the demands the door has
//! just approved: the file handle refuses any path the door did not check, the
//! process handle runs only the argv the door checked, the HTTP handle reaches
//! only the hosts the door checked. A tool whose `demands` under-reports what it
//! does therefore fails instead of escaping.

use crate::scoped::{ScopedFiles, ScopedHttp, ScopedMemory, ScopedProcess};
use crate::scoped_credits::ScopedCredits;
use bulwark_policy::{Demand, TaintLabel};
use serde_json::Value;

/// Static description of one tool operation as the model and the policy see it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The name the model calls (`file_read`).
    pub name: &'static str,
    /// The policy domain (`files`).
    pub domain: &'static str,
    /// The operation within the domain (`read`).
    pub operation: &'static str,
    pub description: &'static str,
    pub input_schema: Value,
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
}

impl ToolOutput {
    pub fn with_audit_note(mut self, note: impl Into<String>) -> Self {
        self.audit_note = note.into();
        self
    }
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            taint: Vec::new(),
            audit_note: String::new(),
        }
    }
    pub fn tainted(content: impl Into<String>, label: TaintLabel) -> Self {
        Self {
            content: content.into(),
            taint: vec![label],
            audit_note: String::new(),
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
    pub fn http(&self) -> Result<&ScopedHttp, ToolError> {
        self.http
            .as_ref()
            .ok_or_else(|| ToolError::NotGranted("no HTTP handle for this call".into()))
    }
}

#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;
    /// The concrete capabilities this call needs, derived from its arguments
    /// alone. The door checks each against the session's effective set and
    /// scopes the context to exactly these.
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError>;
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError>;
    /// Arguments that exercise the tool, for tests that enumerate every tool.
    fn example_args(&self) -> Value;
}

/// Reads a required string argument.
pub fn arg_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::InvalidArgs(format!("`{key}` must be a string")))
}

/// Reads an optional string argument.
pub fn arg_opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ToolError::InvalidArgs(format!("`{key}` must be a string"))),
    }
}

/// Refuses arguments that are not an object or carry keys the schema lacks,
/// so a model cannot smuggle options a tool would silently ignore.
pub fn check_keys(args: &Value, allowed: &[&str]) -> Result<(), ToolError> {
    let Some(map) = args.as_object() else {
        return Err(ToolError::InvalidArgs(
            "arguments must be a JSON object".into(),
        ));
    };
    for key in map.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(ToolError::InvalidArgs(format!(
                "unknown argument `{key}`; allowed: {}",
                allowed.join(", ")
            )));
        }
    }
    Ok(())
}
