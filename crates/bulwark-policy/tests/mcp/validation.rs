//! `[mcp.servers.*]`, MCP domains and `[sandbox] shell_hosts` are checked
//! when the file is parsed, each refusal at its line and field.

use super::{config, config_err, line_of, manifest, manifest_err};

const HEAD: &str = "[agent]\nname = \"a\"\n";

fn with_server(server: &str) -> String {
    format!("{HEAD}[tools]\nallow = [\"mcp:fs\"]\n[mcp.servers.fs]\n{server}")
}

/// (entry body, the text of the offending line, field, words the message has)
fn bad_entries() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    vec![
        (
            "command = [\"a\"]\nurl = \"https://h.example/mcp\"\nallowed_domains = [\"h.example\"]\n",
            "url =",
            "mcp.servers.fs.url",
            "not both",
        ),
        (
            "command = []\n",
            "command =",
            "mcp.servers.fs.command",
            "is empty",
        ),
        (
            "command = [\"\", \"x\"]\n",
            "command =",
            "mcp.servers.fs.command",
            "is empty",
        ),
        (
            "command = [\"a\", \"b\\u0000c\"]\n",
            "command =",
            "mcp.servers.fs.command[1]",
            "NUL",
        ),
        (
            "url = \"ftp://h.example/mcp\"\nallowed_domains = [\"h.example\"]\n",
            "url =",
            "mcp.servers.fs.url",
            "https://",
        ),
        (
            "url = \"https://user:pw@h.example/mcp\"\nallowed_domains = [\"h.example\"]\n",
            "url =",
            "mcp.servers.fs.url",
            "credential grant",
        ),
        (
            "url = \"https://h.example/mcp\"\n",
            "url =",
            "mcp.servers.fs.url",
            "add \"h.example\" to its allowed_domains",
        ),
        (
            "url = \"https://h.example:8443/mcp\"\nallowed_domains = [\"h.example:443\"]\n",
            "url =",
            "mcp.servers.fs.url",
            "h.example:8443 is not in this server's allowed_domains",
        ),
        (
            "url = \"not a url\"\nallowed_domains = [\"h.example\"]\n",
            "url =",
            "mcp.servers.fs.url",
            "is not a URL",
        ),
        (
            "command = [\"a\"]\nallowed_domains = [\"https://h.example\"]\n",
            "allowed_domains =",
            "mcp.servers.fs.allowed_domains[0]",
            "bare host",
        ),
        (
            "command = [\"a\"]\n[mcp.servers.fs.env]\nLD_PRELOAD = \"/tmp/x.so\"\n",
            "LD_PRELOAD",
            "mcp.servers.fs.env.LD_PRELOAD",
            "reserved",
        ),
        (
            "command = [\"a\"]\n[mcp.servers.fs.env]\nhttps_proxy = \"http://evil\"\n",
            "https_proxy",
            "mcp.servers.fs.env.https_proxy",
            "reserved",
        ),
        (
            "command = [\"a\"]\n[mcp.servers.fs.env]\nBULWARK_HOME = \"/\"\n",
            "BULWARK_HOME",
            "mcp.servers.fs.env.BULWARK_HOME",
            "reserved",
        ),
        (
            "command = [\"a\"]\n[mcp.servers.fs.env]\n\"1BAD\" = \"x\"\n",
            "1BAD",
            "mcp.servers.fs.env.1BAD",
            "not an environment variable name",
        ),
        (
            "command = [\"a\"]\n[mcp.servers.fs.env]\nOK = \"a\\u0000b\"\n",
            "OK =",
            "mcp.servers.fs.env.OK",
            "NUL",
        ),
        (
            "command = [\"a\"]\nread_only = [\"lib/node\"]\n",
            "read_only =",
            "mcp.servers.fs.read_only[0]",
            "absolute path",
        ),
        (
            "command = [\"a\"]\ntimeout_secs = 0\n",
            "timeout_secs",
            "mcp.servers.fs.timeout_secs",
            "1 to 600",
        ),
        (
            "command = [\"a\"]\ntimeout_secs = 601\n",
            "timeout_secs",
            "mcp.servers.fs.timeout_secs",
            "1 to 600",
        ),
        (
            "env = { A = \"b\" }\n",
            "env =",
            "mcp.servers.fs.env",
            "uses config.toml's definition",
        ),
        (
            "read_only = [\"/opt\"]\n",
            "read_only =",
            "mcp.servers.fs.read_only",
            "uses config.toml's definition",
        ),
        (
            "command = [\"a\"]\nport = 3\n",
            "port",
            "mcp.servers.fs",
            "unknown field",
        ),
    ]
}

