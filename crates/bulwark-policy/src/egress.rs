//! `[egress]` of the global config: operator overrides for internal
//! services the network layer would otherwise refuse as private addresses.
//!
//! Each entry is one exact `host:port`. Hosts are normalized by the `url`
//! crate exactly as the network layer normalizes a request's host
//! (lowercase, punycode, IPv4 forms canonicalized, one trailing dot
//! removed), so a comparison of the two strings is meaningful.

use std::fmt;

use serde::{Deserialize, Serialize};
use url::{Host, Url};

use crate::config::GlobalConfig;
use crate::error::{ConfigError, Located, Seg};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressSection {
    /// Exact `host:port` pairs: `"wiki.corp:8080"`, `"10.0.0.5:443"`,
    /// `"[fd00::1]:8443"`.
    #[serde(default)]
    pub internal: Vec<String>,
}

/// One parsed `egress.internal` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InternalService {
    /// Normalized as `url::Url::host_str` gives it (lowercase, punycode,
    /// no trailing dot); an IPv6 literal keeps its brackets.
    pub host: String,
    /// 1-65535.
    pub port: u16,
}

impl fmt::Display for InternalService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

const HINT: &str = "internal services are exact host:port pairs like \"wiki.corp:8080\"";

impl InternalService {
    /// Parse one exact `host:port` entry. The error says what is wrong and
    /// what is accepted.
    pub fn parse(entry: &str) -> Result<InternalService, String> {
        if entry.is_empty() {
            return Err(format!("is empty: {HINT}"));
        }
        if entry.contains('*') {
            return Err(format!(
                "{entry:?} has a wildcard: {HINT}; list each service separately"
            ));
        }
        if entry.chars().any(|c| {
            c.is_control() || c.is_whitespace() || matches!(c, '/' | '\\' | '?' | '#' | '@')
        }) {
            return Err(format!(
                "{entry:?} must be a bare host:port, without scheme, path, query, user name or whitespace: {HINT}"
            ));
        }
        let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
            let Some((v6, after)) = rest.split_once(']') else {
                return Err(format!(
                    "{entry:?} has an unclosed '[': write IPv6 as \"[fd00::1]:8443\""
                ));
            };
            match after.strip_prefix(':') {
                Some(p) => (&entry[..v6.len() + 2], p),
                None if after.is_empty() => {
                    return Err(format!("{entry:?} needs a port: {HINT}"));
                }
                None => {
                    return Err(format!(
                        "{entry:?} has text after ']' that is not \":port\": write IPv6 as \"[fd00::1]:8443\""
                    ));
                }
            }
        } else {
            match entry.matches(':').count() {
                0 => return Err(format!("{entry:?} needs a port: {HINT}")),
                1 => entry.split_once(':').unwrap_or((entry, "")),
                _ => {
                    return Err(format!(
                        "{entry:?}: put an IPv6 address in brackets, e.g. \"[fd00::1]:8443\""
                    ));
                }
            }
        };
        if host.is_empty() {
            return Err(format!("{entry:?} has no host: {HINT}"));
        }
        if port.is_empty() {
            return Err(format!("{entry:?} needs a port after ':': {HINT}"));
        }
        let port = match port.parse::<u16>() {
            Ok(0) => {
                return Err(format!(
                    "{entry:?} has port 0, which no service listens on: use the service's port (1-65535)"
                ));
            }
            Ok(p) if port.bytes().all(|b| b.is_ascii_digit()) => p,
            _ => {
                return Err(format!(
                    "{entry:?} has a port that is not a number 1-65535: {HINT}"
                ));
            }
        };
        let url = Url::parse(&format!("http://{entry}/"))
            .map_err(|e| format!("{entry:?} is not a valid host:port ({e}): {HINT}"))?;
        let round_trips = url.username().is_empty()
            && url.password().is_none()
            && url.path() == "/"
            && url.query().is_none()
            && url.fragment().is_none()
            && url.port_or_known_default() == Some(port);
        if !round_trips {
            return Err(format!("{entry:?} is not a bare host:port: {HINT}"));
        }
        let host = match url.host() {
            Some(Host::Domain(d)) => {
                let d = d.strip_suffix('.').unwrap_or(d);
                if d.is_empty() || d.split('.').any(str::is_empty) {
                    return Err(format!(
                        "{entry:?} has an empty label in its host name: {HINT}"
                    ));
                }
                d.to_string()
            }
            Some(Host::Ipv4(ip)) => ip.to_string(),
            Some(Host::Ipv6(_)) => url.host_str().unwrap_or_default().to_string(),
            None => return Err(format!("{entry:?} has no host: {HINT}")),
        };
        Ok(InternalService { host, port })
    }
}

