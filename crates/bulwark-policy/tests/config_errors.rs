//! Every class of configuration error is located (line) and names the field.

use bulwark_policy::{
    AccessMode, Capability, ConfigError, GrantApproval, UserRole, parse_access,
    parse_global_config, parse_manifest, parse_model_ref,
};

const GOOD: &str = r#"
[agent]
name = "researcher"
description = "reads notes"
model = "anthropic:claude-sonnet-4-5"

[tools]
allow = ["files", "web"]
deny = ["files:delete"]

[tools.operations.files]
allow = ["read", "list"]

[[capabilities]]
kind = "file_read"
path = "notes/**"

[[capabilities]]
kind = "llm_max_tokens"
max = 1000

[sandbox]
allowed_domains = ["api.github.com:443", "*.wikipedia.org"]

[credentials.grants.github]
keys = ["GITHUB_TOKEN"]
tools = ["web"]
hosts = ["api.github.com"]
approval = "required"

[access]
mode = "users"
users = ["alice"]

[approval]
operations = ["files:write"]

[loop_guard]
max_tool_calls = 10
"#;

fn err(src: &str) -> ConfigError {
    match parse_manifest(src, "agents/x/agent.toml") {
        Ok(m) => panic!("accepted: {m:?}"),
        Err(e) => e,
    }
}

/// Replace `from` in GOOD by `to` and return the error.
fn err_with(from: &str, to: &str) -> ConfigError {
    assert!(GOOD.contains(from), "{from}");
    err(&GOOD.replacen(from, to, 1))
}

fn line_of(src: &str, needle: &str) -> usize {
    src.lines()
        .position(|l| l.contains(needle))
        .expect("needle")
        + 1
}

#[test]
fn good_manifest_parses_with_defaults() {
    let m = parse_manifest(GOOD, "a.toml").unwrap();
    assert_eq!(m.agent.name, "researcher");
    assert_eq!(m.agent.max_turns, 20);
    assert_eq!(m.agent.max_tokens, 4096);
    assert_eq!(
        m.capabilities[0],
        Capability::FileRead {
            path: "notes/**".into()
        }
    );
    assert_eq!(m.access.mode, AccessMode::Users);
    assert_eq!(
        m.credentials.grants["github"].approval,
        Some(GrantApproval::Required)
    );
    assert_eq!(m.loop_guard.as_ref().unwrap().max_tool_calls, 10);
    assert_eq!(m.loop_guard.as_ref().unwrap().block_threshold, 5);
    assert!(!m.sandbox.shell);

    let minimal = parse_manifest("[agent]\nname = \"a\"\n", "a.toml").unwrap();
    assert_eq!(minimal.tools.allow, None);
    assert_eq!(minimal.access.mode, AccessMode::Private);
    assert!(minimal.loop_guard.is_none());
}

#[test]
fn unknown_field_names_field_and_allowed() {
    let src = GOOD.replacen("description =", "descripton =", 1);
    let e = err(&src);
    assert_eq!(e.line, line_of(&src, "descripton"), "{e}");
    assert!(e.message.contains("descripton"), "{e}");
    assert!(
        e.message.contains("description"),
        "allowed fields not listed: {e}"
    );
    assert!(e.to_string().starts_with("agents/x/agent.toml:"), "{e}");

    // a typo in a narrowing list must not silently become "no restriction"
    let src = GOOD.replacen("deny = [", "dney = [", 1);
    let e = err(&src);
    assert_eq!(e.line, line_of(&src, "dney"), "{e}");
    assert!(
        e.message.contains("dney") && e.message.contains("allow"),
        "{e}"
    );

    let src = GOOD.replacen(
        "path = \"notes/**\"",
        "path = \"notes/**\"\nrecursive = true",
        1,
    );
    let e = err(&src);
    assert!(e.message.contains("recursive"), "{e}");
    assert!(e.message.contains("capabilities"), "{e}");
}

#[test]
fn wrong_type_is_located() {
    let src = GOOD.replacen("max_tool_calls = 10", "max_tool_calls = \"ten\"", 1);
    let e = err(&src);
    assert_eq!(e.line, line_of(&src, "max_tool_calls"), "{e}");
    assert!(e.message.contains("max_tool_calls"), "{e}");
    assert_eq!(e.field.as_deref(), Some("loop_guard.max_tool_calls"));
}

