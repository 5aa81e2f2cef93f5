//! Any CONNECT target, through the real parser and policy: either refused,
//! or a tunnel to a host:port the policy allows; never a panic, and the
//! proxy keeps serving.

use bulwark_net::ProxyRequestKind;
use proptest::prelude::*;
use tokio::io::AsyncWriteExt;

use super::{Fixture, Setup, read_head, status};

fn target() -> impl Strategy<Value = String> {
    prop_oneof![
        // Anything authority-shaped.
        "[a-zA-Z0-9.:\\[\\]@%_~!$&'()*+,;=-]{0,40}",
        // Near misses of the allowed names and of addresses.
        (
            prop::sample::select(vec![
                "allowed.test",
                "ALLOWED.test.",
                "api.gh.test",
                "allowed.test.evil",
                "evil.allowed.test",
                "xn--allowed.test",
                "127.0.0.1",
                "[::1]",
                "[::ffff:7f00:1]",
                "0x7f.1",
                "2130706433",
                "10.0.0.5",
                "private.test",
                "169.254.169.254",
                "[fd00::1]",
                "metadata.google.internal",
                "allowed.test@evil",
                "",
            ]),
            prop::option::of(any::<u16>()),
            "[:@./]{0,2}",
        )
            .prop_map(|(h, p, junk)| match p {
                Some(p) => format!("{h}{junk}:{p}"),
                None => format!("{h}{junk}"),
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn a_connect_target_is_refused_or_allowed_by_the_policy(targets in prop::collection::vec(target(), 1..8)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        rt.block_on(async {
            let f = Fixture::new(Setup::default()).await;
            let allowed = [f.echo, f.web];
            for t in &targets {
                let mut s = f.connect().await;
                let req = format!("CONNECT {t} HTTP/1.1\r\nHost: x\r\n\r\n");
                let _ = s.write_all(req.as_bytes()).await;
                let head = read_head(&mut s).await;
                let code = status(&head);
                if code == 200 {
                    let e = f.events.wait_for(|e| e.kind == ProxyRequestKind::Connect).await;
                    let host = e.host.trim_end_matches('.').to_ascii_lowercase();
                    assert!(
                        matches!(host.as_str(), "allowed.test" | "api.gh.test")
                            && allowed.contains(&e.port),
                        "{t:?} opened a tunnel to {e:?}"
                    );
                } else {
                    assert!(matches!(code, 0 | 400 | 403 | 502), "{t:?}: {head}");
                }
                drop(s);
            }
            // Every dial went to a test server.
            for a in f.dialer.dialled() {
                assert!(a.ip().is_loopback() && allowed.contains(&a.port()), "{a}");
            }
            let (_s, head) = f.tunnel(&format!("allowed.test:{}", f.echo)).await;
            assert_eq!(status(&head), 200, "{head}");
        });
    }
}
