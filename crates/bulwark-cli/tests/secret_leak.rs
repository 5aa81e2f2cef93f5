//! The secret-leak test: one scripted session that uses, is refused, and
//! fails with secrets planted everywhere they could come from (a provider
//! key, a granted web credential, a declared but ungranted secret), then a
//! search of everything the run left behind — every stdout and stderr line
//! (with trace logging), every audit record, the child process's
//! environment, every file under the home — for each secret in every form
//! it could be smuggled in: raw, hex (both cases), base64 (standard and URL
//! alphabets, at all three alignments).

use crate::common;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use bulwark_test_support::http;
use common::{Bw, Out, field, scripted, with_action};
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

const PROVIDER_KEY: &str = "sk-ant-planted-Pv7q2LmX9aZr41";
const WEB_TOKEN: &str = "web-token-planted-Hq83NbVx20Ks";
const UNGRANTED: &str = "ungranted-planted-Tz55YcWd61Qe";
const SECRETS: [(&str, &str); 3] = [
    ("ANTHROPIC_API_KEY", PROVIDER_KEY),
    ("BW_WEB_TOKEN", WEB_TOKEN),
    ("BW_UNGRANTED", UNGRANTED),
];

/// Each form a secret could take in output: raw, hex, and the base64
/// characters that depend on the secret's bytes only (whatever precedes or
/// follows it in an encoded blob).
fn forms(secret: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![
        ("raw".to_string(), secret.as_bytes().to_vec()),
        ("hex".to_string(), hex::encode(secret).into_bytes()),
        ("HEX".to_string(), hex::encode_upper(secret).into_bytes()),
    ];
    for (alphabet, engine) in [
        ("base64", &STANDARD_NO_PAD),
        ("base64url", &URL_SAFE_NO_PAD),
    ] {
        for lead in 0..3usize {
            let mut input = vec![b'x'; lead];
            input.extend_from_slice(secret.as_bytes());
            let encoded = engine.encode(&input);
            // Characters mixing in the lead bytes, and the last group's,
            // depend on neighbours; what is between depends on the secret.
            let skip = [0, 2, 3][lead];
            let core = &encoded[skip..encoded.len() - 4];
            out.push((format!("{alphabet}@{lead}"), core.as_bytes().to_vec()));
        }
    }
    out
}

/// Every (secret, form) found in `haystack`.
fn leaks(haystack: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for (name, secret) in SECRETS {
        for (form, needle) in forms(secret) {
            if haystack
                .windows(needle.len())
                .any(|w| w == needle.as_slice())
            {
                found.push(format!("{name} ({form})"));
            }
        }
    }
    found
}

/// Everything the run printed or wrote, with where it came from.
#[derive(Default)]
struct Evidence {
    places: Vec<(String, Vec<u8>)>,
}

impl Evidence {
    fn output(&mut self, what: &str, out: &Out) {
        self.places
            .push((format!("{what}: stdout"), out.stdout.clone().into_bytes()));
        self.places
            .push((format!("{what}: stderr"), out.stderr.clone().into_bytes()));
    }

    fn files_under(&mut self, root: &std::path::Path) {
        for rel in common::tree(root) {
            let path = root.join(&rel);
            if path.is_file() {
                let bytes = std::fs::read(&path).expect("read a file of the run");
                self.places.push((format!("file {}", rel.display()), bytes));
            }
        }
    }

    #[track_caller]
    fn assert_clean(&self) {
        let mut found = Vec::new();
        for (place, bytes) in &self.places {
            for leak in leaks(bytes) {
                found.push(format!("{leak} in {place}"));
            }
        }
        assert!(found.is_empty(), "secrets leaked:\n{}", found.join("\n"));
    }
}