#[test]
fn each_bad_server_entry_is_refused_at_its_line() {
    for (entry, needle, field, words) in bad_entries() {
        let src = with_server(entry);
        let e = manifest_err(&src);
        assert_eq!(e.line, line_of(&src, needle), "{entry}: {e}");
        assert!(
            e.field.as_deref().is_some_and(|f| f.starts_with(field)),
            "{entry}: {e:?}"
        );
        assert!(e.message.contains(words), "{entry}: {e}");
        assert!(e.to_string().starts_with("agents/x/agent.toml:"), "{e}");
    }
}

#[test]
fn server_names_and_counts_are_bounded() {
    for name in ["Fs", "-fs", "f.s", "a23456789012345678901234567890123"] {
        let src = format!("{HEAD}[mcp.servers.\"{name}\"]\ncommand = [\"a\"]\n");
        let e = manifest_err(&src);
        assert_eq!(e.line, 3, "{name}: {e}");
        assert!(e.message.contains("not a server name"), "{name}: {e}");
    }
    // 32 characters, digits and the separators are fine.
    let ok = "a2345678901234567890123456789_-2";
    manifest(&format!("{HEAD}[mcp.servers.{ok}]\ncommand = [\"a\"]\n"));
    let mut many = HEAD.to_string();
    for i in 0..33 {
        many.push_str(&format!("[mcp.servers.s{i}]\ncommand = [\"a\"]\n"));
    }
    assert!(manifest_err(&many).message.contains("at most"));
    let hosts: Vec<String> = (0..65).map(|i| format!("\"h{i}.example\"")).collect();
    let e = manifest_err(&with_server(&format!(
        "command = [\"a\"]\nallowed_domains = [{}]\n",
        hosts.join(", ")
    )));
    assert!(e.message.contains("at most 64"), "{e}");
}

#[test]
fn good_servers_parse() {
    let m = manifest(&with_server(
        "command = [\"npx\", \"-y\", \"server-filesystem\", \"{workspace}\"]\nallowed_domains = [\"registry.npmjs.org\"]\nenv = { NODE_ENV = \"production\", PATH = \"/usr/bin\" }\nread_only = [\"/usr/lib/node_modules\"]\ntimeout_secs = 600\n",
    ));
    assert_eq!(m.mcp.servers["fs"].timeout_secs, Some(600));
    // An HTTP endpoint whose host a pattern covers; a bare entry.
    manifest(&format!(
        "{HEAD}[tools]\nallow = [\"mcp:search\", \"mcp:tickets\"]\n[mcp.servers.search]\nurl = \"https://mcp.example.com/mcp\"\nallowed_domains = [\"*.example.com:443\"]\n[mcp.servers.tickets]\nallowed_domains = [\"t.corp.example\"]\ntimeout_secs = 5\n"
    ));
}

