//! `time` domain: the current time, the one tool with no resource to guard.

use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool};
use crate::tool_args::NoArgs;
use bulwark_policy::Demand;
use serde_json::{Value, json};

pub struct TimeNow {
    spec: ToolSpec,
}

impl TimeNow {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "time_now",
                "time",
                "now",
                "The current date and time in UTC (RFC 3339).",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for TimeNow {
    type Args = NoArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, _args: &NoArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(Vec::new())
    }
    async fn call(&self, _ctx: &ToolContext, _args: NoArgs) -> Result<ToolOutput, ToolError> {
        let now = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(|e| ToolError::Failed(format!("cannot format the time: {e}")))?;
        Ok(ToolOutput::text(now))
    }
    fn example_args(&self) -> Value {
        json!({})
    }
}
