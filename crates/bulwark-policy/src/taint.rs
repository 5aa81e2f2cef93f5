//! Taint labels: where a piece of content came from, so the door can decide
//! which sinks it may reach.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaintLabel {
    /// Fetched from the network (web pages, API responses).
    External,
    /// Read from the agent's or user's memory written in an earlier session.
    Memory,
    /// Produced by a child process (shell output).
    Process,
    /// Read from the workspace filesystem.
    Workspace,
    /// Sent by another agent or peer.
    Peer,
}
