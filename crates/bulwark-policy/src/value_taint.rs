//! Value-level provenance: which runs of untrusted text a call's arguments
//! copy.
//!
//! SKELETON (naive substring search): the value helper replaces the
//! internals with an index fast enough for the door.

use crate::TaintLabel;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Shortest argument string that can be value-tainted.
pub const MIN_RUN: usize = 8;

/// One piece of untrusted content the session has seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Chunk {
    text: String,
    labels: BTreeSet<TaintLabel>,
    source: String,
}

/// The untrusted text a session has seen, searchable for copied runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UntrustedText {
    chunks: Vec<Chunk>,
}

/// A copied run: which argument, which labels, from which call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueHit {
    /// JSON pointer of the argument string (`/command`).
    pub field: String,
    pub labels: BTreeSet<TaintLabel>,
    /// The tool call id whose output held the run.
    pub source: String,
    pub run_len: usize,
}

impl UntrustedText {
    /// Remembers `text` (with its labels and source call id).
    pub fn add(&mut self, text: &str, labels: &BTreeSet<TaintLabel>, source: &str) {
        self.chunks.push(Chunk {
            text: text.to_string(),
            labels: labels.clone(),
            source: source.to_string(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Every argument string of `args` that copies untrusted text.
    pub fn find(&self, args: &serde_json::Value) -> Vec<ValueHit> {
        let mut hits = Vec::new();
        walk(args, String::new(), &mut |field, text| {
            if text.len() < MIN_RUN {
                return;
            }
            for chunk in &self.chunks {
                if chunk.text.contains(text) {
                    hits.push(ValueHit {
                        field: field.to_string(),
                        labels: chunk.labels.clone(),
                        source: chunk.source.clone(),
                        run_len: text.len(),
                    });
                    return;
                }
            }
        });
        hits
    }

    /// Whether `needle` (a host name, say) occurs in untrusted text.
    pub fn mentions(&self, needle: &str) -> bool {
        self.chunks.iter().any(|c| c.text.contains(needle))
    }
}

fn walk(value: &serde_json::Value, path: String, f: &mut dyn FnMut(&str, &str)) {
    match value {
        serde_json::Value::String(s) => f(&path, s),
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, format!("{path}/{i}"), f);
            }
        }
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                walk(v, format!("{path}/{k}"), f);
            }
        }
        _ => {}
    }
}
