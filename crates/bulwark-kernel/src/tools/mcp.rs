//! One pinned tool of an MCP server as a door tool: domain `mcp:<server>`,
//! operation = the server's tool name, results labelled `mcp`.
//!
//! What the model is shown (name, description, schema) comes from the pin
//! file, never from the live server: a server that changes what a tool
//! says it does is refused before the call (see `crate::mcp_hub`). The
//! arguments are the server's business; the door's check is the domain and
//! operation (and approvals, taint, loop guard, credits, audit), so a call
//! demands nothing further.

use crate::tool::{ParsedCall, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use bulwark_mcp::pins::ToolPin;
use bulwark_policy::mcp::mcp_domain;
use bulwark_policy::{Demand, TaintLabel};
use serde_json::{Map, Value, json};
use std::borrow::Cow;

/// Largest serialized arguments sent to a server.
pub(crate) const MAX_ARGS_BYTES: usize = 256 * 1024;

pub(crate) struct McpTool {
    spec: ToolSpec,
    schema: Value,
}

impl McpTool {
    /// The tool `tool` of server `server` as pinned; `None` when its name
    /// cannot be shown to a model.
    pub(crate) fn new(server: &str, tool: &str, pin: &ToolPin) -> Option<Self> {
        let name = bulwark_mcp::vet::model_tool_name(server, tool)?;
        Some(Self {
            spec: ToolSpec {
                name: Cow::Owned(name),
                domain: Cow::Owned(mcp_domain(server)),
                operation: Cow::Owned(tool.to_string()),
                description: Cow::Owned(pin.description.clone()),
            },
            schema: provider_schema(&pin.input_schema),
        })
    }
}

/// A server's input schema as every provider accepts it (see
/// [`crate::tool_args::schema_for`]): an object schema with `properties`,
/// without `$schema`, `$id` or `title`. Anything that is not an object
/// schema is replaced by an open object (the server still validates).
pub(crate) fn provider_schema(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return json!({"type": "object", "properties": {}});
    };
    if map.get("type").is_some_and(|t| t != "object") {
        return json!({"type": "object", "properties": {}});
    }
    let mut map = map.clone();
    for key in ["$schema", "$id", "title"] {
        map.remove(key);
    }
    map.insert("type".into(), Value::String("object".into()));
    if !map.get("properties").is_some_and(Value::is_object) {
        map.insert("properties".into(), Value::Object(Map::new()));
    }
    Value::Object(map)
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn parse<'t>(&'t self, args: &Value) -> Result<Box<dyn ParsedCall + 't>, ToolError> {
        let Value::Object(map) = args else {
            return Err(ToolError::InvalidArgs(
                "arguments must be a JSON object".into(),
            ));
        };
        let size = serde_json::to_vec(args)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_ARGS_BYTES {
            return Err(ToolError::InvalidArgs(format!(
                "the arguments are {size} bytes; at most {MAX_ARGS_BYTES} are sent to an MCP server"
            )));
        }
        Ok(Box::new(McpCall {
            tool: &self.spec.operation,
            args: map.clone(),
        }))
    }
    fn example_args(&self) -> Value {
        json!({})
    }
}

struct McpCall<'t> {
    tool: &'t str,
    args: Map<String, Value>,
}

#[async_trait::async_trait]
impl ParsedCall for McpCall<'_> {
    fn demands(&self) -> &[Demand] {
        &[]
    }
    async fn call(self: Box<Self>, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mcp = ctx.mcp()?;
        let outcome = mcp.call(self.tool, self.args).await?;
        let text = mcp.redact(&outcome.text);
        let bytes = text.len();
        // A tool error's text is the server's too: labelled like a result.
        let (content, note) = if outcome.is_error {
            (
                format!("the tool reported an error:\n{text}"),
                format!("{bytes} bytes; the tool reported an error"),
            )
        } else {
            (text, format!("{bytes} bytes"))
        };
        Ok(ToolOutput::tainted(content, TaintLabel::Mcp).with_audit_note(note))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_become_object_schemas_providers_accept() {
        let s = provider_schema(&json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args",
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"]
        }));
        assert_eq!(
            s,
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
        );
        assert_eq!(
            provider_schema(&json!({"type": "object"})),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            provider_schema(&json!({"type": "array"})),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            provider_schema(&json!("nonsense")),
            json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn arguments_must_be_a_bounded_object() {
        let pin = ToolPin {
            description: "echo".into(),
            input_schema: json!({"type": "object"}),
            digest: String::new(),
        };
        let tool = McpTool {
            spec: ToolSpec {
                name: "mcp__x__echo".into(),
                domain: "mcp:x".into(),
                operation: "echo".into(),
                description: pin.description.clone().into(),
            },
            schema: provider_schema(&pin.input_schema),
        };
        assert!(matches!(
            tool.parse(&json!(["a"])),
            Err(ToolError::InvalidArgs(_))
        ));
        let big = "x".repeat(MAX_ARGS_BYTES);
        assert!(matches!(
            tool.parse(&json!({"text": big})),
            Err(ToolError::InvalidArgs(_))
        ));
        let parsed = tool
            .parse(&json!({"text": "hi"}))
            .expect("an object parses");
        assert!(parsed.demands().is_empty());
    }
}
