//! The client's address behind a trusted reverse proxy.
//!
//! By default the client is the TCP peer and `Forwarded` /
//! `X-Forwarded-For` are ignored: anyone can send them. With
//! `--trust-proxy CIDR`, a request whose TCP peer is inside one of those
//! networks has its client taken from the forwarding headers: the
//! right-most address that is not itself a trusted proxy (each proxy
//! appends the address it received from, so everything left of the first
//! untrusted hop may have been written by the client). `Forwarded` (RFC
//! 7239) is read when present, else `X-Forwarded-For`. A header that does
//! not parse (an obfuscated or `unknown` node, a name, garbage, too many
//! hops) gives the peer: a client must never be able to choose the address
//! its throttles and caps key on.
//!
//! The address found feeds the sign-in failure throttle, the per-address
//! request budget and the logs. The per-address *connection* cap counts TCP
//! peers (it acts before any header is read), so trusted proxies are exempt
//! from it.

use axum::http::HeaderMap;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};

/// Hops read from the forwarding headers; a longer chain is malformed.
pub const MAX_HOPS: usize = 32;

/// A `--trust-proxy` value: a network (`10.0.0.0/8`, `fd00::/8`) or one
/// address (`10.0.0.5`, a /32 or /128).
pub fn parse_trusted(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<IpAddr>()
        .map(|ip| IpNet::from(canonical(ip)))
        .map_err(|_| {
            format!("`{text}` is not an address or a network (CIDR such as 10.0.0.0/8 or fd00::/8)")
        })
}

/// Whether `ip` is one of the trusted proxies.
pub fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
    let ip = canonical(ip);
    trusted.iter().any(|net| net.contains(&ip))
}

/// The client address of a request that arrived from `peer`.
pub fn client_addr(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer = canonical(peer);
    if !is_trusted(peer, trusted) {
        return peer;
    }
    let chain = if headers.contains_key(axum::http::header::FORWARDED) {
        joined(headers, axum::http::header::FORWARDED.as_str()).and_then(|v| parse_forwarded(&v))
    } else if headers.contains_key("x-forwarded-for") {
        joined(headers, "x-forwarded-for").and_then(|v| parse_x_forwarded_for(&v))
    } else {
        return peer;
    };
    match chain {
        Some(hops) => pick(&hops, trusted).unwrap_or(peer),
        None => peer,
    }
}

/// The right-most hop that is not a trusted proxy; the left-most when all
/// are trusted.
fn pick(hops: &[IpAddr], trusted: &[IpNet]) -> Option<IpAddr> {
    hops.iter()
        .rev()
        .find(|ip| !is_trusted(**ip, trusted))
        .or_else(|| hops.first())
        .copied()
}

/// All values of a header, in order, joined with commas (several header
/// lines are one list); `None` when one is not text.
fn joined(headers: &HeaderMap, name: &str) -> Option<String> {
    let mut parts = Vec::new();
    for value in headers.get_all(name) {
        parts.push(value.to_str().ok()?);
    }
    Some(parts.join(","))
}

/// An IPv4-mapped IPv6 address as IPv4, so both spellings match one rule.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// `X-Forwarded-For: client, proxy1, proxy2`: addresses, an IPv4 one
/// possibly with a port, an IPv6 one bare or as `[addr]:port`.
pub fn parse_x_forwarded_for(value: &str) -> Option<Vec<IpAddr>> {
    let hops: Vec<&str> = value.split(',').map(str::trim).collect();
    if hops.len() > MAX_HOPS {
        return None;
    }
    hops.into_iter().map(parse_node).collect()
}

/// `Forwarded: for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"`: the
/// `for` parameter of each element (RFC 7239). An element without `for`,
/// or a `for` that is not an address, makes the whole header malformed.
pub fn parse_forwarded(value: &str) -> Option<Vec<IpAddr>> {
    let elements: Vec<&str> = value.split(',').collect();
    if elements.len() > MAX_HOPS {
        return None;
    }
    let mut hops = Vec::with_capacity(elements.len());
    for element in elements {
        let mut found = None;
        for pair in element.split(';') {
            let (name, val) = pair.trim().split_once('=')?;
            if name.trim().eq_ignore_ascii_case("for") {
                if found.is_some() {
                    return None;
                }
                let val = val.trim();
                let val = match val.strip_prefix('"') {
                    Some(rest) => rest.strip_suffix('"')?,
                    None => val,
                };
                found = Some(parse_node(val)?);
            }
        }
        hops.push(found?);
    }
    Some(hops)
}

