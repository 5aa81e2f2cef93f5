//! End to end through the binary: a scripted agent fetches from an
//! operator-declared internal service with a granted credential, while
//! proxy variables point elsewhere, then tries to smuggle the secret out.

use crate::common;

use bulwark_test_support::http;
use common::{Bw, field, scripted, with_action};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const TOKEN: &str = "e2e-token-Zq81xKd0Lm77Pw";

/// Echoes request heads; records them.
fn origin() -> (u16, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let addr = http::serve(usize::MAX, move |head| {
        log.lock().unwrap().push(head.to_owned());
        http::response("200 OK", &[("content-type", "text/plain")], head.as_bytes())
    });
    (addr.port(), seen)
}

/// Counts connections and answers nothing useful.
fn proxy() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (port, hits)
}

#[test]
fn granted_credential_reaches_the_internal_service_and_nowhere_else() {
    let (port, seen) = origin();
    let (proxy_port, proxy_hits) = proxy();
    let bw = Bw::empty();
    bw.write(
        "config.toml",
        &format!("[egress]\ninternal = [\"127.0.0.1:{port}\"]\n"),
    );
    let manifest = scripted(
        "fetcher",
        &format!(
            r#"[tools]
allow = ["web"]
[sandbox]
allowed_domains = ["127.0.0.1"]
[[capabilities]]
kind = "net_connect"
host = "127.0.0.1:{port}"
[credentials.grants.internal]
keys = ["BW_E2E_TOKEN"]
tools = ["web"]
hosts = ["127.0.0.1:{port}"]
inject = [{{ header = "Authorization", value = "Bearer ${{BW_E2E_TOKEN}}" }}]
"#
        ),
    );
    let hex: String = TOKEN.bytes().map(|b| format!("{b:02x}")).collect();
    let script = format!(
        "{{\"tool_calls\": [{{\"name\": \"web_fetch\", \"input\": {{\"url\": \"http://127.0.0.1:{port}/hello\"}}}}]}}\n\
         {{\"tool_calls\": [{{\"name\": \"web_fetch\", \"input\": {{\"url\": \"http://127.0.0.1:{port}/leak?d={hex}\"}}}}]}}\n\
         {{\"text\": \"done\"}}\n"
    );
    bw.agent("fetcher", &manifest, Some(&script));
    let proxy_url = format!("http://127.0.0.1:{proxy_port}");
    let out = bw
        .cmd(&["run", "fetcher", "fetch it"])
        .env("BW_E2E_TOKEN", TOKEN)
        .env("HTTP_PROXY", &proxy_url)
        .env("HTTPS_PROXY", &proxy_url)
        .env("ALL_PROXY", &proxy_url)
        .env("http_proxy", &proxy_url)
        .run();
    out.ok();

    let heads = seen.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "only the clean request was sent: {heads:?}");
    assert!(
        heads[0].starts_with("GET /hello ")
            && heads[0].contains(&format!("authorization: Bearer {TOKEN}")),
        "{}",
        heads[0]
    );
    assert_eq!(
        proxy_hits.load(Ordering::SeqCst),
        0,
        "proxy variables were honoured"
    );

    let records = bw.audit();
    let creds = with_action(&records, "credential");
    assert_eq!(creds.len(), 1, "{records:#?}");
    assert_eq!(
        field(creds[0], "detail"),
        format!("grant internal: keys BW_E2E_TOKEN to 127.0.0.1: injected")
    );
    let calls: Vec<(&str, &str)> = with_action(&records, "tool_call")
        .iter()
        .map(|r| (field(r, "decision"), field(r, "reason")))
        .collect();
    assert_eq!(calls, [("allowed", "ok"), ("denied", "exfiltration")]);

    // The secret is nowhere the agent or an operator reads: output, audit,
    // or the stored transcript (database and its WAL).
    assert!(!out.stdout.contains(TOKEN) && !out.stderr.contains(TOKEN));
    assert!(!format!("{records:?}").contains(TOKEN));
    for entry in std::fs::read_dir(bw.home()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with("bulwark.db") {
            let bytes = std::fs::read(entry.path()).unwrap();
            assert!(
                !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
                "{name} holds the secret"
            );
        }
    }
}
