//! Credential grants (inject specs, mode), `[egress]` and `[secrets]`:
//! good inputs parse, bad ones fail at the right line naming the field.

use bulwark_policy::{
    ConfigError, CredentialGrant, CredentialMode, GrantApproval, Injection, InjectionTarget,
    InternalService, Template, TemplatePart, parse_global_config, parse_manifest,
};
use proptest::prelude::*;

const GOOD: &str = r#"
[agent]
name = "researcher"

[tools]
allow = ["web"]

[credentials.grants.github]
keys = ["GITHUB_TOKEN"]
tools = ["web"]
hosts = ["api.github.com", "*.githubusercontent.com"]
inject = [{ header = "Authorization", value = "Bearer ${GITHUB_TOKEN}" }]
approval = "required"

[credentials.grants.maps]
keys = ["MAPS_KEY", "MAPS_ID"]
tools = ["web", "geo"]
hosts = ["maps.example.com:443"]
inject = [
  { query = "key", value = "${MAPS_KEY}" },
  { header = "X-Client", value = "id=${MAPS_ID};k=${MAPS_KEY}" },
]

[credentials.grants.bare]
keys = ["PLAIN_TOKEN"]
tools = ["web"]
hosts = ["example.org"]
"#;

fn line_of(src: &str, needle: &str) -> usize {
    src.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("needle {needle:?} not in source"))
        + 1
}

fn manifest_err(src: &str) -> ConfigError {
    match parse_manifest(src, "agents/x/agent.toml") {
        Ok(m) => panic!("accepted: {m:#?}\n{src}"),
        Err(e) => e,
    }
}

#[test]
fn good_grants_parse() {
    let m = parse_manifest(GOOD, "a.toml").unwrap();
    assert_eq!(m.credential_mode(), CredentialMode::Strict);
    let gh = &m.credentials.grants["github"];
    assert_eq!(gh.approval, Some(GrantApproval::Required));
    assert_eq!(gh.inject.len(), 1);
    assert_eq!(
        gh.inject[0].target(),
        InjectionTarget::Header("Authorization".into())
    );
    let t = gh.inject[0].template().unwrap();
    assert_eq!(
        t.render(|k: &str| (k == "GITHUB_TOKEN").then_some("s3cret"))
            .as_deref(),
        Some("Bearer s3cret")
    );

    let maps = &m.credentials.grants["maps"];
    assert_eq!(
        maps.inject[0].target(),
        InjectionTarget::Query("key".into())
    );
    assert_eq!(
        maps.inject[1]
            .template()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["MAPS_ID", "MAPS_KEY"]
    );
    assert!(m.credentials.grants["bare"].inject.is_empty());
    assert_eq!(m.credentials.grants["bare"].approval, None);

    let none = parse_manifest("[agent]\nname = \"a\"\n", "a.toml").unwrap();
    assert_eq!(none.credential_mode(), CredentialMode::Legacy);
    let empty = parse_manifest("[agent]\nname = \"a\"\n[credentials]\n", "a.toml").unwrap();
    assert_eq!(empty.credential_mode(), CredentialMode::Legacy);
}

#[test]
fn grants_round_trip_through_toml() {
    let m = parse_manifest(GOOD, "a.toml").unwrap();
    let text = toml::to_string(&m).unwrap();
    assert_eq!(parse_manifest(&text, "b.toml").unwrap(), m, "{text}");
}

#[test]
fn literal_grant_construction() {
    let g = CredentialGrant {
        keys: vec!["T".into()],
        tools: vec!["web".into()],
        hosts: vec!["h.example".into()],
        inject: vec![Injection {
            header: None,
            query: Some("k".into()),
            value: "${T}".into(),
        }],
        approval: None,
    };
    assert_eq!(g.inject[0].target(), InjectionTarget::Query("k".into()));
    // Unvalidated, neither set: an empty header name the caller must refuse.
    let none = Injection {
        header: None,
        query: None,
        value: String::new(),
    };
    assert_eq!(none.target(), InjectionTarget::Header(String::new()));
}

/// (replace this in GOOD, by this, error on the line containing, message
/// contains all of).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
);

