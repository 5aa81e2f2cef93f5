//! The loop guard: per-session detectors that stop an agent from burning its
//! budget on calls that make no progress. It is pure state: the kernel calls
//! [`LoopGuard::check_call`] before executing a tool call and
//! [`LoopGuard::record_outcome`] after, and persists the guard with the
//! session so a resumed session cannot reset its counters.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Thresholds. A value of 0 disables that detector (validation in the
/// config parsers refuses 0, so this only matters for hand-built configs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoopGuardConfig {
    /// Identical calls (same tool, same arguments) before a warning.
    pub warn_threshold: u32,
    /// Identical calls before the call is blocked.
    pub block_threshold: u32,
    /// Times the same call may return the same outcome before it is blocked.
    pub outcome_repeat_block: u32,
    /// A-B-A-B alternations (of two distinct calls) before blocking.
    pub ping_pong_cycles: u32,
    /// Total tool calls in a session before the breaker trips.
    pub max_tool_calls: u32,
    /// Total LLM tokens in a session before the breaker trips.
    pub max_tokens: u64,
}

impl Default for LoopGuardConfig {
    fn default() -> Self {
        LoopGuardConfig {
            warn_threshold: 3,
            block_threshold: 5,
            outcome_repeat_block: 3,
            ping_pong_cycles: 3,
            max_tool_calls: 50,
            max_tokens: 1_000_000,
        }
    }
}

impl LoopGuardConfig {
    /// Refuse settings that would silently disable a detector or contradict
    /// each other.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let positive = [
            ("warn_threshold", u64::from(self.warn_threshold)),
            ("block_threshold", u64::from(self.block_threshold)),
            ("outcome_repeat_block", u64::from(self.outcome_repeat_block)),
            ("ping_pong_cycles", u64::from(self.ping_pong_cycles)),
            ("max_tool_calls", u64::from(self.max_tool_calls)),
            ("max_tokens", self.max_tokens),
        ];
        for (field, v) in positive {
            if v == 0 {
                return Err((
                    field,
                    format!("{field} must be at least 1 (0 would disable the detector)"),
                ));
            }
        }
        if self.warn_threshold > self.block_threshold {
            return Err((
                "warn_threshold",
                format!(
                    "warn_threshold ({}) must not exceed block_threshold ({})",
                    self.warn_threshold, self.block_threshold
                ),
            ));
        }
        Ok(())
    }
}

/// What the kernel should do with a call (or a token charge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead.
    Allow,
    /// Go ahead, but tell the model what was noticed.
    Warn(String),
    /// Do not execute this call; return the message to the model.
    Block(String),
    /// Stop the session: a budget is exhausted. Sticky.
    Break(String),
}

/// Per-session loop-guard state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoopGuard {
    config: LoopGuardConfig,
    calls: u32,
    tokens: u64,
    /// call hash -> times proposed
    seen: BTreeMap<String, u32>,
    /// "call hash:outcome hash" -> times observed
    outcomes: BTreeMap<String, u32>,
    /// the last `2 * ping_pong_cycles` call hashes
    recent: VecDeque<String>,
    /// Set once a budget is exhausted; every later check returns it.
    broken: Option<String>,
}

