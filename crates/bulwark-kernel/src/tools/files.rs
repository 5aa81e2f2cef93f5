//! `files` domain: read, write, list, edit, search inside the agent's workspace.

use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSpec, arg_opt_str, arg_str, check_keys};
use bulwark_policy::{Demand, TaintLabel, WorkspacePath};
use serde_json::{Value, json};
use std::fmt::Write as _;

fn path_arg(args: &Value, key: &str) -> Result<WorkspacePath, ToolError> {
    let raw = arg_opt_str(args, key)?.unwrap_or("");
    WorkspacePath::parse(raw).map_err(|e| ToolError::Path(e.to_string()))
}

fn required_path(args: &Value) -> Result<WorkspacePath, ToolError> {
    let raw = arg_str(args, "path")?;
    let path = WorkspacePath::parse(raw).map_err(|e| ToolError::Path(e.to_string()))?;
    if path.is_root() {
        return Err(ToolError::Path(
            "`path` must name a file, not the workspace root".into(),
        ));
    }
    Ok(path)
}

pub struct FileRead {
    spec: ToolSpec,
}

impl FileRead {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "file_read",
                domain: "files",
                operation: "read",
                description: "Read a UTF-8 text file from the workspace. `path` is relative to the workspace root.",
                input_schema: json!({"type":"object","properties":{"path":{"type":"string","description":"workspace-relative file path"}},"required":["path"],"additionalProperties":false}),
            },
        }
    }
}

#[async_trait::async_trait]
impl crate::tool::Tool for FileRead {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError> {
        check_keys(args, &["path"])?;
        Ok(vec![Demand::FileRead(required_path(args)?)])
    }
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError> {
        let path = required_path(args)?;
        let bytes = ctx.files()?.read(&path)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolError::Failed(format!("`{path}` is not UTF-8 text")))?;
        Ok(ToolOutput::tainted(text, TaintLabel::Workspace))
    }
    fn example_args(&self) -> Value {
        json!({"path": "notes.txt"})
    }
}

pub struct FileWrite {
    spec: ToolSpec,
}

impl FileWrite {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "file_write",
                domain: "files",
                operation: "write",
                description: "Create or replace a text file in the workspace (parent directories are created).",
                input_schema: json!({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}),
            },
        }
    }
}

#[async_trait::async_trait]
impl crate::tool::Tool for FileWrite {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError> {
        check_keys(args, &["path", "content"])?;
        arg_str(args, "content")?;
        Ok(vec![Demand::FileWrite(required_path(args)?)])
    }
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError> {
        let path = required_path(args)?;
        let content = arg_str(args, "content")?;
        ctx.files()?.write(&path, content.as_bytes())?;
        Ok(ToolOutput::text(format!(
            "wrote {} bytes to {path}",
            content.len()
        )))
    }
    fn example_args(&self) -> Value {
        json!({"path": "out.txt", "content": "hello"})
    }
}

pub struct FileList {
    spec: ToolSpec,
}

impl FileList {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "file_list",
                domain: "files",
                operation: "list",
                description: "List a directory of the workspace (default: the root).",
                input_schema: json!({"type":"object","properties":{"path":{"type":"string","description":"workspace-relative directory; omit for the root"}},"additionalProperties":false}),
            },
        }
    }
}

#[async_trait::async_trait]
impl crate::tool::Tool for FileList {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError> {
        check_keys(args, &["path"])?;
        Ok(vec![Demand::FileRead(path_arg(args, "path")?)])
    }
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError> {
        let path = path_arg(args, "path")?;
        let (entries, hidden) = ctx.files()?.list(&path)?;
        let mut out = String::new();
        for entry in entries {
            let _ = writeln!(out, "{:?}\t{}\t{}", entry.kind, entry.size, entry.name);
        }
        if hidden > 0 {
            let _ = writeln!(
                out,
                "({hidden} entr{} not shown: not covered by the agent's file_read grants)",
                if hidden == 1 { "y" } else { "ies" }
            );
        } else if out.is_empty() {
            out.push_str("(empty directory)");
        }
        Ok(ToolOutput::tainted(out, TaintLabel::Workspace))
    }
    fn example_args(&self) -> Value {
        json!({})
    }
}

pub struct FileEdit {
    spec: ToolSpec,
}

impl FileEdit {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "file_edit",
                domain: "files",
                operation: "edit",
                description: "Replace text in a workspace file. `old` must occur exactly once unless `replace_all` is true.",
                input_schema: json!({"type":"object","properties":{"path":{"type":"string"},"old":{"type":"string"},"new":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["path","old","new"],"additionalProperties":false}),
            },
        }
    }
}

#[async_trait::async_trait]
impl crate::tool::Tool for FileEdit {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError> {
        check_keys(args, &["path", "old", "new", "replace_all"])?;
        arg_str(args, "old")?;
        arg_str(args, "new")?;
        let path = required_path(args)?;
        Ok(vec![
            Demand::FileRead(path.clone()),
            Demand::FileWrite(path),
        ])
    }
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError> {
        let path = required_path(args)?;
        let old = arg_str(args, "old")?;
        let new = arg_str(args, "new")?;
        if old.is_empty() {
            return Err(ToolError::InvalidArgs("`old` must not be empty".into()));
        }
        let replace_all = match args.get("replace_all") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ToolError::InvalidArgs(
                    "`replace_all` must be a boolean".into(),
                ));
            }
        };
        let count = ctx.files()?.edit(&path, old, new, replace_all)?;
        Ok(ToolOutput::text(format!(
            "replaced {count} occurrence(s) in {path}"
        )))
    }
    fn example_args(&self) -> Value {
        json!({"path": "notes.txt", "old": "a", "new": "b"})
    }
}

pub struct FileSearch {
    spec: ToolSpec,
}

impl FileSearch {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "file_search",
                domain: "files",
                operation: "search",
                description: "Find lines containing `query` in workspace files under `path` (default: the root).",
                input_schema: json!({"type":"object","properties":{"query":{"type":"string"},"path":{"type":"string"},"max_results":{"type":"integer","minimum":1,"maximum":500}},"required":["query"],"additionalProperties":false}),
            },
        }
    }
}

#[async_trait::async_trait]
impl crate::tool::Tool for FileSearch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError> {
        check_keys(args, &["query", "path", "max_results"])?;
        arg_str(args, "query")?;
        Ok(vec![Demand::FileRead(path_arg(args, "path")?)])
    }
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError> {
        let query = arg_str(args, "query")?;
        if query.is_empty() {
            return Err(ToolError::InvalidArgs("`query` must not be empty".into()));
        }
        let path = path_arg(args, "path")?;
        let max = match args.get("max_results") {
            None | Some(Value::Null) => 50,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=500).contains(n))
                .ok_or_else(|| ToolError::InvalidArgs("`max_results` must be 1..=500".into()))?
                as usize,
        };
        let (hits, skipped) = ctx.files()?.search(&path, query, max)?;
        let mut out = String::new();
        for hit in &hits {
            let _ = writeln!(out, "{}:{}: {}", hit.path, hit.line, hit.text);
        }
        if hits.is_empty() {
            out.push_str("no matches");
            if skipped > 0 {
                out.push('\n');
            }
        }
        if skipped > 0 {
            let _ = writeln!(
                out,
                "({skipped} file(s) not searched: not covered by the agent's file_read grants)"
            );
        }
        Ok(ToolOutput::tainted(out, TaintLabel::Workspace))
    }
    fn example_args(&self) -> Value {
        json!({"query": "todo"})
    }
}
