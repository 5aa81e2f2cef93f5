//! `files` domain: read, write, list, edit, search inside the agent's workspace.

use crate::tool::{PathAccess, PathParam, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool};
use crate::tool_args::{NonEmpty, PathArg};
use bulwark_llm::PathKind;
use bulwark_policy::{Demand, TaintLabel};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// `file_read`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileReadArgs {
    /// workspace-relative file path
    path: PathArg,
}

/// `file_write`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileWriteArgs {
    /// workspace-relative file path
    path: PathArg,
    content: String,
}

/// `file_list`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileListArgs {
    /// workspace-relative directory; omit for the root
    path: Option<PathArg>,
}

/// `file_edit`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileEditArgs {
    /// workspace-relative file path
    path: PathArg,
    /// the exact text to replace
    old: NonEmpty,
    new: String,
    /// replace every occurrence (default: `old` must occur exactly once)
    replace_all: Option<bool>,
}

/// `file_search`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSearchArgs {
    /// the text to find (plain text, not a pattern)
    query: NonEmpty,
    /// more texts to find at once (up to 7): a line with any of them
    /// matches too
    any_of: Option<AlsoQueries>,
    /// workspace-relative directory; omit for the root
    path: Option<PathArg>,
    /// at most this many matching lines per text (1-500; default 50)
    max_results: Option<MaxResults>,
}

/// The further texts of one `file_search`, at most [`MAX_ALSO_QUERIES`].
///
/// Why one call for several texts: a caller looking for the file that
/// holds a question's words (a name, a date, a thing) searched once per
/// word, and each search was a call of its own in the audit and against
/// the caller's budget.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(try_from = "Vec<NonEmpty>")]
#[schemars(extend("maxItems" = 7))]
struct AlsoQueries(Vec<NonEmpty>);

const MAX_ALSO_QUERIES: usize = 7;

impl TryFrom<Vec<NonEmpty>> for AlsoQueries {
    type Error = &'static str;
    fn try_from(queries: Vec<NonEmpty>) -> Result<Self, Self::Error> {
        if queries.len() > MAX_ALSO_QUERIES {
            Err("at most 7 further texts")
        } else {
            Ok(Self(queries))
        }
    }
}

/// How many matching lines `file_search` returns: 1 to 500, 50 by default.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(try_from = "u64")]
#[schemars(extend("minimum" = 1, "maximum" = 500))]
struct MaxResults(usize);

impl TryFrom<u64> for MaxResults {
    type Error = &'static str;
    fn try_from(n: u64) -> Result<Self, Self::Error> {
        match usize::try_from(n) {
            Ok(n) if (1..=500).contains(&n) => Ok(Self(n)),
            _ => Err("must be 1..=500"),
        }
    }
}

/// Stored content with the labels its provenance gave it.
pub(crate) fn labelled(content: String, labels: BTreeSet<TaintLabel>) -> ToolOutput {
    ToolOutput {
        content,
        taint: labels.into_iter().collect(),
        audit_note: String::new(),
        findings: Vec::new(),
    }
}

pub struct FileRead {
    spec: ToolSpec,
}

impl FileRead {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "file_read",
                "files",
                "read",
                "Read a UTF-8 text file from the workspace. `path` is relative to the workspace root.",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for FileRead {
    type Args = FileReadArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &FileReadArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(vec![Demand::FileRead(args.path.file("path")?)])
    }
    async fn call(&self, ctx: &ToolContext, args: FileReadArgs) -> Result<ToolOutput, ToolError> {
        let path = args.path.file("path")?;
        let (bytes, labels) = ctx.files()?.read(&path, ctx.taint()?)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolError::Failed(format!("`{path}` is not UTF-8 text")))?;
        Ok(labelled(text, labels))
    }
    fn example_args(&self) -> Value {
        json!({"path": "notes.txt"})
    }
    fn path_params(&self) -> &'static [PathParam] {
        &[PathParam {
            argument: "path",
            kind: PathKind::File,
            access: PathAccess::Read,
        }]
    }
}

pub struct FileWrite {
    spec: ToolSpec,
}

