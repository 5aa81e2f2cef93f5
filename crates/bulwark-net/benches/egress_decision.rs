//! Cost of one egress decision, excluding DNS: URL parsing, scheme and
//! userinfo checks, the allowlist, and the address table (longest-prefix
//! match with IPv4-in-IPv6 unwrapping). The target is under 2 µs.

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bulwark_net::{EgressPolicy, HttpLimits, SafeHttp, SecretStore, forbidden_range};
use criterion::{Criterion, criterion_group, criterion_main};
use secrecy::SecretString;
use std::hint::black_box;
use std::net::IpAddr;

fn bench(c: &mut Criterion) {
    let allowed: Vec<String> = (0..20)
        .map(|i| format!("service{i}.example.com"))
        .chain(["*.github.com".to_string(), "api.openai.com".to_string()])
        .collect();
    let http = match SafeHttp::new(
        EgressPolicy {
            allowed_domains: allowed,
            allow_all: false,
        },
        HttpLimits::default(),
    ) {
        Ok(h) => h,
        Err(e) => panic!("client: {e}"),
    };
    c.bench_function("egress/check_url/allowed_host", |b| {
        b.iter(|| {
            black_box(http.check_url(black_box(
                "https://api.github.com/repos/x/y/issues?state=open",
            )))
        })
    });
    c.bench_function("egress/check_url/denied_metadata_literal", |b| {
        b.iter(|| black_box(http.check_url(black_box("http://169.254.169.254/latest/meta-data/"))))
    });
    c.bench_function("egress/check_url/denied_not_allowlisted", |b| {
        b.iter(|| black_box(http.check_url(black_box("https://evil.example.net/x"))))
    });
    let v4: IpAddr = [93, 184, 215, 14].into();
    let v6: IpAddr = match "2002:a9fe:a9fe::1".parse() {
        Ok(a) => a,
        Err(e) => panic!("addr: {e}"),
    };
    c.bench_function("egress/address/public_v4", |b| {
        b.iter(|| black_box(forbidden_range(black_box(v4))))
    });
    c.bench_function("egress/address/6to4_embedded_metadata", |b| {
        b.iter(|| black_box(forbidden_range(black_box(v6))))
    });
}

/// The exfiltration guard's cost on what a request usually carries: a URL
/// with a query, and a 4 KiB JSON body, against a store of five secrets.
fn guard(c: &mut Criterion) {
    let mut store = SecretStore::new();
    for (name, value) in [
        ("GH_TOKEN", "ghp_aaaaBBBBccccDDDDeeeeFFFF0000"),
        ("MAPS_KEY", "maps-1234567890abcdef"),
        ("SLACK_TOKEN", "xoxb-1111-2222-abcdefghij"),
        ("ANTHROPIC_API_KEY", "sk-ant-api03-zzzzyyyyxxxxwwww"),
        ("DB_PASSWORD", "correct horse battery staple"),
    ] {
        store.insert(name, SecretString::from(value), true);
    }
    let url = "https://api.github.com/repos/rust-lang/rust/issues?state=open&labels=C-bug&per_page=50&page=2";
    let body: String = (0..80)
        .map(|i| format!("{{\"id\":{i},\"title\":\"issue number {i} text\"}},"))
        .collect();
    c.bench_function("egress/guard/url_with_query", |b| {
        b.iter(|| black_box(store.find_in(black_box(url.as_bytes()))))
    });
    c.bench_function(
        &format!("egress/guard/json_body_{}_bytes", body.len()),
        |b| b.iter(|| black_box(store.find_in(black_box(body.as_bytes())))),
    );
}

/// The guard on larger bodies (4 KiB and 64 KiB of JSON-ish text) against
/// three secrets: what a tool request body (`find_in`) and a command's
/// output on its way to the model (`redact`) cost. No secret is present,
/// the common case and the worst one (every check runs to the end).
fn guard_sizes(c: &mut Criterion) {
    let mut store = SecretStore::new();
    for (name, value) in [
        ("GH_TOKEN", "ghp_aaaaBBBBccccDDDDeeeeFFFF0000"),
        ("SLACK_TOKEN", "xoxb-1111-2222-abcdefghij"),
        ("ANTHROPIC_API_KEY", "sk-ant-api03-zzzzyyyyxxxxwwww"),
    ] {
        store.insert(name, SecretString::from(value), true);
    }
    for size in [4 * 1024, 64 * 1024] {
        let mut body = String::new();
        let mut i = 0;
        while body.len() < size {
            body.push_str(&format!(
                "{{\"id\":{i},\"title\":\"issue number {i}: the build fails on x86_64\",\"sha\":\"{:040x}\",\"state\":\"open\"}},\n",
                i * 7919
            ));
            i += 1;
        }
        body.truncate(size);
        let kib = size / 1024;
        c.bench_function(&format!("egress/guard3/find_in_{kib}KiB"), |b| {
            b.iter(|| black_box(store.find_in(black_box(body.as_bytes()))))
        });
        c.bench_function(&format!("egress/guard3/redact_{kib}KiB"), |b| {
            b.iter(|| black_box(store.redact(black_box(&body))))
        });
    }
}

criterion_group!(benches, bench, guard, guard_sizes);
criterion_main!(benches);