/// An internal service that echoes each request head (so a credential it
/// was sent comes back in the response, as some servers do).
fn echo_origin() -> (u16, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let addr = http::serve(usize::MAX, move |head| {
        log.lock().expect("log").push(head.to_owned());
        let body = format!(
            "you sent:\n{head}\nencoded: {}\n",
            STANDARD_NO_PAD.encode(head)
        );
        http::response("200 OK", &[("content-type", "text/plain")], body.as_bytes())
    });
    (addr.port(), seen)
}

/// An Anthropic endpoint that refuses every request with a 401 that echoes
/// the key it was sent, raw and hex-encoded.
fn failing_provider() -> (u16, Arc<Mutex<Vec<String>>>) {
    fn handle(stream: TcpStream, keys: &Mutex<Vec<String>>) -> std::io::Result<()> {
        stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut length = 0usize;
        let mut key = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                match name.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "x-api-key" => key = value.trim().to_string(),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let reply = format!(
            r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key: {key} ({})"}}}}"#,
            hex::encode(&key)
        );
        keys.lock().expect("keys").push(key);
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
            reply.len()
        )?;
        stream.flush()
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let keys = Arc::new(Mutex::new(Vec::new()));
    let seen = keys.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = handle(stream, &seen);
        }
    });
    (port, keys)
}

/// The text of every stored tool result, oldest first.
fn tool_results(bw: &Bw) -> Vec<String> {
    let db = rusqlite::Connection::open(bw.path("bulwark.db")).expect("open the database");
    let mut stmt = db
        .prepare(
            "SELECT content_json FROM messages WHERE content_json LIKE '%tool_result%' ORDER BY id",
        )
        .expect("query messages");
    stmt.query_map([], |r| r.get::<_, String>(0))
        .expect("read messages")
        .map(|r| r.expect("a message"))
        .collect()
}

fn call(name: &str, input: serde_json::Value) -> String {
    json!({"tool_calls": [{"name": name, "input": input}]}).to_string()
}

