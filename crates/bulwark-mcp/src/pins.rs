//! Tool pins: what an operator approved of each server's tools.
//!
//! `bulwark mcp pin AGENT` connects to each server, vets each tool
//! ([`crate::vet`]) and stores the digest of its name, description and
//! input schema in `$BULWARK_HOME/mcp/pins/<agent>.json`. A session offers
//! the model only pinned tools, from the pin file (no server is started
//! to open a session), and before the first call to a server compares its
//! live tool list with the pins: a changed or added tool is refused and
//! audited until it is pinned again (a server that changes what a tool
//! says it does after approval is the rug pull this stops).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::McpError;
use crate::client::LiveTool;

/// The pins of one agent: server name -> its pinned tools.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinFile {
    pub agent: String,
    #[serde(default)]
    pub servers: BTreeMap<String, ServerPins>,
}

/// One server's pinned tools.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerPins {
    /// RFC 3339 time of the pin.
    pub pinned_at: String,
    /// The protocol version the server spoke when pinned.
    #[serde(default)]
    pub protocol_version: String,
    /// Tool name (the server's) -> its pin.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolPin>,
    /// Tools the operator was shown and did not pin (flagged by the
    /// checks, or declined), by name -> digest: not offered, and not
    /// "added" when the server lists them unchanged. A change to one is
    /// drift like any other.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub withheld: BTreeMap<String, String>,
}

/// One pinned tool: what the model is shown, and its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPin {
    pub description: String,
    pub input_schema: serde_json::Value,
    /// [`tool_digest`] of name, description and schema.
    pub digest: String,
}

/// How a live tool list differs from the pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// A pinned tool's name, description or schema changed.
    Changed { tool: String },
    /// The server offers a tool that was never pinned.
    Added { tool: String },
    /// A pinned tool is gone (its calls fail; not a refusal of the others).
    Removed { tool: String },
}

/// Where agent `agent`'s pins live under the Bulwark home `home`.
pub fn pin_path(home: &Path, agent: &str) -> PathBuf {
    home.join("mcp").join("pins").join(format!("{agent}.json"))
}

/// Largest pin file read: a few hundred tools with 64 KiB schemas fit.
pub const MAX_PIN_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// SHA-256 (hex) of a tool's name, description and input schema, over a
/// canonical JSON encoding (sorted keys), so a re-ordered but equal schema
/// keeps its pin and any other change does not.
pub fn tool_digest(name: &str, description: &str, input_schema: &serde_json::Value) -> String {
    let mut encoded = String::new();
    encoded.push_str("{\"description\":");
    push_canonical(&serde_json::Value::String(description.into()), &mut encoded);
    encoded.push_str(",\"input_schema\":");
    push_canonical(input_schema, &mut encoded);
    encoded.push_str(",\"name\":");
    push_canonical(&serde_json::Value::String(name.into()), &mut encoded);
    encoded.push('}');
    hex::encode(Sha256::digest(encoded.as_bytes()))
}

/// Compact JSON with every object's keys in byte order. Written out here
/// rather than trusting `serde_json::Map`'s order: a dependency that turns
/// on `preserve_order` anywhere in the build would silently change every
/// digest (and invalidate every pin).
fn push_canonical(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, child)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_canonical(&serde_json::Value::String(key.clone()), out);
                out.push(':');
                push_canonical(child, out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, child) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_canonical(child, out);
            }
            out.push(']');
        }
        // Scalars: serde_json's own compact form (strings escaped, numbers
        // as parsed).
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn pins_error(path: &Path, detail: impl Into<String>) -> McpError {
    McpError::Pins {
        path: path.display().to_string(),
        detail: detail.into(),
    }
}

impl PinFile {
    /// Reads `path`; `Ok(None)` when it does not exist.
    pub fn load(path: &Path) -> Result<Option<PinFile>, McpError> {
        let fix = "re-create it with `bulwark mcp pin AGENT`";
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(pins_error(path, format!("cannot be read ({e}); {fix}"))),
        };
        let mut bytes = Vec::new();
        file.take(MAX_PIN_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| pins_error(path, format!("cannot be read ({e}); {fix}")))?;
        if bytes.len() as u64 > MAX_PIN_FILE_BYTES {
            return Err(pins_error(
                path,
                format!("is larger than {MAX_PIN_FILE_BYTES} bytes; {fix}"),
            ));
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| pins_error(path, format!("is not a valid pin file ({e}); {fix}")))
    }

    /// Writes atomically (a temporary file renamed over `path`), creating
    /// the directory.
    pub fn save(&self, path: &Path) -> Result<(), McpError> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| pins_error(path, format!("cannot create {} ({e})", dir.display())))?;
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| pins_error(path, format!("cannot be encoded ({e})")))?;
        bytes.push(b'\n');
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "pins".into());
        let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
        let written = (|| -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)?;
            // The rename is durable once the directory is.
            std::fs::File::open(dir)?.sync_all()
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(pins_error(path, format!("cannot be written ({e})")));
        }
        Ok(())
    }
}

/// How `live` differs from `pinned`, in tool-name order.
pub fn drift(pinned: &ServerPins, live: &[LiveTool]) -> Vec<Drift> {
    let live_by_name: BTreeMap<&str, &LiveTool> =
        live.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut names: Vec<&str> = pinned.tools.keys().map(String::as_str).collect();
    names.extend(live_by_name.keys().copied());
    names.sort_unstable();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        match (pinned.tools.get(name), live_by_name.get(name)) {
            (Some(pin), Some(tool)) => {
                if pin.digest != tool_digest(&tool.name, &tool.description, &tool.input_schema) {
                    out.push(Drift::Changed { tool: name.into() });
                }
            }
            (None, Some(tool)) => match pinned.withheld.get(name) {
                Some(digest)
                    if *digest
                        == tool_digest(&tool.name, &tool.description, &tool.input_schema) => {}
                Some(_) => out.push(Drift::Changed { tool: name.into() }),
                None => out.push(Drift::Added { tool: name.into() }),
            },
            (Some(_), None) => out.push(Drift::Removed { tool: name.into() }),
            (None, None) => {}
        }
    }
    out
}
