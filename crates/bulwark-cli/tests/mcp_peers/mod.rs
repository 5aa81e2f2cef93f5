//! Bulwark against real third-party MCP peers, through the real binary:
//! the reference filesystem server (`@modelcontextprotocol/server-filesystem`
//! from npm) driven by Bulwark's client inside the process sandbox
//! (`server.rs`), and the official MCP Python SDK's client driving
//! `bulwark mcp serve` (`client.rs`).
//!
//! The peers are not in the repository: `scripts/test` runs
//! `scripts/mcp-peers`, which installs the pinned versions (hashes in
//! `tests/data/mcp-peers/`) and exports `BULWARK_MCP_PEERS`; without the
//! variable the tests look in `target/mcp-peers`, where the script installs
//! by default. Missing peers FAIL the tests with the command that installs
//! them; they never skip (a skipped interoperability test would hide a
//! broken protocol).

mod client;
mod server;

use crate::common::SCRUBBED;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The committed pins and the client script.
fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mcp-peers")
}

/// Where `scripts/mcp-peers` installed the peers.
pub struct Peers {
    dir: PathBuf,
}

impl Peers {
    /// The installed peers, or a failure naming the command that installs
    /// them.
    pub fn get() -> Self {
        let dir = match std::env::var_os("BULWARK_MCP_PEERS") {
            Some(dir) => PathBuf::from(dir),
            None => repo_root().join("target/mcp-peers"),
        };
        for half in ["node", "py"] {
            assert!(
                dir.join(half).join(".installed").is_file(),
                "the MCP peers are not installed in {} ({half}/ is missing or incomplete): \
                 run scripts/mcp-peers (scripts/test does, and exports BULWARK_MCP_PEERS), \
                 or set BULWARK_MCP_PEERS to the directory it printed",
                dir.display()
            );
        }
        let dir = dir.canonicalize().expect("the peers directory resolves");
        Peers { dir }
    }

    /// Everything the Node server needs to read: its packages.
    pub fn node_dir(&self) -> PathBuf {
        self.dir.join("node")
    }

    /// The filesystem server's entry point.
    pub fn filesystem_server(&self) -> PathBuf {
        self.node_dir()
            .join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
    }

    /// The virtualenv's interpreter, with the MCP SDK.
    pub fn python(&self) -> PathBuf {
        self.dir.join("py/bin/python")
    }
}

/// The `node` on PATH as an absolute path (the sandbox resolves no PATH of
/// the host), and the directories beyond the system ones that it needs to
/// read: none for a system install, its prefix for one elsewhere.
pub fn node() -> (PathBuf, Vec<PathBuf>) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let node = std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .expect("node is on PATH (scripts/mcp-peers needs it too)");
    let node = node.canonicalize().expect("node resolves");
    let system = ["/usr/", "/bin/", "/lib/"]
        .iter()
        .any(|prefix| node.starts_with(prefix));
    let extra = if system {
        Vec::new()
    } else {
        // <prefix>/bin/node: the prefix holds its libraries.
        node.parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .into_iter()
            .collect()
    };
    (node, extra)
}

/// A TOML string literal of a path (a JSON string is a TOML basic string:
/// the same escapes).
pub fn toml_path(path: &Path) -> String {
    Value::String(path.display().to_string()).to_string()
}

/// Runs the committed SDK client (`tests/data/mcp-peers/client.py`) with
/// `args` and returns the JSON it printed; panics with its output when it
/// fails.
pub fn run_client(peers: &Peers, args: &[&str]) -> Value {
    let mut cmd = Command::new(peers.python());
    cmd.arg(data_dir().join("client.py")).args(args);
    for var in SCRUBBED {
        cmd.env_remove(var);
    }
    let out = cmd.output().expect("the SDK client starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the MCP SDK client failed ({})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the client printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

/// Whether any of the home's database files holds `needle` (what the model
/// saw is stored there).
pub fn stored(home: &Path, needle: &str) -> bool {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(home).expect("read the home").flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("bulwark.db")
        {
            bytes.extend(std::fs::read(entry.path()).expect("read the database"));
        }
    }
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn the_pins_are_exact_and_name_no_registry() {
    // The installer trusts the committed pins only: every npm package has
    // an integrity hash and no download address (the machine's npm
    // settings choose the registry), every Python package an exact
    // version and a SHA-256.
    let lock =
        std::fs::read_to_string(data_dir().join("node/package-lock.json")).expect("read the lock");
    let lock: Value = serde_json::from_str(&lock).expect("the lock is JSON");
    let packages = lock["packages"].as_object().expect("lockfile v3 packages");
    let mut count = 0;
    for (path, entry) in packages {
        if path.is_empty() {
            continue;
        }
        count += 1;
        assert!(
            entry["integrity"]
                .as_str()
                .is_some_and(|i| i.starts_with("sha512-")),
            "{path} has no sha512 integrity"
        );
        assert!(entry.get("resolved").is_none(), "{path} names a registry");
    }
    assert!(count > 0, "the lock pins nothing");
    let server = &packages["node_modules/@modelcontextprotocol/server-filesystem"];
    assert_eq!(server["version"], "2026.8.31");

    let reqs = std::fs::read_to_string(data_dir().join("requirements.txt"))
        .expect("read requirements.txt");
    let mut pins = 0;
    let mut lines = reqs.lines().filter(|l| !l.starts_with('#')).peekable();
    while let Some(line) = lines.next() {
        let spec = line.trim_end_matches('\\').trim();
        assert!(spec.contains("=="), "not an exact pin: {line:?}");
        let hash = lines.next().unwrap_or_default().trim();
        assert!(
            hash.starts_with("--hash=sha256:") && hash.len() == "--hash=sha256:".len() + 64,
            "{spec} has no SHA-256: {hash:?}"
        );
        pins += 1;
    }
    assert!(reqs.lines().any(|l| l.starts_with("mcp==2.3.0 ")), "{reqs}");
    assert!(pins >= 10, "{pins} pins");
}
