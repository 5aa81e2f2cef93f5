//! `web` domain: fetch a URL through the one egress client.

use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSpec, arg_str, check_keys};
use bulwark_policy::{Demand, TaintLabel};
use serde_json::{Value, json};

/// The host and port a URL will connect to, parsed by the WHATWG parser the
/// egress client also uses, so the door checks what will really be dialled.
fn target(url: &str) -> Result<(String, u16), ToolError> {
    let parsed = url::Url::parse(url)
        .map_err(|e| ToolError::InvalidArgs(format!("`url` is not a valid URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ToolError::Egress(format!(
            "scheme `{}` is not allowed; use http or https",
            parsed.scheme()
        )));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| ToolError::InvalidArgs("`url` has no host".into()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| ToolError::InvalidArgs("`url` has no port".into()))?;
    Ok((host, port))
}

pub struct WebFetch {
    spec: ToolSpec,
}

impl WebFetch {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "web_fetch",
                domain: "web",
                operation: "fetch",
                description: "Fetch an http(s) URL and return its text. Only hosts the agent was granted are reachable.",
                input_schema: json!({"type":"object","properties":{"url":{"type":"string"}},"required":["url"],"additionalProperties":false}),
            },
        }
    }
}

#[async_trait::async_trait]
impl crate::tool::Tool for WebFetch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &Value) -> Result<Vec<Demand>, ToolError> {
        check_keys(args, &["url"])?;
        let (host, port) = target(arg_str(args, "url")?)?;
        Ok(vec![Demand::NetConnect { host, port }])
    }
    async fn call(&self, ctx: &ToolContext, args: &Value) -> Result<ToolOutput, ToolError> {
        let url = arg_str(args, "url")?;
        let response = ctx.http()?.get(url).await?;
        let mut text = format!(
            "HTTP {} {}\ncontent-type: {}\n\n",
            response.status,
            response.final_url,
            response.content_type.as_deref().unwrap_or("unknown")
        );
        text.push_str(&String::from_utf8_lossy(&response.body));
        if response.truncated {
            text.push_str("\n(body truncated)");
        }
        Ok(ToolOutput::tainted(text, TaintLabel::External))
    }
    fn example_args(&self) -> Value {
        json!({"url": "https://example.com/"})
    }
}
