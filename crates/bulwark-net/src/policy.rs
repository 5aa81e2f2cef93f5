//! The egress allowlist: which hosts an agent may contact at all.

use url::Host;

use crate::NetError;

/// One compiled allowlist rule: a host part, in the same normalized form
/// the `url` crate gives hosts (lowercase, punycode, no trailing dot, IPv6
/// in brackets), so host matching is plain string comparison with no
/// second parser to disagree with the first; and an optional port, compared
/// with the URL's port (or its scheme's default). A `net_connect` grant's
/// `host:port` compiles to exactly that pair, so every hop of a redirect
/// chain is held to the port as well as the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    host: HostRule,
    /// `None`: any port (`host` or `host:*`).
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostRule {
    /// `example.com` matches exactly `example.com`.
    Exact(String),
    /// `*.example.com` matches `example.com` and every subdomain of it, but
    /// not `evilexample.com`.
    Suffix(String),
    /// `*:443`: any host, on that port only.
    Any,
}

impl Rule {
    /// `host`, `host:port`, `*.suffix[:port]`, `[v6]:port`, a bare IPv6
    /// literal, or `*:port`; `:*` means any port.
    pub(crate) fn parse(raw: &str) -> Result<Rule, NetError> {
        let invalid = |detail: &str| NetError::InvalidRule {
            rule: raw.to_string(),
            detail: detail.to_string(),
        };
        let shape = "a rule is a host (\"example.com\", \"*.example.com\") with an optional \
                     \":port\"; no scheme, path or inner wildcard";
        if raw.contains(['/', '@', '?', '#', '\\']) || raw.chars().any(char::is_whitespace) {
            return Err(invalid(shape));
        }
        let (host_part, port_part) = if raw.starts_with('[') {
            match raw.find(']') {
                Some(end) => match &raw[end + 1..] {
                    "" => (&raw[..=end], None),
                    rest => match rest.strip_prefix(':') {
                        Some(p) => (&raw[..=end], Some(p)),
                        None => return Err(invalid("text after ']' that is not \":port\"")),
                    },
                },
                None => return Err(invalid("an unclosed '['")),
            }
        } else if raw.matches(':').count() > 1 {
            // A bare IPv6 literal: a port needs brackets.
            (raw, None)
        } else {
            match raw.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (raw, None),
            }
        };
        let port = match port_part {
            None | Some("*") => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
                _ => return Err(invalid("the port must be 1-65535 or '*'")),
            },
        };
        if host_part == "*" {
            return match port {
                Some(_) => Ok(Rule {
                    host: HostRule::Any,
                    port,
                }),
                None => Err(invalid(
                    "a bare '*' is not a rule; use allow_all to allow every host, or name a port (\"*:443\")",
                )),
            };
        }
        let (wild, rest) = match host_part.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host_part),
        };
        if rest.is_empty() {
            return Err(invalid(
                "empty host; use allow_all to allow every host, or name a domain",
            ));
        }
        if rest.contains('*') {
            return Err(invalid(shape));
        }
        // A bare IPv6 literal is parsed in the bracketed form URLs use.
        let bracketed;
        let rest = if !rest.starts_with('[') && rest.contains(':') {
            bracketed = format!("[{rest}]");
            bracketed.as_str()
        } else {
            rest
        };
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
        Ok(Rule {
            host: if wild {
                HostRule::Suffix(normalized)
            } else {
                HostRule::Exact(normalized)
            },
            port,
        })
    }

    /// Whether `host:port` is covered. `host` must already be in the `url`
    /// crate's normalized form; `port` is the URL's explicit port or its
    /// scheme's default.
    pub(crate) fn matches(&self, host: &str, port: u16) -> bool {
        self.matches_host(host) && self.port.is_none_or(|p| p == port)
    }

    /// Whether the host part alone matches (to explain a refusal).
    pub(crate) fn matches_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.');
        match &self.host {
            HostRule::Any => true,
            HostRule::Exact(h) => host == h,
            HostRule::Suffix(s) => {
                host == s
                    || (host.len() > s.len()
                        && host.ends_with(s.as_str())
                        && host.as_bytes()[host.len() - s.len() - 1] == b'.')
            }
        }
    }

    /// The port this rule is limited to, if any.
    pub(crate) fn port(&self) -> Option<u16> {
        self.port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    fn m(rule: &str, host: &str) -> bool {
        Rule::parse(rule)
            .map(|r| r.matches(host, 443))
            .unwrap_or(false)
    }

    fn mp(rule: &str, host: &str, port: u16) -> bool {
        Rule::parse(rule)
            .map(|r| r.matches(host, port))
            .unwrap_or(false)
    }

    #[test]
    fn ports_are_part_of_the_rule() {
        assert!(mp("svc.test:18461", "svc.test", 18461));
        assert!(!mp("svc.test:18461", "svc.test", 18462));
        assert!(!mp("svc.test:18461", "svc.test", 80));
        assert!(!mp("svc.test:18461", "other.test", 18461));
        assert!(mp("svc.test", "svc.test", 18462));
        assert!(mp("svc.test:*", "svc.test", 1));
        assert!(mp("*.svc.test:443", "a.svc.test", 443));
        assert!(!mp("*.svc.test:443", "a.svc.test", 80));
        assert!(mp("127.0.0.1:8080", "127.0.0.1", 8080));
        assert!(!mp("127.0.0.1:8080", "127.0.0.1", 8081));
        assert!(mp("[::1]:8080", "[::1]", 8080));
        assert!(!mp("[::1]:8080", "[::1]", 8081));
        assert!(mp("::1", "[::1]", 8081));
        assert!(mp("[0:0::1]", "[::1]", 1));
        assert!(mp("*:443", "anything.test", 443));
        assert!(!mp("*:443", "anything.test", 80));
        assert!(mp("SVC.Test.:18461", "svc.test", 18461));
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
            "svc.test:",
            "svc.test:0",
            "svc.test:65536",
            "svc.test:+80",
            "svc.test:80:81",
            "[::1]80",
            "[::1",
            "*.[::1]:80",
            "*:*",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    proptest! {
        /// The egress rule and the policy's `net_connect` pattern (what the
        /// door checks on the first request) agree on every host and port,
        /// so a redirect hop is judged as the first request was.
        #[test]
        fn rule_agrees_with_the_net_connect_pattern(
            labels in proptest::collection::vec("[a-z][a-z0-9]{0,2}", 1..4),
            host_labels in proptest::collection::vec("[a-z][a-z0-9]{0,2}", 1..5),
            wild in any::<bool>(),
            rule_port in proptest::option::of(1u16..6),
            port in 1u16..6,
        ) {
            let pattern_host = format!("{}{}", if wild { "*." } else { "" }, labels.join("."));
            let pattern = match rule_port {
                Some(p) => format!("{pattern_host}:{p}"),
                None => pattern_host.clone(),
            };
            // Hosts near the pattern: itself, a subdomain, and random ones.
            let near = labels.join(".");
            for host in [near.clone(), format!("x.{near}"), format!("x{near}"), host_labels.join(".")] {
                let ours = mp(&pattern, &host, port);
                let door = bulwark_policy::HostPattern::parse(&pattern)
                    .is_ok_and(|h| h.covers(&host, port));
                prop_assert_eq!(ours, door, "{} vs {}:{}", pattern, host, port);
            }
        }

        /// A rule with a port never matches another port, whatever the host.
        #[test]
        fn a_port_rule_never_matches_another_port(
            host in "[a-z]{1,8}\\.[a-z]{2,3}",
            p in 1u16..,
            q in 1u16..,
        ) {
            prop_assert_eq!(mp(&format!("{host}:{p}"), &host, q), p == q);
            prop_assert!(mp(&host, &host, q));
        }
    }
}
