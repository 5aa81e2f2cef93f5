//! SafeHttp: the one outbound HTTP client agents can influence.
//!
//! Every URL an agent asks for (and every redirect the server answers with)
//! goes through the same decision, [`SafeHttp::check_url`]: WHATWG parsing
//! with the `url` crate (so `http://2130706433/`, `0x7f.1` and `0177.0.0.1`
//! are normalized to `127.0.0.1` *before* the check, exactly as a browser or
//! HTTP client would read them), http/https only, no userinfo, the egress
//! allowlist, the special-purpose address table (`data/special-purpose.tsv`)
//! for IP literals, and cloud metadata host names.
//!
//! Then the connection (see `transport.rs`): one lookup through a
//! [`Resolver`] whose every answer is checked, a connect to exactly those
//! addresses, and a check of the connected socket's peer address before the
//! first TLS or HTTP byte. No HTTP stack ever resolves a name on its own,
//! proxies are never used, and redirects are followed here, one checked hop
//! at a time.
#![forbid(unsafe_code)]

mod check;
mod credentials;
mod dial;
mod ip;
mod matcher;
mod policy;
mod proxy;
mod resolve;
mod secrets;
mod transport;
mod tunnel;

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use url::Url;

pub use credentials::{CallContext, CredentialUse, Credentials, UseOutcome};
pub use dial::{Dialer, TcpDialer};
pub use ip::{forbidden_host, forbidden_range};
use policy::Rule;
pub use proxy::{
    EgressProxy, ProxyConfig, ProxyEvent, ProxyLimits, ProxyObserver, ProxyRequestKind,
};
pub use resolve::{Resolver, StaticResolver, SystemResolver};
pub use secrets::{MIN_FUZZY_SECRET_ALNUM, MIN_GUARDED_SECRET_LEN, SecretStore, redact_value};

/// URLs in error messages are cut to this many characters so a hostile,
/// huge URL cannot flood logs or the model's context.
const MAX_URL_IN_ERROR: usize = 512;

/// Longest URL accepted (from a tool or a redirect). Far above any real
/// page address, far below what would let a URL smuggle a document out.
pub const MAX_URL_BYTES: usize = 8 * 1024;

/// Longest host name (RFC 1035: 253 characters in presentation form).
const MAX_HOST_BYTES: usize = 253;

/// Parse with the WHATWG parser after the length bound.
pub(crate) fn parse_url(url: &str) -> Result<Url, NetError> {
    if url.len() > MAX_URL_BYTES {
        return Err(NetError::InvalidUrl {
            url: clip(url),
            detail: format!(
                "{} bytes long; URLs are limited to {MAX_URL_BYTES} bytes",
                url.len()
            ),
        });
    }
    Url::parse(url).map_err(|e| NetError::InvalidUrl {
        url: clip(url),
        detail: e.to_string(),
    })
}

/// Which hosts may be contacted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    /// Exact hosts (`api.example.com`) or `*.suffix` (which also covers the
    /// bare suffix), each optionally limited to one port (`host:8443`,
    /// `[::1]:8080`, `*.suffix:443`, `*:443`; `host:*` is any port). The
    /// port is compared with the URL's port or its scheme's default, on
    /// the first request and on every redirect hop alike. Case-insensitive.
    /// Empty allows nothing.
    pub allowed_domains: Vec<String>,
    /// Any host passes the allowlist. Scheme, userinfo and address checks
    /// still apply.
    pub allow_all: bool,
}

/// Bounds on one [`SafeHttp::get`], redirects included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Per address tried.
    pub connect_timeout: Duration,
    /// From the connected socket to the response head: TLS handshake,
    /// request, and the server's answer line and headers.
    pub first_byte_timeout: Duration,
    /// Deadline for the whole request chain, body included.
    pub total_timeout: Duration,
    /// Cap on the body as received and, separately, as decompressed.
    pub max_body_bytes: usize,
    pub max_redirects: u8,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(20),
            total_timeout: Duration::from_secs(30),
            max_body_bytes: 2 * 1024 * 1024,
            max_redirects: 5,
        }
    }
}

