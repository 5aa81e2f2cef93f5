//! Table-driven address vectors for `forbidden_range` and `check_url`.
//!
//! The expectations come from an oracle written here independently of
//! `src/ip.rs` and `data/special-purpose.tsv`: a short list of refused
//! prefixes transcribed from the IANA special-purpose registries, with the
//! two documented exceptions (IPv4-mapped and NAT64 well-known prefix follow
//! the embedded IPv4). Vectors are generated from it systematically: first,
//! middle and last address of every refused range, the neighbours just
//! outside, every metadata endpoint, and every IPv4-in-IPv6 embedding form.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bulwark_net::{EgressPolicy, HttpLimits, NetError, SafeHttp, forbidden_host, forbidden_range};
use proptest::prelude::*;

/// Refused IPv4 ranges (covering blocks and sub-entries): every one of
/// these is refused entirely.
const REFUSED_V4: &[&str] = &[
    "0.0.0.0/8",
    "0.0.0.0/32",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.0.0/29",
    "192.0.0.8/32",
    "192.0.0.9/32",
    "192.0.0.10/32",
    "192.0.0.170/32",
    "192.0.0.171/32",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.88.99.2/32",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "255.255.255.255/32",
];

/// Registry entries that are globally reachable and not inside a refused
/// block: allowed.
const ALLOWED_REGISTRY: &[&str] = &[
    "192.31.196.0/24",
    "192.52.193.0/24",
    "192.175.48.0/24",
    "2620:4f:8000::/48",
];

/// Refused IPv6 ranges. The first three are "not 2000::/3 Global Unicast";
/// inside them only ::ffff:0:0/96 and 64:ff9b::/96 can be allowed (when the
/// embedded IPv4 is).
const REFUSED_V6: &[&str] = &[
    "::/3",
    "4000::/2",
    "8000::/1",
    "::1/128",
    "::/128",
    "::/96",
    "64:ff9b:1::/48",
    "100::/64",
    "100:0:0:1::/64",
    "2001::/23",
    "2001::/32",
    "2001:1::1/128",
    "2001:1::2/128",
    "2001:1::3/128",
    "2001:2::/48",
    "2001:3::/32",
    "2001:4:112::/48",
    "2001:10::/28",
    "2001:20::/28",
    "2001:30::/28",
    "2001:db8::/32",
    "2002::/16",
    "3fff::/20",
    "5f00::/16",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
];

/// Refused IPv6 blocks inside 2000::/3, for the oracle (the others are
/// covered by ::/3, 4000::/2, 8000::/1).
const REFUSED_V6_ORACLE: &[&str] = &[
    "::/3",
    "4000::/2",
    "8000::/1",
    "2001::/23",
    "2001:db8::/32",
    "2002::/16",
    "3fff::/20",
];

const METADATA: &[&str] = &[
    "169.254.169.254",
    "169.254.170.2",
    "fd00:ec2::254",
    "100.100.100.200",
    "192.0.0.192",
    "168.63.129.16",
];

const PUBLIC: &[&str] = &[
    "1.1.1.1",
    "8.8.8.8",
    "9.9.9.9",
    "93.184.216.34",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001:800::200e",
];

/// (network bits, prefix length, address width) of "a.b.c.d/len".
fn prefix(p: &str) -> (u128, u32, u32) {
    let (a, l) = p.split_once('/').expect("prefix");
    let len: u32 = l.parse().expect("len");
    match a.parse::<IpAddr>().expect("addr") {
        IpAddr::V4(v) => (u128::from(u32::from(v)), len, 32),
        IpAddr::V6(v) => (u128::from(v), len, 128),
    }
}

fn host_mask(len: u32, width: u32) -> u128 {
    let all = if width == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    all.checked_shr(len).unwrap_or(0)
}

fn contains(p: &str, bits: u128, width: u32) -> bool {
    let (net, len, w) = prefix(p);
    w == width && bits & !host_mask(len, w) == net
}

