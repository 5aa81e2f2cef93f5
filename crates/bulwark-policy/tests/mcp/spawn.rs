//! A child gets no MCP server, server host, tool or shell host its parent
//! lacks; an exact copy and a narrower child are allowed.

use bulwark_policy::{
    EffectivePolicy, GlobalConfig, ModelRef, SpawnGrant, SpawnViolation, parse_model_ref,
    spawn_violations,
};

use super::{effective, manifest};

const PARENT: &str = r#"
[agent]
name = "parent"
[tools]
allow = ["agents", "shell", "mcp:fs"]
[tools.operations."mcp:fs"]
deny = ["delete_file"]
[approval]
operations = ["mcp:fs:write_file"]
[sandbox]
shell = true
allowed_domains = ["github.com", "pypi.org"]
shell_hosts = ["github.com"]
[[capabilities]]
kind = "agent_spawn"
agent = "*"
[mcp.servers.fs]
command = ["mcp-fs"]
allowed_domains = ["registry.npmjs.org", "*.cdn.example"]
"#;

fn policy(src: &str) -> EffectivePolicy {
    effective(&GlobalConfig::default(), &manifest(src))
}

fn check(child_edits: &[(&str, &str)]) -> Vec<SpawnViolation> {
    let mut src = PARENT.replace("name = \"parent\"", "name = \"kid\"");
    for (from, to) in child_edits {
        assert!(src.contains(from), "{from}");
        src = src.replacen(from, to, 1);
    }
    let model: ModelRef = parse_model_ref("script:a").unwrap();
    let (p, c) = (policy(PARENT), policy(&src));
    let credentials = Default::default();
    let grant = |policy| SpawnGrant {
        policy,
        model: &model,
        credentials: &credentials,
    };
    spawn_violations(&grant(&p), "kid", &grant(&c))
}

fn items(v: &[SpawnViolation]) -> Vec<&str> {
    v.iter().map(|v| v.item.as_str()).collect()
}

#[test]
fn an_exact_copy_and_narrower_children_are_allowed() {
    assert_eq!(check(&[]), []);
    let narrower = check(&[
        (
            r#"allowed_domains = ["registry.npmjs.org", "*.cdn.example"]"#,
            r#"allowed_domains = ["a.cdn.example"]"#,
        ),
        (
            r#"deny = ["delete_file"]"#,
            r#"allow = ["read_file", "write_file"]"#,
        ),
        (r#"shell_hosts = ["github.com"]"#, "shell_hosts = []"),
    ]);
    assert_eq!(narrower, []);
    // Without the server at all.
    assert_eq!(check(&[(r#", "mcp:fs""#, "")]), []);
}

#[test]
fn a_server_or_host_the_parent_lacks_is_refused() {
    let v = check(&[
        (
            "[mcp.servers.fs]",
            "[mcp.servers.extra]\ncommand = [\"x\"]\n[mcp.servers.fs]",
        ),
        (
            r#"allow = ["agents", "shell", "mcp:fs"]"#,
            r#"allow = ["agents", "shell", "mcp:fs", "mcp:extra"]"#,
        ),
    ]);
    assert!(items(&v).contains(&"mcp server extra"), "{v:?}");
    assert!(items(&v).contains(&"tool mcp:extra:*"), "{v:?}");
    let v = check(&[(r#""*.cdn.example""#, r#""*.cdn.example", "evil.example""#)]);
    assert_eq!(items(&v), ["mcp server fs host evil.example"], "{v:?}");
    let v = check(&[(
        r#"command = ["mcp-fs"]"#,
        r#"command = ["mcp-fs", "--write"]"#,
    )]);
    assert_eq!(items(&v), ["mcp server fs"], "{v:?}");
    let v = check(&[(
        r#"command = ["mcp-fs"]"#,
        "command = [\"mcp-fs\"]\nenv = { MODE = \"rw\" }",
    )]);
    assert_eq!(items(&v), ["mcp server fs"], "{v:?}");
}

#[test]
fn dropped_tool_denials_and_approvals_are_refused() {
    let v = check(&[(r#"deny = ["delete_file"]"#, "deny = []")]);
    assert_eq!(items(&v), ["tool mcp:fs:*"], "{v:?}");
    let v = check(&[(r#"operations = ["mcp:fs:write_file"]"#, "operations = []")]);
    assert_eq!(items(&v), ["approval mcp:fs:write_file"], "{v:?}");
}

#[test]
fn shell_hosts_beyond_the_parents_are_refused() {
    let v = check(&[(
        r#"shell_hosts = ["github.com"]"#,
        r#"shell_hosts = ["github.com", "pypi.org"]"#,
    )]);
    assert_eq!(items(&v), ["sandbox.shell_hosts pypi.org"], "{v:?}");
}