#[test]
fn duplicate_key_is_located() {
    let src = GOOD.replacen(
        "description = \"reads notes\"",
        "description = \"a\"\ndescription = \"b\"",
        1,
    );
    let e = err(&src);
    assert_eq!(e.line, line_of(&src, "description = \"b\""), "{e}");
    assert!(e.message.contains("duplicate"), "{e}");
    assert!(e.message.contains("description"), "{e}");
}

#[test]
fn unknown_capability_kind_lists_kinds() {
    let src = GOOD.replacen("kind = \"file_read\"", "kind = \"file_delete\"", 1);
    let e = err(&src);
    assert!(e.message.contains("file_delete"), "{e}");
    assert!(
        e.message.contains("net_connect") && e.message.contains("econ_transfer"),
        "{e}"
    );
    assert!(e.message.contains("capabilities[0]"), "{e}");
    let line = e.line;
    assert!(
        line >= line_of(&src, "[[capabilities]]") && line <= line_of(&src, "notes/**"),
        "{e}"
    );
}

#[test]
fn invalid_capability_pattern_is_located_at_the_field() {
    let src = GOOD.replacen("path = \"notes/**\"", "path = \"../secrets/**\"", 1);
    let e = err(&src);
    assert_eq!(e.line, line_of(&src, "../secrets"), "{e}");
    assert_eq!(e.field.as_deref(), Some("capabilities[0].path"));
    assert!(
        e.message.contains("capabilities[0].path") && e.message.contains(".."),
        "{e}"
    );

    let src = GOOD.replacen("\"*.wikipedia.org\"", "\"https://evil.com\"", 1);
    let e = err(&src);
    assert_eq!(e.line, line_of(&src, "allowed_domains"), "{e}");
    assert!(e.message.contains("sandbox.allowed_domains[1]"), "{e}");
}

#[test]
fn bad_model_ref() {
    let src = GOOD.replacen("anthropic:claude-sonnet-4-5", "claude-sonnet", 1);
    let e = err(&src);
    assert_eq!(e.line, line_of(&src, "model ="), "{e}");
    assert!(
        e.message.contains("agent.model") && e.message.contains("provider:model"),
        "{e}"
    );
}

#[test]
fn zero_max_turns() {
    let src = GOOD.replacen("[agent]\n", "[agent]\nmax_turns = 0\n", 1);
    let e = err(&src);
    assert_eq!(e.line, line_of(&src, "max_turns"), "{e}");
    assert!(e.message.contains("agent.max_turns"), "{e}");
}

#[test]
fn bad_agent_names() {
    for bad in ["Researcher", "-x", "a b", "", "../x", &"a".repeat(65)] {
        let src = GOOD.replacen("name = \"researcher\"", &format!("name = {bad:?}"), 1);
        let e = err(&src);
        assert_eq!(e.line, line_of(&src, "name ="), "{bad:?}: {e}");
        assert!(e.message.contains("agent.name"), "{e}");
    }
    for good in ["a", "0x", "my_agent-2", &"a".repeat(64)] {
        let src = GOOD.replacen("name = \"researcher\"", &format!("name = {good:?}"), 1);
        assert!(parse_manifest(&src, "m").is_ok(), "{good}");
    }
}

#[test]
fn other_semantic_checks() {
    let e = err_with("operations = [\"files:write\"]", "operations = [\"files\"]");
    assert!(e.message.contains("approval.operations[0]"), "{e}");
    let e = err_with(
        "allow = [\"files\", \"web\"]",
        "allow = [\"files\", \"Web Tools\"]",
    );
    assert!(e.message.contains("tools.allow[1]"), "{e}");
    let e = err_with("keys = [\"GITHUB_TOKEN\"]", "keys = []");
    assert!(e.message.contains("credentials.grants.github.keys"), "{e}");
    let e = err_with("max_tool_calls = 10", "block_threshold = 0");
    assert!(e.message.contains("loop_guard.block_threshold"), "{e}");
    let e = err_with("[agent]\n", "[agent]\nmax_turns = -1\n");
    assert!(e.message.contains("max_turns"), "{e}");
}