/// A completed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    /// The URL of the last hop, after redirects.
    pub final_url: String,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// True if the body was cut at `max_body_bytes` (by [`SafeHttp::get`]).
    pub truncated: bool,
    /// The last hop's response headers as received. `body` is decoded, so
    /// `Content-Encoding` and `Content-Length` describe the wire, not it.
    pub headers: http::HeaderMap,
}

/// Why a request was refused or failed. Each message names the URL or host
/// and what would make it acceptable.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("invalid URL {url:?}: {detail}")]
    InvalidUrl { url: String, detail: String },
    #[error("invalid egress rule {rule:?}: {detail}")]
    InvalidRule { rule: String, detail: String },
    #[error("URL {url:?} uses a scheme other than http or https; only http(s) URLs can be fetched")]
    Scheme { url: String },
    #[error(
        "URL {url:?} contains a user name or password; credentials in URLs are refused, remove them"
    )]
    Userinfo { url: String },
    #[error(
        "host {host:?} is not allowed by the egress policy ({rule}); ask the operator to add it to allowed_domains"
    )]
    NotAllowed { host: String, rule: String },
    #[error("host {host:?} is or resolves to {addr}, in {range}, which agents may never reach")]
    ForbiddenAddress {
        host: String,
        addr: String,
        range: String,
    },
    #[error("too many redirects, last at {url:?}; fetch the final URL directly")]
    TooManyRedirects { url: String },
    #[error("redirect from https to plain http ({url:?}) refused; fetch an https URL")]
    Downgrade { url: String },
    #[error("request to {url:?} timed out")]
    Timeout { url: String },
    #[error("response from {url:?} is larger than the limit of {limit} bytes")]
    TooLarge { url: String, limit: usize },
    #[error("request to {url:?} failed: {detail}")]
    Transport { url: String, detail: String },
    #[error("host {host:?} could not be resolved: {detail}")]
    Resolve { host: String, detail: String },
    #[error(
        "response from {url:?} uses content encoding {encoding:?}, which is not supported (only gzip and deflate)"
    )]
    Encoding { url: String, encoding: String },
    #[error("request header {name:?} is not allowed: {detail}")]
    Header { name: String, detail: String },
    #[error("credential refused: {detail}")]
    Credential { detail: String },
    #[error(
        "tunnel to {host} refused: the program holds secret {key}, and no credential grant sends it to this host for {tool:?}; tunnels are opaque, so the operator must grant {key} to this host (or not give it to the program)"
    )]
    HeldKey {
        host: String,
        key: String,
        tool: String,
    },
    #[error("egress proxy socket {path}: {detail}")]
    Listen { path: String, detail: String },
    #[error(
        "request to {host:?} refused: {place} contains the value of secret {key} (raw or encoded); secrets reach a host only through a credential grant for that host"
    )]
    Exfiltration {
        host: String,
        key: String,
        place: String,
    },
}

/// The HTTP client handed to tools that the session allows to fetch.
pub struct SafeHttp {
    rules: Vec<Rule>,
    allow_all: bool,
    limits: HttpLimits,
    /// Operator overrides: exact (host, port) pairs of internal services.
    internal: BTreeSet<(String, u16)>,
    /// Test-only: `127.0.0.1:<port>` past the allowlist and the table.
    loopback_ports: BTreeSet<u16>,
    resolver: Arc<dyn Resolver>,
    dialer: Arc<dyn Dialer>,
    /// Extra trust anchors (DER), for tests with a local TLS server.
    extra_roots: Vec<Vec<u8>>,
    tls: OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
    credentials: Option<Arc<Credentials>>,
}

impl std::fmt::Debug for SafeHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SafeHttp")
            .field("rules", &self.rules)
            .field("allow_all", &self.allow_all)
            .field("limits", &self.limits)
            .field("internal", &self.internal)
            .field("loopback_ports", &self.loopback_ports)
            .finish_non_exhaustive()
    }
}

