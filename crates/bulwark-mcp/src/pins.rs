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
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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

/// SHA-256 (hex) of a tool's name, description and input schema, over a
/// canonical JSON encoding (sorted keys), so a re-ordered but equal schema
/// keeps its pin and any other change does not.
pub fn tool_digest(name: &str, description: &str, input_schema: &serde_json::Value) -> String {
    let _ = (name, description, input_schema);
    String::new()
}

impl PinFile {
    /// Reads `path`; `Ok(None)` when it does not exist.
    pub fn load(path: &Path) -> Result<Option<PinFile>, McpError> {
        let _ = path;
        Ok(None)
    }

    /// Writes atomically (a temporary file renamed over `path`), creating
    /// the directory.
    pub fn save(&self, path: &Path) -> Result<(), McpError> {
        let _ = path;
        Err(McpError::Pins {
            path: path.display().to_string(),
            detail: "not built yet".into(),
        })
    }
}

/// How `live` differs from `pinned`, in tool-name order.
pub fn drift(pinned: &ServerPins, live: &[LiveTool]) -> Vec<Drift> {
    let _ = (pinned, live);
    Vec::new()
}