const BAD_MANIFESTS: &[Case] = &[
    // grant name
    (
        "[credentials.grants.bare]",
        "[credentials.grants.Bare]",
        "grants.Bare]",
        &["credentials.grants.Bare", "grant name", "[a-z0-9_-]"],
    ),
    (
        "[credentials.grants.bare]",
        "[credentials.grants.\"-x\"]",
        "\"-x\"",
        &["credentials.grants.-x", "grant name"],
    ),
    // keys
    (
        "keys = [\"PLAIN_TOKEN\"]",
        "keys = []",
        "keys = []",
        &["credentials.grants.bare.keys", "at least one key"],
    ),
    (
        "keys = [\"PLAIN_TOKEN\"]",
        "keys = [\"plain_token\"]",
        "plain_token",
        &[
            "credentials.grants.bare.keys[0]",
            "uppercase",
            "GITHUB_TOKEN",
        ],
    ),
    (
        "keys = [\"PLAIN_TOKEN\"]",
        "keys = [\"PLAIN-TOKEN\"]",
        "PLAIN-TOKEN",
        &["credentials.grants.bare.keys[0]"],
    ),
    (
        "keys = [\"PLAIN_TOKEN\"]",
        "keys = [\"9TOKEN\"]",
        "9TOKEN",
        &["credentials.grants.bare.keys[0]"],
    ),
    (
        "keys = [\"PLAIN_TOKEN\"]",
        "keys = [\"\"]",
        "keys = [\"\"]",
        &["credentials.grants.bare.keys[0]"],
    ),
    (
        "keys = [\"MAPS_KEY\", \"MAPS_ID\"]",
        "keys = [\"MAPS_KEY\", \"MAPS_ID\", \"MAPS_KEY\"]",
        "keys = [\"MAPS_KEY\", \"MAPS_ID\", \"MAPS_KEY\"]",
        &["credentials.grants.maps.keys[2]", "listed twice", "[0]"],
    ),
    // tools
    (
        "tools = [\"web\", \"geo\"]",
        "tools = []",
        "tools = []",
        &["credentials.grants.maps.tools", "at least one tool"],
    ),
    (
        "tools = [\"web\", \"geo\"]",
        "tools = [\"web\", \"Geo Tool\"]",
        "Geo Tool",
        &["credentials.grants.maps.tools[1]", "tool domain"],
    ),
    (
        "tools = [\"web\", \"geo\"]",
        "tools = [\"*\"]",
        "tools = [\"*\"]",
        &["credentials.grants.maps.tools[0]"],
    ),
    // hosts
    (
        "hosts = [\"example.org\"]",
        "hosts = []",
        "hosts = []",
        &["credentials.grants.bare.hosts", "at least one host"],
    ),
    (
        "hosts = [\"example.org\"]",
        "hosts = [\"example.org\", \"*\"]",
        "hosts = [\"example.org\", \"*\"]",
        &[
            "credentials.grants.bare.hosts[1]",
            "any host",
            "name the hosts",
        ],
    ),
    (
        "hosts = [\"example.org\"]",
        "hosts = [\"*:443\"]",
        "hosts = [\"*:443\"]",
        &["credentials.grants.bare.hosts[0]", "any host"],
    ),
    (
        "hosts = [\"example.org\"]",
        "hosts = [\"https://example.org\"]",
        "https://example.org",
        &["credentials.grants.bare.hosts[0]", "bare host"],
    ),
    // inject: destination
    (
        "{ query = \"key\", value = \"${MAPS_KEY}\" }",
        "{ query = \"key\", header = \"X-Key\", value = \"${MAPS_KEY}\" }",
        "X-Key",
        &["credentials.grants.maps.inject[0]", "both", "two entries"],
    ),
    (
        "{ query = \"key\", value = \"${MAPS_KEY}\" }",
        "{ value = \"${MAPS_KEY}\" }",
        "{ value = \"${MAPS_KEY}\" }",
        &["credentials.grants.maps.inject[0]", "header =", "query ="],
    ),
    (
        "{ query = \"key\", value = \"${MAPS_KEY}\" }",
        "{ query = \"key\", value = \"${MAPS_KEY}\", cookie = \"x\" }",
        "cookie",
        &["credentials.grants.maps.inject[0]", "cookie", "header"],
    ),
    (
        "{ query = \"key\", value = \"${MAPS_KEY}\" }",
        "{ query = \"key\" }",
        "{ query = \"key\" }",
        &["credentials.grants.maps.inject[0]", "value"],
    ),
    // inject: header names
    (
        "header = \"Authorization\"",
        "header = \"Auth orization\"",
        "Auth orization",
        &[
            "credentials.grants.github.inject[0].header",
            "not an HTTP header name",
        ],
    ),
    (
        "header = \"Authorization\"",
        "header = \"X-Key:\"",
        "X-Key:",
        &["credentials.grants.github.inject[0].header"],
    ),
    (
        "header = \"Authorization\"",
        "header = \"\"",
        "header = \"\"",
        &["credentials.grants.github.inject[0].header"],
    ),
    (
        "header = \"Authorization\"",
        "header = \"host\"",
        "header = \"host\"",
        &[
            "credentials.grants.github.inject[0].header",
            "frames or routes",
        ],
    ),
    (
        "header = \"Authorization\"",
        "header = \"Proxy-AUTHORIZATION\"",
        "Proxy-AUTHORIZATION",
        &["credentials.grants.github.inject[0].header", "frames"],
    ),
    (
        "header = \"Authorization\"",
        "header = \"te\"",
        "header = \"te\"",
        &["credentials.grants.github.inject[0].header"],
    ),
    // inject: query names
    (
        "query = \"key\"",
        "query = \"\"",
        "query = \"\"",
        &["credentials.grants.maps.inject[0].query", "is empty"],
    ),
    (
        "query = \"key\"",
        "query = \"a&b\"",
        "a&b",
        &["credentials.grants.maps.inject[0].query", "'&'"],
    ),
    (
        "query = \"key\"",
        "query = \"k=v\"",
        "k=v",
        &["credentials.grants.maps.inject[0].query"],
    ),
    (
        "query = \"key\"",
        "query = \"k#\"",
        "k#",
        &["credentials.grants.maps.inject[0].query"],
    ),
    (
        "query = \"key\"",
        "query = \"a key\"",
        "a key",
        &["credentials.grants.maps.inject[0].query"],
    ),
    // inject: duplicates
    (
        "header = \"X-Client\"",
        "query = \"key\"",
        "id=${MAPS_ID}",
        &[
            "credentials.grants.maps.inject[1].query",
            "already injected by inject[0]",
        ],
    ),
    // inject: value templates
    (
        "value = \"Bearer ${GITHUB_TOKEN}\"",
        "value = \"Bearer token\"",
        "Bearer token",
        &[
            "credentials.grants.github.inject[0].value",
            "no ${KEY} placeholder",
            "${GITHUB_TOKEN}",
        ],
    ),
    (
        "value = \"Bearer ${GITHUB_TOKEN}\"",
        "value = \"Bearer ${OTHER}\"",
        "${OTHER}",
        &[
            "credentials.grants.github.inject[0].value",
            "${OTHER}",
            "not a key of this grant",
            "add \"OTHER\" to keys",
        ],
    ),
    (
        "value = \"Bearer ${GITHUB_TOKEN}\"",
        "value = \"Bearer ${GITHUB_TOKEN\"",
        "Bearer ${GITHUB_TOKEN\"",
        &["credentials.grants.github.inject[0].value", "never closed"],
    ),
    (
        "value = \"Bearer ${GITHUB_TOKEN}\"",
        "value = \"Bearer ${}${GITHUB_TOKEN}\"",
        "${}",
        &["credentials.grants.github.inject[0].value", "names no key"],
    ),
    (
        "value = \"Bearer ${GITHUB_TOKEN}\"",
        "value = \"Bearer ${github_token}\"",
        "github_token}",
        &[
            "credentials.grants.github.inject[0].value",
            "not a key name",
        ],
    ),
    (
        "value = \"Bearer ${GITHUB_TOKEN}\"",
        "value = \"Bearer ${GITHUB_TOKEN}\\r\\nX-Evil: 1\"",
        "X-Evil",
        &[
            "credentials.grants.github.inject[0].value",
            "control character",
        ],
    ),
];

