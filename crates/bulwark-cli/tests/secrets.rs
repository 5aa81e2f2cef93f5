//! No API key leaks through the CLI: not on stdout or stderr (even with
//! trace logging), not in the audit log, not in any file under the home.

use crate::common;

use common::{Bw, Out};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

const KEY: &str = "sk-test-SECRET123";
const NEEDLE: &str = "SECRET123";

/// A fake Anthropic endpoint on 127.0.0.1 that answers every request with
/// 401 and, like some real servers, echoes the key it was sent.
struct FakeProvider {
    port: u16,
    /// The `x-api-key` header of every request received.
    keys: Arc<Mutex<Vec<String>>>,
}

fn handle(stream: TcpStream, keys: &Mutex<Vec<String>>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0usize;
    let mut key = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(()); // a bare connect (preflight's reachability check)
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "x-api-key" => key = Some(value.trim().to_string()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let key = key.unwrap_or_default();
    let reply = format!(
        r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key: {key}"}}}}"#
    );
    keys.lock().unwrap().push(key);
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    )?;
    stream.flush()
}

impl FakeProvider {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
        let port = listener.local_addr().expect("local address").port();
        let keys = Arc::new(Mutex::new(Vec::new()));
        let seen = keys.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = handle(stream, &seen);
            }
        });
        FakeProvider { port, keys }
    }
}

#[track_caller]
fn assert_clean(what: &str, out: &Out) {
    assert!(
        !out.stdout.contains(NEEDLE),
        "{what}: the key is on stdout:\n{}",
        out.stdout
    );
    assert!(
        !out.stderr.contains(NEEDLE),
        "{what}: the key is on stderr:\n{}",
        out.stderr
    );
}

/// Every file under `dir`, byte for byte (the database and its WAL too).
fn assert_no_file_contains(dir: &Path) {
    for rel in common::tree(dir) {
        let path = dir.join(&rel);
        if path.is_file() {
            let bytes = std::fs::read(&path).expect("read a home file");
            assert!(
                !bytes.windows(NEEDLE.len()).any(|w| w == NEEDLE.as_bytes()),
                "the key was written to {}",
                rel.display()
            );
        }
    }
}

#[test]
fn api_key_never_leaks_through_the_cli() {
    let provider = FakeProvider::start();
    let bw = Bw::empty();
    let with_key = |args: &[&str]| bw.cmd(args).env("ANTHROPIC_API_KEY", KEY).run();

    let out = with_key(&["init"]);
    out.ok();
    assert_clean("init", &out);

    let out = with_key(&["run", "demo", "show me"]);
    out.ok();
    assert_clean("run demo", &out);

    // Point the built-in anthropic provider at the fake endpoint, so nothing
    // leaves the machine and the key is really used.
    bw.write(
        "config.toml",
        &format!(
            "[providers.anthropic]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:{}\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n",
            provider.port
        ),
    );

    let out = with_key(&["preflight", "assistant"]);
    out.ok();
    assert!(
        out.stdout.contains("(key from ANTHROPIC_API_KEY)"),
        "{}",
        out.stdout
    );
    assert_clean("preflight assistant", &out);

    // A real provider call: the server echoes the key in its 401.
    let out = with_key(&["run", "assistant", "summarize notes.txt"]);
    out.expect_code(1);
    assert!(out.stderr.contains("401"), "{}", out.stderr);
    // The echoed key reached the client and was redacted, not dropped.
    assert!(
        out.stderr.contains("invalid x-api-key: [redacted]"),
        "{}",
        out.stderr
    );
    assert_clean("run assistant", &out);

    // The same with every log line the binary can produce.
    let out = bw
        .cmd(&["run", "assistant", "summarize notes.txt"])
        .env("ANTHROPIC_API_KEY", KEY)
        .env("BULWARK_LOG", "trace")
        .run();
    out.expect_code(1);
    assert!(
        out.stderr.contains("TRACE"),
        "no trace logs:\n{}",
        out.stderr
    );
    // Logs into a pipe carry no terminal colour codes.
    assert!(!out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
    assert_clean("run assistant with BULWARK_LOG=trace", &out);

    let out = bw
        .cmd(&["chat", "assistant"])
        .env("ANTHROPIC_API_KEY", KEY)
        .stdin("hello\n")
        .run();
    assert_clean("chat assistant", &out);

    // The fake provider really saw the key: the test exercised it.
    let keys = provider.keys.lock().unwrap().clone();
    assert!(keys.len() >= 3, "the provider saw {} requests", keys.len());
    assert!(keys.iter().all(|k| k == KEY), "{keys:?}");

    for args in [
        &["audit", "tail", "--json", "-n", "1000"][..],
        &["audit", "tail", "-n", "1000"],
        &["sessions", "list"],
        &["agents", "list"],
        &["policy", "explain", "assistant"],
    ] {
        let out = with_key(args);
        out.ok();
        assert_clean(&args.join(" "), &out);
    }
    assert_no_file_contains(bw.home());
}
