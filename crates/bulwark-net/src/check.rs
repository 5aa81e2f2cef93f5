//! The per-hop decision: may this URL be fetched, and which addresses may
//! the connection go to? Pure and synchronous apart from the one lookup, so
//! `check_url` (no I/O at all) and the real request share every rule.

use std::net::{IpAddr, Ipv4Addr};

use url::{Host, Url};

use crate::{NetError, SafeHttp, clip, forbidden_host, forbidden_range, ip::metadata_endpoint};

/// A URL that passed the pre-connect checks.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) url: Url,
    /// The `url` crate's normalized host (IPv6 in brackets).
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The address, when the host is an IP literal.
    pub(crate) literal: Option<IpAddr>,
    /// An operator-declared internal service (exact host:port) or the
    /// test-only loopback allowance: private addresses are permitted for
    /// this pair, metadata endpoints still are not.
    pub(crate) internal: bool,
}

impl SafeHttp {
    pub(crate) fn decide(&self, url: Url) -> Result<Target, NetError> {
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
        let host = url.host_str().unwrap_or_default().to_string();
        if host.len() > crate::MAX_HOST_BYTES {
            return Err(NetError::InvalidUrl {
                url: clip(url.as_str()),
                detail: format!(
                    "the host is {} bytes long; host names are at most {} bytes",
                    host.len(),
                    crate::MAX_HOST_BYTES
                ),
            });
        }
        let port = url.port_or_known_default().unwrap_or(0);
        let literal = match url.host() {
            None => {
                return Err(NetError::InvalidUrl {
                    url: clip(url.as_str()),
                    detail: "no host".into(),
                });
            }
            Some(Host::Domain(d)) => {
                if let Some(range) = forbidden_host(d) {
                    return Err(NetError::ForbiddenAddress {
                        host: host.clone(),
                        addr: host,
                        range,
                    });
                }
                None
            }
            Some(Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
            Some(Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
        };
        let test_port = matches!(
            literal,
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST) | IpAddr::V6(std::net::Ipv6Addr::LOCALHOST))
        ) && self.loopback_ports.contains(&port);
        let internal = test_port
            || self
                .internal
                .contains(&(host.trim_end_matches('.').to_string(), port));
        if let Some(ip) = literal {
            self.check_addr(&host, ip, internal)?;
        }
        if !test_port && !self.allow_all && !self.rules.iter().any(|r| r.matches(&host, port)) {
            return Err(self.not_allowed(&host, port));
        }
        Ok(Target {
            url,
            host,
            port,
            literal,
            internal,
        })
    }

    /// Why `host:port` is not on the allowlist, naming the ports the rules
    /// for this host do allow when only the port is wrong.
    fn not_allowed(&self, host: &str, port: u16) -> NetError {
        if self.rules.is_empty() {
            return NetError::NotAllowed {
                host: host.to_string(),
                rule: "the allowlist is empty".into(),
            };
        }
        let ports: Vec<String> = self
            .rules
            .iter()
            .filter(|r| r.matches_host(host))
            .filter_map(|r| r.port().map(|p| p.to_string()))
            .collect();
        if ports.is_empty() {
            return NetError::NotAllowed {
                host: host.to_string(),
                rule: "no allowlist rule matches".into(),
            };
        }
        NetError::NotAllowed {
            host: format!("{host}:{port}"),
            rule: format!(
                "port {port} is not granted; the rules for this host allow only port {}",
                ports.join(", ")
            ),
        }
    }

    /// The address rule, for literals, resolved answers and connected peers
    /// alike: the special-purpose table, except that an internal pair may
    /// reach private addresses (but never a metadata endpoint).
    pub(crate) fn check_addr(
        &self,
        host: &str,
        ip: IpAddr,
        internal: bool,
    ) -> Result<(), NetError> {
        let refused = if internal {
            metadata_endpoint(ip)
        } else {
            forbidden_range(ip)
        };
        match refused {
            Some(range) => Err(NetError::ForbiddenAddress {
                host: host.to_string(),
                addr: ip.to_string(),
                range,
            }),
            None => Ok(()),
        }
    }

    /// The addresses the connection may go to: the literal, or every answer
    /// of one lookup, each checked. One bad answer refuses the whole name,
    /// because which of them a retry would use is the attacker's choice.
    pub(crate) async fn addresses(&self, target: &Target) -> Result<Vec<IpAddr>, NetError> {
        if let Some(ip) = target.literal {
            return Ok(vec![ip]);
        }
        let answer =
            self.resolver
                .lookup(&target.host)
                .await
                .map_err(|detail| NetError::Resolve {
                    host: target.host.clone(),
                    detail,
                })?;
        if answer.is_empty() {
            return Err(NetError::Resolve {
                host: target.host.clone(),
                detail: "no addresses in the answer".into(),
            });
        }
        for ip in &answer {
            self.check_addr(&target.host, *ip, target.internal)?;
        }
        Ok(answer)
    }
}
