//! SafeHttp: the one outbound HTTP client agents can influence.
//!
//! Every URL an agent asks for (and every redirect the server answers with)
//! goes through the same decision, [`SafeHttp::check_url`]: WHATWG parsing
//! with the `url` crate (so `http://2130706433/`, `0x7f.1` and `0177.0.0.1`
//! are normalized to `127.0.0.1` *before* the check, exactly as a browser or
//! HTTP client would read them), http/https only, no userinfo, the egress
//! allowlist, the special-purpose address table (`data/special-purpose.tsv`)
//! for IP literals, and cloud metadata host names.
//! Host names are checked again when they resolve: the resolver refuses
//! names whose addresses fall in the table, so `localhost` or a rebinding
//! domain cannot be used to reach loopback. The client ignores proxy
//! environment variables and never follows redirects on its own.
//!
//! A later issue pins the connection to the checked address and adds
//! credential injection; the public surface here is meant to stay.
#![forbid(unsafe_code)]

mod ip;
mod policy;

use std::collections::BTreeSet;
use std::error::Error as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

pub use ip::{forbidden_host, forbidden_range};
use policy::Rule;

/// URLs in error messages are cut to this many characters so a hostile,
/// huge URL cannot flood logs or the model's context.
const MAX_URL_IN_ERROR: usize = 512;

/// Which hosts may be contacted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    /// Exact hosts (`api.example.com`) or `*.suffix` (which also covers the
    /// bare suffix). Case-insensitive. Empty allows nothing.
    pub allowed_domains: Vec<String>,
    /// Any host passes the allowlist. Scheme, userinfo and address checks
    /// still apply.
    pub allow_all: bool,
}

/// Bounds on one [`SafeHttp::get`], redirects included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    pub connect_timeout: Duration,
    /// Deadline for the whole request chain, body included.
    pub total_timeout: Duration,
    pub max_body_bytes: usize,
    pub max_redirects: u8,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            connect_timeout: Duration::from_secs(10),
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
}

/// The HTTP client handed to tools that the session allows to fetch.
#[derive(Debug)]
pub struct SafeHttp {
    rules: Vec<Rule>,
    allow_all: bool,
    limits: HttpLimits,
    client: reqwest::Client,
    loopback_ports: BTreeSet<u16>,
}

fn clip(url: &str) -> String {
    match url.char_indices().nth(MAX_URL_IN_ERROR) {
        Some((i, _)) => format!("{}...", &url[..i]),
        None => url.to_string(),
    }
}

impl SafeHttp {
    /// Compile the policy (a malformed rule fails closed with its text) and
    /// build a client that ignores `*_PROXY` variables, follows no redirects
    /// itself and resolves names through the address-checking resolver.
    pub fn new(policy: EgressPolicy, limits: HttpLimits) -> Result<SafeHttp, NetError> {
        let rules = policy
            .allowed_domains
            .iter()
            .map(|r| Rule::parse(r))
            .collect::<Result<Vec<_>, _>>()?;
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(limits.connect_timeout)
            .timeout(limits.total_timeout)
            .dns_resolver(CheckingResolver)
            .user_agent(concat!("bulwark/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NetError::Transport {
                url: String::new(),
                detail: format!("could not build the HTTP client: {}", error_chain(&e)),
            })?;
        Ok(SafeHttp {
            rules,
            allow_all: policy.allow_all,
            limits,
            client,
            loopback_ports: BTreeSet::new(),
        })
    }

    /// Operator override: allow exactly `127.0.0.1:<port>` (and nothing else
    /// on loopback), bypassing the allowlist and address table for that one
    /// pair. Meant for tests and for an operator who deliberately exposes one
    /// local service; never wire it to anything an agent controls. Host
    /// names (`localhost`) are still refused.
    pub fn allow_loopback_port_for_tests(&mut self, port: u16) {
        self.loopback_ports.insert(port);
    }

    /// The full pre-flight decision for `url`, without sending anything.
    pub fn check_url(&self, url: &str) -> Result<Url, NetError> {
        let parsed = Url::parse(url).map_err(|e| NetError::InvalidUrl {
            url: clip(url),
            detail: e.to_string(),
        })?;
        self.check_parsed(parsed)
    }

