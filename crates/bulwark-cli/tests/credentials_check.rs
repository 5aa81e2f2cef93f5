//! `bulwark credentials check`, `preflight` and `policy explain` report
//! credential modes, grants, missing keys and internal services; names
//! only, never values.

use crate::common;

use common::Bw;

const STRICT: &str = r#"[agent]
name = "researcher"
model = "script:s.jsonl"
[tools]
allow = ["web"]
[sandbox]
allowed_domains = ["api.github.com"]
[credentials.grants.github]
keys = ["BW_TEST_GH_TOKEN"]
tools = ["web"]
hosts = ["api.github.com"]
inject = [{ header = "Authorization", value = "Bearer ${BW_TEST_GH_TOKEN}" }]
"#;

const LEGACY: &str = r#"[agent]
name = "legacy"
model = "script:s.jsonl"
[tools]
allow = ["web"]
[sandbox]
allowed_domains = ["api.github.com"]
"#;

const SECRET: &str = "ghp_ValueThatMustNeverBePrinted42";

#[test]
fn strict_agent_reports_grants_and_missing_keys() {
    let bw = Bw::empty();
    bw.agent("researcher", STRICT, Some("{\"text\": \"x\"}\n"));
    let out = bw.run(&["credentials", "check", "researcher"]);
    out.expect_code(1);
    assert!(out.stdout.contains("strict mode"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("FAIL  grant github: BW_TEST_GH_TOKEN is not set"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("header Authorization"),
        "{}",
        out.stdout
    );

    let out = bw
        .cmd(&["credentials", "check", "researcher", "--require-strict"])
        .env("BW_TEST_GH_TOKEN", SECRET)
        .run();
    out.ok();
    assert!(
        out.stdout.contains("BW_TEST_GH_TOKEN is set"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(SECRET) && !out.stderr.contains(SECRET));

    let out = bw
        .cmd(&["credentials", "check", "researcher"])
        .env("BW_TEST_GH_TOKEN", "short")
        .run();
    out.ok();
    assert!(out.stdout.contains("too short"), "{}", out.stdout);
}

#[test]
fn legacy_mode_is_reported_loudly() {
    let bw = Bw::empty();
    bw.agent("legacy", LEGACY, Some("{\"text\": \"x\"}\n"));
    let out = bw.run(&["credentials", "check", "legacy"]);
    out.ok();
    assert!(out.stdout.contains("WARN  LEGACY MODE"), "{}", out.stdout);
    bw.run(&["credentials", "check", "legacy", "--require-strict"])
        .expect_code(1);

    let out = bw.run(&["preflight", "legacy"]);
    assert!(
        out.stdout.contains("WARN  credentials  LEGACY MODE"),
        "{}",
        out.stdout
    );
    let out = bw.run(&["policy", "explain", "legacy"]);
    out.ok();
    assert!(
        out.stdout.contains("credentials:\n  LEGACY mode"),
        "{}",
        out.stdout
    );
}

#[test]
fn internal_services_are_explained_and_honoured_by_net_check() {
    let bw = Bw::empty();
    bw.write(
        "config.toml",
        "[egress]\ninternal = [\"wiki.corp:8080\", \"10.1.2.3:5432\"]\n",
    );
    bw.agent("legacy", LEGACY, Some("{\"text\": \"x\"}\n"));
    let out = bw.run(&["policy", "explain", "legacy"]);
    out.ok();
    assert!(
        out.stdout.contains("wiki.corp:8080") && out.stdout.contains("10.1.2.3:5432"),
        "{}",
        out.stdout
    );

    let net = |url: &str, resolve: &str| {
        let out = bw.run(&["net", "check", url, "--resolve", resolve]);
        (out.code, out.stdout)
    };
    let (code, text) = net("http://wiki.corp:8080/page", "wiki.corp=10.0.0.5");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("internal service"), "{text}");
    // Same host, another port: the override does not apply.
    let (code, text) = net("http://wiki.corp:8081/", "wiki.corp=10.0.0.5");
    assert_eq!(code, Some(1), "{text}");
    // Metadata is never an internal service.
    let (code, text) = net("http://wiki.corp:8080/", "wiki.corp=169.254.169.254");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("metadata"), "{text}");

    bw.write("config.toml", "[egress]\ninternal = [\"wiki.corp\"]\n");
    let out = bw.run(&["policy", "explain", "legacy"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("egress.internal") && out.stderr.contains("port"),
        "{}",
        out.stderr
    );
}
