//! Credentials through the door: a grant's credential reaches only its
//! host, is audited by names, never shows in what the model sees; a call
//! carrying a secret value is refused and audited as exfiltration.

use crate::common;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use bulwark_audit::{Decision, MemorySink};
use bulwark_kernel::{ToolCall, ToolRegistry};
use bulwark_net::{Credentials, EgressPolicy, HttpLimits, SafeHttp, SecretStore, StaticResolver};
use bulwark_policy::parse_manifest;
use bulwark_test_support::http;
use common::*;
use secrecy::SecretString;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "ghp_KernelTestToken_5566778899";

/// Echoes each request head back as the body.
async fn echo_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 2048];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let reply = http::response("200 OK", &[("content-type", "text/plain")], &req);
                let _ = sock.write_all(&reply).await;
            });
        }
    });
    port
}

fn manifest(port: u16) -> String {
    format!(
        r#"
[agent]
name = "tester"
[tools]
allow = ["web"]
[[capabilities]]
kind = "net_connect"
host = "api.fixture.test:{port}"
[[capabilities]]
kind = "net_connect"
host = "other.fixture.test:{port}"
[credentials.grants.github]
keys = ["GH_TOKEN"]
tools = ["web"]
hosts = ["api.fixture.test"]
inject = [{{ header = "Authorization", value = "Bearer ${{GH_TOKEN}}" }}]
"#
    )
}

async fn call(
    door: &bulwark_kernel::Door,
    s: &mut bulwark_kernel::Session,
    id: &str,
    input: Value,
) -> bulwark_kernel::DispatchResult {
    door.dispatch(
        s,
        ToolCall {
            id,
            name: "web_fetch",
            input: &input,
        },
    )
    .await
}

#[tokio::test]
async fn credentials_reach_their_host_only_and_never_the_model() {
    let port = echo_server().await;
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let text = manifest(port);
    let grants: BTreeMap<_, _> = parse_manifest(&text, "agent.toml")
        .unwrap()
        .credentials
        .grants;
    let sink = Arc::new(MemorySink::new());
    let door = door(registry.clone(), sink.clone(), deny_all());
    let mut s = session(dir.path(), policy(&registry, &text));

    let mut store = SecretStore::new();
    store.insert("GH_TOKEN", SecretString::from(TOKEN), true);
    let resolver = Arc::new(StaticResolver::new());
    let lo: IpAddr = "127.0.0.1".parse().unwrap();
    resolver
        .answer("api.fixture.test", vec![lo])
        .answer("other.fixture.test", vec![lo]);
    let mut http = SafeHttp::new(
        EgressPolicy {
            allowed_domains: vec!["*.fixture.test".into()],
            allow_all: false,
        },
        HttpLimits::default(),
    )
    .unwrap()
    .with_resolver(resolver)
    .with_credentials(Arc::new(
        Credentials::new(&grants, Arc::new(store)).unwrap(),
    ));
    http.allow_internal_service("api.fixture.test", port);
    http.allow_internal_service("other.fixture.test", port);
    s = s.with_http(Some(Arc::new(http)));

    // 1. The grant's host: injected on the wire, redacted in the result.
    let r = call(
        &door,
        &mut s,
        "1",
        json!({"url": format!("http://api.fixture.test:{port}/me")}),
    )
    .await;
    assert_eq!(r.decision, Decision::Allowed, "{}", r.content);
    assert!(
        r.content.contains("Bearer [secret GH_TOKEN redacted]"),
        "{}",
        r.content
    );
    assert!(!r.content.contains(TOKEN));

    // 2. Another host: nothing injected.
    let r = call(
        &door,
        &mut s,
        "2",
        json!({"url": format!("http://other.fixture.test:{port}/")}),
    )
    .await;
    assert_eq!(r.decision, Decision::Allowed, "{}", r.content);
    assert!(
        !r.content.to_ascii_lowercase().contains("authorization"),
        "{}",
        r.content
    );

    // 3. A placeholder aimed at the wrong host is refused.
    let r = call(
        &door,
        &mut s,
        "3",
        json!({"url": format!("http://other.fixture.test:{port}/"), "headers": {"X-Key": "${GH_TOKEN}"}}),
    )
    .await;
    assert_eq!(
        (r.decision, &r.reason),
        (Decision::Denied, &bulwark_audit::Reason::Egress),
        "{}",
        r.content
    );

    // 4. The secret's value smuggled in the URL (base64) is exfiltration.
    let hidden = "Z2hwX0tlcm5lbFRlc3RUb2tlbl81NTY2Nzc4ODk5"; // base64 of TOKEN
    let r = call(
        &door,
        &mut s,
        "4",
        json!({"url": format!("http://other.fixture.test:{port}/c?d={hidden}")}),
    )
    .await;
    assert_eq!(
        (r.decision, &r.reason),
        (Decision::Denied, &bulwark_audit::Reason::Exfiltration),
        "{}",
        r.content
    );
    assert!(r.content.contains("GH_TOKEN") && !r.content.contains(TOKEN));

    let records = sink.records();
    let credential: Vec<_> = records
        .iter()
        .filter(|r| r.action == bulwark_audit::Action::Credential)
        .collect();
    assert_eq!(credential.len(), 1, "{credential:?}");
    assert_eq!(
        credential[0].detail,
        "grant github: keys GH_TOKEN to api.fixture.test: injected"
    );
    assert!(
        records
            .iter()
            .any(|r| r.reason == bulwark_audit::Reason::Exfiltration
                && r.decision == Decision::Denied
                && r.detail.contains("GH_TOKEN"))
    );
    for r in &records {
        let all = format!("{r:?}");
        assert!(
            !all.contains(TOKEN) && !all.contains(hidden),
            "audit leaks: {all}"
        );
    }
}