    fn check_parsed(&self, url: Url) -> Result<Url, NetError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(NetError::Scheme {
                url: clip(url.as_str()),
            });
        }
        if !url.username().is_empty() || url.password().is_some() {
            // Never echo the credentials back into a message.
            let mut shown = url.clone();
            let _ = shown.set_username("");
            let _ = shown.set_password(None);
            return Err(NetError::Userinfo {
                url: clip(shown.as_str()),
            });
        }
        let host_str = url.host_str().unwrap_or_default().to_string();
        let addr = match url.host() {
            None => {
                return Err(NetError::InvalidUrl {
                    url: clip(url.as_str()),
                    detail: "no host".into(),
                });
            }
            Some(Host::Domain(d)) => {
                if let Some(range) = forbidden_host(d) {
                    return Err(NetError::ForbiddenAddress {
                        host: host_str.clone(),
                        addr: host_str,
                        range,
                    });
                }
                None
            }
            Some(Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
            Some(Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
        };
        if let (Some(IpAddr::V4(v4)), Some(port)) = (addr, url.port_or_known_default())
            && v4 == Ipv4Addr::LOCALHOST
            && self.loopback_ports.contains(&port)
        {
            return Ok(url);
        }
        if let Some(ip) = addr
            && let Some(range) = forbidden_range(ip)
        {
            return Err(NetError::ForbiddenAddress {
                host: host_str,
                addr: ip.to_string(),
                range,
            });
        }
        if !self.allow_all && !self.rules.iter().any(|r| r.matches(&host_str)) {
            let rule = if self.rules.is_empty() {
                "the allowlist is empty".to_string()
            } else {
                "no allowlist rule matches".to_string()
            };
            return Err(NetError::NotAllowed {
                host: host_str,
                rule,
            });
        }
        Ok(url)
    }

    /// GET `url`, following up to `max_redirects` redirects (each hop fully
    /// re-checked). A body longer than `max_body_bytes` is cut there and
    /// `truncated` is set: for an agent reading a page, a prefix is useful.
    pub async fn get(&self, url: &str) -> Result<HttpResponse, NetError> {
        self.get_with(url, false).await
    }

    /// Like [`SafeHttp::get`], but a body over `max_body_bytes` is an error
    /// ([`NetError::TooLarge`]) instead of a prefix: for callers that need
    /// the whole document (a download to verify, a JSON to parse).
    pub async fn get_complete(&self, url: &str) -> Result<HttpResponse, NetError> {
        self.get_with(url, true).await
    }

    async fn get_with(&self, url: &str, complete: bool) -> Result<HttpResponse, NetError> {
        match tokio::time::timeout(self.limits.total_timeout, self.fetch(url, complete)).await {
            Ok(r) => r,
            Err(_) => Err(NetError::Timeout { url: clip(url) }),
        }
    }

    async fn fetch(&self, url: &str, complete: bool) -> Result<HttpResponse, NetError> {
        let mut current = self.check_url(url)?;
        let mut hops: u8 = 0;
        loop {
            let mut resp = self
                .client
                .get(current.clone())
                .send()
                .await
                .map_err(|e| map_reqwest(&current, &e))?;
            let status = resp.status().as_u16();
            let location = resp.headers().get(reqwest::header::LOCATION).cloned();
            if let (true, Some(location)) = (is_followed_redirect(status), location) {
                if hops >= self.limits.max_redirects {
                    return Err(NetError::TooManyRedirects {
                        url: clip(current.as_str()),
                    });
                }
                let location = location.to_str().map_err(|_| NetError::InvalidUrl {
                    url: clip(current.as_str()),
                    detail: "redirect Location header is not valid ASCII".into(),
                })?;
                current = self.check_parsed(next_hop(&current, location)?)?;
                hops += 1;
                continue;
            }
            let content_type = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let limit = self.limits.max_body_bytes;
            let mut body = Vec::new();
            let mut truncated = false;
            while let Some(chunk) = resp.chunk().await.map_err(|e| map_reqwest(&current, &e))? {
                let room = limit - body.len();
                if chunk.len() > room {
                    if complete {
                        return Err(NetError::TooLarge {
                            url: clip(current.as_str()),
                            limit,
                        });
                    }
                    body.extend_from_slice(&chunk[..room]);
                    truncated = true;
                    // Stop reading: dropping the response closes the stream.
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            return Ok(HttpResponse {
                status,
                final_url: current.to_string(),
                content_type,
                body,
                truncated,
            });
        }
    }
}

/// Statuses whose `Location` we follow (always with GET, no body).
fn is_followed_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Resolve a redirect target against the current URL and refuse an
/// https→http downgrade (which would expose the request to the network).
/// The result still has to pass [`SafeHttp::check_url`]'s checks.
fn next_hop(current: &Url, location: &str) -> Result<Url, NetError> {
    let next = current.join(location).map_err(|e| NetError::InvalidUrl {
        url: clip(location),
        detail: format!("bad redirect target from {}: {e}", clip(current.as_str())),
    })?;
    if current.scheme() == "https" && next.scheme() == "http" {
        return Err(NetError::Downgrade {
            url: clip(next.as_str()),
        });
    }
    Ok(next)
}

/// Raised inside the resolver; found again in the reqwest error's source
/// chain and turned into [`NetError::ForbiddenAddress`].
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves to {addr} in {range}")]
struct ResolvedForbidden {
    host: String,
    addr: IpAddr,
    range: String,
}

/// System resolver that fails closed: if *any* address of a name is in the
/// special-purpose table, the whole name is refused (an attacker-controlled
/// DNS answer mixing a public and a private address must not get through).
struct CheckingResolver;

impl Resolve for CheckingResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            if let Some(range) = forbidden_host(&host) {
                return Err(format!("{host} is refused: {range}").into());
            }
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if addrs.is_empty() {
                return Err(format!("{host} did not resolve to any address").into());
            }
            if let Some((addr, range)) = addrs
                .iter()
                .find_map(|a| forbidden_range(a.ip()).map(|r| (a.ip(), r)))
            {
                return Err(Box::new(ResolvedForbidden { host, addr, range }) as _);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        src = s.source();
    }
    out
}

fn map_reqwest(url: &Url, e: &reqwest::Error) -> NetError {
    let mut src: Option<&(dyn std::error::Error + 'static)> = e.source();
    while let Some(s) = src {
        if let Some(f) = s.downcast_ref::<ResolvedForbidden>() {
            return NetError::ForbiddenAddress {
                host: f.host.clone(),
                addr: f.addr.to_string(),
                range: f.range.clone(),
            };
        }
        src = s.source();
    }
    if e.is_timeout() {
        return NetError::Timeout {
            url: clip(url.as_str()),
        };
    }
    NetError::Transport {
        url: clip(url.as_str()),
        detail: error_chain(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
