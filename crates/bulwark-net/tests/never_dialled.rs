//! Property: whatever URL is given, and whatever the names in it resolve
//! to, no address inside a refused range is ever dialled.

use crate::support;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use bulwark_net::{EgressPolicy, HttpLimits, SafeHttp, StaticResolver, forbidden_range};
use proptest::prelude::*;
use support::RecordingDialer;

/// Addresses biased toward the refused ranges and their encodings.
fn address() -> impl Strategy<Value = IpAddr> {
    let v4_refused = prop_oneof![
        (0u32..1 << 24).prop_map(|l| Ipv4Addr::from(0x7f00_0000 | l)),
        (0u32..1 << 24).prop_map(|l| Ipv4Addr::from(0x0a00_0000 | l)),
        (0u32..1 << 16).prop_map(|l| Ipv4Addr::from(0xa9fe_0000 | l)),
        (0u32..1 << 16).prop_map(|l| Ipv4Addr::from(0xc0a8_0000 | l)),
        (0u32..1 << 22).prop_map(|l| Ipv4Addr::from(0x6440_0000 | l)),
        (0u32..1 << 24).prop_map(Ipv4Addr::from),
        (0u32..1 << 28).prop_map(|l| Ipv4Addr::from(0xe000_0000 | l)),
        (0u32..1 << 28).prop_map(|l| Ipv4Addr::from(0xf000_0000 | l)),
    ];
    let v4 = prop_oneof![v4_refused.clone(), any::<u32>().prop_map(Ipv4Addr::from)];
    prop_oneof![
        v4.clone().prop_map(IpAddr::V4),
        v4.clone().prop_map(|a| IpAddr::V6(a.to_ipv6_mapped())),
        v4.clone().prop_map(|a| IpAddr::V6(a.to_ipv6_compatible())),
        v4.clone().prop_map(|a| IpAddr::V6(Ipv6Addr::from(
            (0x64_ff9b_u128 << 96) | u128::from(u32::from(a))
        ))),
        v4.clone().prop_map(|a| IpAddr::V6(Ipv6Addr::from(
            (0x2002_u128 << 112) | (u128::from(u32::from(a)) << 80)
        ))),
        v4.prop_map(|a| IpAddr::V6(Ipv6Addr::from(
            (0x2001_0000_u128 << 96) | u128::from(!u32::from(a))
        ))),
        any::<u128>().prop_map(|b| IpAddr::V6(Ipv6Addr::from(b))),
        (0u128..1 << 64).prop_map(|l| IpAddr::V6(Ipv6Addr::from((0xfe80_u128 << 112) | l))),
        (0u128..1 << 120).prop_map(|l| IpAddr::V6(Ipv6Addr::from((0xfd_u128 << 120) | l))),
        Just(IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ]
}

/// How the host appears in the URL.
fn host_text(ip: IpAddr, form: u8) -> String {
    match (ip, form % 5) {
        (IpAddr::V4(a), 0) => a.to_string(),
        (IpAddr::V4(a), 1) => u32::from(a).to_string(),
        (IpAddr::V4(a), 2) => format!("0x{:x}", u32::from(a)),
        (IpAddr::V4(a), 3) => a
            .octets()
            .iter()
            .map(|o| format!("0{o:o}"))
            .collect::<Vec<_>>()
            .join("."),
        (IpAddr::V4(a), _) => format!("[::ffff:{a}]"),
        (IpAddr::V6(a), _) => format!("[{a}]"),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_refused_address_is_ever_dialled(
        literal in address(),
        form in any::<u8>(),
        answers in prop::collection::vec(address(), 0..4),
        use_name in any::<bool>(),
        https in any::<bool>(),
        port in prop::option::of(1u16..),
        junk in "[a-z0-9/?#%@:.]{0,12}",
    ) {
        let resolver = Arc::new(StaticResolver::new());
        resolver.answer("target.test", answers.clone());
        let dialer = Arc::new(RecordingDialer::default());
        let http = SafeHttp::new(
            EgressPolicy { allowed_domains: Vec::new(), allow_all: true },
            HttpLimits::default(),
        )
        .expect("client")
        .with_resolver(resolver)
        .with_dialer(dialer.clone());
        let host = if use_name { "target.test".to_string() } else { host_text(literal, form) };
        let scheme = if https { "https" } else { "http" };
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        let url = format!("{scheme}://{host}{port}/{junk}");
        let result = runtime().block_on(http.get(&url));
        for addr in dialer.dialled() {
            prop_assert_eq!(forbidden_range(addr.ip()), None, "{} dialled {}", url, addr);
        }
        // And a dial happened only when every answer was acceptable.
        if use_name && answers.iter().any(|a| forbidden_range(*a).is_some()) {
            prop_assert!(dialer.dialled().is_empty(), "{}: {:?}", url, result);
        }
    }
}
