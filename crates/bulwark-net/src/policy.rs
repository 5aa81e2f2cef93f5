//! The egress allowlist: which hosts an agent may contact at all.

use url::Host;

use crate::NetError;

/// One compiled allowlist rule, in the same normalized form the `url` crate
/// gives hosts (lowercase, punycode, no trailing dot), so matching is plain
/// string comparison with no second parser to disagree with the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rule {
    /// `example.com` matches exactly `example.com`.
    Exact(String),
    /// `*.example.com` matches `example.com` and every subdomain of it, but
    /// not `evilexample.com`.
    Suffix(String),
}

impl Rule {
    pub(crate) fn parse(raw: &str) -> Result<Rule, NetError> {
        let invalid = |detail: &str| NetError::InvalidRule {
            rule: raw.to_string(),
            detail: detail.to_string(),
        };
        let (wild, rest) = match raw.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        if rest.is_empty() {
            return Err(invalid(
                "empty host; use allow_all to allow every host, or name a domain",
            ));
        }
        if rest.contains(['*', '/', '@', '?', '#']) || rest.chars().any(char::is_whitespace) {
            return Err(invalid(
                "a rule is a bare host (\"example.com\") or \"*.example.com\"; \
                 no scheme, port, path or inner wildcard",
            ));
        }
        let host = Host::parse(rest).map_err(|e| invalid(&format!("not a valid host: {e}")))?;
        let normalized = match host {
            Host::Domain(d) => d.trim_end_matches('.').to_string(),
            Host::Ipv4(ip) if !wild => ip.to_string(),
            Host::Ipv6(ip) if !wild => format!("[{ip}]"),
            _ => {
                return Err(invalid(
                    "a wildcard rule must name a domain, not an IP address",
                ));
            }
        };
        if normalized.is_empty() {
            return Err(invalid("empty host"));
        }
        Ok(if wild {
            Rule::Suffix(normalized)
        } else {
            Rule::Exact(normalized)
        })
    }

    /// `host` must already be in the `url` crate's normalized form.
    pub(crate) fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.');
        match self {
            Rule::Exact(h) => host == h,
            Rule::Suffix(s) => {
                host == s
                    || (host.len() > s.len()
                        && host.ends_with(s.as_str())
                        && host.as_bytes()[host.len() - s.len() - 1] == b'.')
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rule: &str, host: &str) -> bool {
        Rule::parse(rule).map(|r| r.matches(host)).unwrap_or(false)
    }

    #[test]
    fn suffix_matching_is_label_aligned() {
        assert!(m("*.example.com", "example.com"));
        assert!(m("*.example.com", "a.example.com"));
        assert!(m("*.example.com", "a.b.example.com"));
        assert!(!m("*.example.com", "evilexample.com"));
        assert!(!m("*.example.com", "example.com.evil.org"));
        assert!(!m("*.example.com", "xample.com"));
        assert!(m("EXAMPLE.com", "example.com"));
        assert!(m("bücher.example", "xn--bcher-kva.example"));
        assert!(m("127.0.0.1", "127.0.0.1"));
        assert!(m("::1", "[::1]") || m("[::1]", "[::1]"));
    }

    #[test]
    fn bad_rules_refused() {
        for bad in [
            "",
            "*",
            "*.",
            "exa*mple.com",
            "*.*.example.com",
            "http://example.com",
            "example.com/path",
            "user@example.com",
            "example .com",
            "*.127.0.0.1",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
