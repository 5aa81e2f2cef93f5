//! Special-purpose address table: addresses an agent must never reach.
//!
//! An agent-driven fetch that reaches loopback, a private network, or a cloud
//! metadata endpoint (169.254.169.254) turns a prompt injection into SSRF.
//! Embedded IPv4 addresses (IPv4-mapped, NAT64, 6to4) are unwrapped and
//! checked as IPv4, because `::ffff:127.0.0.1` *is* 127.0.0.1 on the wire;
//! missing that is a classic bypass.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// (network, prefix length, description). Order matters only for which
/// description is reported; 255.255.255.255 precedes 240/4 for that reason.
const V4_TABLE: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8, "0.0.0.0/8 (\"this network\")"),
    (
        Ipv4Addr::new(10, 0, 0, 0),
        8,
        "10.0.0.0/8 (private, RFC 1918)",
    ),
    (
        Ipv4Addr::new(100, 64, 0, 0),
        10,
        "100.64.0.0/10 (carrier-grade NAT)",
    ),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "127.0.0.0/8 (loopback)"),
    (
        Ipv4Addr::new(169, 254, 0, 0),
        16,
        "169.254.0.0/16 (link-local, cloud metadata)",
    ),
    (
        Ipv4Addr::new(172, 16, 0, 0),
        12,
        "172.16.0.0/12 (private, RFC 1918)",
    ),
    (
        Ipv4Addr::new(192, 0, 0, 0),
        24,
        "192.0.0.0/24 (IETF protocol assignments)",
    ),
    (
        Ipv4Addr::new(192, 0, 2, 0),
        24,
        "192.0.2.0/24 (documentation)",
    ),
    (
        Ipv4Addr::new(192, 88, 99, 0),
        24,
        "192.88.99.0/24 (6to4 relay anycast)",
    ),
    (
        Ipv4Addr::new(192, 168, 0, 0),
        16,
        "192.168.0.0/16 (private, RFC 1918)",
    ),
    (
        Ipv4Addr::new(198, 18, 0, 0),
        15,
        "198.18.0.0/15 (benchmarking)",
    ),
    (
        Ipv4Addr::new(198, 51, 100, 0),
        24,
        "198.51.100.0/24 (documentation)",
    ),
    (
        Ipv4Addr::new(203, 0, 113, 0),
        24,
        "203.0.113.0/24 (documentation)",
    ),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "224.0.0.0/4 (multicast)"),
    (
        Ipv4Addr::new(255, 255, 255, 255),
        32,
        "255.255.255.255/32 (broadcast)",
    ),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "240.0.0.0/4 (reserved)"),
];

const V6_TABLE: &[(Ipv6Addr, u8, &str)] = &[
    (Ipv6Addr::UNSPECIFIED, 128, "::/128 (unspecified)"),
    (Ipv6Addr::LOCALHOST, 128, "::1/128 (loopback)"),
    (
        Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0),
        96,
        "::/96 (IPv4-compatible, deprecated)",
    ),
    (
        Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0),
        48,
        "64:ff9b:1::/48 (local-use NAT64)",
    ),
    (
        Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0),
        64,
        "100::/64 (discard-only)",
    ),
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        32,
        "2001::/32 (Teredo tunnelling)",
    ),
    (
        Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0),
        48,
        "2001:2::/48 (benchmarking)",
    ),
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        "2001:db8::/32 (documentation)",
    ),
    (
        Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
        7,
        "fc00::/7 (unique local)",
    ),
    (
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
        10,
        "fe80::/10 (link-local)",
    ),
    (
        Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0),
        10,
        "fec0::/10 (site-local, deprecated)",
    ),
    (
        Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0),
        8,
        "ff00::/8 (multicast)",
    ),
];

fn in_v4(ip: Ipv4Addr, net: Ipv4Addr, len: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(net) & mask
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, len: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(net) & mask
}

fn v4_range(ip: Ipv4Addr) -> Option<String> {
    V4_TABLE
        .iter()
        .find(|(net, len, _)| in_v4(ip, *net, *len))
        .map(|(_, _, d)| (*d).to_string())
}

/// The special-purpose range `ip` falls in, or `None` if it may be reached.
///
/// Exposed so every place that connects (the resolver here, later the
/// connect-time check) uses one table.
pub fn forbidden_range(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            // IPv4-mapped ::ffff:0:0/96 and NAT64 64:ff9b::/96 carry a full
            // IPv4 address in the low 32 bits.
            let mapped = Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0);
            let nat64 = Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0);
            for (net, what) in [(mapped, "IPv4-mapped"), (nat64, "NAT64")] {
                if in_v6(v6, net, 96) {
                    let inner = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
                    return v4_range(inner).map(|r| format!("{r} via {what} IPv6 {net}/96"));
                }
            }
            // 6to4 2002::/16 carries an IPv4 address in bits 16..48.
            if in_v6(v6, Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16) {
                let inner = Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32);
                return v4_range(inner).map(|r| format!("{r} via 6to4 IPv6 2002::/16"));
            }
            V6_TABLE
                .iter()
                .find(|(net, len, _)| in_v6(v6, *net, *len))
                .map(|(_, _, d)| (*d).to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> Option<String> {
        forbidden_range(s.parse().expect("test address"))
    }

    #[test]
    fn table() {
        for bad in [
            "0.0.0.0",
            "10.255.0.1",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::127.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "ff02::1",
            "2001:db8::1",
        ] {
            assert!(f(bad).is_some(), "{bad} must be forbidden");
        }
        for good in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "223.255.255.255",
            "2606:4700::1111",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(f(good).is_none(), "{good} must be allowed: {:?}", f(good));
        }
        assert_eq!(
            f("255.255.255.255").as_deref(),
            Some("255.255.255.255/32 (broadcast)")
        );
        assert!(f("::ffff:127.0.0.1").is_some_and(|r| r.contains("loopback")));
    }
}