fn addr(bits: u128, width: u32) -> IpAddr {
    if width == 32 {
        IpAddr::V4(Ipv4Addr::from(bits as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(bits))
    }
}

fn is_metadata(ip: IpAddr) -> bool {
    METADATA
        .iter()
        .any(|m| m.parse::<IpAddr>().ok() == Some(ip))
}

/// Independent statement of the policy.
fn oracle(ip: IpAddr) -> bool {
    if is_metadata(ip) {
        return true;
    }
    match ip {
        IpAddr::V4(v) => {
            let b = u128::from(u32::from(v));
            REFUSED_V4.iter().any(|p| contains(p, b, 32))
        }
        IpAddr::V6(v) => {
            let b = u128::from(v);
            if contains("::ffff:0:0/96", b, 128) || contains("64:ff9b::/96", b, 128) {
                return oracle(IpAddr::V4(Ipv4Addr::from(b as u32)));
            }
            REFUSED_V6_ORACLE.iter().any(|p| contains(p, b, 128))
        }
    }
}

struct Vector {
    ip: IpAddr,
    refused: bool,
    why: String,
}

/// The seven IPv4-in-IPv6 forms of `v4` (Teredo twice: as server and as
/// client, the other end being a public address), and whether the form is
/// allowed when `v4` is public.
fn embeddings(v4: Ipv4Addr) -> Vec<(Ipv6Addr, &'static str, bool)> {
    let x = u128::from(u32::from(v4));
    let public = u128::from(u32::from(Ipv4Addr::new(8, 8, 8, 8)));
    vec![
        (Ipv6Addr::from(0xffff_0000_0000 | x), "mapped", true),
        (Ipv6Addr::from(x), "compatible", false),
        (Ipv6Addr::from((0x64_ff9b_u128 << 96) | x), "nat64", true),
        (
            Ipv6Addr::from((0x64_ff9b_0001_u128 << 80) | x),
            "nat64-local",
            false,
        ),
        (
            Ipv6Addr::from((0x2002_u128 << 112) | (x << 80) | 0x1),
            "6to4",
            false,
        ),
        (
            Ipv6Addr::from(
                (0x2001_0000_u128 << 96)
                    | (x << 64)
                    | (0x8000_u128 << 48)
                    | (0x1234_u128 << 32)
                    | u128::from(!(public as u32)),
            ),
            "teredo-server",
            false,
        ),
        (
            Ipv6Addr::from((0x2001_0000_u128 << 96) | (public << 64) | u128::from(!(x as u32))),
            "teredo-client",
            false,
        ),
    ]
}

fn vectors() -> Vec<Vector> {
    let mut out = Vec::new();
    let mut push = |ip: IpAddr, refused: bool, why: String| out.push(Vector { ip, refused, why });
    for (list, refused_inside) in [
        (REFUSED_V4, true),
        (REFUSED_V6, true),
        (ALLOWED_REGISTRY, false),
    ] {
        for p in list {
            let (net, len, w) = prefix(p);
            let last = net | host_mask(len, w);
            let mid = net | ((host_mask(len, w) >> 1).wrapping_add(1) & host_mask(len, w));
            for (what, b) in [("first", net), ("middle", mid), ("last", last)] {
                let ip = addr(b, w);
                assert_eq!(
                    oracle(ip),
                    refused_inside,
                    "oracle disagrees on {what} of {p}"
                );
                push(ip, refused_inside, format!("{what} of {p}"));
            }
            let max = if w == 32 {
                u128::from(u32::MAX)
            } else {
                u128::MAX
            };
            if net > 0 {
                let ip = addr(net - 1, w);
                push(ip, oracle(ip), format!("just below {p}"));
            }
            if last < max {
                let ip = addr(last + 1, w);
                push(ip, oracle(ip), format!("just above {p}"));
            }
        }
    }
    for m in METADATA {
        push(m.parse().expect("metadata"), true, format!("metadata {m}"));
    }
    for p in PUBLIC {
        push(p.parse().expect("public"), false, format!("public {p}"));
    }
    for inner in [
        "127.0.0.1",
        "127.255.255.254",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.0.1",
        "100.64.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.1",
        "169.254.169.254",
        "169.254.170.2",
        "100.100.100.200",
        "168.63.129.16",
        "8.8.8.8",
        "1.1.1.1",
        "9.9.9.9",
    ] {
        let v4: Ipv4Addr = inner.parse().expect("inner");
        let inner_refused = oracle(IpAddr::V4(v4));
        for (v6, form, allowed_if_public) in embeddings(v4) {
            let refused = inner_refused || !allowed_if_public;
            assert_eq!(oracle(IpAddr::V6(v6)), refused, "oracle on {form} {v6}");
            push(IpAddr::V6(v6), refused, format!("{inner} as {form}"));
        }
    }
    out
}

#[test]
fn address_vectors() {
    let vs = vectors();
    let mut failures = Vec::new();
    for v in &vs {
        let got = forbidden_range(v.ip);
        if got.is_some() != v.refused {
            failures.push(format!(
                "{} ({}): expected {}, got {got:?}",
                v.ip,
                v.why,
                if v.refused { "refused" } else { "allowed" }
            ));
        }
        if let Some(reason) = got {
            assert!(!reason.is_empty());
        }
    }
    eprintln!("address vectors: {}", vs.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(vs.len() >= 300, "only {} vectors", vs.len());
}

#[test]
fn reasons_name_the_range_and_the_embedding() {
    let r = |s: &str| forbidden_range(s.parse().expect("addr")).unwrap_or_default();
    assert_eq!(r("10.1.2.3"), "10.0.0.0/8 (Private-Use, RFC 1918)");
    assert_eq!(
        r("192.0.0.9"),
        "192.0.0.9/32 (Port Control Protocol Anycast, RFC 7723)"
    );
    assert_eq!(r("2001:db8::1"), "2001:db8::/32 (Documentation, RFC 3849)");
    assert_eq!(r("2002:808:808::1"), "2002::/16 (6to4, RFC 3056)");
    assert!(r("169.254.169.254").starts_with("169.254.169.254 (cloud metadata endpoint: AWS"));
    assert_eq!(
        r("64:ff9b::7f00:1"),
        "127.0.0.0/8 (Loopback, RFC 1122), as 127.0.0.1 embedded in 64:ff9b::7f00:1 \
         (NAT64 64:ff9b::/96)"
    );
    let teredo = r("2001:0:808:808:8000:1234:80ff:fffe");
    assert!(
        teredo.contains("127.0.0.1") && teredo.contains("Teredo client"),
        "{teredo}"
    );
    assert!(r("2002:a00:1::").contains("as 10.0.0.1 embedded in 2002:a00:1:: (6to4"));
}

#[test]
fn metadata_names() {
    for name in [
        "metadata.google.internal",
        "METADATA.GOOGLE.INTERNAL",
        "metadata.google.internal.",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
    ] {
        assert!(forbidden_host(name).is_some(), "{name}");
    }
    for name in [
        "example.com",
        "metadata.google.internal.example.com",
        "xmetadata",
        "google.internal",
    ] {
        assert!(forbidden_host(name).is_none(), "{name}");
    }
}

enum Expect {
    /// Refused as ForbiddenAddress; `Url::host_str()` and the refused
    /// address are both this string (brackets stripped for the address).
    Forbidden(&'static str),
    /// Passes with allow_all; the parsed host is this.
    Allowed(&'static str),
    Userinfo,
    Invalid,
}

fn allow_all() -> SafeHttp {
    SafeHttp::new(
        EgressPolicy {
            allowed_domains: vec![],
            allow_all: true,
        },
        HttpLimits::default(),
    )
    .expect("client")
}

const URLS: &[(&str, Expect)] = &[
    // 127.0.0.1, every notation the WHATWG IPv4 parser accepts.
    ("http://127.0.0.1/", Expect::Forbidden("127.0.0.1")),
    ("http://2130706433/", Expect::Forbidden("127.0.0.1")),
    ("http://0x7f000001/", Expect::Forbidden("127.0.0.1")),
    ("http://0X7F000001/", Expect::Forbidden("127.0.0.1")),
    ("http://017700000001/", Expect::Forbidden("127.0.0.1")),
    ("http://0177.0.0.1/", Expect::Forbidden("127.0.0.1")),
    (
        "http://0177.0000.0000.0001/",
        Expect::Forbidden("127.0.0.1"),
    ),
    ("http://0x7f.0.0.1/", Expect::Forbidden("127.0.0.1")),
    ("http://0x7f.0x0.0x0.0x1/", Expect::Forbidden("127.0.0.1")),
    ("http://0x7f.1/", Expect::Forbidden("127.0.0.1")),
    ("http://127.1/", Expect::Forbidden("127.0.0.1")),
    ("http://127.0.1/", Expect::Forbidden("127.0.0.1")),
    ("http://127.0.0.1./", Expect::Forbidden("127.0.0.1")),
    ("http://127.000.000.001/", Expect::Forbidden("127.0.0.1")),
    ("http://%31%32%37.0.0.1/", Expect::Forbidden("127.0.0.1")),
    (
        "http://%31%32%37%2e%30%2e%30%2e%31/",
        Expect::Forbidden("127.0.0.1"),
    ),
    (
        "http://\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}/",
        Expect::Forbidden("127.0.0.1"),
    ),
    (
        "http://127\u{3002}0\u{3002}0\u{3002}1/",
        Expect::Forbidden("127.0.0.1"),
    ),
    ("http://127.0.0.\t1/", Expect::Forbidden("127.0.0.1")),
    ("http://127.0.0.1\n/", Expect::Forbidden("127.0.0.1")),
    ("  http://127.0.0.1/  ", Expect::Forbidden("127.0.0.1")),
    ("HTTP://127.0.0.1/", Expect::Forbidden("127.0.0.1")),
    ("https://127.0.0.1:443/", Expect::Forbidden("127.0.0.1")),
    ("http://127.0.0.1:8080/", Expect::Forbidden("127.0.0.1")),
    ("http://127.0.0.1:65535/", Expect::Forbidden("127.0.0.1")),
    ("http:/127.0.0.1/", Expect::Forbidden("127.0.0.1")),
    ("http:127.0.0.1/", Expect::Forbidden("127.0.0.1")),
    ("http:\\\\127.0.0.1\\", Expect::Forbidden("127.0.0.1")),
    (
        "http://127.0.0.1#@evil.com/",
        Expect::Forbidden("127.0.0.1"),
    ),
    (
        "http://127.0.0.1?@evil.com/",
        Expect::Forbidden("127.0.0.1"),
    ),
    (
        "http://127.255.255.254/",
        Expect::Forbidden("127.255.255.254"),
    ),
    ("http://0/", Expect::Forbidden("0.0.0.0")),
    ("http://0.0.0.0/", Expect::Forbidden("0.0.0.0")),
    ("http://10.1/", Expect::Forbidden("10.0.0.1")),
    ("http://192.168.257/", Expect::Forbidden("192.168.1.1")),
    ("http://3232235777/", Expect::Forbidden("192.168.1.1")),
    ("http://4294967295/", Expect::Forbidden("255.255.255.255")),
    // 169.254.169.254.
    (
        "http://169.254.169.254/latest/meta-data/",
        Expect::Forbidden("169.254.169.254"),
    ),
    ("http://2852039166/", Expect::Forbidden("169.254.169.254")),
    ("http://0xa9fea9fe/", Expect::Forbidden("169.254.169.254")),
    ("http://025177524776/", Expect::Forbidden("169.254.169.254")),
    (
        "http://0251.0376.0251.0376/",
        Expect::Forbidden("169.254.169.254"),
    ),
    (
        "http://0xa9.0xfe.0xa9.0xfe/",
        Expect::Forbidden("169.254.169.254"),
    ),
    (
        "http://169.254.43518/",
        Expect::Forbidden("169.254.169.254"),
    ),
    ("http://169.16689662/", Expect::Forbidden("169.254.169.254")),
    (
        "http://%31%36%39.254.169.254/",
        Expect::Forbidden("169.254.169.254"),
    ),
    (
        "http://\u{ff11}\u{ff16}\u{ff19}.\u{ff12}\u{ff15}\u{ff14}.\u{ff11}\u{ff16}\u{ff19}.\u{ff12}\u{ff15}\u{ff14}/",
        Expect::Forbidden("169.254.169.254"),
    ),
    ("http://169.254.169.254:80@evil.com/", Expect::Userinfo),
    (
        "http://169.254.170.2/v2/credentials",
        Expect::Forbidden("169.254.170.2"),
    ),
    (
        "http://100.100.100.200/",
        Expect::Forbidden("100.100.100.200"),
    ),
    ("http://168.63.129.16/", Expect::Forbidden("168.63.129.16")),
    // IPv6 literals.
    ("http://[::1]/", Expect::Forbidden("[::1]")),
    ("http://[0:0:0:0:0:0:0:1]/", Expect::Forbidden("[::1]")),
    ("http://[::]/", Expect::Forbidden("[::]")),
    (
        "http://[::ffff:127.0.0.1]/",
        Expect::Forbidden("[::ffff:7f00:1]"),
    ),
    (
        "http://[::ffff:7f00:1]/",
        Expect::Forbidden("[::ffff:7f00:1]"),
    ),
    ("http://[::127.0.0.1]/", Expect::Forbidden("[::7f00:1]")),
    (
        "http://[64:ff9b::127.0.0.1]/",
        Expect::Forbidden("[64:ff9b::7f00:1]"),
    ),
    (
        "http://[64:ff9b:1::a9fe:a9fe]/",
        Expect::Forbidden("[64:ff9b:1::a9fe:a9fe]"),
    ),
    (
        "http://[::ffff:169.254.169.254]/",
        Expect::Forbidden("[::ffff:a9fe:a9fe]"),
    ),
    (
        "http://[2002:a9fe:a9fe::]/",
        Expect::Forbidden("[2002:a9fe:a9fe::]"),
    ),
    (
        "http://[2001:0:808:808:8000:1234:80ff:fffe]/",
        Expect::Forbidden("[2001:0:808:808:8000:1234:80ff:fffe]"),
    ),
    (
        "http://[fd00:ec2::254]/",
        Expect::Forbidden("[fd00:ec2::254]"),
    ),
    ("http://[FE80::1]/", Expect::Forbidden("[fe80::1]")),
    ("http://[fe80::1%25eth0]/", Expect::Invalid),
    ("http://[fe80::1%eth0]/", Expect::Invalid),
    ("http://[::1%251]/", Expect::Invalid),
    ("http://[fc00::1]:8080/", Expect::Forbidden("[fc00::1]")),
    ("http://[ff02::1]/", Expect::Forbidden("[ff02::1]")),
    ("http://[2001:db8::1]/", Expect::Forbidden("[2001:db8::1]")),
    // Metadata by name.
    (
        "http://metadata.google.internal/computeMetadata/v1/",
        Expect::Forbidden("metadata.google.internal"),
    ),
    (
        "http://METADATA.Google.Internal./",
        Expect::Forbidden("metadata.google.internal."),
    ),
    ("http://metadata/", Expect::Forbidden("metadata")),
    (
        "http://instance-data/latest/",
        Expect::Forbidden("instance-data"),
    ),
    // Userinfo and backslash tricks: the refusal is of the host the WHATWG
    // parser actually read. A backslash is a path separator in http(s), so
    // `evil.com\@127.0.0.1` is host evil.com with path `/@127.0.0.1/`.
    ("http://evil.com\\@127.0.0.1/", Expect::Allowed("evil.com")),
    (
        "http://127.0.0.1\\@evil.com/",
        Expect::Forbidden("127.0.0.1"),
    ),
    (
        "http://127.0.0.1\\\\@evil.com/",
        Expect::Forbidden("127.0.0.1"),
    ),
    ("http://evil.com@127.0.0.1/", Expect::Userinfo),
    ("http://127.0.0.1@evil.com/", Expect::Userinfo),
    ("http://evil.com:pw@127.0.0.1/", Expect::Userinfo),
    ("http://@127.0.0.1/", Expect::Forbidden("127.0.0.1")),
    ("http://evil.com#@127.0.0.1/", Expect::Allowed("evil.com")),
    // `%2f` is not decoded in userinfo: host evil.com, userinfo refused.
    ("http://127.0.0.1%2f@evil.com/", Expect::Userinfo),
    ("http://127.0.0.1%00/", Expect::Invalid),
    ("http://127.0.0.1:99999/", Expect::Invalid),
    ("http://256.0.0.1/", Expect::Invalid),
    ("http://0x100000000/", Expect::Invalid),
    // Public literals pass (allow_all).
    ("http://1.1.1.1/", Expect::Allowed("1.1.1.1")),
    ("http://16843009/", Expect::Allowed("1.1.1.1")),
    ("http://8.8.8.8/", Expect::Allowed("8.8.8.8")),
    ("http://9.9.9.9/", Expect::Allowed("9.9.9.9")),
    (
        "http://[2606:4700:4700::1111]/",
        Expect::Allowed("[2606:4700:4700::1111]"),
    ),
    (
        "http://[2001:4860:4860::8888]/",
        Expect::Allowed("[2001:4860:4860::8888]"),
    ),
    (
        "http://[::ffff:8.8.8.8]/",
        Expect::Allowed("[::ffff:808:808]"),
    ),
    (
        "http://[64:ff9b::8.8.8.8]/",
        Expect::Allowed("[64:ff9b::808:808]"),
    ),
    (
        "http://[2002:808:808::1]/",
        Expect::Forbidden("[2002:808:808::1]"),
    ),
    ("http://example.com/", Expect::Allowed("example.com")),
    (
        "http://metadata.example.com/",
        Expect::Allowed("metadata.example.com"),
    ),
];

#[test]
fn url_vectors() {
    let http = allow_all();
    let mut failures = Vec::new();
    for (input, expect) in URLS {
        let parsed = url::Url::parse(input);
        let got = http.check_url(input);
        let ok = match (expect, &got) {
            (Expect::Forbidden(h), Err(NetError::ForbiddenAddress { host, addr, .. })) => {
                let bare = h.trim_start_matches('[').trim_end_matches(']');
                parsed
                    .as_ref()
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_string))
                    == Some((*h).to_string())
                    && host == h
                    && match (addr.parse::<IpAddr>(), bare.parse::<IpAddr>()) {
                        (Ok(a), Ok(b)) => a == b,
                        (Err(_), Err(_)) => addr == h,
                        _ => false,
                    }
            }
            (Expect::Allowed(h), Ok(u)) => u.host_str() == Some(h),
            (Expect::Userinfo, Err(NetError::Userinfo { .. })) => true,
            (Expect::Invalid, Err(NetError::InvalidUrl { .. })) => parsed.is_err(),
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{input:?}: parsed host {:?}, got {got:?}",
                parsed.as_ref().map(|u| u.host_str().map(str::to_string))
            ));
        }
    }
    eprintln!("URL vectors: {}", URLS.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn refused_prefixes() -> Vec<(u128, u32, u32)> {
    REFUSED_V4
        .iter()
        .chain(REFUSED_V6.iter())
        .map(|p| prefix(p))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn every_address_in_a_refused_prefix_is_refused(i in 0usize..52, host in any::<u128>()) {
        let ps = refused_prefixes();
        let (net, len, w) = ps[i % ps.len()];
        let ip = addr(net | (host & host_mask(len, w)), w);
        prop_assert!(forbidden_range(ip).is_some(), "{}", ip);
    }

    #[test]
    fn embedded_refused_v4_refuses_every_form(v4 in any::<u32>()) {
        let v4 = Ipv4Addr::from(v4);
        let refused = forbidden_range(IpAddr::V4(v4)).is_some();
        prop_assert_eq!(refused, oracle(IpAddr::V4(v4)), "{}", v4);
        for (v6, form, allowed_if_public) in embeddings(v4) {
            let got = forbidden_range(IpAddr::V6(v6));
            if refused && u128::from(v6) > 1 {
                prop_assert!(
                    got.as_deref().is_some_and(|r| r.contains(&v4.to_string())),
                    "{} as {} {}: {:?}", v4, form, v6, got
                );
            } else if refused {
                prop_assert!(got.is_some());
            } else {
                prop_assert_eq!(got.is_none(), allowed_if_public, "{} as {} {}", v4, form, v6);
            }
        }
    }

    #[test]
    fn random_v6_agrees_with_the_oracle(
        top in prop_oneof![
            Just(0u128), Just(0x0064u128), Just(0x2001), Just(0x2002), Just(0x2600),
            Just(0x2a00), Just(0x3fff), Just(0xfd00), Just(0xfe80), Just(0x4000), any::<u16>().prop_map(u128::from)
        ],
        rest in any::<u128>(),
        narrow in any::<bool>(),
    ) {
        // `narrow` keeps the interesting low bits only (::/96-ish forms).
        let rest = if narrow { rest & 0xffff_ffff_ffff } else { rest };
        let ip = IpAddr::V6(Ipv6Addr::from((top << 112) | (rest & (u128::MAX >> 16))));
        prop_assert_eq!(forbidden_range(ip).is_some(), oracle(ip), "{}", ip);
    }
}
