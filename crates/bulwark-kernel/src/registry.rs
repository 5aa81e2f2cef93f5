//! The set of tools a kernel can dispatch to.

use crate::mcp_hub::{ServerSlot, ShellEgress};
use crate::tool::Tool;
use bulwark_llm::ToolDef;
use bulwark_policy::{EffectivePolicy, ToolCatalog};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    /// Each tool's argument schema, derived once when it is registered.
    schemas: BTreeMap<String, Value>,
    /// The session's MCP servers by name: the door hands a call to
    /// `mcp:<name>` a handle on its server only.
    mcp_servers: BTreeMap<String, Arc<ServerSlot>>,
    /// The session's egress proxy for the shell, if it has shell hosts.
    shell_egress: Option<Arc<ShellEgress>>,
}

impl ToolRegistry {
    /// A registry holding every built-in tool.
    pub fn builtin() -> Self {
        let mut registry = Self::default();
        for tool in crate::tools::builtin_tools() {
            registry.register(tool);
        }
        registry
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.spec().name.to_string();
        self.schemas.insert(name.clone(), tool.input_schema());
        self.tools.insert(name, tool);
    }

    pub(crate) fn register_mcp_server(&mut self, name: &str, slot: Arc<ServerSlot>) {
        self.mcp_servers.insert(name.to_string(), slot);
    }

    /// The MCP server `name` of the session, if it has one.
    pub(crate) fn mcp_server(&self, name: &str) -> Option<&Arc<ServerSlot>> {
        self.mcp_servers.get(name)
    }

    pub(crate) fn set_shell_egress(&mut self, egress: Arc<ShellEgress>) {
        self.shell_egress = Some(egress);
    }

    pub(crate) fn shell_egress(&self) -> Option<&Arc<ShellEgress>> {
        self.shell_egress.as_ref()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values()
    }

    /// Domains and their operations, for policy layering.
    pub fn catalog(&self) -> ToolCatalog {
        let mut domains: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for tool in self.tools.values() {
            let spec = tool.spec();
            domains
                .entry(spec.domain.to_string())
                .or_default()
                .push(spec.operation.to_string());
        }
        ToolCatalog::new(domains)
    }

    /// The tool definitions the model is shown: only tools whose domain and
    /// operation the session's policy allows, so the model is not even told
    /// about the rest (the door still refuses them if it tries).
    pub fn definitions_for(&self, policy: &EffectivePolicy) -> Vec<ToolDef> {
        self.tools
            .values()
            .filter(|t| {
                policy
                    .check_tool(&t.spec().domain, &t.spec().operation)
                    .is_ok()
            })
            .map(|t| ToolDef {
                name: t.spec().name.to_string(),
                description: t.spec().description.to_string(),
                input_schema: self
                    .schemas
                    .get(t.spec().name.as_ref())
                    .cloned()
                    .unwrap_or_else(|| t.input_schema()),
            })
            .collect()
    }
}
