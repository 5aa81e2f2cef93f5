//! `shell` domain: run one program with an argv, never through a shell.

use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSpec, check_keys};
use bulwark_policy::{Demand, TaintLabel};
use serde_json::{Value, json};
use std::fmt::Write as _;

const MAX_ARGS: usize = 256;
const MAX_ARG_LEN: usize = 16 * 1024;

fn argv(args: &Value) -> Result<Vec<String>, ToolError> {
    let list = args
        .get("argv")
        .and_then(Value::as_array)
        .ok_or_else(|| ToolError::InvalidArgs("`argv` must be an array of strings".into()))?;
    if list.is_empty() || list.len() > MAX_ARGS {
        return Err(ToolError::InvalidArgs(format!(
            "`argv` must hold 1 to {MAX_ARGS} strings"
        )));
    }
    list.iter()
        .map(|v| match v.as_str() {
            Some(s) if s.len() <= MAX_ARG_LEN && !s.contains('\0') => Ok(s.to_string()),
            Some(_) => Err(ToolError::InvalidArgs(
                "an argument is too long or contains NUL".into(),
            )),
            None => Err(ToolError::InvalidArgs(
                "`argv` must hold only strings".into(),
            )),
        })
        .collect()
}

pub struct ShellExec {
    spec: ToolSpec,
}

impl ShellExec {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "shell_exec",
                domain: "shell",
                operation: "exec",
                description: "Run a program in the workspace. `argv[0]` is the program, the rest its arguments; no shell interprets them (no pipes, globs or variables). The environment is minimal and holds no credentials.",
                input_schema: json!({"type":"object","properties":{"argv":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["argv"],"additionalProperties":false}),
            },
        }
    }
}

#[async_trait::async_trait]
impl crate::tool::Tool for ShellExec {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError> {
        check_keys(args, &["argv"])?;
        Ok(vec![Demand::ShellExec(argv(args)?)])
    }
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError> {
        let argv = argv(args)?;
        let out = ctx.process()?.run(&argv).await?;
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
