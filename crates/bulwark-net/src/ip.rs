//! Special-purpose address policy: addresses an agent must never reach.
//!
//! An agent-driven fetch that reaches loopback, a private network, or a cloud
//! metadata endpoint (169.254.169.254) turns a prompt injection into SSRF.
//!
//! The policy is data, `data/special-purpose.tsv` (the IANA IPv4 and IPv6
//! special-purpose registries, multicast, the non-global-unicast IPv6 space
//! and cloud metadata endpoints, with the source and date in its header),
//! compiled in with `include_str!` and parsed once. The unit tests below
//! parse it and check every row, so a parse error cannot reach a release;
//! should it happen anyway, every address is refused (fail closed).
//!
//! Embedded IPv4 addresses (IPv4-mapped, IPv4-compatible, NAT64, 6to4,
//! Teredo) are unwrapped and checked as IPv4 first, because
//! `::ffff:127.0.0.1` *is* 127.0.0.1 on the wire; missing that is a classic
//! bypass.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

/// The policy data, compiled into the binary.
const DATA: &str = include_str!("../data/special-purpose.tsv");

/// What a row does to the addresses it is the most specific match for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Refuse,
    Allow,
    /// Allowed as itself; the IPv4 address it carries decides (unwrapped
    /// before the table is consulted).
    Embedded,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    /// Network bits, IPv4 in the low 32 bits for the IPv4 table.
    net: u128,
    mask: u128,
    len: u8,
    action: Action,
    /// "True", "False", "N/A" (registry) or "-" (not a registry entry).
    global: String,
    /// `prefix (name, RFC)`: what [`forbidden_range`] returns.
    label: String,
}

#[derive(Debug, Default)]
struct Table {
    v4: Vec<Row>,
    v6: Vec<Row>,
    /// (address, label)
    meta_addrs: Vec<(IpAddr, String)>,
    /// (lowercase host name, label)
    meta_names: Vec<(String, String)>,
}

static TABLE: LazyLock<Result<Table, String>> = LazyLock::new(|| parse(DATA));

fn prefix_mask(len: u8, bits: u32) -> u128 {
    let len = u32::from(len);
    let full = if bits == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    if len == 0 {
        0
    } else {
        (full << (bits - len)) & full
    }
}

fn parse_prefix(text: &str) -> Result<(IpAddr, u8), String> {
    let (addr, len) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?}: prefix without /length"))?;
    let addr: IpAddr = addr
        .parse()
        .map_err(|e| format!("{text:?}: bad address: {e}"))?;
    let len: u8 = len
        .parse()
        .map_err(|e| format!("{text:?}: bad length: {e}"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(format!("{text:?}: length over {max}"));
    }
    Ok((addr, len))
}

