//! `memory` domain: small named notes per agent and per user, kept in separate
//! directories so one scope can never be reached through the other.

use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool};
use bulwark_policy::{Demand, TaintLabel};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Whose notes: this agent's, or the user's (shared across the user's
/// agents). Each is its own directory and its own capability.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Scope {
    Agent,
    User,
}

impl Scope {
    fn as_str(self) -> &'static str {
        match self {
            Scope::Agent => "agent",
            Scope::User => "user",
        }
    }
}

/// A note key becomes one file name; only a plain, short name is accepted so a
/// key can never be a path.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(try_from = "String")]
struct NoteKey(String);

impl TryFrom<String> for NoteKey {
    type Error = &'static str;
    fn try_from(key: String) -> Result<Self, Self::Error> {
        let ok = !key.is_empty()
            && key.len() <= 64
            && !key.starts_with('.')
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if ok {
            Ok(Self(key))
        } else {
            Err("must be 1-64 characters of A-Z a-z 0-9 _ - . and not start with a dot")
        }
    }
}

impl NoteKey {
    /// The note's file name in its scope's directory.
    fn file(&self) -> String {
        format!("{}.md", self.0)
    }
}

/// `memory_read`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryReadArgs {
    /// `agent` (this agent's notes) or `user` (shared by this user's agents)
    scope: Scope,
    /// the note's name: 1-64 of A-Z a-z 0-9 _ - . not starting with a dot
    key: NoteKey,
}

/// `memory_write`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryWriteArgs {
    /// `agent` (this agent's notes) or `user` (shared by this user's agents)
    scope: Scope,
    /// the note's name: 1-64 of A-Z a-z 0-9 _ - . not starting with a dot
    key: NoteKey,
    content: String,
}

/// `memory_list`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryListArgs {
    /// `agent` (this agent's notes) or `user` (shared by this user's agents)
    scope: Scope,
}

pub struct MemoryRead {
    spec: ToolSpec,
}
pub struct MemoryWrite {
    spec: ToolSpec,
}
pub struct MemoryList {
    spec: ToolSpec,
}

impl MemoryRead {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "memory_read",
                "memory",
                "read",
                "Read a note saved earlier. `scope` is `agent` (this agent's notes) or `user` (notes shared across this user's agents).",
            ),
        }
    }
}
impl MemoryWrite {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "memory_write",
                "memory",
                "write",
                "Save a note under `key` for later sessions.",
            ),
        }
    }
}
impl MemoryList {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "memory_list",
                "memory",
                "list",
                "List the saved notes of a scope.",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for MemoryRead {
    type Args = MemoryReadArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &MemoryReadArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(vec![Demand::MemoryRead(args.scope.as_str().to_owned())])
    }
    async fn call(&self, ctx: &ToolContext, args: MemoryReadArgs) -> Result<ToolOutput, ToolError> {
        let (bytes, labels) =
            ctx.memory()?
                .read(args.scope.as_str(), &args.key.file(), ctx.taint()?)?;
        Ok(super::files::labelled(
            String::from_utf8_lossy(&bytes).into_owned(),
            labels,
        ))
    }
    fn example_args(&self) -> Value {
        json!({"scope": "agent", "key": "todo"})
    }
}

#[async_trait::async_trait]
impl TypedTool for MemoryWrite {
    type Args = MemoryWriteArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &MemoryWriteArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(vec![Demand::MemoryWrite(args.scope.as_str().to_owned())])
    }
    async fn call(
        &self,
        ctx: &ToolContext,
        args: MemoryWriteArgs,
    ) -> Result<ToolOutput, ToolError> {
        ctx.memory()?.write(
            args.scope.as_str(),
            &args.key.file(),
            args.content.as_bytes(),
            ctx.taint()?,
        )?;
        Ok(ToolOutput::text("saved"))
    }
    fn example_args(&self) -> Value {
        json!({"scope": "agent", "key": "todo", "content": "x"})
    }
}

#[async_trait::async_trait]
impl TypedTool for MemoryList {
    type Args = MemoryListArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &MemoryListArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(vec![Demand::MemoryRead(args.scope.as_str().to_owned())])
    }
    async fn call(&self, ctx: &ToolContext, args: MemoryListArgs) -> Result<ToolOutput, ToolError> {
        let entries = ctx.memory()?.list(args.scope.as_str())?;
        let names: Vec<String> = entries
            .into_iter()
            .filter_map(|e| e.name.strip_suffix(".md").map(str::to_string))
            .collect();
        let text = if names.is_empty() {
            "no notes".to_string()
        } else {
            names.join("\n")
        };
        Ok(ToolOutput::tainted(text, TaintLabel::Memory))
    }
    fn example_args(&self) -> Value {
        json!({"scope": "user"})
    }
}
