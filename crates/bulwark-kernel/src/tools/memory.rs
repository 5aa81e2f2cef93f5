//! `memory` domain: small named notes per agent and per user, kept in separate
//! directories so one scope can never be reached through the other.

use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSpec, arg_str, check_keys};
use bulwark_policy::{Demand, TaintLabel};
use serde_json::{Value, json};

const SCOPES: [&str; 2] = ["agent", "user"];

fn scope(args: &Value) -> Result<String, ToolError> {
    let scope = arg_str(args, "scope")?;
    if SCOPES.contains(&scope) {
        Ok(scope.to_string())
    } else {
        Err(ToolError::InvalidArgs(format!(
            "`scope` must be `agent` or `user`, not `{scope}`"
        )))
    }
}

/// A note key becomes one file name; only a plain, short name is accepted so a
/// key can never be a path.
fn key_file(args: &Value) -> Result<String, ToolError> {
    let key = arg_str(args, "key")?;
    let ok = !key.is_empty()
        && key.len() <= 64
        && !key.starts_with('.')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(format!("{key}.md"))
    } else {
        Err(ToolError::InvalidArgs(
            "`key` must be 1-64 characters of A-Z a-z 0-9 _ - . and not start with a dot".into(),
        ))
    }
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
            spec: ToolSpec {
                name: "memory_read",
                domain: "memory",
                operation: "read",
                description: "Read a note saved earlier. `scope` is `agent` (this agent's notes) or `user` (notes shared across this user's agents).",
                input_schema: json!({"type":"object","properties":{"scope":{"type":"string","enum":["agent","user"]},"key":{"type":"string"}},"required":["scope","key"],"additionalProperties":false}),
            },
        }
    }
}
impl MemoryWrite {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "memory_write",
                domain: "memory",
                operation: "write",
                description: "Save a note under `key` for later sessions.",
                input_schema: json!({"type":"object","properties":{"scope":{"type":"string","enum":["agent","user"]},"key":{"type":"string"},"content":{"type":"string"}},"required":["scope","key","content"],"additionalProperties":false}),
            },
        }
    }
}
impl MemoryList {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "memory_list",
                domain: "memory",
                operation: "list",
                description: "List the saved notes of a scope.",
                input_schema: json!({"type":"object","properties":{"scope":{"type":"string","enum":["agent","user"]}},"required":["scope"],"additionalProperties":false}),
            },
        }
    }
}

#[async_trait::async_trait]
impl crate::tool::Tool for MemoryRead {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError> {
        check_keys(args, &["scope", "key"])?;
        key_file(args)?;
        Ok(vec![Demand::MemoryRead(scope(args)?)])
    }
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError> {
        let bytes = ctx.memory()?.read(&scope(args)?, &key_file(args)?)?;
        Ok(ToolOutput::tainted(
            String::from_utf8_lossy(&bytes).into_owned(),
            TaintLabel::Memory,
        ))
    }
    fn example_args(&self) -> Value {
        json!({"scope": "agent", "key": "todo"})
    }
}

#[async_trait::async_trait]
impl crate::tool::Tool for MemoryWrite {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError> {
        check_keys(args, &["scope", "key", "content"])?;
        key_file(args)?;
        arg_str(args, "content")?;
        Ok(vec![Demand::MemoryWrite(scope(args)?)])
    }
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError> {
        let content = arg_str(args, "content")?;
        ctx.memory()?
            .write(&scope(args)?, &key_file(args)?, content.as_bytes())?;
        Ok(ToolOutput::text("saved"))
    }
    fn example_args(&self) -> Value {
        json!({"scope": "agent", "key": "todo", "content": "x"})
    }
}

#[async_trait::async_trait]
impl crate::tool::Tool for MemoryList {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError> {
        check_keys(args, &["scope"])?;
        Ok(vec![Demand::MemoryRead(scope(args)?)])
    }
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError> {
        let entries = ctx.memory()?.list(&scope(args)?)?;
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