#[test]
fn syntax_error_is_located() {
    let e = err("[agent]\nname = \"a\"\nmodel = \n");
    assert_eq!(e.line, 3, "{e}");
}

#[test]
fn model_refs() {
    let m = parse_model_ref("ollama:qwen2.5:0.5b").unwrap();
    assert_eq!(
        (m.provider.as_str(), m.model.as_str()),
        ("ollama", "qwen2.5:0.5b")
    );
    let m = parse_model_ref("script:agents/a/script.jsonl").unwrap();
    assert_eq!(m.model, "agents/a/script.jsonl");
    assert_eq!(m.to_string(), "script:agents/a/script.jsonl");
    for bad in ["", "anthropic", ":x", "anthropic:", "Anthropic:x", "a:b c"] {
        assert!(parse_model_ref(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn global_config() {
    let src = r#"
default_model = "anthropic:claude-x"
capabilities = [{ kind = "file_read", path = "**" }, { kind = "net_connect", host = "*" }]

[tools]
deny = ["shell"]

[remote]
shell = false
[remote.tools]
deny = ["memory"]

[providers.anthropic]
kind = "anthropic"
base_url = "https://api.anthropic.com"
api_key_env = "ANTHROPIC_API_KEY"

[loop_guard]
max_tokens = 5000
"#;
    let c = parse_global_config(src, "config.toml").unwrap();
    assert_eq!(c.tools.allow, None);
    assert_eq!(c.capabilities.as_ref().unwrap().len(), 2);
    assert_eq!(c.loop_guard.max_tokens, 5000);
    assert!(
        parse_global_config("", "config.toml")
            .unwrap()
            .capabilities
            .is_none()
    );

    let bad = src.replacen("kind = \"anthropic\"", "kind = \"gemini\"", 1);
    let e = parse_global_config(&bad, "config.toml").unwrap_err();
    assert_eq!(e.line, line_of(&bad, "gemini"), "{e}");
    assert!(
        e.message.contains("providers.anthropic.kind") && e.message.contains("openai"),
        "{e}"
    );

    let bad = src.replacen("path = \"**\"", "path = \"/\"", 1);
    let e = parse_global_config(&bad, "config.toml").unwrap_err();
    assert_eq!(e.line, line_of(&bad, "capabilities ="), "{e}");
    assert!(e.message.contains("capabilities[0].path"), "{e}");

    let bad = src.replacen("[remote]\n", "[remote]\nsandbox = true\n", 1);
    let e = parse_global_config(&bad, "config.toml").unwrap_err();
    assert_eq!(e.line, line_of(&bad, "sandbox = true"), "{e}");
    assert!(
        e.message.contains("sandbox") && e.message.contains("shell"),
        "{e}"
    );

    let bad = src.replacen("anthropic:claude-x", "claude", 1);
    let e = parse_global_config(&bad, "config.toml").unwrap_err();
    assert!(e.message.contains("default_model"), "{e}");
}

#[test]
fn access_file() {
    let src = r#"
[users.alice]
agents = ["researcher"]
capabilities = [{ kind = "file_read", path = "notes/**" }]
[users.alice.tools.operations.files]
deny = ["write"]

[users.root]
role = "admin"
"#;
    let a = parse_access(src, "access.toml").unwrap();
    assert_eq!(a.users["root"].role, UserRole::Admin);
    assert_eq!(a.users["alice"].role, UserRole::User);
    assert_eq!(a.users["alice"].tools.operations["files"].deny, ["write"]);

    let bad = src.replacen("role = \"admin\"", "role = \"superuser\"", 1);
    let e = parse_access(&bad, "access.toml").unwrap_err();
    assert_eq!(e.line, line_of(&bad, "superuser"), "{e}");
    assert!(
        e.message.contains("users.root.role") && e.message.contains("admin"),
        "{e}"
    );

    // A user name that is not a safe directory name fails where it is
    // read, naming the table and the rule (the name is a `UserName`).
    for name in ["Root", "\"../etc\"", "\"a b\""] {
        let bad = src.replacen("[users.root]", &format!("[users.{name}]"), 1);
        let e = parse_access(&bad, "access.toml").unwrap_err();
        assert_eq!(e.line, line_of(&bad, &format!("[users.{name}]")), "{e}");
        assert!(
            e.message.contains("users") && e.message.contains(bulwark_policy::NAME_RULE),
            "{e}"
        );
    }

    let bad = src.replacen("agents = [\"researcher\"]", "agents = [\"Bad Name\"]", 1);
    let e = parse_access(&bad, "access.toml").unwrap_err();
    assert_eq!(e.line, line_of(&bad, "Bad Name"), "{e}");
    assert!(e.message.contains("users.alice.agents[0]"), "{e}");

    let bad = src.replacen(
        "deny = [\"write\"]",
        "deny = [\"write\"]\nallow_all = true",
        1,
    );
    let e = parse_access(&bad, "access.toml").unwrap_err();
    assert_eq!(e.line, line_of(&bad, "allow_all"), "{e}");
}

#[test]
fn reserved_user_names_cannot_hold_tokens() {
    // The local operator's own name: a token would hand its workspaces,
    // memory, sessions and `user:local` credits to a remote client.
    let hash = "0".repeat(64);
    let src = format!(
        "[users.alice]\nrole = \"user\"\n\n[users.local]\nrole = \"admin\"\n\n[[users.local.tokens]]\nid = \"abc\"\nhash = \"{hash}\"\n"
    );
    let e = parse_access(&src, "/home/op/.bulwark/access.toml").unwrap_err();
    let text = e.to_string();
    assert!(text.contains("/home/op/.bulwark/access.toml"), "{text}");
    assert!(text.contains("may not hold tokens"), "{text}");
    assert!(text.contains("[[users.local.tokens]]"), "{text}");
    for (name, _) in bulwark_policy::AccessFile::RESERVED_USER_NAMES {
        let src = format!("[[users.{name}.tokens]]\nid = \"abc\"\nhash = \"{hash}\"\n");
        assert!(parse_access(&src, "access.toml").is_err(), "{name}");
    }
    // Without tokens the operator's entry narrows the operator's own runs.
    let limits = "[users.local.limits]\ntokens_per_day = 150\n";
    assert!(parse_access(limits, "access.toml").is_ok());
    // Names that merely look special stay ordinary user names, tokens and all.
    let ok = "[users.locals]\n[users.local-ops]\n[users.admin]\n[users.system]\n[users.root]\nrole = \"admin\"\n";
    let a = parse_access(ok, "access.toml").unwrap();
    assert_eq!(a.users.len(), 5);
    assert_eq!(
        bulwark_policy::AccessFile::reserved_user_name("alice"),
        None
    );
}

#[test]
fn audit_and_trust_sections() {
    let src = "[trust]\nrequire_signed = true\n[audit]\ncheckpoint_interval_secs = 60\ncheckpoint_every_records = 500\nrecord_arguments = true\n";
    let c = parse_global_config(src, "config.toml").unwrap();
    assert!(c.trust.require_signed);
    assert_eq!(
        (c.audit.interval_secs(), c.audit.every_records()),
        (60, 500)
    );
    assert!(c.audit.record_arguments);
    let defaults = parse_global_config("", "config.toml").unwrap();
    assert!(!defaults.trust.require_signed && !defaults.audit.record_arguments);
    assert_eq!(
        (
            defaults.audit.interval_secs(),
            defaults.audit.every_records()
        ),
        (300, 10_000)
    );

    let bad = src.replacen("= 60", "= 0", 1);
    let e = parse_global_config(&bad, "config.toml").unwrap_err();
    assert_eq!(e.line, line_of(&bad, "= 0"), "{e}");
    assert!(
        e.message.contains("audit.checkpoint_interval_secs") && e.message.contains("1 to"),
        "{e}"
    );
    let bad = src.replacen("record_arguments", "record_args", 1);
    let e = parse_global_config(&bad, "config.toml").unwrap_err();
    assert!(e.message.contains("record_args"), "{e}");
    let bad = src.replacen("require_signed = true", "require_signed = \"yes\"", 1);
    assert!(parse_global_config(&bad, "config.toml").is_err());
}

/// A witness vkey (cosignature/v1, type 0x04) for the `[audit]` tests.
fn witness_vkey(name: &str) -> String {
    let key = bulwark_audit::generate_signing_key();
    bulwark_audit::CosignerKey::from_signing_key(name, &key)
        .unwrap()
        .to_vkey()
}

#[test]
fn audit_witnesses_are_validated_with_file_and_field() {
    let (w1, w2) = (witness_vkey("w1.example/w"), witness_vkey("w2.example/w"));
    let good = format!(
        "[audit]\norigin = \"alice.example/audit\"\nrequire_witnesses = 2\n\
         [[audit.witnesses]]\nurl = \"http://127.0.0.1:7380\"\nkey = \"{w1}\"\n\
         [[audit.witnesses]]\nurl = \"https://w2.example\"\nkey = \"{w2}\"\n"
    );
    let c = parse_global_config(&good, "config.toml").unwrap();
    assert_eq!(c.audit.origin(), "alice.example/audit");
    assert_eq!(c.audit.required_witnesses(), 2);
    assert_eq!(c.audit.witnesses[1].url, "https://w2.example");
    // Nothing changes for a config without the fields.
    let defaults = parse_global_config("", "config.toml").unwrap();
    assert_eq!(defaults.audit.origin(), "bulwark.local/audit");
    assert_eq!(defaults.audit.required_witnesses(), 0);

    let cases = [
        (
            good.replace("require_witnesses = 2", "require_witnesses = 3"),
            "audit.require_witnesses",
            "more than the 2 witnesses",
        ),
        (
            good.replace("http://127.0.0.1:7380", "ftp://127.0.0.1"),
            "audit.witnesses[0].url",
            "http(s) URL",
        ),
        (
            good.replace(&w2, "w2+00000000+AAAA"),
            "audit.witnesses[1].key",
            "bulwark witness key",
        ),
        (
            good.replace(&w2, &w1),
            "audit.witnesses[1].key",
            "listed twice",
        ),
        (
            good.replace("alice.example/audit", ""),
            "audit.origin",
            "one line",
        ),
    ];
    for (src, field, message) in cases {
        let e = parse_global_config(&src, "config.toml").unwrap_err();
        assert_eq!(e.field.as_deref(), Some(field), "{e}");
        assert!(e.message.contains(message), "{e}");
        assert!(e.to_string().contains("config.toml"), "{e}");
    }
    // A log key (type 0x01) is not a witness key.
    let log_key =
        bulwark_audit::VerifierKey::from_signing_key("log", &bulwark_audit::generate_signing_key())
            .unwrap()
            .to_vkey();
    let e = parse_global_config(&good.replace(&w1, &log_key), "config.toml").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("audit.witnesses[0].key"), "{e}");
}

#[test]
fn env_read_no_longer_exists_and_says_so_where() {
    let src = "[agent]\nname = \"a\"\n[[capabilities]]\nkind = \"env_read\"\nname = \"HOME\"\n";
    let e = parse_manifest(src, "agents/a/agent.toml").unwrap_err();
    let text = e.to_string();
    assert!(text.contains("agents/a/agent.toml"), "{text}");
    assert_eq!(e.line, 4, "{text}");
    assert!(text.contains("`env_read` no longer exists"), "{text}");
    // The same in the global ceiling.
    let e = parse_global_config(
        "[[capabilities]]\nkind = \"env_read\"\nname = \"*\"\n",
        "config.toml",
    )
    .unwrap_err();
    assert!(e.to_string().contains("config.toml"), "{e}");
    assert!(e.to_string().contains("no longer exists"), "{e}");
    // The kind is gone from the list errors teach.
    assert!(!bulwark_policy::CAPABILITY_KINDS.contains(&"env_read"));
}

#[test]
fn llm_max_tokens_of_zero_is_refused_where_it_is() {
    let src = "[agent]\nname = \"a\"\n[[capabilities]]\nkind = \"llm_max_tokens\"\nmax = 0\n";
    let e = parse_manifest(src, "agent.toml").unwrap_err();
    assert!(e.to_string().contains("refuse every model call"), "{e}");
}
