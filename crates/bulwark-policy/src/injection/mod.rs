//! An advisory prompt-injection scanner for untrusted content.
//!
//! SKELETON: the scanner helper fills in the detectors.

use serde::{Deserialize, Serialize};

/// How to read the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    /// Plain text (a child's reply, a memory note, a file).
    Text,
    /// HTML (a fetched page): hidden text is looked for too.
    Html,
}

/// What a finding looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    InstructionOverride,
    RolePlay,
    ToolCallLookalike,
    Exfiltration,
    HiddenText,
}

/// One finding: its kind and the byte offset where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub offset: usize,
}

/// Scans `text`; no findings is the common case.
pub fn scan(_text: &str, _kind: ContentKind) -> Vec<Finding> {
    Vec::new()
}