#[test]
fn bad_grants_are_located_and_named() {
    for (from, to, line_needle, wants) in BAD_MANIFESTS {
        assert!(GOOD.contains(from), "{from}");
        let src = GOOD.replacen(from, to, 1);
        let e = manifest_err(&src);
        assert_eq!(e.line, line_of(&src, line_needle), "{to}: {e}");
        assert!(!e.message.contains("Bearer token"), "value echoed: {e}");
        assert!(
            e.to_string().starts_with("agents/x/agent.toml:"),
            "{to}: {e}"
        );
        for w in *wants {
            assert!(e.message.contains(w), "{to}: missing {w:?} in: {e}");
        }
    }
}

#[test]
fn duplicate_header_is_case_insensitive() {
    let src = GOOD.replacen(
        "inject = [{ header = \"Authorization\", value = \"Bearer ${GITHUB_TOKEN}\" }]",
        "inject = [\n  { header = \"Authorization\", value = \"Bearer ${GITHUB_TOKEN}\" },\n  { header = \"AUTHORIZATION\", value = \"${GITHUB_TOKEN}\" },\n]",
        1,
    );
    let e = manifest_err(&src);
    assert_eq!(e.line, line_of(&src, "AUTHORIZATION"), "{e}");
    assert!(
        e.message
            .contains("credentials.grants.github.inject[1].header"),
        "{e}"
    );
}