#[test]
fn config_needs_exactly_one_of_command_and_url() {
    let src = "[mcp.servers.fs]\nallowed_domains = [\"a.example\"]\n";
    let e = config_err(src);
    assert_eq!((e.line, e.field.as_deref()), (1, Some("mcp.servers.fs")));
    assert!(e.message.contains("needs command"), "{e}");
    let src = "[mcp.servers.fs]\ncommand = [\"a\"]\nurl = \"https://a.example/\"\nallowed_domains = [\"a.example\"]\n";
    let e = config_err(src);
    assert_eq!(e.line, 3, "{e}");
    let src = "[mcp.servers.web]\nurl = \"https://a.example/\"\n";
    let e = config_err(src);
    assert_eq!(e.line, 2, "{e}");
    assert!(e.to_string().starts_with("config.toml:2:"), "{e}");
    config(
        "[mcp.servers.fs]\ncommand = [\"mcp-fs\"]\n[mcp.servers.web]\nurl = \"http://wiki.corp:8080/mcp\"\nallowed_domains = [\"wiki.corp:8080\"]\n",
    );
}

#[test]
fn an_undeclared_server_is_refused_wherever_it_is_named() {
    let cases = [
        (
            "[tools]\nallow = [\"mcp:fss\"]\n",
            "allow",
            "tools.allow[0]",
        ),
        (
            "[tools]\nallow = [\"mcp:fs\"]\ndeny = [\"mcp:fss:delete_file\"]\n",
            "deny",
            "tools.deny[0]",
        ),
        (
            "[tools]\nallow = [\"mcp:fs\"]\n[tools.operations.\"mcp:fss\"]\ndeny = [\"x\"]\n",
            "[tools.operations",
            "tools.operations.mcp:fss",
        ),
        (
            "[approval]\ntools = [\"mcp:fss\"]\n",
            "tools =",
            "approval.tools[0]",
        ),
        (
            "[approval]\noperations = [\"mcp:fss:write_file\"]\n",
            "operations =",
            "approval.operations[0]",
        ),
        (
            "[credentials.grants.g]\nkeys = [\"K\"]\ntools = [\"mcp:fss\"]\n",
            "tools =",
            "credentials.grants.g.tools[0]",
        ),
        (
            "[taint.sinks]\n\"mcp:fss:write_file\" = { external = \"deny\" }\n",
            "mcp:fss",
            "taint.sinks.mcp:fss:write_file",
        ),
        (
            "[[capabilities]]\nkind = \"tool_invoke\"\ntool = \"mcp:fss\"\n",
            "tool =",
            "capabilities[0].tool",
        ),
    ];
    for (body, needle, field) in cases {
        let src = format!("{HEAD}{body}[mcp.servers.fs]\ncommand = [\"a\"]\n");
        let e = manifest_err(&src);
        assert_eq!(e.field.as_deref(), Some(field), "{body}: {e}");
        assert_eq!(e.line, line_of(&src, needle), "{body}: {e}");
        assert!(
            e.message
                .contains("does not declare: add [mcp.servers.fss]"),
            "{body}: {e}"
        );
    }
}

