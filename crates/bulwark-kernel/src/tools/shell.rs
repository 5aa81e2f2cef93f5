//! `shell` domain: run one program with an argv, never through a shell.

use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool};
use bulwark_policy::{Demand, TaintLabel};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt::Write as _;

const MAX_ARGS: usize = 256;
const MAX_ARG_LEN: usize = 16 * 1024;

/// `shell_exec`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellExecArgs {
    /// the program, then its arguments
    argv: Argv,
}

/// A program and its arguments: 1 to [`MAX_ARGS`] strings, each at most
/// [`MAX_ARG_LEN`] bytes and without NUL.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(try_from = "Vec<String>")]
#[schemars(extend("minItems" = 1))]
struct Argv(Vec<String>);

impl TryFrom<Vec<String>> for Argv {
    type Error = String;
    fn try_from(list: Vec<String>) -> Result<Self, String> {
        if list.is_empty() || list.len() > MAX_ARGS {
            return Err(format!("must hold 1 to {MAX_ARGS} strings"));
        }
        if list
            .iter()
            .any(|s| s.len() > MAX_ARG_LEN || s.contains('\0'))
        {
            return Err(format!(
                "an argument is longer than {MAX_ARG_LEN} bytes or contains NUL"
            ));
        }
        Ok(Self(list))
    }
}

pub struct ShellExec {
    spec: ToolSpec,
}

impl ShellExec {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "shell_exec",
                "shell",
                "exec",
                "Run a program in the workspace. `argv[0]` is the program, the rest its arguments; no shell interprets them (no pipes, globs or variables). The environment is minimal and holds no credentials.",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for ShellExec {
    type Args = ShellExecArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &ShellExecArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(vec![Demand::ShellExec(args.argv.0.clone())])
    }
    async fn call(&self, ctx: &ToolContext, args: ShellExecArgs) -> Result<ToolOutput, ToolError> {
        let out = ctx.process()?.run(&args.argv.0).await?;
        let mut text = String::new();
        match (out.exit_code, out.signal) {
            (Some(code), _) => {
                let _ = writeln!(text, "exit code: {code}");
            }
            (None, Some(sig)) => {
                let _ = writeln!(text, "killed by signal {sig}");
            }
            _ => {}
        }
        if out.timed_out {
            text.push_str("timed out: the process group was killed\n");
        }
        if !out.stdout.is_empty() {
            let _ = write!(text, "stdout:\n{}\n", out.stdout);
        }
        if !out.stderr.is_empty() {
            let _ = write!(text, "stderr:\n{}\n", out.stderr);
        }
        if out.truncated {
            text.push_str("(output truncated)\n");
        }
        let note = match (out.exit_code, out.signal, out.timed_out) {
            (_, _, true) => "timed out; process group killed".to_string(),
            (Some(code), _, _) => format!("exit code {code}"),
            (None, Some(sig), _) => format!("killed by signal {sig}"),
            _ => String::new(),
        };
        Ok(ToolOutput::tainted(text, TaintLabel::Process).with_audit_note(note))
    }
    fn example_args(&self) -> Value {
        json!({"argv": ["echo", "hi"]})
    }
}