impl FileWrite {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "file_write",
                "files",
                "write",
                "Create or replace a text file in the workspace (parent directories are created).",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for FileWrite {
    type Args = FileWriteArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &FileWriteArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(vec![Demand::FileWrite(args.path.file("path")?)])
    }
    async fn call(&self, ctx: &ToolContext, args: FileWriteArgs) -> Result<ToolOutput, ToolError> {
        let path = args.path.file("path")?;
        let content = args.content;
        ctx.files()?
            .write(&path, content.as_bytes(), ctx.taint()?)?;
        Ok(ToolOutput::text(format!(
            "wrote {} bytes to {path}",
            content.len()
        )))
    }
    fn example_args(&self) -> Value {
        json!({"path": "out.txt", "content": "hello"})
    }
    fn path_params(&self) -> &'static [PathParam] {
        &[PathParam {
            argument: "path",
            kind: PathKind::File,
            access: PathAccess::Write,
        }]
    }
}

pub struct FileList {
    spec: ToolSpec,
}

impl FileList {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "file_list",
                "files",
                "list",
                "List a directory of the workspace (default: the root).",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for FileList {
    type Args = FileListArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &FileListArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(vec![Demand::FileRead(PathArg::dir_or_root(
            args.path.as_ref(),
        )?)])
    }
    async fn call(&self, ctx: &ToolContext, args: FileListArgs) -> Result<ToolOutput, ToolError> {
        let path = PathArg::dir_or_root(args.path.as_ref())?;
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
    fn path_params(&self) -> &'static [PathParam] {
        &[PathParam {
            argument: "path",
            kind: PathKind::Directory,
            access: PathAccess::Read,
        }]
    }
}

pub struct FileEdit {
    spec: ToolSpec,
}

impl FileEdit {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "file_edit",
                "files",
                "edit",
                "Replace text in a workspace file. `old` must occur exactly once unless `replace_all` is true.",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for FileEdit {
    type Args = FileEditArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &FileEditArgs) -> Result<Vec<Demand>, ToolError> {
        let path = args.path.file("path")?;
        Ok(vec![
            Demand::FileRead(path.clone()),
            Demand::FileWrite(path),
        ])
    }
    async fn call(&self, ctx: &ToolContext, args: FileEditArgs) -> Result<ToolOutput, ToolError> {
        let path = args.path.file("path")?;
        let replace_all = args.replace_all.unwrap_or(false);
        let count = ctx.files()?.edit(
            &path,
            args.old.as_str(),
            &args.new,
            replace_all,
            ctx.taint()?,
        )?;
        Ok(ToolOutput::text(format!(
            "replaced {count} occurrence(s) in {path}"
        )))
    }
    fn example_args(&self) -> Value {
        json!({"path": "notes.txt", "old": "a", "new": "b"})
    }
    fn path_params(&self) -> &'static [PathParam] {
        &[PathParam {
            argument: "path",
            kind: PathKind::File,
            access: PathAccess::ReadWrite,
        }]
    }
}

pub struct FileSearch {
    spec: ToolSpec,
}

impl FileSearch {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "file_search",
                "files",
                "search",
                "Find lines containing `query`, or any text of `any_of` (ignoring case), in workspace files under `path` (default: the root).",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for FileSearch {
    type Args = FileSearchArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &FileSearchArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(vec![Demand::FileRead(PathArg::dir_or_root(
            args.path.as_ref(),
        )?)])
    }
    async fn call(&self, ctx: &ToolContext, args: FileSearchArgs) -> Result<ToolOutput, ToolError> {
        let path = PathArg::dir_or_root(args.path.as_ref())?;
        let max = args.max_results.map_or(50, |m| m.0);
        let queries = std::iter::once(&args.query).chain(args.any_of.iter().flat_map(|a| &a.0));
        let (mut hits, mut skipped, mut labels) = (Vec::new(), 0, BTreeSet::new());
        for query in queries {
            let (found, not_searched, found_labels) =
                ctx.files()?
                    .search(&path, query.as_str(), max, ctx.taint()?)?;
            // A line with two of the texts is shown once, where first found.
            for hit in found {
                if !hits
                    .iter()
                    .any(|h: &bulwark_sandbox::SearchHit| h.path == hit.path && h.line == hit.line)
                {
                    hits.push(hit);
                }
            }
            skipped = skipped.max(not_searched);
            labels.extend(found_labels);
        }
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
        Ok(labelled(out, labels))
    }
    fn example_args(&self) -> Value {
        json!({"query": "todo"})
    }
    fn path_params(&self) -> &'static [PathParam] {
        &[PathParam {
            argument: "path",
            kind: PathKind::Directory,
            access: PathAccess::Read,
        }]
    }
}