#[test]
fn no_secret_appears_anywhere_in_any_form() {
    let (origin_port, origin_seen) = echo_origin();
    let (provider_port, provider_seen) = failing_provider();
    let bw = Bw::empty();
    bw.write(
        "config.toml",
        &format!(
            "[egress]\ninternal = [\"127.0.0.1:{origin_port}\"]\n\
             [secrets]\nenv = [\"BW_UNGRANTED\"]\n\
             [providers.anthropic]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:{provider_port}\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n"
        ),
    );
    let manifest = scripted(
        "worker",
        &format!(
            r#"[tools]
allow = ["shell", "web", "files"]
[sandbox]
shell = true
allowed_domains = ["127.0.0.1"]
[[capabilities]]
kind = "shell_exec"
argv = ["env"]
[[capabilities]]
kind = "shell_exec"
argv = ["printenv", "BW_UNGRANTED", "ANTHROPIC_API_KEY"]
[[capabilities]]
kind = "net_connect"
host = "127.0.0.1:{origin_port}"
[[capabilities]]
kind = "file_read"
path = "**"
[credentials.grants.internal]
keys = ["BW_WEB_TOKEN"]
tools = ["web"]
hosts = ["127.0.0.1:{origin_port}"]
inject = [{{ header = "Authorization", value = "Bearer ${{BW_WEB_TOKEN}}" }}]
"#
        ),
    );
    let origin = format!("http://127.0.0.1:{origin_port}");
    let script = [
        // The child's whole environment, printed into the transcript.
        call("shell_exec", json!({"argv": ["env"]})),
        // A command that fails (exit 1: neither variable is set for it).
        call(
            "shell_exec",
            json!({"argv": ["printenv", "BW_UNGRANTED", "ANTHROPIC_API_KEY"]}),
        ),
        // A granted credential, echoed back by the server (raw and base64).
        call("web_fetch", json!({"url": format!("{origin}/granted")})),
        // A placeholder for a secret no grant gives to this host: refused.
        call(
            "web_fetch",
            json!({"url": format!("{origin}/smuggle"), "headers": {"X-Leak": "${BW_UNGRANTED}"}}),
        ),
        // A host outside the allowlist: refused before any lookup.
        call("web_fetch", json!({"url": "https://example.com/"})),
        // A tool error.
        call("file_read", json!({"path": "does-not-exist.txt"})),
        // After untrusted content, a command needs an approval: refused.
        call("shell_exec", json!({"argv": ["env"]})),
        json!({"text": "done"}).to_string(),
    ];
    bw.agent("worker", &manifest, Some(&(script.join("\n") + "\n")));
    bw.agent(
        "remote",
        "[agent]\nname = \"remote\"\nmodel = \"anthropic:test-model\"\n",
        None,
    );

    let with_secrets = |args: &[&str]| {
        let mut cmd = bw.cmd(args).env("BULWARK_LOG", "trace");
        for (name, value) in SECRETS {
            cmd = cmd.env(name, value);
        }
        cmd.run()
    };
    let mut evidence = Evidence::default();

    let out = with_secrets(&["run", "worker", "do the work"]);
    out.ok();
    evidence.output("run worker", &out);

    // The provider fails, echoing the key it was sent.
    let out = with_secrets(&["run", "remote", "hello"]);
    out.expect_code(1);
    assert!(out.stderr.contains("401"), "{}", out.stderr);
    assert!(
        out.stderr.contains("TRACE"),
        "no trace logs:\n{}",
        out.stderr
    );
    evidence.output("run remote", &out);
    let out = with_secrets(&["chat", "remote"]);
    evidence.output("chat remote", &out);

    for args in [
        &["audit", "export"][..],
        &["audit", "tail", "--json", "-n", "1000"],
        &["audit", "verify"],
        &["audit", "checkpoint"],
        &["audit", "show", "1"],
        &["sessions", "list"],
        &["policy", "explain", "worker"],
        &["credentials", "check", "worker"],
        &["preflight", "worker"],
    ] {
        let out = with_secrets(args);
        evidence.output(&args.join(" "), &out);
    }
    evidence.files_under(bw.home());

    // The test exercised what it claims: the secrets were really used.
    let heads = origin_seen.lock().expect("heads").clone();
    assert_eq!(
        heads.len(),
        1,
        "only the granted request is sent: {heads:?}"
    );
    assert!(
        heads[0].contains(&format!("Bearer {WEB_TOKEN}")),
        "{heads:?}"
    );
    let keys = provider_seen.lock().expect("keys").clone();
    assert!(!keys.is_empty() && keys.iter().all(|k| k == PROVIDER_KEY));
    let child_env = tool_results(&bw).into_iter().next().expect("env ran");
    assert!(child_env.contains("PATH="), "{child_env}");
    assert!(leaks(child_env.as_bytes()).is_empty(), "{child_env}");
    let records = bw.audit();
    let calls: Vec<(&str, &str)> = with_action(&records, "tool_call")
        .iter()
        .map(|r| (field(r, "tool"), field(r, "decision")))
        .collect();
    assert_eq!(
        calls,
        [
            ("shell_exec", "allowed"),
            ("shell_exec", "allowed"),
            ("web_fetch", "allowed"),
            ("web_fetch", "denied"),
            ("web_fetch", "denied"),
            ("file_read", "failed"),
            ("shell_exec", "denied"),
        ],
        "{records:#?}"
    );
    assert_eq!(with_action(&records, "credential").len(), 1, "{records:#?}");

    evidence.assert_clean();
    // The searcher itself finds each form (so a clean result means something).
    for (_, secret) in SECRETS {
        for (form, needle) in forms(secret) {
            let mut blob = b"prefix ".to_vec();
            blob.extend_from_slice(&needle);
            assert!(!leaks(&blob).is_empty(), "{form} not found");
        }
        let embedded = STANDARD_NO_PAD.encode(format!("a{secret}bc"));
        assert!(!leaks(embedded.as_bytes()).is_empty());
    }
}
