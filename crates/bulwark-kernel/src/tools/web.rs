//! `web` domain: fetch a URL through the one egress client.

use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool};
use bulwark_policy::injection::{ContentKind, Finding, FindingKind, scan};
use bulwark_policy::{Demand, TaintLabel};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// `web_fetch`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebFetchArgs {
    /// an http(s) URL
    url: String,
    /// extra request headers; write ${KEY_NAME} to place a granted credential
    headers: Option<Headers>,
}

impl WebFetchArgs {
    /// The request's method: `web_fetch` has no argument for another.
    fn method(&self) -> &'static str {
        "GET"
    }
    /// The request's body: `web_fetch` has no argument for one.
    fn body(&self) -> &[u8] {
        &[]
    }
}

/// Whether a request with `method` and `body` sends something to its host
/// beyond the URL and headers.
fn sends_body(method: &str, body: &[u8]) -> bool {
    !body.is_empty() || !matches!(method.to_ascii_uppercase().as_str(), "GET" | "HEAD")
}

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
    connect_target(&parsed).ok_or_else(|| {
        ToolError::InvalidArgs("`url` has no host or no port; write a full http(s) URL".into())
    })
}

/// The one spelling of "where this URL connects" that the door's demand and
/// the scoped client's re-check both use: a domain in lower case, an IP
/// address as the address (an IPv6 literal without its URL brackets, as
/// grants write it), and the port, explicit or the scheme's default.
pub(crate) fn connect_target(parsed: &url::Url) -> Option<(String, u16)> {
    let host = match parsed.host()? {
        url::Host::Domain(d) => d.to_ascii_lowercase(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => ip.to_string(),
    };
    Some((host, parsed.port_or_known_default()?))
}

const MAX_HEADERS: usize = 20;
const MAX_HEADER_BYTES: usize = 8 * 1024;

/// The optional `headers` argument: names to string values, bounded.
/// (Names and values are validated again by the client.)
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(try_from = "BTreeMap<String, String>")]
#[schemars(extend("maxProperties" = MAX_HEADERS))]
struct Headers(Vec<(String, String)>);

impl TryFrom<BTreeMap<String, String>> for Headers {
    type Error = String;
    fn try_from(map: BTreeMap<String, String>) -> Result<Self, String> {
        if map.len() > MAX_HEADERS {
            return Err(format!("has {} entries; at most {MAX_HEADERS}", map.len()));
        }
        if let Some((k, _)) = map
            .iter()
            .find(|(k, v)| k.len() + v.len() > MAX_HEADER_BYTES)
        {
            return Err(format!(
                "header `{k}` is longer than {MAX_HEADER_BYTES} bytes"
            ));
        }
        Ok(Self(map.into_iter().collect()))
    }
}

/// Width HTML is wrapped to when rendered as text.
const HTML_WIDTH: usize = 100;

/// What of a response body the model is shown. HTML becomes readable text
/// (scripts, styles and markup dropped, by html5ever via `html2text`);
/// other text-like types pass through; anything else (images, archives,
/// executables, PDFs) is summarized, never handed to the model as bytes.
/// The flag says whether the body was HTML.
fn render(content_type: Option<&str>, body: &[u8]) -> (String, bool) {
    let essence = content_type
        .and_then(|t| t.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let looks_textual = !body.contains(&0) && std::str::from_utf8(body).is_ok();
    let is_html = matches!(essence.as_str(), "text/html" | "application/xhtml+xml")
        || (essence.is_empty() && looks_textual && sniff_html(body));
    if is_html {
        let text = match html2text::from_read(body, HTML_WIDTH) {
            Ok(text) => text,
            Err(err) => format!("[HTML that could not be rendered as text: {err}]"),
        };
        return (text, true);
    }
    let text_like = essence.starts_with("text/")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-ndjson"
                | "application/yaml"
                | "application/toml"
        )
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || (essence.is_empty() && looks_textual);
    let text = if text_like {
        String::from_utf8_lossy(body).into_owned()
    } else {
        let kind = if essence.is_empty() {
            "unknown type"
        } else {
            essence.as_str()
        };
        format!(
            "[{} bytes of {kind} not shown: only text content is passed to the model]",
            body.len()
        )
    };
    (text, false)
}

fn sniff_html(body: &[u8]) -> bool {
    let head: Vec<u8> = body
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take(15)
        .map(u8::to_ascii_lowercase)
        .collect();
    head.starts_with(b"<!doctype html") || head.starts_with(b"<html")
}

pub struct WebFetch {
    spec: ToolSpec,
}

