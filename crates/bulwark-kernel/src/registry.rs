//! The set of tools a kernel can dispatch to.

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