pub(crate) fn clip(url: &str) -> String {
    match url.char_indices().nth(MAX_URL_IN_ERROR) {
        Some((i, _)) => format!("{}...", &url[..i]),
        None => url.to_string(),
    }
}

/// One request. Header values and the body are sent as given on the first
/// hop; see [`SafeHttp::send`] for what redirects do to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn get(url: &str) -> Self {
        HttpRequest {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }
}

/// The outcome of [`SafeHttp::send_as`].
#[derive(Debug)]
pub struct Sent {
    pub result: Result<HttpResponse, NetError>,
    pub credentials: Vec<CredentialUse>,
}

/// What to do with a body over `max_body_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyMode {
    /// Keep the first `max_body_bytes` and set `truncated`: for an agent
    /// reading a page, a prefix is useful.
    Prefix,
    /// Fail with [`NetError::TooLarge`]: for a document that must be whole.
    Complete,
}

impl SafeHttp {
    /// Compile the policy (a malformed rule fails closed with its text).
    /// Names resolve through the system resolver and connections are plain
    /// TCP; [`SafeHttp::with_resolver`] and [`SafeHttp::with_dialer`]
    /// substitute them.
    pub fn new(policy: EgressPolicy, limits: HttpLimits) -> Result<SafeHttp, NetError> {
        let rules = policy
            .allowed_domains
            .iter()
            .map(|r| Rule::parse(r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SafeHttp {
            rules,
            allow_all: policy.allow_all,
            limits,
            internal: BTreeSet::new(),
            loopback_ports: BTreeSet::new(),
            resolver: Arc::new(SystemResolver::new()),
            dialer: Arc::new(TcpDialer),
            extra_roots: Vec::new(),
            tls: OnceLock::new(),
            credentials: None,
        })
    }

    /// Resolve names with `resolver` (tests, `net check --resolve`).
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Open connections with `dialer` (tests). The peer-address check
    /// still applies to whatever socket it returns.
    pub fn with_dialer(mut self, dialer: Arc<dyn Dialer>) -> Self {
        self.dialer = dialer;
        self
    }

    /// Inject credentials by these grants, and guard every request against
    /// carrying the store's secret values.
    pub fn with_credentials(mut self, credentials: Arc<Credentials>) -> Self {
        self.credentials = Some(credentials);
        self
    }

    pub fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_deref()
    }

    /// Trust `der` as an extra root certificate (a local TLS test server).
    pub fn add_root_certificate(&mut self, der: Vec<u8>) {
        self.extra_roots.push(der);
        self.tls = OnceLock::new();
    }

    /// Operator override: the internal service at exactly `host:port` may
    /// be reached even though it resolves to (or is) a private address.
    /// The allowlist still applies, and metadata endpoints stay refused.
    /// `host` is compared in the `url` crate's normalized form (lowercase,
    /// punycode, IPv6 in brackets).
    pub fn allow_internal_service(&mut self, host: &str, port: u16) {
        self.internal
            .insert((host.trim_end_matches('.').to_ascii_lowercase(), port));
    }

    /// Test-only allowance: exactly `127.0.0.1:<port>` (and nothing else
    /// on loopback), past the allowlist and the address table for that one
    /// pair. Never wire it to anything an agent controls. Host names
    /// (`localhost`) are still refused.
    pub fn allow_loopback_port_for_tests(&mut self, port: u16) {
        self.loopback_ports.insert(port);
    }

    /// The full pre-flight decision for `url`, without resolving or sending
    /// anything.
    pub fn check_url(&self, url: &str) -> Result<Url, NetError> {
        self.decide(parse_url(url)?).map(|t| t.url)
    }

    /// [`SafeHttp::check_url`] plus the lookup the request would make (one
    /// lookup, every answer checked), still without connecting. Returns the
    /// addresses a request would dial.
    pub async fn check_url_resolved(&self, url: &str) -> Result<Vec<std::net::IpAddr>, NetError> {
        let target = self.decide(parse_url(url)?)?;
        self.addresses(&target).await
    }