impl WebFetch {
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::fixed(
                "web_fetch",
                "web",
                "fetch",
                "Fetch an http(s) URL and return its text. Only hosts the agent was granted are reachable. Credentials granted for a host are added automatically; to place one yourself, write ${KEY_NAME} in a header value (never the secret itself: requests carrying secret values are refused).",
            ),
        }
    }
}

#[async_trait::async_trait]
impl TypedTool for WebFetch {
    type Args = WebFetchArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, args: &WebFetchArgs) -> Result<Vec<Demand>, ToolError> {
        let (host, port) = target(&args.url)?;
        Ok(vec![Demand::NetConnect { host, port }])
    }
    /// A request with a body, or with a method other than GET or HEAD,
    /// sends something: a taint sink even to a host already fetched.
    /// `web_fetch` only ever sends a body-less GET ([`ScopedHttp`] has no
    /// other request), so none of its calls does.
    ///
    /// [`ScopedHttp`]: crate::ScopedHttp
    fn sends_body(&self, args: &WebFetchArgs) -> bool {
        sends_body(args.method(), args.body())
    }
    async fn call(&self, ctx: &ToolContext, args: WebFetchArgs) -> Result<ToolOutput, ToolError> {
        let http = ctx.http()?;
        let headers = args.headers.map(|h| h.0).unwrap_or_default();
        let response = http.get_with_headers(&args.url, headers).await?;
        let mut text = format!(
            "HTTP {} {}\ncontent-type: {}\n\n",
            response.status,
            response.final_url,
            response.content_type.as_deref().unwrap_or("unknown")
        );
        let (rendered, is_html) = render(response.content_type.as_deref(), &response.body);
        text.push_str(&rendered);
        // Rendering drops comments and CSS-hidden elements, so the model
        // never sees them verbatim, but a page hides its instructions there:
        // the raw HTML is scanned for hidden text before it is dropped.
        let hidden: Vec<Finding> = if is_html {
            scan(&String::from_utf8_lossy(&response.body), ContentKind::Html)
                .into_iter()
                .filter(|f| f.kind == FindingKind::HiddenText)
                .collect()
        } else {
            Vec::new()
        };
        if response.truncated {
            text.push_str("\n(body truncated)");
        }
        // A server may echo back the credential it was sent.
        Ok(ToolOutput::tainted(http.redact(&text), TaintLabel::External).with_findings(hidden))
    }
    fn example_args(&self) -> Value {
        json!({"url": "https://example.com/"})
    }
}

#[cfg(test)]
mod tests {
    use super::{WebFetch, render, sends_body};
    use crate::tool::Tool;
    use serde_json::json;

    #[test]
    fn only_a_body_or_a_method_that_sends_one_makes_a_request_send() {
        assert!(!sends_body("GET", b""));
        assert!(!sends_body("head", b""));
        assert!(sends_body("GET", b"x"));
        for method in ["POST", "PUT", "PATCH", "DELETE", "post"] {
            assert!(sends_body(method, b""), "{method}");
        }
        // A web_fetch call is a body-less GET, headers or not.
        let tool = WebFetch::new();
        for args in [
            json!({"url": "https://example.com/?q=1"}),
            json!({"url": "https://example.com/", "headers": {"x-a": "b"}}),
        ] {
            assert!(!tool.parse(&args).unwrap().sends_body(), "{args}");
        }
    }

    #[test]
    fn html_becomes_text_without_scripts_or_markup() {
        let page = b"<html><head><style>p{color:red}</style><script>steal()</script></head>\
<body><h1>Title</h1><p>The code is <b>BLUE HERON</b>.</p></body></html>";
        let text = render(Some("text/html; charset=utf-8"), page).0;
        assert!(text.contains("BLUE HERON"), "{text}");
        assert!(
            !text.contains("<b>") && !text.contains("steal()") && !text.contains("color:red"),
            "{text}"
        );
    }

    #[test]
    fn binary_types_are_summarized_not_shown() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        let text = render(Some("image/png"), png).0;
        assert!(
            text.contains("image/png") && text.contains("not shown"),
            "{text}"
        );
        let text = render(None, png).0;
        assert!(text.contains("not shown"), "{text}");
        let text = render(Some("application/octet-stream"), b"plain?").0;
        assert!(text.contains("not shown"), "{text}");
    }

    #[test]
    fn text_like_types_pass_through() {
        assert_eq!(
            render(Some("application/json"), b"{\"a\":1}").0,
            "{\"a\":1}"
        );
        assert_eq!(render(Some("application/problem+json"), b"{}").0, "{}");
        assert_eq!(render(Some("text/plain"), b"hi").0, "hi");
        assert_eq!(render(None, b"just text").0, "just text");
        assert!(
            render(None, b"<!DOCTYPE html><p>x</p>")
                .0
                .trim()
                .starts_with('x')
        );
    }
}
