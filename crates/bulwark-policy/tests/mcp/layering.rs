//! `mcp:<server>` domains through every layer, server resolution and host
//! narrowing, approvals, `shell_hosts` narrowing, and `explain`.

use bulwark_policy::mcp::{McpTransport, resolve_servers};
use bulwark_policy::{
    Capability, Demand, DenyReason, GlobalConfig, Layer, PolicyInputs, compute_effective,
};

use super::{access, catalog, config, effective, items, manifest};

const FS: &str = r#"
[agent]
name = "a"
[tools]
allow = ["files", "mcp:fs"]
[mcp.servers.fs]
command = ["mcp-fs", "{workspace}"]
allowed_domains = ["registry.npmjs.org"]
"#;

#[test]
fn a_plain_manifest_server_is_resolved_and_its_tools_allowed() {
    let eff = effective(&GlobalConfig::default(), &manifest(FS));
    let fs = &eff.mcp["fs"];
    assert_eq!(
        fs.transport,
        McpTransport::Stdio {
            command: vec!["mcp-fs".into(), "{workspace}".into()]
        }
    );
    assert_eq!(fs.allowed_domains, ["registry.npmjs.org"]);
    assert_eq!(fs.timeout_secs, 60);
    for tool in ["read_file", "write_file", "list.dir", "Tool-2"] {
        eff.check_tool("mcp:fs", tool).unwrap();
    }
    assert!(eff.removed.is_empty(), "{:?}", items(&eff));
    // The server's hosts are its own: the agent may not connect there.
    assert!(
        eff.check_demand(&Demand::NetConnect {
            host: "registry.npmjs.org".into(),
            port: 443
        })
        .is_err()
    );
    assert!(eff.sandbox.allowed_domains.is_empty());
    // "*" in tools.allow covers the declared servers too.
    let star = manifest(&FS.replace(r#"allow = ["files", "mcp:fs"]"#, r#"allow = ["*"]"#));
    effective(&GlobalConfig::default(), &star)
        .check_tool("mcp:fs", "x")
        .unwrap();
}

#[test]
fn a_declared_server_whose_domain_is_not_allowed_is_not_started() {
    let m = manifest(&FS.replace(r#", "mcp:fs""#, ""));
    let eff = effective(&GlobalConfig::default(), &m);
    assert!(eff.mcp.is_empty());
    let e = eff.check_tool("mcp:fs", "read_file").unwrap_err();
    assert_eq!(e.reason, DenyReason::Tool);
    assert!(e.message.contains("tools.allow"), "{e}");
}

#[test]
fn undeclared_mcp_domains_and_bad_tool_names_fail_closed() {
    let eff = effective(&GlobalConfig::default(), &manifest(FS));
    assert_eq!(
        eff.check_tool("mcp:other", "read_file").unwrap_err().reason,
        DenyReason::Tool
    );
    for bad in ["", "*", "read file", "a:b", "x\n", &"a".repeat(129)] {
        let e = eff.check_tool("mcp:fs", bad).unwrap_err();
        assert_eq!(e.reason, DenyReason::Operation, "{bad:?}");
    }
    // A manifest built without parsing that grants an undeclared server.
    let mut m = manifest(FS);
    m.tools.allow = Some(vec!["mcp:ghost".into()]);
    let eff = effective(&GlobalConfig::default(), &m);
    assert!(eff.check_tool("mcp:ghost", "x").is_err());
    assert!(
        items(&eff)
            .iter()
            .any(|r| r.starts_with("tool mcp:ghost: agent manifest")),
        "{:?}",
        items(&eff)
    );
}

#[test]
fn operations_of_an_open_domain_narrow_in_every_layer() {
    let src = FS.replace(
        "[mcp.servers.fs]",
        "deny = [\"mcp:fs:delete_file\"]\n[tools.operations.\"mcp:fs\"]\ndeny = [\"move_file\"]\n[mcp.servers.fs]",
    );
    let m = manifest(&src);
    let g = config("[tools.operations.\"mcp:fs\"]\ndeny = [\"write_file\"]\n");
    let eff = effective(&g, &m);
    eff.check_tool("mcp:fs", "read_file").unwrap();
    for (op, why) in [
        (
            "delete_file",
            "agent manifest (tools.deny contains \"mcp:fs:delete_file\")",
        ),
        (
            "move_file",
            "operation allowlist (tools.operations.mcp:fs.deny contains \"move_file\")",
        ),
        (
            "write_file",
            "global config (tools.operations.mcp:fs.deny contains \"write_file\")",
        ),
    ] {
        let e = eff.check_tool("mcp:fs", op).unwrap_err();
        assert_eq!(e.reason, DenyReason::Operation, "{op}");
        assert!(e.message.contains(why), "{op}: {e}");
    }
    assert!(
        eff.explain()
            .contains("mcp:fs: * (except delete_file, move_file, write_file)"),
        "{}",
        eff.explain()
    );
    // An allow list replaces "every tool" with the tools it names, in
    // whichever layer writes it; later deny lists still apply.
    let a = access(
        "[users.al]\n[users.al.tools.operations.\"mcp:fs\"]\nallow = [\"read_file\", \"write_file\", \"stat\"]\n",
    );
    let mut m = manifest(FS);
    m.access.mode = bulwark_policy::AccessMode::Public;
    let eff = compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m,
            remote: false,
            user: Some(("al", &a.users["al"])),
        },
        &catalog(),
    );
    eff.check_tool("mcp:fs", "read_file").unwrap();
    eff.check_tool("mcp:fs", "stat").unwrap();
    let e = eff.check_tool("mcp:fs", "write_file").unwrap_err();
    assert!(e.message.contains("global config"), "{e}");
    let e = eff.check_tool("mcp:fs", "list_directory").unwrap_err();
    assert!(
        e.message
            .contains("user restrictions (users.al.tools.operations.mcp:fs.allow lists only"),
        "{e}"
    );
    // A deny of "*" removes the whole domain, and with it the server.
    let g = config("[tools.operations.\"mcp:fs\"]\ndeny = [\"*\"]\n");
    let eff = effective(&g, &manifest(FS));
    assert!(eff.mcp.is_empty() && !eff.tools.contains_key("mcp:fs"));
}

#[test]
fn domain_filters_of_every_layer_remove_mcp_domains() {
    let m = manifest(FS);
    for (g, remote, layer) in [
        (
            config("[tools]\nallow = [\"files\"]\n"),
            false,
            Layer::Global,
        ),
        (
            config("[tools]\ndeny = [\"mcp:fs\"]\n"),
            false,
            Layer::Global,
        ),
        (
            config("[remote.tools]\ndeny = [\"mcp:fs:*\"]\n"),
            true,
            Layer::RemoteSandbox,
        ),
        (
            config("[remote.tools]\nallow = [\"files\"]\n"),
            true,
            Layer::RemoteSandbox,
        ),
    ] {
        let eff = compute_effective(
            &PolicyInputs {
                global: &g,
                manifest: &m,
                remote,
                user: None,
            },
            &catalog(),
        );
        assert!(eff.mcp.is_empty(), "{layer:?}");
        let e = eff.check_tool("mcp:fs", "read_file").unwrap_err();
        assert!(e.message.contains(&layer.to_string()), "{e}");
        eff.check_tool("files", "read").unwrap();
    }
    // Allowed by name in a narrowing layer: kept.
    let g = config("[tools]\nallow = [\"files\", \"mcp:fs\"]\n");
    assert!(effective(&g, &m).mcp.contains_key("fs"));
}

#[test]
fn approvals_name_mcp_domains_and_tools() {
    let m = manifest(&FS.replace(
        "[mcp.servers.fs]",
        "[approval]\noperations = [\"mcp:fs:write_file\"]\n[mcp.servers.fs]",
    ));
    let eff = effective(&GlobalConfig::default(), &m);
    assert!(eff.needs_approval("mcp:fs", "write_file"));
    assert!(!eff.needs_approval("mcp:fs", "read_file"));
    // "mcp:fs:write_file" is never read as domain "mcp", operation "fs".
    assert!(!eff.needs_approval("mcp", "fs"));
    let m = manifest(&FS.replace(
        "[mcp.servers.fs]",
        "[approval]\ntools = [\"mcp:fs\"]\n[mcp.servers.fs]",
    ));
    let eff = effective(&GlobalConfig::default(), &m);
    assert!(eff.needs_approval("mcp:fs", "read_file"));
    assert!(!eff.needs_approval("files", "read"));
}

const OPERATOR: &str = r#"
[mcp.servers.tickets]
url = "https://tickets.corp.example/mcp"
allowed_domains = ["tickets.corp.example", "*.cdn.example"]
timeout_secs = 30
"#;

fn bare(extra: &str) -> String {
    format!(
        "[agent]\nname = \"a\"\n[tools]\nallow = [\"mcp:tickets\"]\n[mcp.servers.tickets]\n{extra}"
    )
}

#[test]
fn a_bare_entry_takes_the_operators_definition_and_only_narrows_it() {
    let g = config(OPERATOR);
    let eff = effective(&g, &manifest(&bare("")));
    let t = &eff.mcp["tickets"];
    assert_eq!(
        t.transport,
        McpTransport::Http {
            url: "https://tickets.corp.example/mcp".into()
        }
    );
    assert_eq!(t.allowed_domains, ["tickets.corp.example", "*.cdn.example"]);
    assert_eq!(t.timeout_secs, 30);
    // Narrowed: the manifest's hosts within config.toml's stay, the rest
    // are dropped and reported; a lower timeout wins, a higher one not.
    let m = manifest(&bare(
        "allowed_domains = [\"tickets.corp.example\", \"a.cdn.example\", \"evil.example\", \"*.example\"]\ntimeout_secs = 90\n",
    ));
    let eff = effective(&g, &m);
    let t = &eff.mcp["tickets"];
    assert_eq!(t.allowed_domains, ["tickets.corp.example", "a.cdn.example"]);
    assert_eq!(t.timeout_secs, 30);
    let removed = items(&eff);
    for h in ["evil.example", "*.example"] {
        assert!(
            removed.iter().any(|r| r.starts_with(&format!(
                "mcp server tickets host {h}: global config (not within config.toml's"
            ))),
            "{removed:?}"
        );
    }
    assert!(
        eff.explain()
            .contains("hosts removed: evil.example, *.example"),
        "{}",
        eff.explain()
    );
    assert_eq!(
        effective(&g, &manifest(&bare("timeout_secs = 5\n"))).mcp["tickets"].timeout_secs,
        5
    );
    // Narrowing away the endpoint's own host drops the server.
    let eff = effective(
        &g,
        &manifest(&bare("allowed_domains = [\"a.cdn.example\"]\n")),
    );
    assert!(eff.mcp.is_empty());
    assert!(eff.check_tool("mcp:tickets", "open").is_err());
    assert!(
        items(&eff)
            .iter()
            .any(|r| r.starts_with("mcp server tickets:")),
        "{:?}",
        items(&eff)
    );
    // The public resolver agrees.
    let tools = effective(&g, &manifest(&bare(""))).tools;
    assert_eq!(
        resolve_servers(&g.mcp, &manifest(&bare("")).mcp, &tools)["tickets"].allowed_domains,
        ["tickets.corp.example", "*.cdn.example"]
    );
}

#[test]
fn a_bare_entry_config_toml_lacks_is_reported_and_refused() {
    let eff = effective(&GlobalConfig::default(), &manifest(&bare("")));
    assert!(eff.mcp.is_empty());
    let r = eff
        .removed
        .iter()
        .find(|r| r.item == "mcp server tickets")
        .expect("reported");
    assert_eq!(r.layer, Layer::Global);
    assert!(r.rule.contains("config.toml defines none"), "{}", r.rule);
    let e = eff.check_tool("mcp:tickets", "open").unwrap_err();
    assert!(e.message.contains("its MCP server did not resolve"), "{e}");
    // config.toml's servers reach no agent that does not name them.
    let g = config(OPERATOR);
    assert!(!effective(&g, &manifest(FS)).mcp.contains_key("tickets"));
}

#[test]
fn server_hosts_pass_the_capability_ceilings() {
    let g = config(
        "[[capabilities]]\nkind = \"net_connect\"\nhost = \"*.npmjs.org\"\n[[capabilities]]\nkind = \"tool_all\"\n",
    );
    let m = manifest(&FS.replace(
        r#"allowed_domains = ["registry.npmjs.org"]"#,
        r#"allowed_domains = ["registry.npmjs.org", "evil.example"]"#,
    ));
    let eff = effective(&g, &m);
    assert_eq!(eff.mcp["fs"].allowed_domains, ["registry.npmjs.org"]);
    assert!(items(&eff).contains(
        &"mcp server fs host evil.example: global config (not within the global capabilities ceiling)"
            .to_string()
    ));
    // The user's ceiling too.
    let a = access(
        "[users.al]\n[[users.al.capabilities]]\nkind = \"tool_all\"\n[[users.al.capabilities]]\nkind = \"net_connect\"\nhost = \"evil.example\"\n",
    );
    let mut m = m;
    m.access.mode = bulwark_policy::AccessMode::Public;
    let eff = compute_effective(
        &PolicyInputs {
            global: &GlobalConfig::default(),
            manifest: &m,
            remote: false,
            user: Some(("al", &a.users["al"])),
        },
        &catalog(),
    );
    assert_eq!(eff.mcp["fs"].allowed_domains, ["evil.example"]);
    assert!(
        items(&eff)
            .iter()
            .any(|r| r.starts_with("mcp server fs host registry.npmjs.org: user restrictions"))
    );
    // An HTTP server whose endpoint a ceiling removes is not started.
    let g = config(&format!(
        "{OPERATOR}[[capabilities]]\nkind = \"net_connect\"\nhost = \"*.cdn.example\"\n[[capabilities]]\nkind = \"tool_all\"\n"
    ));
    let eff = effective(&g, &manifest(&bare("")));
    assert!(eff.mcp.is_empty());
    let r = eff
        .removed
        .iter()
        .find(|r| r.item == "mcp server tickets")
        .unwrap();
    assert_eq!(r.layer, Layer::Global);
}

#[test]
fn shell_hosts_survive_only_with_the_shell_and_their_capability() {
    let src = r#"
[agent]
name = "a"
[tools]
allow = ["shell"]
[sandbox]
shell = true
allowed_domains = ["github.com", "pypi.org"]
shell_hosts = ["github.com", "pypi.org"]
"#;
    let m = manifest(src);
    let eff = effective(&GlobalConfig::default(), &m);
    assert_eq!(eff.sandbox.shell_hosts, ["github.com", "pypi.org"]);
    assert!(
        eff.explain()
            .contains("shell hosts (through the egress proxy): github.com, pypi.org")
    );
    // A ceiling that removes pypi.org removes it from the shell too.
    let g = config(
        "[[capabilities]]\nkind = \"net_connect\"\nhost = \"github.com\"\n[[capabilities]]\nkind = \"tool_all\"\n",
    );
    let eff = effective(&g, &m);
    assert_eq!(eff.sandbox.shell_hosts, ["github.com"]);
    assert!(
        items(&eff)
            .iter()
            .any(|r| r.starts_with("shell host pypi.org: global config")),
        "{:?}",
        items(&eff)
    );
    // No shell in a remote session: no shell hosts.
    let eff = compute_effective(
        &PolicyInputs {
            global: &GlobalConfig::default(),
            manifest: &m,
            remote: true,
            user: None,
        },
        &catalog(),
    );
    assert!(!eff.sandbox.shell && eff.sandbox.shell_hosts.is_empty());
    assert!(
        items(&eff)
            .iter()
            .any(|r| r.starts_with("shell host github.com:"))
    );
    // The agent itself keeps its own hosts either way.
    assert!(eff.capabilities.iter().any(|c| *c
        == Capability::NetConnect {
            host: "github.com".into()
        }));
}

#[test]
fn explain_lists_servers_and_the_taint_table_has_the_mcp_column() {
    let eff = effective(&GlobalConfig::default(), &manifest(FS));
    let text = eff.explain();
    assert!(
        text.contains("mcp servers:\n  fs: stdio mcp-fs; hosts registry.npmjs.org; timeout 60s\n"),
        "{text}"
    );
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("sink"))
        .unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["sink", "external", "peer", "unknown", "mcp"]
    );
}