#[test]
fn missing_grant_fields() {
    // `tools` and `hosts` absent entirely: located at the grant.
    let src = GOOD.replacen("tools = [\"web\"]\nhosts = [\"example.org\"]\n", "", 1);
    let e = manifest_err(&src);
    assert!(e.message.contains("credentials.grants.bare.tools"), "{e}");
    assert_eq!(e.line, line_of(&src, "grants.bare]"), "{e}");
    let src = GOOD.replacen("hosts = [\"example.org\"]\n", "", 1);
    let e = manifest_err(&src);
    assert!(e.message.contains("credentials.grants.bare.hosts"), "{e}");
}

#[test]
fn good_header_and_query_names() {
    for h in [
        "X-Api-Key",
        "x-goog-api-key",
        "Authorization",
        "A!#$%&'*+-.^_`|~1",
    ] {
        let src = GOOD.replacen("header = \"Authorization\"", &format!("header = {h:?}"), 1);
        parse_manifest(&src, "m").unwrap_or_else(|e| panic!("{h}: {e}"));
    }
    for q in ["api_key", "k", "a.b[c]", "clé"] {
        let src = GOOD.replacen("query = \"key\"", &format!("query = {q:?}"), 1);
        parse_manifest(&src, "m").unwrap_or_else(|e| panic!("{q}: {e}"));
    }
}

const CONFIG: &str = r#"
[egress]
internal = ["wiki.corp:8080", "10.0.0.5:443", "[fd00::1]:8443", "Git.Corp.:80"]

[secrets]
env = ["GITHUB_TOKEN", "OPENAI_API_KEY"]
"#;

fn config_err(src: &str) -> ConfigError {
    match parse_global_config(src, "config.toml") {
        Ok(c) => panic!("accepted: {c:#?}\n{src}"),
        Err(e) => e,
    }
}

#[test]
fn good_config_sections() {
    let c = parse_global_config(CONFIG, "config.toml").unwrap();
    let svc = |host: &str, port| InternalService {
        host: host.into(),
        port,
    };
    assert_eq!(
        c.internal_services(),
        [
            svc("wiki.corp", 8080),
            svc("10.0.0.5", 443),
            svc("[fd00::1]", 8443),
            svc("git.corp", 80),
        ]
    );
    assert_eq!(c.internal_services()[2].to_string(), "[fd00::1]:8443");
    assert_eq!(c.secrets.env, ["GITHUB_TOKEN", "OPENAI_API_KEY"]);

    let empty = parse_global_config("", "config.toml").unwrap();
    assert!(empty.egress.internal.is_empty() && empty.internal_services().is_empty());
    assert!(empty.secrets.env.is_empty());
}