fn parse(data: &str) -> Result<Table, String> {
    let mut table = Table::default();
    for (n, line) in data.lines().enumerate() {
        let at = |e: String| format!("special-purpose.tsv line {}: {e}", n + 1);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        match cols.as_slice() {
            ["range", prefix, action, global, rfc, name] => {
                let (addr, len) = parse_prefix(prefix).map_err(at)?;
                let action = match *action {
                    "refuse" => Action::Refuse,
                    "allow" => Action::Allow,
                    "embedded" => Action::Embedded,
                    other => return Err(at(format!("unknown action {other:?}"))),
                };
                if !matches!(*global, "True" | "False" | "N/A" | "-") {
                    return Err(at(format!("globally-reachable {global:?}")));
                }
                if action == Action::Allow && *global != "True" {
                    return Err(at(format!(
                        "{prefix} is allowed but not globally reachable ({global})"
                    )));
                }
                if !rfc.starts_with("RFC ") || name.trim().is_empty() {
                    return Err(at("missing RFC or name".into()));
                }
                let (net, bits) = match addr {
                    IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
                    IpAddr::V6(a) => (u128::from(a), 128),
                };
                let mask = prefix_mask(len, bits);
                if net & !mask != 0 {
                    return Err(at(format!("{prefix} has host bits set")));
                }
                let row = Row {
                    net,
                    mask,
                    len,
                    action,
                    global: (*global).to_string(),
                    label: format!("{prefix} ({name}, {rfc})"),
                };
                let list = if bits == 32 {
                    &mut table.v4
                } else {
                    &mut table.v6
                };
                if list.iter().any(|r| r.net == row.net && r.len == row.len) {
                    return Err(at(format!("duplicate prefix {prefix}")));
                }
                list.push(row);
            }
            ["metadata", what, cloud] => {
                if cloud.trim().is_empty() {
                    return Err(at("metadata row without a cloud".into()));
                }
                if let Ok(ip) = what.parse::<IpAddr>() {
                    table
                        .meta_addrs
                        .push((ip, format!("{ip} (cloud metadata endpoint: {cloud})")));
                } else {
                    let name = what.to_ascii_lowercase();
                    if name.is_empty()
                        || name != *what
                        || !name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
                    {
                        return Err(at(format!("bad metadata host name {what:?}")));
                    }
                    table.meta_names.push((
                        name.clone(),
                        format!("{name} (cloud metadata endpoint: {cloud})"),
                    ));
                }
            }
            _ => return Err(at(format!("unrecognised row {line:?}"))),
        }
    }
    if table.v4.is_empty() || table.v6.is_empty() || table.meta_addrs.is_empty() {
        return Err("special-purpose.tsv: a section is empty".into());
    }
    Ok(table)
}

/// The most specific row containing `bits`, if any.
fn lookup(rows: &[Row], bits: u128) -> Option<&Row> {
    rows.iter()
        .filter(|r| bits & r.mask == r.net)
        .max_by_key(|r| r.len)
}

fn v4_range(t: &Table, ip: Ipv4Addr) -> Option<String> {
    if let Some((_, label)) = t.meta_addrs.iter().find(|(a, _)| *a == IpAddr::V4(ip)) {
        return Some(label.clone());
    }
    lookup(&t.v4, u128::from(u32::from(ip)))
        .filter(|r| r.action == Action::Refuse)
        .map(|r| r.label.clone())
}

/// IPv4 addresses carried inside `ip`, with the form that carries them.
fn embedded_v4(ip: Ipv6Addr) -> Vec<(Ipv4Addr, &'static str)> {
    let bits = u128::from(ip);
    let low = Ipv4Addr::from(bits as u32);
    let in_net = |net: u128, len: u8| bits & prefix_mask(len, 128) == net;
    let mut out = Vec::new();
    if in_net(0xffff_0000_0000, 96) {
        out.push((low, "IPv4-mapped ::ffff:0:0/96"));
    }
    if in_net(0, 96) && bits > 1 {
        out.push((low, "IPv4-compatible ::/96"));
    }
    if in_net(0x0064_ff9b << 96, 96) {
        out.push((low, "NAT64 64:ff9b::/96"));
    }
    if in_net((0x0064_ff9b_0001_u128) << 80, 48) {
        out.push((low, "local-use NAT64 64:ff9b:1::/48"));
    }
    if in_net(0x2002 << 112, 16) {
        out.push((Ipv4Addr::from((bits >> 80) as u32), "6to4 2002::/16"));
    }
    if in_net(0x2001_0000 << 96, 32) {
        out.push((
            Ipv4Addr::from((bits >> 64) as u32),
            "Teredo server 2001::/32",
        ));
        out.push((Ipv4Addr::from(!(bits as u32)), "Teredo client 2001::/32"));
    }
    out
}

