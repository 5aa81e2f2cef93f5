//! URLs come from the model (web_fetch) and from pages (redirects). Whatever
//! string arrives, a URL the egress client accepts must be http(s), carry no
//! credentials, name no forbidden IP literal or metadata host, and (under an
//! allowlist) name an allowed host. The address table must never panic.
#![no_main]

use bulwark_net::{EgressPolicy, HttpLimits, SafeHttp, forbidden_host, forbidden_range};
use libfuzzer_sys::fuzz_target;
use std::net::IpAddr;
use std::sync::LazyLock;

static OPEN: LazyLock<Option<SafeHttp>> = LazyLock::new(|| {
    SafeHttp::new(EgressPolicy { allowed_domains: Vec::new(), allow_all: true }, HttpLimits::default()).ok()
});
static LISTED: LazyLock<Option<SafeHttp>> = LazyLock::new(|| {
    let allowed = vec!["example.com".to_string(), "*.github.com".to_string()];
    SafeHttp::new(EgressPolicy { allowed_domains: allowed, allow_all: false }, HttpLimits::default()).ok()
});

fn allowed_by_list(host: &str) -> bool {
    host == "example.com" || host == "github.com" || host.ends_with(".github.com")
}

fuzz_target!(|data: &[u8]| {
    // Raw bytes as an address, so the table sees every bit pattern.
    if data.len() >= 16 {
        let mut v6 = [0u8; 16];
        v6.copy_from_slice(&data[..16]);
        let _ = forbidden_range(IpAddr::from(v6));
        let _ = forbidden_range(IpAddr::from([v6[0], v6[1], v6[2], v6[3]]));
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (Some(open), Some(listed)) = (OPEN.as_ref(), LISTED.as_ref()) else {
        panic!("egress clients failed to build");
    };
    for (client, list) in [(open, false), (listed, true)] {
        let Ok(url) = client.check_url(text) else {
            continue;
        };
        assert!(matches!(url.scheme(), "http" | "https"), "scheme of {text:?}");
        assert!(url.username().is_empty() && url.password().is_none(), "credentials in {text:?}");
        let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        assert!(!host.is_empty(), "no host in {text:?}");
        if let Ok(ip) = host.parse::<IpAddr>() {
            assert!(forbidden_range(ip).is_none(), "forbidden literal accepted: {text:?}");
        }
        assert!(forbidden_host(&host).is_none(), "metadata host accepted: {text:?}");
        if list {
            assert!(allowed_by_list(host.trim_end_matches('.')), "off-list host {host:?} accepted from {text:?}");
        }
    }
});