const BAD_CONFIGS: &[Case] = &[
    (
        "\"wiki.corp:8080\"",
        "\"wiki.corp\"",
        "internal =",
        &[
            "egress.internal[0]",
            "\"wiki.corp\" needs a port",
            "exact host:port pairs like \"wiki.corp:8080\"",
        ],
    ),
    (
        "\"10.0.0.5:443\"",
        "\"*.corp:443\"",
        "internal =",
        &["egress.internal[1]", "wildcard"],
    ),
    (
        "\"10.0.0.5:443\"",
        "\"10.0.0.5:0\"",
        "internal =",
        &["egress.internal[1]", "port 0"],
    ),
    (
        "\"[fd00::1]:8443\"",
        "\"fd00::1\"",
        "internal =",
        &["egress.internal[2]", "brackets"],
    ),
    (
        "\"[fd00::1]:8443\"",
        "\"http://wiki.corp:80/\"",
        "internal =",
        &["egress.internal[2]", "bare host:port"],
    ),
    (
        "\"Git.Corp.:80\"",
        "\"WIKI.corp.:8080\"",
        "internal =",
        &[
            "egress.internal[3]",
            "same service as egress.internal[0]",
            "remove one",
        ],
    ),
    (
        "internal = [\"wiki.corp:8080\", \"10.0.0.5:443\", \"[fd00::1]:8443\", \"Git.Corp.:80\"]",
        "internal = \"wiki.corp:8080\"",
        "internal =",
        &["egress.internal", "sequence"],
    ),
    (
        "[egress]\n",
        "[egress]\nallow = []\n",
        "allow = []",
        &["allow", "internal"],
    ),
    (
        "\"OPENAI_API_KEY\"",
        "\"openai_api_key\"",
        "env =",
        &["secrets.env[1]", "uppercase"],
    ),
    (
        "\"OPENAI_API_KEY\"",
        "\"GITHUB_TOKEN\"",
        "env =",
        &["secrets.env[1]", "listed twice"],
    ),
    (
        "[secrets]\n",
        "[secrets]\nenvs = []\n",
        "envs",
        &["envs", "env"],
    ),
];

#[test]
fn bad_config_sections_are_located_and_named() {
    for (from, to, line_needle, wants) in BAD_CONFIGS {
        assert!(CONFIG.contains(from), "{from}");
        let src = CONFIG.replacen(from, to, 1);
        let e = config_err(&src);
        assert_eq!(e.line, line_of(&src, line_needle), "{to}: {e}");
        assert!(e.to_string().starts_with("config.toml:"), "{to}: {e}");
        for w in *wants {
            assert!(e.message.contains(w), "{to}: missing {w:?} in: {e}");
        }
    }
}

#[test]
fn multiline_internal_list_points_at_the_entry() {
    let src = "[egress]\ninternal = [\n  \"a.corp:1\",\n  \"b.corp\",\n]\n";
    let e = config_err(src);
    assert_eq!((e.line, e.col), (4, 3), "{e}");
    assert_eq!(e.field.as_deref(), Some("egress.internal[1]"));
}

fn part() -> impl Strategy<Value = TemplatePart> {
    prop_oneof![
        // No '{' in literals, so no accidental "${"; '$' and '}' are fine.
        "[^{\\p{Cc}]{1,8}".prop_map(TemplatePart::Literal),
        "[A-Z_][A-Z0-9_]{0,6}".prop_map(TemplatePart::Key),
    ]
}

proptest! {
    #[test]
    fn template_parse_never_panics(s in "\\PC*|.*") {
        if let Ok(t) = Template::parse(&s) {
            // What parses prints back to itself.
            prop_assert_eq!(t.to_string(), s);
        }
    }

    #[test]
    fn template_parse_never_panics_near_syntax(s in "[${}A_a\r\né ]{0,24}") {
        if let Ok(t) = Template::parse(&s) {
            prop_assert_eq!(Template::parse(&t.to_string()), Ok(t));
        }
    }

    #[test]
    fn render_is_literals_and_values_in_order(parts in prop::collection::vec(part(), 0..8)) {
        let lookup = |k: &str| Some(format!("<{}>", k.to_lowercase()));
        let mut src = String::new();
        let mut want = String::new();
        for p in &parts {
            match p {
                TemplatePart::Literal(l) => {
                    src.push_str(l);
                    want.push_str(l);
                }
                TemplatePart::Key(k) => {
                    src.push_str(&format!("${{{k}}}"));
                    want.push_str(&format!("<{}>", k.to_lowercase()));
                }
            }
        }
        let t = Template::parse(&src).map_err(|e| TestCaseError::fail(format!("{src:?}: {e}")))?;
        let keys: Vec<&str> = parts
            .iter()
            .filter_map(|p| match p {
                TemplatePart::Key(k) => Some(k.as_str()),
                TemplatePart::Literal(_) => None,
            })
            .collect();
        prop_assert_eq!(t.keys().collect::<Vec<_>>(), keys.clone());
        prop_assert_eq!(t.render(lookup), Some(want));
        // A lookup missing any one key renders nothing.
        if let Some(missing) = keys.first() {
            let partial = |k: &str| (k != *missing).then_some("v");
            prop_assert_eq!(t.render(partial), None);
        }
    }
}