impl GlobalConfig {
    /// The parsed `egress.internal` entries, in order. Entries that do not
    /// parse are skipped; [`crate::parse_global_config`] refuses them, so
    /// after it none are.
    pub fn internal_services(&self) -> Vec<InternalService> {
        self.egress
            .internal
            .iter()
            .filter_map(|e| InternalService::parse(e).ok())
            .collect()
    }
}

pub(crate) fn validate_egress(
    loc: &Located<'_>,
    egress: &EgressSection,
) -> Result<(), ConfigError> {
    use Seg::{Idx, Key};
    let mut seen: Vec<InternalService> = Vec::new();
    for (i, entry) in egress.internal.iter().enumerate() {
        let at = [Key("egress"), Key("internal"), Idx(i)];
        let svc = InternalService::parse(entry).map_err(|e| loc.at(&at, e))?;
        if let Some(j) = seen.iter().position(|s| *s == svc) {
            return Err(loc.at(
                &at,
                format_args!(
                    "{entry:?} is the same service as egress.internal[{j}] ({svc}): remove one"
                ),
            ));
        }
        seen.push(svc);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(host: &str, port: u16) -> InternalService {
        InternalService {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn parses_and_normalizes() {
        let cases = [
            ("wiki.corp:8080", svc("wiki.corp", 8080)),
            ("WIKI.Corp:8080", svc("wiki.corp", 8080)),
            ("wiki.corp.:8080", svc("wiki.corp", 8080)),
            ("wiki:80", svc("wiki", 80)),
            ("bücher.corp:443", svc("xn--bcher-kva.corp", 443)),
            ("10.0.0.5:443", svc("10.0.0.5", 443)),
            ("10.1:443", svc("10.0.0.1", 443)),
            ("[fd00::1]:8443", svc("[fd00::1]", 8443)),
            ("[FD00:0::1]:1", svc("[fd00::1]", 1)),
            ("db.corp:65535", svc("db.corp", 65535)),
        ];
        for (entry, want) in cases {
            assert_eq!(InternalService::parse(entry), Ok(want.clone()), "{entry}");
            // The normalized form parses to itself.
            assert_eq!(InternalService::parse(&want.to_string()), Ok(want));
        }
    }

    #[test]
    fn refuses_with_a_reason() {
        let cases = [
            ("", "empty"),
            ("wiki.corp", "needs a port"),
            ("wiki.corp:", "needs a port"),
            ("[fd00::1]", "needs a port"),
            ("fd00::1", "brackets"),
            ("fd00::1:80", "brackets"),
            ("[fd00::1", "unclosed"),
            ("[fd00::1]x", "after ']'"),
            ("*.corp:80", "wildcard"),
            ("*:80", "wildcard"),
            ("wiki.corp:*", "wildcard"),
            ("wiki.corp:0", "port 0"),
            ("wiki.corp:65536", "1-65535"),
            ("wiki.corp:+80", "1-65535"),
            ("wiki.corp:8o", "1-65535"),
            (":80", "no host"),
            ("http://wiki.corp:80", "bare host:port"),
            ("wiki.corp:80/x", "bare host:port"),
            ("user@wiki.corp:80", "bare host:port"),
            ("wiki.corp:80?a", "bare host:port"),
            ("wiki corp:80", "bare host:port"),
            ("wiki..corp:80", "empty label"),
            (".:80", "empty label"),
            ("1.2.3.256:80", "not a valid host"),
            ("[zz::1]:80", "not a valid host"),
            ("a<b:80", "not a valid host"),
        ];
        for (entry, why) in cases {
            match InternalService::parse(entry) {
                Ok(s) => panic!("{entry:?} accepted as {s:?}"),
                Err(e) => assert!(e.contains(why), "{entry:?}: {e}"),
            }
        }
    }
}