/// The reason `ip` may not be reached, or `None` if it may be.
///
/// The string names the most specific refused range and its registry entry,
/// `"<prefix> (<registry name>, <RFC>)"`, e.g.
/// `"127.0.0.0/8 (Loopback, RFC 1122)"`; a metadata endpoint is
/// `"<address> (cloud metadata endpoint: <cloud>)"`. When the verdict comes
/// from an IPv4 address embedded in an IPv6 one, the IPv4 reason is followed
/// by `", as <v4> embedded in <v6> (<form> <prefix>)"`.
///
/// The single entry point for addresses: every place that connects (the
/// resolver here, later the connect-time check) uses this table.
pub fn forbidden_range(ip: IpAddr) -> Option<String> {
    let t = match &*TABLE {
        Ok(t) => t,
        Err(e) => return Some(format!("address policy data failed to load: {e}")),
    };
    match ip {
        IpAddr::V4(v4) => v4_range(t, v4),
        IpAddr::V6(v6) => {
            // An IPv4-mapped address is the IPv4 address for every purpose.
            if let Some(v4) = v6.to_ipv4_mapped() {
                return v4_range(t, v4)
                    .map(|r| format!("{r}, as {v4} embedded in {v6} (IPv4-mapped ::ffff:0:0/96)"));
            }
            for (v4, form) in embedded_v4(v6) {
                if let Some(r) = v4_range(t, v4) {
                    return Some(format!("{r}, as {v4} embedded in {v6} ({form})"));
                }
            }
            if let Some((_, label)) = t.meta_addrs.iter().find(|(a, _)| *a == IpAddr::V6(v6)) {
                return Some(label.clone());
            }
            lookup(&t.v6, u128::from(v6))
                .filter(|r| r.action == Action::Refuse)
                .map(|r| r.label.clone())
        }
    }
}

/// The metadata-endpoint label of `ip` (also when IPv4-mapped), or `None`.
///
/// Operator-declared internal services may reach private addresses, but a
/// cloud metadata endpoint hands out the machine's own credentials, so no
/// override ever opens it.
pub(crate) fn metadata_endpoint(ip: IpAddr) -> Option<String> {
    let t = match &*TABLE {
        Ok(t) => t,
        Err(e) => return Some(format!("address policy data failed to load: {e}")),
    };
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    t.meta_addrs
        .iter()
        .find(|(a, _)| *a == ip)
        .map(|(_, label)| label.clone())
}

