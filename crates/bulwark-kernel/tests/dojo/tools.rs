//! One scripted Bulwark tool per AgentDojo function. A call returns the
//! output the harness queued for it, labelled `external` (everything an
//! AgentDojo tool returns comes from mail, chats, web pages, reviews: none
//! of it is the operator's). `get_webpage` and `post_webpage` are tools of
//! the `web` domain with the `fetch` operation and the host they name as a
//! demand, so Bulwark's own `web:fetch` sink rule judges them.

use super::trace::{Kind, Suite};
use bulwark_kernel::{
    ParsedCall, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec,
};
use bulwark_policy::{Demand, TaintLabel};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// The output the next call returns; the replay is sequential.
pub type Slot = Arc<Mutex<Option<String>>>;

struct DojoTool {
    spec: ToolSpec,
    web: bool,
    slot: Slot,
}

struct DojoCall {
    demands: Vec<Demand>,
    body: bool,
    slot: Slot,
}

/// A name that lives as long as the test binary (a `ToolSpec` holds
/// `&'static str`); each suite's names are made once.
fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

/// The registry of one suite's functions, all sharing `slot`.
pub fn registry(suite: &Suite, slot: &Slot) -> ToolRegistry {
    let mut registry = ToolRegistry::default();
    for function in &suite.functions {
        let name = leak(&function.name);
        let web = function.kind == Kind::Web;
        let (domain, operation) = if web {
            ("web", "fetch")
        } else {
            ("dojo", name)
        };
        registry.register(Arc::new(DojoTool {
            spec: ToolSpec::fixed(name, domain, operation, "AgentDojo function, scripted"),
            web,
            slot: slot.clone(),
        }));
    }
    registry
}

/// The host and port a URL as AgentDojo writes it (`www.example.com/x`,
/// with or without a scheme) connects to.
pub fn target(url: &str) -> Option<(String, u16)> {
    let (rest, port) = match url.split_once("://") {
        Some(("http", rest)) => (rest, 80),
        Some((_, rest)) => (rest, 443),
        None => (url, 443),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, p)) => (host, p.parse().ok()?),
        None => (authority, port),
    };
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

#[async_trait::async_trait]
impl Tool for DojoTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn parse<'t>(&'t self, args: &Value) -> Result<Box<dyn ParsedCall + 't>, ToolError> {
        let mut demands = Vec::new();
        let mut body = false;
        if self.web {
            let url = args
                .get("url")
                .and_then(Value::as_str)
                .ok_or_else(|| ToolError::InvalidArgs("`url` is missing".into()))?;
            let (host, port) = target(url)
                .ok_or_else(|| ToolError::InvalidArgs(format!("`url` {url:?} names no host")))?;
            demands.push(Demand::NetConnect { host, port });
            body = args.get("content").is_some();
        }
        Ok(Box::new(DojoCall {
            demands,
            body,
            slot: self.slot.clone(),
        }))
    }
    fn example_args(&self) -> Value {
        if self.web {
            json!({"url": "www.example.com"})
        } else {
            json!({})
        }
    }
}

#[async_trait::async_trait]
impl ParsedCall for DojoCall {
    fn demands(&self) -> &[Demand] {
        &self.demands
    }
    fn sends_body(&self) -> bool {
        self.body
    }
    async fn call(self: Box<Self>, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let text = self
            .slot
            .lock()
            .unwrap()
            .take()
            .ok_or_else(|| ToolError::Failed("the replay queued no output".into()))?;
        Ok(ToolOutput::tainted(text, TaintLabel::External))
    }
}

#[test]
fn urls_name_their_host() {
    assert_eq!(target("www.a.com/x"), Some(("www.a.com".into(), 443)));
    assert_eq!(target("http://A.com:8080/"), Some(("a.com".into(), 8080)));
    assert_eq!(target("https://a.com?q"), Some(("a.com".into(), 443)));
    assert_eq!(target("/x"), None);
}
