//! The limits on an agent's own model and priced calls: which models it may
//! query (`llm_query`), how many output tokens one call may ask for
//! (`llm_max_tokens`) and how many credits one call may reserve
//! (`econ_spend`).
//!
//! These kinds are limits, not grants of a resource a tool names, so they
//! layer differently from the other capabilities: every layer that declares
//! one (the manifest, config.toml's global ceiling, the user's ceiling in
//! access.toml) narrows the agent, and a layer that declares none leaves
//! the others' limits in force. A ceiling can therefore only tighten a
//! limit, never lift it by not mentioning it. The kernel checks them where
//! every model call and every priced tool call passes.

use serde::Serialize;

use crate::capability::Capability;
use crate::glob::segment_matches;

/// The limits of one session, computed with the effective policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CallLimits {
    /// One list of `provider:model` globs per layer that declares
    /// `llm_query`; a model is allowed when it matches a pattern of every
    /// list. No list: the agent may query the model it is configured with.
    pub models: Vec<Vec<String>>,
    /// The most output tokens one model call may ask for: the smallest of
    /// the layers' `llm_max_tokens`.
    pub max_tokens: Option<u32>,
    /// The most one model call or priced tool call may reserve: the
    /// smallest of the layers' `econ_spend`.
    pub max_spend: Option<u64>,
}

impl CallLimits {
    /// Limits from the capability lists of the layers that apply. A limit
    /// is the smallest one declared, in any layer (a second, larger
    /// `llm_max_tokens` never lifts the first); models must match a pattern
    /// of every declaring layer. Invalid capabilities are skipped (they
    /// grant nothing, and the loaders refuse them before this is reached).
    pub fn from_layers<'a>(layers: impl IntoIterator<Item = &'a [Capability]>) -> CallLimits {
        let mut limits = CallLimits::default();
        for caps in layers {
            let valid = || caps.iter().filter(|c| c.validate().is_ok());
            let models: Vec<String> = valid()
                .filter_map(|c| match c {
                    Capability::LlmQuery { model } => Some(model.clone()),
                    _ => None,
                })
                .collect();
            if !models.is_empty() {
                limits.models.push(models);
            }
            let tokens = valid()
                .filter_map(|c| match c {
                    Capability::LlmMaxTokens { max } => Some(*max),
                    _ => None,
                })
                .min();
            limits.max_tokens = narrowest(limits.max_tokens, tokens);
            let spend = valid()
                .filter_map(|c| match c {
                    Capability::EconSpend { max } => Some(*max),
                    _ => None,
                })
                .min();
            limits.max_spend = narrowest(limits.max_spend, spend);
        }
        limits
    }

    /// May this session call `model` (`provider:model`)?
    pub fn model_allowed(&self, model: &str) -> bool {
        self.models
            .iter()
            .all(|layer| layer.iter().any(|p| segment_matches(p, model)))
    }

    /// The `max_tokens` a call that wants `wanted` is sent with.
    pub fn tokens_for(&self, wanted: u32) -> u32 {
        self.max_tokens.map_or(wanted, |max| wanted.min(max))
    }

    /// May one call reserve `amount` credits?
    pub fn spend_allowed(&self, amount: u64) -> bool {
        self.max_spend.is_none_or(|max| amount <= max)
    }

    /// What of `self` (a child's limits) is wider than `parent`'s, for
    /// spawn checks: a child is held at least as tightly as its parent.
    pub fn wider_than(&self, parent: &CallLimits) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(p) = parent.max_tokens
            && self.max_tokens.is_none_or(|c| c > p)
        {
            out.push((
                "llm_max_tokens".to_owned(),
                format!(
                    "the parent may ask for at most {p} output tokens per model call and the child {}; add {{ kind = \"llm_max_tokens\", max = {p} }} (or less) to the child's capabilities",
                    self.max_tokens
                        .map_or("has no such limit".to_owned(), |c| format!("for {c}"))
                ),
            ));
        }
        if let Some(p) = parent.max_spend
            && self.max_spend.is_none_or(|c| c > p)
        {
            out.push((
                "econ_spend".to_owned(),
                format!(
                    "the parent may reserve at most {p} credits per call and the child {}; add {{ kind = \"econ_spend\", max = {p} }} (or less) to the child's capabilities",
                    self.max_spend
                        .map_or("has no such limit".to_owned(), |c| format!("{c}"))
                ),
            ));
        }
        out
    }
}

fn narrowest<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