/// The reason the host *name* `host` may not be contacted (a cloud metadata
/// name such as `metadata.google.internal`), or `None`. Compared
/// case-insensitively, ignoring a trailing dot. Addresses are checked by
/// [`forbidden_range`] once the name resolves.
pub fn forbidden_host(host: &str) -> Option<String> {
    let t = match &*TABLE {
        Ok(t) => t,
        Err(e) => return Some(format!("address policy data failed to load: {e}")),
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    t.meta_names
        .iter()
        .find(|(n, _)| *n == host)
        .map(|(_, label)| label.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> Option<String> {
        forbidden_range(s.parse().expect("test address"))
    }

    fn table() -> &'static Table {
        TABLE.as_ref().expect("the policy data parses")
    }

    #[test]
    fn data_parses_and_every_row_is_sound() {
        let t = table();
        assert!(DATA.contains("SOURCE: IANA IPv4 Special-Purpose Address Registry"));
        assert!(DATA.contains("IANA IPv6 Special-Purpose Address Registry"));
        // Every non-comment line became exactly one row.
        let rows = DATA
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .count();
        assert_eq!(
            rows,
            t.v4.len() + t.v6.len() + t.meta_addrs.len() + t.meta_names.len()
        );
        assert!(
            t.v4.len() >= 25 && t.v6.len() >= 30,
            "{} {}",
            t.v4.len(),
            t.v6.len()
        );
        for (rows, bits) in [(&t.v4, 32u32), (&t.v6, 128)] {
            for r in rows.iter() {
                assert_eq!(r.mask, prefix_mask(r.len, bits));
                assert_eq!(r.net & !r.mask, 0, "{}", r.label);
                // Not globally reachable => refused.
                if r.global != "True" && r.action != Action::Embedded {
                    assert_eq!(r.action, Action::Refuse, "{}", r.label);
                }
                // An allowed row is never inside a refused row: allowed
                // exceptions to a refused block are spelled out in the header.
                if r.action == Action::Allow {
                    let covering_refused = rows
                        .iter()
                        .filter(|c| c.len < r.len && r.net & c.mask == c.net)
                        .max_by_key(|c| c.len);
                    if let Some(c) = covering_refused {
                        assert!(
                            c.action != Action::Refuse
                                || r.label.starts_with("64:ff9b::/96")
                                || r.label.starts_with("::ffff:0:0/96"),
                            "{} inside refused {}",
                            r.label,
                            c.label
                        );
                    }
                }
                // The row's own network address gets the row's verdict.
                let first = r.net;
                let got = if bits == 32 {
                    f(&Ipv4Addr::from(first as u32).to_string())
                } else {
                    f(&Ipv6Addr::from(first).to_string())
                };
                if r.action == Action::Refuse {
                    assert!(got.is_some(), "{}", r.label);
                }
            }
        }
        // Only IPv4-mapped is "embedded".
        let embedded: Vec<_> =
            t.v6.iter()
                .filter(|r| r.action == Action::Embedded)
                .map(|r| r.label.as_str())
                .collect();
        assert_eq!(embedded.len(), 1);
        assert!(embedded[0].starts_with("::ffff:0:0/96"));
        assert!(t.meta_addrs.len() >= 5 && !t.meta_names.is_empty());
    }

    #[test]
    fn bad_data_is_rejected() {
        let ok = "range\t10.0.0.0/8\trefuse\tFalse\tRFC 1918\tPrivate-Use\n\
                  range\t::1/128\trefuse\tFalse\tRFC 4291\tLoopback\n\
                  metadata\t169.254.169.254\tAWS\n";
        assert!(parse(ok).is_ok());
        for bad in [
            "range\t10.0.0.1/8\trefuse\tFalse\tRFC 1918\tx\n",
            "range\t10.0.0.0/33\trefuse\tFalse\tRFC 1918\tx\n",
            "range\t10.0.0.0/8\tallow\tFalse\tRFC 1918\tx\n",
            "range\t10.0.0.0/8\tmaybe\tFalse\tRFC 1918\tx\n",
            "range\t10.0.0.0/8\trefuse\tyes\tRFC 1918\tx\n",
            "range\t10.0.0.0/8 refuse False RFC 1918 x\n",
            "metadata\tMetadata\tGCP\n",
            "range\t10.0.0.0/8\trefuse\tFalse\tRFC 1918\tx\nrange\t10.0.0.0/8\trefuse\tFalse\tRFC 1918\ty\n",
        ] {
            let data = format!("{ok}{bad}");
            assert!(parse(&data).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn known_addresses() {
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
            "168.63.129.16",
            "::",
            "::1",
            "::127.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "2002:808:808::1",
            "fc00::1",
            "fd12:3456::1",
            "fd00:ec2::254",
            "fe80::1",
            "febf::1",
            "ff02::1",
            "2001:db8::1",
            "4000::1",
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
            "192.175.48.1",
            "2606:4700::1111",
            "2a00:1450::1",
            "2620:4f:8000::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(f(good).is_none(), "{good} must be allowed: {:?}", f(good));
        }
        assert_eq!(
            f("255.255.255.255").as_deref(),
            Some("255.255.255.255/32 (Limited Broadcast, RFC 8190)")
        );
        assert_eq!(
            f("192.0.0.170").as_deref(),
            Some("192.0.0.170/32 (NAT64/DNS64 Discovery, RFC 8880)")
        );
        assert!(
            f("::ffff:127.0.0.1").is_some_and(|r| r.contains("Loopback")
                && r.contains("as 127.0.0.1 embedded in ::ffff:127.0.0.1"))
        );
        assert!(f("169.254.169.254").is_some_and(|r| r.contains("cloud metadata")));
        assert!(forbidden_host("Metadata.Google.Internal.").is_some());
        assert!(forbidden_host("metadata.google.internal.evil.com").is_none());
        assert!(forbidden_host("example.com").is_none());
    }
}
