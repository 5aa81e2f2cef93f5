//! `bulwark net check`: the egress decision without sending anything.

use crate::common;

use common::Bw;

const FETCHER: &str = r#"[agent]
name = "fetcher"
model = "script:s.jsonl"
[tools]
allow = ["web"]
[sandbox]
allowed_domains = ["api.example.com"]
"#;

fn check(bw: &Bw, args: &[&str]) -> (i32, String) {
    let mut all = vec!["net", "check"];
    all.extend_from_slice(args);
    let out = bw.run(&all);
    (
        out.code.unwrap_or(-1),
        format!("{}{}", out.stdout, out.stderr),
    )
}

#[test]
fn refused_addresses_names_and_encodings() {
    let bw = Bw::empty();
    for (url, expect) in [
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://metadata.google.internal/", "metadata"),
        ("http://0x7f.1/", "127.0.0.0/8"),
        ("http://2130706433/", "127.0.0.0/8"),
        ("http://[::ffff:10.0.0.1]/", "10.0.0.0/8"),
        ("http://[64:ff9b::a9fe:a9fe]/", "metadata"),
        ("http://user@example.com/", "user name"),
        ("file:///etc/passwd", "scheme"),
    ] {
        let (code, text) = check(&bw, &[url]);
        assert_eq!(code, 1, "{url}: {text}");
        assert!(text.starts_with("denied"), "{url}: {text}");
        assert!(
            text.to_lowercase().contains(expect),
            "{url} should mention {expect}: {text}"
        );
    }
}

#[test]
fn every_resolved_answer_is_checked_and_failures_are_refused() {
    let bw = Bw::empty();
    // Rebinding-style answer set: one public, one private address.
    let (code, text) = check(
        &bw,
        &[
            "https://rebind.example/",
            "--resolve",
            "rebind.example=93.184.215.14",
            "--resolve",
            "rebind.example=192.168.1.10",
        ],
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("192.168.1.10") && text.contains("192.168.0.0/16"),
        "{text}"
    );
    // A name that does not resolve is refused, never allowed by default.
    let (code, text) = check(&bw, &["https://does-not-exist.invalid/"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("refused"), "{text}");
    // A public answer is allowed (address policy only).
    let (code, text) = check(
        &bw,
        &[
            "https://ok.example/",
            "--resolve",
            "ok.example=93.184.215.14",
        ],
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        text.starts_with("allowed") && text.contains("93.184.215.14"),
        "{text}"
    );
}

#[test]
fn an_agents_grants_and_allowlist_apply() {
    let bw = Bw::empty();
    bw.agent("fetcher", FETCHER, Some("{\"text\": \"x\"}\n"));
    let (code, text) = check(
        &bw,
        &[
            "https://api.example.com/v1",
            "--agent",
            "fetcher",
            "--resolve",
            "api.example.com=93.184.215.14",
        ],
    );
    assert_eq!(code, 0, "{text}");
    // Not on the allowlist.
    let (code, text) = check(
        &bw,
        &[
            "https://other.example.com/",
            "--agent",
            "fetcher",
            "--resolve",
            "other.example.com=93.184.215.14",
        ],
    );
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("allow"), "{text}");
    // On the allowlist but resolving to a private address.
    let (code, text) = check(
        &bw,
        &[
            "https://api.example.com/",
            "--agent",
            "fetcher",
            "--resolve",
            "api.example.com=10.1.2.3",
        ],
    );
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("10.0.0.0/8"), "{text}");
    // An agent without the web domain is refused before any address check.
    bw.agent(
        "quiet",
        "[agent]\nname = \"quiet\"\nmodel = \"script:s.jsonl\"\n",
        Some("{\"text\": \"x\"}\n"),
    );
    let (code, text) = check(
        &bw,
        &[
            "https://api.example.com/",
            "--agent",
            "quiet",
            "--resolve",
            "api.example.com=93.184.215.14",
        ],
    );
    assert_eq!(code, 1, "{text}");
}

#[test]
fn malformed_resolve_rules_are_usage_errors() {
    let bw = Bw::empty();
    for rule in ["bad", "host=", "host=not-an-ip", "=1.2.3.4"] {
        let (code, text) = check(&bw, &["https://host/", "--resolve", rule]);
        assert_eq!(code, 2, "{rule}: {text}");
    }
}