    /// GET `url`, following up to `max_redirects` redirects (each hop fully
    /// re-checked); a body over `max_body_bytes` is cut there.
    pub async fn get(&self, url: &str) -> Result<HttpResponse, NetError> {
        self.send(HttpRequest::get(url), BodyMode::Prefix).await
    }

    /// Like [`SafeHttp::get`], but a body over `max_body_bytes` is an error.
    pub async fn get_complete(&self, url: &str) -> Result<HttpResponse, NetError> {
        self.send(HttpRequest::get(url), BodyMode::Complete).await
    }

    /// Send `request`, following redirects. Each hop is checked like the
    /// first (URL, allowlist, every resolved address, the connected peer).
    /// 303, and 301/302 after a POST, turn into a body-less GET; 307/308
    /// keep method and body. On a hop to another origin, `Authorization`,
    /// `Cookie` and `Proxy-Authorization` are dropped.
    pub async fn send(
        &self,
        request: HttpRequest,
        mode: BodyMode,
    ) -> Result<HttpResponse, NetError> {
        self.send_as(&CallContext::default(), request, mode)
            .await
            .result
    }

    /// [`SafeHttp::send`] on behalf of a tool call: credential grants for
    /// `ctx.tool` apply. Returns, with the result, every credential use (by
    /// names), including uses on a chain that then failed, for the audit.
    pub async fn send_as(&self, ctx: &CallContext, request: HttpRequest, mode: BodyMode) -> Sent {
        let url = clip(&request.url);
        let mut uses = Vec::new();
        let fetched = tokio::time::timeout(
            self.limits.total_timeout,
            self.fetch(ctx, request, mode, true, &mut uses),
        )
        .await;
        Sent {
            result: fetched.unwrap_or(Err(NetError::Timeout { url })),
            credentials: uses,
        }
    }

    /// [`SafeHttp::send_as`] for one hop only: a redirect is returned as the
    /// response (status and `Location` in `headers`), not followed. For a
    /// caller that follows redirects itself, each hop through this client
    /// (the egress proxy's programs).
    pub async fn send_once_as(
        &self,
        ctx: &CallContext,
        request: HttpRequest,
        mode: BodyMode,
    ) -> Sent {
        let url = clip(&request.url);
        let mut uses = Vec::new();
        let fetched = tokio::time::timeout(
            self.limits.total_timeout,
            self.fetch(ctx, request, mode, false, &mut uses),
        )
        .await;
        Sent {
            result: fetched.unwrap_or(Err(NetError::Timeout { url })),
            credentials: uses,
        }
    }

    pub fn limits(&self) -> HttpLimits {
        self.limits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::next_hop;

    #[test]
    fn https_to_http_redirect_is_a_downgrade() {
        let cur = Url::parse("https://a.example/x").expect("url");
        assert!(matches!(
            next_hop(&cur, "http://a.example/y"),
            Err(NetError::Downgrade { .. })
        ));
        assert!(next_hop(&cur, "/y").is_ok_and(|u| u.as_str() == "https://a.example/y"));
        assert!(next_hop(&cur, "//b.example/z").is_ok_and(|u| u.scheme() == "https"));
        let plain = Url::parse("http://a.example/x").expect("url");
        assert!(next_hop(&plain, "https://a.example/").is_ok());
    }

    #[test]
    fn long_urls_are_clipped_in_errors() {
        let long = format!("ftp://example.com/{}", "a".repeat(5000));
        let http = SafeHttp::new(EgressPolicy::default(), HttpLimits::default()).expect("client");
        let msg = http
            .check_url(&long)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.len() < 1000, "{}", msg.len());
    }

    #[test]
    fn userinfo_is_not_echoed() {
        let http = SafeHttp::new(EgressPolicy::default(), HttpLimits::default()).expect("client");
        let msg = http
            .check_url("https://user:hunter2@example.com/")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            msg.contains("example.com") && !msg.contains("hunter2"),
            "{msg}"
        );
    }
}