/// One node: `1.2.3.4`, `1.2.3.4:80`, `::1`, `[::1]`, `[::1]:80`.
fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim();
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    if let Ok(addr) = node.parse::<SocketAddr>() {
        return Some(canonical(addr.ip()));
    }
    let inner = node.strip_prefix('[')?.strip_suffix(']')?;
    inner
        .parse::<std::net::Ipv6Addr>()
        .ok()
        .map(|v6| canonical(IpAddr::V6(v6)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use proptest::prelude::*;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn trusted_proxies_parse_as_networks_or_addresses() {
        assert_eq!(
            parse_trusted("10.1.2.3/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            parse_trusted("10.0.0.5").unwrap().to_string(),
            "10.0.0.5/32"
        );
        assert_eq!(parse_trusted("::1").unwrap().to_string(), "::1/128");
        let err = parse_trusted("proxy.example").unwrap_err();
        assert!(
            err.contains("proxy.example") && err.contains("CIDR"),
            "{err}"
        );
        assert!(parse_trusted("10.0.0.0/33").is_err());
    }

    #[test]
    fn an_untrusted_peer_cannot_choose_its_address() {
        let h = headers(&[("x-forwarded-for", "1.2.3.4"), ("forwarded", "for=1.2.3.4")]);
        assert_eq!(client_addr(ip("9.9.9.9"), &h, &[]), ip("9.9.9.9"));
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_addr(ip("9.9.9.9"), &h, &trusted), ip("9.9.9.9"));
    }

    #[test]
    fn a_trusted_proxy_names_the_client() {
        let trusted = nets(&["10.0.0.0/8", "fd00::/8"]);
        let xff = headers(&[("x-forwarded-for", "203.0.113.7")]);
        assert_eq!(
            client_addr(ip("10.1.1.1"), &xff, &trusted),
            ip("203.0.113.7")
        );
        let fwd = headers(&[("forwarded", "for=\"[2001:db8::1]:4711\";proto=https")]);
        assert_eq!(
            client_addr(ip("10.1.1.1"), &fwd, &trusted),
            ip("2001:db8::1")
        );
        // No header from the proxy: the proxy itself.
        assert_eq!(
            client_addr(ip("10.1.1.1"), &HeaderMap::new(), &trusted),
            ip("10.1.1.1")
        );
        // An IPv4-mapped peer matches an IPv4 rule.
        assert_eq!(
            client_addr(ip("::ffff:10.1.1.1"), &xff, &trusted),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn chains_take_the_rightmost_untrusted_hop() {
        let trusted = nets(&["10.0.0.0/8"]);
        // The client wrote "6.6.6.6" itself; 203.0.113.7 is who reached our
        // first proxy, 10.2.2.2 a second proxy of ours.
        let xff = headers(&[("x-forwarded-for", "6.6.6.6, 203.0.113.7, 10.2.2.2")]);
        assert_eq!(
            client_addr(ip("10.1.1.1"), &xff, &trusted),
            ip("203.0.113.7")
        );
        // Several header lines are one list.
        let lines = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "203.0.113.7:5000"),
        ]);
        assert_eq!(
            client_addr(ip("10.1.1.1"), &lines, &trusted),
            ip("203.0.113.7")
        );
        let fwd = headers(&[(
            "forwarded",
            "for=6.6.6.6, for=203.0.113.7;by=10.1.1.1, for=10.2.2.2",
        )]);
        assert_eq!(
            client_addr(ip("10.1.1.1"), &fwd, &trusted),
            ip("203.0.113.7")
        );
        // Only our proxies: the left-most.
        let ours = headers(&[("x-forwarded-for", "10.3.3.3, 10.2.2.2")]);
        assert_eq!(client_addr(ip("10.1.1.1"), &ours, &trusted), ip("10.3.3.3"));
        // Forwarded wins over X-Forwarded-For.
        let both = headers(&[
            ("forwarded", "for=192.0.2.1"),
            ("x-forwarded-for", "192.0.2.2"),
        ]);
        assert_eq!(
            client_addr(ip("10.1.1.1"), &both, &trusted),
            ip("192.0.2.1")
        );
    }

    #[test]
    fn malformed_headers_give_the_peer() {
        let trusted = nets(&["10.0.0.0/8"]);
        for (name, value) in [
            ("x-forwarded-for", "203.0.113.7, not-an-ip"),
            ("x-forwarded-for", ""),
            ("x-forwarded-for", "203.0.113.7,,"),
            ("forwarded", "for=unknown"),
            ("forwarded", "for=_hidden"),
            ("forwarded", "proto=https"),
            ("forwarded", "for=\"203.0.113.7"),
            ("forwarded", "for=1.2.3.4;for=5.6.7.8"),
            ("forwarded", "garbage"),
        ] {
            let h = headers(&[(name, value)]);
            assert_eq!(
                client_addr(ip("10.1.1.1"), &h, &trusted),
                ip("10.1.1.1"),
                "{name}: {value}"
            );
        }
        let long = vec!["1.1.1.1"; MAX_HOPS + 1].join(",");
        let h = headers(&[("x-forwarded-for", &long)]);
        assert_eq!(client_addr(ip("10.1.1.1"), &h, &trusted), ip("10.1.1.1"));
    }

    fn any_ip() -> impl Strategy<Value = IpAddr> {
        prop_oneof![
            any::<[u8; 4]>().prop_map(IpAddr::from),
            any::<[u16; 8]>().prop_map(IpAddr::from),
        ]
    }

    fn xff_form(ip: IpAddr, port: Option<u16>) -> String {
        match (ip, port) {
            (IpAddr::V4(v4), Some(p)) => format!("{v4}:{p}"),
            (IpAddr::V6(v6), Some(p)) => format!("[{v6}]:{p}"),
            (ip, None) => ip.to_string(),
        }
    }

    fn forwarded_form(ip: IpAddr, port: Option<u16>) -> String {
        match (ip, port) {
            (IpAddr::V4(v4), None) => format!("for={v4}"),
            (IpAddr::V4(v4), Some(p)) => format!("for=\"{v4}:{p}\""),
            (IpAddr::V6(v6), None) => format!("for=\"[{v6}]\""),
            (IpAddr::V6(v6), Some(p)) => format!("for=\"[{v6}]:{p}\";proto=https"),
        }
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,200}") {
            let _ = parse_x_forwarded_for(&s);
            let _ = parse_forwarded(&s);
        }

        #[test]
        fn chains_round_trip_and_pick_the_model_answer(
            hops in proptest::collection::vec((any_ip(), proptest::option::of(any::<u16>())), 1..8),
            trusted_mask in any::<u8>(),
        ) {
            let ips: Vec<IpAddr> = hops.iter().map(|(ip, _)| canonical(*ip)).collect();
            let xff = hops.iter().map(|(ip, p)| xff_form(*ip, *p)).collect::<Vec<_>>().join(", ");
            let fwd = hops.iter().map(|(ip, p)| forwarded_form(*ip, *p)).collect::<Vec<_>>().join(", ");
            prop_assert_eq!(parse_x_forwarded_for(&xff), Some(ips.clone()));
            prop_assert_eq!(parse_forwarded(&fwd), Some(ips.clone()));
            // Trust some of the hops (as host networks) and the peer.
            let peer = ip("10.9.9.9");
            let mut trusted = vec!["10.9.9.9/32".parse::<IpNet>().unwrap()];
            for (i, hop) in ips.iter().enumerate() {
                if trusted_mask & (1 << i) != 0 {
                    trusted.push(IpNet::from(*hop));
                }
            }
            let expected = ips
                .iter()
                .rev()
                .find(|ip| !trusted.iter().any(|n| n.contains(*ip)))
                .or(ips.first())
                .copied()
                .unwrap();
            let h = headers(&[("x-forwarded-for", &xff)]);
            prop_assert_eq!(client_addr(peer, &h, &trusted), expected);
            let h = headers(&[("forwarded", &fwd)]);
            prop_assert_eq!(client_addr(peer, &h, &trusted), expected);
            // The same headers from a peer nobody trusts change nothing.
            prop_assert_eq!(client_addr(ip("192.0.2.1"), &h, &trusted[1..]), ip("192.0.2.1"));
        }
    }
}
