//! The sandbox's one way out, through the binary: a stdio MCP server and a
//! shell command reach exactly the hosts they were granted, through the
//! egress proxy on a Unix socket, and nothing else (a private address, a
//! port not granted, a direct connection around the proxy); every decision
//! is an `egress` audit record.

use super::{python, script};
use crate::common::{self, Bw, field, with_action};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A loopback HTTP server on the host that answers 200 to everything and
/// keeps the request lines it saw.
struct Origin {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Origin {
    fn start() -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                log.lock().unwrap().push(line.trim().to_string());
                // Drain the head, then answer.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let mut stream = stream;
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            }
        });
        Origin { port, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// config.toml: the loopback origin is an operator-allowed internal
/// service (as a company's internal registry would be); nothing else is.
fn config(bw: &Bw, origin: &Origin) {
    bw.write(
        "config.toml",
        &format!(
            "[sandbox]\nenforcement = \"permissive\"\n[egress]\ninternal = [\"127.0.0.1:{}\"]\n",
            origin.port
        ),
    );
}

fn server(name: &str, mode: &str, host: &str, url: &str) -> String {
    let script = script().canonicalize().unwrap();
    let dir = script.parent().unwrap().display().to_string();
    format!(
        r#"
[mcp.servers.{name}]
command = ["{python}", "{script}"]
read_only = ["{dir}"]
allowed_domains = ["{host}"]
timeout_secs = 20
[mcp.servers.{name}.env]
MCP_TEST_MODE = "{mode}"
MCP_TEST_URL = "{url}"
"#,
        python = python(),
        script = script.display(),
    )
}

fn echo(tool: &str) -> String {
    json!({"tool_calls": [{"name": tool, "input": {"text": "go"}}]}).to_string()
}

/// The `egress` records: (tool, decision, detail).
fn egress(records: &[Value]) -> Vec<(String, String, String)> {
    with_action(records, "egress")
        .iter()
        .map(|r| {
            (
                field(r, "tool").to_string(),
                field(r, "decision").to_string(),
                field(r, "detail").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_sandboxed_mcp_server_reaches_its_granted_host_through_the_proxy_and_nothing_else() {
    let origin = Origin::start();
    let other = Origin::start();
    let bw = Bw::init();
    config(&bw, &origin);
    let granted = format!("127.0.0.1:{}", origin.port);
    let mut manifest = common::scripted(
        "net",
        r#"max_turns = 10
[tools]
allow = ["mcp:ok", "mcp:private", "mcp:port", "mcp:direct"]
# Each server's own output is in the conversation before the next call;
# this test is about the network, so the MCP sinks take it.
[taint.sinks]
"mcp:ok" = { mcp = "allow" }
"mcp:private" = { mcp = "allow" }
"mcp:port" = { mcp = "allow" }
"mcp:direct" = { mcp = "allow" }
"#,
    );
    manifest += &server(
        "ok",
        "proxy",
        &granted,
        &format!("http://{granted}/through-the-proxy"),
    );
    // Allowlisted, but a private address: the address table still refuses.
    manifest += &server("private", "proxy", "10.0.0.1", "http://10.0.0.1/private");
    // The granted host on a port the grant does not name.
    manifest += &server(
        "port",
        "proxy",
        &granted,
        &format!("http://127.0.0.1:{}/other-port", other.port),
    );
    // Around the proxy: a direct connection to the granted host.
    manifest += &server(
        "direct",
        "direct",
        &granted,
        &format!("http://{granted}/around-the-proxy"),
    );
    let turns = [
        echo("mcp__ok__echo"),
        echo("mcp__private__echo"),
        echo("mcp__port__echo"),
        echo("mcp__direct__echo"),
        json!({"text": "done"}).to_string(),
    ];
    bw.agent("net", &manifest, Some(&(turns.join("\n") + "\n")));
    bw.run(&["mcp", "pin", "net", "--yes"]).ok();
    bw.run(&["run", "net", "fetch"]).ok();

    // Only the request through the proxy reached a host.
    assert_eq!(
        origin.seen(),
        ["GET /through-the-proxy HTTP/1.1"],
        "the granted origin"
    );
    assert!(other.seen().is_empty(), "{:?}", other.seen());

    let records = bw.audit();
    let decisions = egress(&records);
    let allowed: Vec<_> = decisions
        .iter()
        .filter(|(_, d, _)| d == "allowed")
        .collect();
    assert_eq!(allowed.len(), 1, "{decisions:#?}");
    assert_eq!(allowed[0].0, "mcp:ok");
    assert!(allowed[0].2.contains(&granted), "{}", allowed[0].2);
    let refused = |tool: &str| {
        decisions
            .iter()
            .find(|(t, d, _)| t == tool && d == "denied")
            .map(|(_, _, detail)| detail.clone())
            .unwrap_or_else(|| panic!("no refusal for {tool}: {decisions:#?}"))
    };
    assert!(refused("mcp:private").contains("10.0.0.1"));
    assert!(refused("mcp:port").contains(&other.port.to_string()));
    // The direct attempt never reached the proxy: nothing to record, and
    // nothing arrived (above).
    assert!(
        !decisions.iter().any(|(t, _, _)| t == "mcp:direct"),
        "{decisions:#?}"
    );
    // Every server started in the sandbox, the proxied ones with their proxy.
    let spawns: Vec<&str> = with_action(&records, "spawn")
        .iter()
        .map(|r| field(r, "detail"))
        .filter(|d| d.starts_with("MCP server"))
        .collect();
    assert!(
        spawns
            .iter()
            .any(|d| d.contains("sandboxed") && d.contains("egress proxy")),
        "{spawns:#?}"
    );
}

#[test]
fn shell_hosts_give_shell_commands_the_proxy_and_only_those_hosts() {
    let origin = Origin::start();
    let other = Origin::start();
    let bw = Bw::init();
    config(&bw, &origin);
    let granted = format!("127.0.0.1:{}", origin.port);
    let manifest = common::scripted(
        "builder",
        &format!(
            r#"max_turns = 10
[tools]
allow = ["shell"]
[sandbox]
shell = true
allowed_domains = ["{granted}"]
shell_hosts = ["{granted}"]
[[capabilities]]
kind = "shell_exec"
argv = ["*", "**"]
"#
        ),
    );
    let fetch = |url: &str, proxied: bool| {
        let opener = if proxied {
            "urllib.request.build_opener()"
        } else {
            "urllib.request.build_opener(urllib.request.ProxyHandler({}))"
        };
        let code = format!(
            "import urllib.request\ntry:\n    print('fetched', {opener}.open('{url}', timeout=10).status)\nexcept Exception as e:\n    print('failed', e)\n"
        );
        json!({"tool_calls": [{"name": "shell_exec", "input": {"argv": [python(), "-c", code]}}]})
            .to_string()
    };
    let turns = [
        fetch(&format!("http://{granted}/shell-through-the-proxy"), true),
        fetch(
            &format!("http://127.0.0.1:{}/shell-other-port", other.port),
            true,
        ),
        fetch(&format!("http://{granted}/shell-around-the-proxy"), false),
        json!({"text": "done"}).to_string(),
    ];
    bw.agent("builder", &manifest, Some(&(turns.join("\n") + "\n")));
    bw.run(&["run", "builder", "fetch"]).ok();

    assert_eq!(origin.seen(), ["GET /shell-through-the-proxy HTTP/1.1"]);
    assert!(other.seen().is_empty(), "{:?}", other.seen());
    let records = bw.audit();
    let decisions = egress(&records);
    assert!(
        decisions
            .iter()
            .any(|(t, d, detail)| t == "shell" && d == "allowed" && detail.contains(&granted)),
        "{decisions:#?}"
    );
    assert!(
        decisions.iter().any(|(t, d, detail)| t == "shell"
            && d == "denied"
            && detail.contains(&other.port.to_string())),
        "{decisions:#?}"
    );
}

#[test]
fn without_shell_hosts_a_shell_command_has_no_way_out() {
    let origin = Origin::start();
    let bw = Bw::init();
    config(&bw, &origin);
    let granted = format!("127.0.0.1:{}", origin.port);
    let manifest = common::scripted(
        "builder",
        &format!(
            r#"max_turns = 10
[tools]
allow = ["shell"]
[sandbox]
shell = true
allowed_domains = ["{granted}"]
[[capabilities]]
kind = "shell_exec"
argv = ["*", "**"]
"#
        ),
    );
    let code = format!(
        "import urllib.request\ntry:\n    print('fetched', urllib.request.urlopen('http://{granted}/no-shell-hosts', timeout=10).status)\nexcept Exception as e:\n    print('failed', e)\n"
    );
    let turns = [
        json!({"tool_calls": [{"name": "shell_exec", "input": {"argv": [python(), "-c", code]}}]})
            .to_string(),
        json!({"text": "done"}).to_string(),
    ];
    bw.agent("builder", &manifest, Some(&(turns.join("\n") + "\n")));
    bw.run(&["run", "builder", "fetch"]).ok();
    assert!(origin.seen().is_empty(), "{:?}", origin.seen());
    assert!(egress(&bw.audit()).is_empty());
}