/// Canonical JSON: object keys sorted at every level, no whitespace, so the
/// same arguments hash the same whatever order the model wrote them in (and
/// whatever map type `serde_json` was built with).
fn canonical(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(*k) {
                    canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// SHA-256 over the tool name (length-prefixed, so name and args cannot
/// run into each other) and the canonical arguments.
pub fn call_hash(tool: &str, args: &serde_json::Value) -> String {
    let mut canon = String::new();
    canonical(args, &mut canon);
    let mut h = Sha256::new();
    h.update((tool.len() as u64).to_be_bytes());
    h.update(tool.as_bytes());
    h.update(canon.as_bytes());
    hex::encode(h.finalize())
}

fn outcome_key(call: &str, outcome: &str) -> String {
    format!("{call}:{}", hex::encode(Sha256::digest(outcome.as_bytes())))
}

impl LoopGuard {
    pub fn new(config: LoopGuardConfig) -> Self {
        LoopGuard {
            config,
            calls: 0,
            tokens: 0,
            seen: BTreeMap::new(),
            outcomes: BTreeMap::new(),
            recent: VecDeque::new(),
            broken: None,
        }
    }

    pub fn config(&self) -> &LoopGuardConfig {
        &self.config
    }

    /// Judge a proposed call before it runs. Every call, including blocked
    /// ones, counts toward the breaker: a model that keeps retrying a
    /// blocked call is still burning the budget.
    pub fn check_call(&mut self, tool: &str, args: &serde_json::Value) -> Verdict {
        if let Some(msg) = &self.broken {
            return Verdict::Break(msg.clone());
        }
        self.calls = self.calls.saturating_add(1);
        let max = self.config.max_tool_calls;
        if max > 0 && self.calls > max {
            let msg = format!(
                "session stopped: {} tool calls exceed the limit of {max}; summarize progress and finish, or ask the user to start a new session",
                self.calls
            );
            self.broken = Some(msg.clone());
            return Verdict::Break(msg);
        }

        let hash = call_hash(tool, args);
        let count = {
            let c = self.seen.entry(hash.clone()).or_insert(0);
            *c = c.saturating_add(1);
            *c
        };
        let window = (self.config.ping_pong_cycles as usize).saturating_mul(2);
        if window > 0 {
            self.recent.push_back(hash.clone());
            while self.recent.len() > window {
                self.recent.pop_front();
            }
        }

        let prefix = format!("{hash}:");
        let same_outcome = self
            .outcomes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0);
        let repeat = self.config.outcome_repeat_block;
        if repeat > 0 && same_outcome >= repeat {
            return Verdict::Block(format!(
                "blocked: calling `{tool}` with these arguments has returned the same result {same_outcome} times, so repeating it makes no progress; use the result you already have, change the arguments, or try a different approach"
            ));
        }
        if window > 0 && self.is_ping_pong(window) {
            return Verdict::Block(format!(
                "blocked: the last {window} calls alternate between the same two calls (A-B-A-B) without progress; stop alternating, re-read the results you have, and choose a different next step"
            ));
        }
        let block = self.config.block_threshold;
        if block > 0 && count >= block {
            return Verdict::Block(format!(
                "blocked: `{tool}` has been called with identical arguments {count} times (limit {block}); do not repeat it, use the earlier result or change the approach"
            ));
        }
        let warn = self.config.warn_threshold;
        if warn > 0 && count >= warn {
            return Verdict::Warn(format!(
                "warning: `{tool}` has been called with identical arguments {count} times; at {block} it will be blocked, so change the arguments or the approach"
            ));
        }
        Verdict::Allow
    }

    fn is_ping_pong(&self, window: usize) -> bool {
        self.recent.len() == window && self.alternates()
    }

    fn alternates(&self) -> bool {
        let mut it = self.recent.iter();
        let (Some(a), Some(b)) = (it.next(), it.next()) else {
            return false;
        };
        a != b
            && self
                .recent
                .iter()
                .enumerate()
                .all(|(i, h)| if i % 2 == 0 { h == a } else { h == b })
    }

    /// Record what an executed call returned.
    pub fn record_outcome(&mut self, tool: &str, args: &serde_json::Value, outcome: &str) {
        let key = outcome_key(&call_hash(tool, args), outcome);
        let c = self.outcomes.entry(key).or_insert(0);
        *c = c.saturating_add(1);
    }

    /// Charge LLM tokens; `Break` once the session budget is exceeded.
    pub fn charge_tokens(&mut self, tokens: u64) -> Verdict {
        if let Some(msg) = &self.broken {
            return Verdict::Break(msg.clone());
        }
        self.tokens = self.tokens.saturating_add(tokens);
        let max = self.config.max_tokens;
        if max > 0 && self.tokens > max {
            let msg = format!(
                "session stopped: {} tokens used exceed the budget of {max}; finish with what you have, or ask the user to raise loop_guard.max_tokens",
                self.tokens
            );
            self.broken = Some(msg.clone());
            return Verdict::Break(msg);
        }
        Verdict::Allow
    }

    /// Tool calls proposed so far (blocked ones included).
    pub fn tool_calls(&self) -> u32 {
        self.calls
    }

    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Whether the breaker has tripped.
    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn guard() -> LoopGuard {
        LoopGuard::new(LoopGuardConfig::default())
    }

    #[test]
    fn identical_calls_warn_then_block() {
        let mut g = guard();
        let a = json!({"path": "x"});
        assert_eq!(g.check_call("read", &a), Verdict::Allow);
        assert_eq!(g.check_call("read", &a), Verdict::Allow);
        assert!(matches!(g.check_call("read", &a), Verdict::Warn(m) if m.contains("identical")));
        assert!(matches!(g.check_call("read", &a), Verdict::Warn(_)));
        assert!(matches!(g.check_call("read", &a), Verdict::Block(m) if m.contains("5 times")));
        assert!(matches!(g.check_call("read", &a), Verdict::Block(_)));
    }

    #[test]
    fn different_args_are_tracked_separately_and_key_order_does_not_matter() {
        let mut g = guard();
        for i in 0..10 {
            assert_eq!(
                g.check_call("read", &json!({"path": format!("f{i}")})),
                Verdict::Allow
            );
        }
        let mut g = guard();
        g.check_call("t", &json!({"a": 1, "b": 2}));
        g.check_call("t", &json!({"b": 2, "a": 1}));
        assert!(matches!(
            g.check_call("t", &json!({"a": 1, "b": 2})),
            Verdict::Warn(_)
        ));
        assert_eq!(call_hash("ab", &json!("c")), call_hash("ab", &json!("c")));
        assert_ne!(
            call_hash("a", &json!({"x": 1})),
            call_hash("b", &json!({"x": 1}))
        );
        assert_ne!(
            call_hash("a", &json!({"x": 1})),
            call_hash("a", &json!({"x": "1"}))
        );
    }

    #[test]
    fn same_outcome_blocks_before_the_identical_threshold() {
        let mut g = guard();
        let a = json!({"q": "status"});
        for _ in 0..3 {
            assert!(!matches!(g.check_call("poll", &a), Verdict::Block(_)));
            g.record_outcome("poll", &a, "pending");
        }
        assert!(matches!(g.check_call("poll", &a), Verdict::Block(m) if m.contains("same result")));
    }

    #[test]
    fn changing_outcomes_are_progress() {
        let mut g = guard();
        let a = json!({"q": "status"});
        for i in 0..4 {
            assert!(!matches!(g.check_call("poll", &a), Verdict::Block(_)));
            g.record_outcome("poll", &a, &format!("step {i}"));
        }
        // Only the identical-call threshold (5) applies now.
        assert!(matches!(g.check_call("poll", &a), Verdict::Block(m) if m.contains("identical")));
        // Same outcome of a *different* call does not count.
        let mut g = guard();
        for i in 0..3 {
            let b = json!({"q": i});
            g.check_call("poll", &b);
            g.record_outcome("poll", &b, "same");
        }
        assert_eq!(g.check_call("poll", &json!({"q": 9})), Verdict::Allow);
    }

    #[test]
    fn ping_pong_is_blocked() {
        let mut g = guard();
        let (a, b) = (json!({"p": "a"}), json!({"p": "b"}));
        let mut last = Verdict::Allow;
        for i in 0..6 {
            last = g.check_call("t", if i % 2 == 0 { &a } else { &b });
            if i < 5 {
                assert!(!matches!(last, Verdict::Block(_)), "call {i}: {last:?}");
            }
        }
        assert!(matches!(last, Verdict::Block(m) if m.contains("alternate")));
    }

    #[test]
    fn three_distinct_calls_are_not_ping_pong() {
        let mut g = guard();
        for i in 0..9 {
            let v = g.check_call("t", &json!({"p": i % 3}));
            assert!(!matches!(v, Verdict::Block(_)), "{i}: {v:?}");
        }
    }

    #[test]
    fn breaker_trips_after_max_calls_and_is_sticky() {
        let mut g = LoopGuard::new(LoopGuardConfig {
            max_tool_calls: 3,
            ..Default::default()
        });
        for i in 0..3 {
            assert_eq!(g.check_call("t", &json!(i)), Verdict::Allow);
        }
        assert!(
            matches!(g.check_call("t", &json!(9)), Verdict::Break(m) if m.contains("limit of 3"))
        );
        assert!(matches!(g.check_call("t", &json!(10)), Verdict::Break(_)));
        assert!(matches!(g.charge_tokens(1), Verdict::Break(_)));
        assert_eq!(g.tool_calls(), 4);
    }

    #[test]
    fn blocked_calls_count_toward_the_breaker() {
        let mut g = LoopGuard::new(LoopGuardConfig {
            max_tool_calls: 7,
            ..Default::default()
        });
        let a = json!({});
        let verdicts: Vec<_> = (0..8).map(|_| g.check_call("t", &a)).collect();
        assert!(matches!(verdicts[5], Verdict::Block(_)));
        assert!(matches!(verdicts[7], Verdict::Break(_)));
    }

    #[test]
    fn token_budget_breaks() {
        let mut g = LoopGuard::new(LoopGuardConfig {
            max_tokens: 100,
            ..Default::default()
        });
        assert_eq!(g.charge_tokens(60), Verdict::Allow);
        assert_eq!(g.charge_tokens(40), Verdict::Allow);
        assert!(matches!(g.charge_tokens(1), Verdict::Break(m) if m.contains("101")));
        assert!(matches!(g.check_call("t", &json!(1)), Verdict::Break(_)));
        assert_eq!(g.tokens(), 101);
    }

    #[test]
    fn state_survives_serialization() {
        let mut g = guard();
        let a = json!({"x": 1});
        g.check_call("t", &a);
        g.check_call("t", &a);
        let saved = serde_json::to_string(&g).unwrap();
        let mut g2: LoopGuard = serde_json::from_str(&saved).unwrap();
        assert!(matches!(g2.check_call("t", &a), Verdict::Warn(_)));
        assert_eq!(g2.tool_calls(), 3);
    }

    #[test]
    fn config_validation() {
        assert!(LoopGuardConfig::default().validate().is_ok());
        let bad = LoopGuardConfig {
            block_threshold: 0,
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "block_threshold");
        let bad = LoopGuardConfig {
            warn_threshold: 9,
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "warn_threshold");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Call(u8, u8),
        Outcome(u8, u8, u8),
        Tokens(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..3, 0u8..3).prop_map(|(t, a)| Op::Call(t, a)),
            2 => (0u8..3, 0u8..3, 0u8..2).prop_map(|(t, a, o)| Op::Outcome(t, a, o)),
            1 => (0u64..u64::MAX).prop_map(Op::Tokens),
        ]
    }

    fn cfg() -> impl Strategy<Value = LoopGuardConfig> {
        (0u32..6, 0u32..6, 0u32..4, 0u32..4, 0u32..30, 0u64..1000).prop_map(|(w, b, o, p, c, t)| {
            LoopGuardConfig {
                warn_threshold: w,
                block_threshold: b,
                outcome_repeat_block: o,
                ping_pong_cycles: p,
                max_tool_calls: c,
                max_tokens: t,
            }
        })
    }

    proptest! {
        #[test]
        fn never_panics_and_break_is_sticky(config in cfg(), ops in prop::collection::vec(op(), 0..80)) {
            let mut g = LoopGuard::new(config);
            let mut broken = false;
            for op in ops {
                let v = match op {
                    Op::Call(t, a) => Some(g.check_call(&format!("t{t}"), &json!({"a": a}))),
                    Op::Outcome(t, a, o) => { g.record_outcome(&format!("t{t}"), &json!({"a": a}), &format!("o{o}")); None }
                    Op::Tokens(n) => Some(g.charge_tokens(n)),
                };
                if let Some(v) = v {
                    if broken {
                        prop_assert!(matches!(v, Verdict::Break(_)), "break not sticky: {:?}", v);
                    }
                    broken |= matches!(v, Verdict::Break(_));
                }
            }
        }
    }
}