#[test]
fn mcp_domains_and_operations_work_wherever_domains_do() {
    let m = manifest(&format!(
        r#"{HEAD}[tools]
allow = ["files", "mcp:fs"]
deny = ["mcp:fs:delete_file"]
[tools.operations."mcp:fs"]
allow = ["read_file", "write_file", "list.dir", "Search-Files"]
[approval]
tools = ["mcp:fs"]
operations = ["mcp:fs:write_file", "mcp:fs:*"]
[credentials.grants.fs]
keys = ["FS_TOKEN"]
tools = ["mcp:fs"]
[taint.sinks]
"mcp:fs" = {{ mcp = "allow" }}
"mcp:fs:write_file" = {{ external = "deny" }}
[[capabilities]]
kind = "tool_invoke"
tool = "mcp:fs"
[mcp.servers.fs]
command = ["mcp-fs"]
"#
    ));
    assert_eq!(m.credentials.grants["fs"].tools, ["mcp:fs"]);
    // A grant for an HTTP-reached domain and a stdio server still needs hosts.
    let e = manifest_err(&format!(
        "{HEAD}[credentials.grants.g]\nkeys = [\"K\"]\ntools = [\"web\", \"mcp:fs\"]\n[mcp.servers.fs]\ncommand = [\"a\"]\n"
    ));
    assert_eq!(
        e.field.as_deref(),
        Some("credentials.grants.g.hosts"),
        "{e}"
    );
    // Operation names outside the protocol's characters are refused.
    let src = format!(
        "{HEAD}[tools]\nallow = [\"mcp:fs\"]\n[tools.operations.\"mcp:fs\"]\nallow = [\"read file\"]\n[mcp.servers.fs]\ncommand = [\"a\"]\n"
    );
    let e = manifest_err(&src);
    assert_eq!(e.line, 6, "{e}");
    assert_eq!(
        e.field.as_deref(),
        Some("tools.operations.mcp:fs.allow[0]"),
        "{e}"
    );
    // Built-in domains keep their lowercase rule.
    let e = manifest_err(&format!(
        "{HEAD}[approval]\noperations = [\"files:Write\"]\n"
    ));
    assert!(e.message.contains("domain:operation"), "{e}");
    // config.toml and access.toml may name MCP domains of any manifest.
    config(
        "[tools]\nallow = [\"files\", \"mcp:fs\"]\ndeny = [\"mcp:web:post\"]\n[remote.tools.operations.\"mcp:fs\"]\ndeny = [\"write_file\"]\n[credits.tool_costs]\n\"mcp:fs\" = 3\n",
    );
    super::access("[users.al]\n[users.al.tools]\ndeny = [\"mcp:fs:write_file\"]\n");
}

#[test]
fn shell_hosts_need_a_shell_and_the_agents_own_hosts() {
    let src = format!(
        "{HEAD}[sandbox]\nallowed_domains = [\"github.com\"]\nshell_hosts = [\"github.com\"]\n"
    );
    let e = manifest_err(&src);
    assert_eq!(
        (e.line, e.field.as_deref()),
        (5, Some("sandbox.shell_hosts"))
    );
    assert!(e.message.contains("set sandbox.shell = true"), "{e}");
    let src = format!(
        "{HEAD}[sandbox]\nshell = true\nallowed_domains = [\"github.com\"]\nshell_hosts = [\"github.com\", \"evil.example\"]\n"
    );
    let e = manifest_err(&src);
    assert_eq!(
        (e.line, e.field.as_deref()),
        (6, Some("sandbox.shell_hosts[1]"))
    );
    assert!(
        e.message.contains("add it to sandbox.allowed_domains"),
        "{e}"
    );
    let src = format!(
        "{HEAD}[sandbox]\nshell = true\nallowed_domains = [\"github.com:443\"]\nshell_hosts = [\"github.com\"]\n"
    );
    // Any port is wider than the agent's port 443.
    assert_eq!(
        manifest_err(&src).field.as_deref(),
        Some("sandbox.shell_hosts[0]")
    );
    let src = format!(
        "{HEAD}[sandbox]\nshell = true\nallowed_domains = [\"x\"]\nshell_hosts = [\"*\"]\n"
    );
    assert!(manifest_err(&src).message.contains("not within"));
    let src = format!(
        "{HEAD}[sandbox]\nshell = true\nallowed_domains = [\"x\"]\nshell_hosts = [\"a/b\"]\n"
    );
    assert_eq!(
        manifest_err(&src).field.as_deref(),
        Some("sandbox.shell_hosts[0]")
    );
    // Covered by a suffix pattern, a net_connect capability, or allow_all.
    manifest(&format!(
        "{HEAD}[sandbox]\nshell = true\nallowed_domains = [\"*.github.com\"]\nshell_hosts = [\"codeload.github.com:443\", \"github.com\"]\n"
    ));
    manifest(&format!(
        "{HEAD}[sandbox]\nshell = true\nshell_hosts = [\"pypi.org\"]\n[[capabilities]]\nkind = \"net_connect\"\nhost = \"pypi.org\"\n"
    ));
    manifest(&format!(
        "{HEAD}[sandbox]\nshell = true\nallow_all = true\nshell_hosts = [\"*\"]\n"
    ));
}
