//! A session: who is acting, under which immutable policy, with which
//! resources, and the per-session state the door keeps (loop guard, approvals
//! granted for the session, taint seen).

use crate::boundary::Boundary;
use crate::children::ChildHost;
use crate::credits::SessionCredits;
use crate::provenance::{MemoryProvenance, ProvenanceStore};
use bulwark_net::SafeHttp;
use bulwark_policy::injection::FindingKind;
use bulwark_policy::{EffectivePolicy, ExecPolicy, LoopGuard, TaintLabel};
use bulwark_sandbox::Workspace;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIdentity {
    pub id: String,
    pub agent: String,
    pub user: String,
}

/// Limits applied to tool effects.
#[derive(Debug, Clone)]
pub struct ToolLimits {
    pub max_read_bytes: u64,
    pub max_write_bytes: u64,
    pub max_memory_bytes: u64,
    pub shell_timeout: Duration,
    pub shell_max_output: usize,
    /// Whole-call deadline enforced by the door around every tool.
    pub call_timeout: Duration,
}

impl ToolLimits {
    /// The limits config.toml sets (`[sandbox] timeout_secs`), the
    /// defaults otherwise: the one place every session's limits come from.
    pub fn from_config(global: &bulwark_policy::GlobalConfig) -> Self {
        let mut limits = Self::default();
        if let Some(secs) = global.sandbox.timeout_secs {
            limits.shell_timeout = Duration::from_secs(secs);
        }
        limits
    }
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            max_read_bytes: 1024 * 1024,
            max_write_bytes: 1024 * 1024,
            max_memory_bytes: 64 * 1024,
            shell_timeout: Duration::from_secs(60),
            shell_max_output: 64 * 1024,
            call_timeout: Duration::from_secs(120),
        }
    }
}

/// Everything a session may touch. The door hands slices of these to tools.
pub struct SessionResources {
    pub workspace: Arc<Workspace>,
    pub memory_agent: Arc<Workspace>,
    pub memory_user: Arc<Workspace>,
    /// Absent when the session holds no network grant at all.
    pub http: Option<Arc<SafeHttp>>,
    /// Checked for every command, in addition to the capabilities.
    pub exec_policy: ExecPolicy,
    pub sandbox: crate::setup::ProcessSandbox,
    /// The working directory of child processes (the workspace root).
    pub process_cwd: PathBuf,
    /// The full environment of child processes: nothing is inherited.
    pub process_env: Vec<(String, String)>,
    /// Secrets granted to the `shell` domain (`[credentials.grants.*]`
    /// with `tools = ["shell"]`): (grant, key, value), added to each child's
    /// environment. Approval-required grants are not among them.
    pub process_secrets: Vec<(String, String, secrecy::SecretString)>,
    /// Every secret the runtime knows, to redact from command output.
    pub secrets: Arc<bulwark_net::SecretStore>,
    pub limits: ToolLimits,
}

/// The part of a session that survives a restart.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionState {
    pub guard: LoopGuard,
    /// `domain:operation` pairs a human approved for the rest of the
    /// session, each with the taint labels it was approved under: a later
    /// call carrying a label outside that set is asked about again.
    /// Never persisted: the approval was given to this process's conversation
    /// by a person at its terminal, and must not carry over to a later
    /// (possibly headless) run that resumes the session.
    #[serde(skip)]
    pub approved_for_session: BTreeMap<String, BTreeSet<TaintLabel>>,
    /// Every taint label that has entered the conversation.
    pub taint: BTreeSet<TaintLabel>,
    /// The tool call id that first brought each label in.
    #[serde(default)]
    pub taint_sources: std::collections::BTreeMap<TaintLabel, String>,
    /// The untrusted text the conversation holds (value mode looks for
    /// copies of it in arguments).
    #[serde(default)]
    pub untrusted: bulwark_policy::value_taint::UntrustedText,
    /// What the door learnt about the untrusted content: scanner findings
    /// and the hosts fetched before such content named them.
    #[serde(default)]
    pub taint_notes: TaintNotes,
    pub boundary: Boundary,
    /// Set when the loop guard's breaker tripped; the session refuses more calls.
    pub stopped: Option<String>,
}

/// What the door remembers about untrusted content beyond its labels and
/// text; like taint, it only grows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintNotes {
    /// Tool calls whose untrusted output the injection scanner flagged, in
    /// order, with the kinds found: a finding can raise a sink's `allow`
    /// to `approve` for the rest of the session.
    #[serde(default)]
    pub injections: Vec<(String, BTreeSet<FindingKind>)>,
    /// Hosts the session fetched before any untrusted content named them:
    /// a later fetch there is the user's errand, not a page's choice.
    #[serde(default)]
    pub known_hosts: BTreeSet<String>,
}

impl SessionState {
    /// Whether a person approved `key` (`domain:operation`) for the session
    /// under a label set that includes every one of `labels`.
    pub fn approval_covers(&self, key: &str, labels: &BTreeSet<TaintLabel>) -> bool {
        self.approved_for_session
            .get(key)
            .is_some_and(|given| labels.is_subset(given))
    }
}

/// A session: who acts, under which policy, with which resources.
///
/// Its identity, policy, resources, credits and child host are set when it
/// is built (by [`crate::SessionFactory`], or [`crate::build_session`] and
/// the `with_*` builders for an embedding program) and cannot be replaced
/// afterwards: the door and the tools read them through `&Session`
/// accessors. The state the door keeps only moves one way: taint only
/// grows ([`Session::add_taint`]) and a stopped session stays stopped.
pub struct Session {
    pub(crate) identity: SessionIdentity,
    pub(crate) policy: Arc<EffectivePolicy>,
    pub(crate) resources: SessionResources,
    /// Private even to the kernel: changed only through the methods below,
    /// which can add taint, stop the session and grant approvals but never
    /// undo any of them.
    state: SessionState,
    /// How the session pays for model calls and tools; `None` when
    /// config.toml has no `[credits]` section.
    pub(crate) credits: Option<SessionCredits>,
    /// Where its child agents are spawned and run; `None` when this
    /// session cannot spawn (served sessions, children themselves).
    pub(crate) children: Option<Arc<ChildHost>>,
    /// Where the labels of what it writes are kept (and read back).
    pub(crate) provenance: Arc<dyn ProvenanceStore>,
}

impl Session {
    pub fn identity(&self) -> &SessionIdentity {
        &self.identity
    }

    /// The effective policy, fixed for the session's life.
    pub fn policy(&self) -> &Arc<EffectivePolicy> {
        &self.policy
    }

    pub fn resources(&self) -> &SessionResources {
        &self.resources
    }

    /// The state the door keeps (loop guard, taint, stop).
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    pub fn credits(&self) -> Option<&SessionCredits> {
        self.credits.as_ref()
    }

    pub fn children(&self) -> Option<&Arc<ChildHost>> {
        self.children.as_ref()
    }

    /// Adds taint labels; taint is never removed.
    pub fn add_taint(&mut self, labels: impl IntoIterator<Item = TaintLabel>) {
        self.state.taint.extend(labels);
    }

    /// Adds taint labels brought in by `source` (a tool call id, or
    /// `parent:<call id>` for a child's inherited labels).
    pub fn add_taint_from(&mut self, labels: impl IntoIterator<Item = TaintLabel>, source: &str) {
        for label in labels {
            self.state.taint.insert(label);
            self.state
                .taint_sources
                .entry(label)
                .or_insert_with(|| source.to_string());
        }
    }

    /// Remembers trusted `text` (the user's message, the system prompt):
    /// value mode does not count a short value it has as copied from
    /// untrusted text. A message that is itself untrusted text held (a
    /// tainted parent's message to its child) stays untrusted.
    pub fn note_trusted_text(&mut self, text: &str) {
        if !self.state.untrusted.holds(text) {
            self.state.untrusted.add_trusted(text);
        }
    }

    /// Remembers untrusted `text` (with its labels and source) so value
    /// mode can see copies of it; also adds the labels.
    pub fn add_untrusted_text(&mut self, text: &str, labels: &BTreeSet<TaintLabel>, source: &str) {
        self.add_taint_from(labels.iter().copied(), source);
        self.state.untrusted.add(text, labels, source);
    }

    /// Stops the session for good: every later call is refused. The first
    /// reason is kept; a stopped session is never started again.
    pub(crate) fn stop(&mut self, why: impl Into<String>) {
        if self.state.stopped.is_none() {
            self.state.stopped = Some(why.into());
        }
    }

    /// A human approved `domain:operation` for the rest of the session,
    /// under `labels`; it covers later calls whose labels are a subset.
    /// A new approval of the same key replaces the set it was given under.
    pub(crate) fn approve_for_session(&mut self, key: String, labels: BTreeSet<TaintLabel>) {
        self.state.approved_for_session.insert(key, labels);
    }

    /// The injection scanner flagged the untrusted output of call `source`.
    pub(crate) fn note_injection(&mut self, source: &str, kinds: BTreeSet<FindingKind>) {
        if !kinds.is_empty() {
            self.state
                .taint_notes
                .injections
                .push((source.to_string(), kinds));
        }
    }

    /// The session fetched `host` before untrusted content named it.
    pub(crate) fn note_known_host(&mut self, host: String) {
        self.state.taint_notes.known_hosts.insert(host);
    }

    /// The loop guard, which counts every call and token spent.
    pub(crate) fn guard_mut(&mut self) -> &mut LoopGuard {
        &mut self.state.guard
    }

    /// Pays from `credits` (set as the session is built).
    pub fn with_credits(mut self, credits: Option<SessionCredits>) -> Self {
        self.credits = credits;
        self
    }

    /// A session that cannot spawn children (a narrowing).
    pub fn without_children(mut self) -> Self {
        self.children = None;
        self
    }

    /// Reaches the network through `http` (set as the session is built;
    /// tests use it to reach a loopback server).
    pub fn with_http(mut self, http: Option<Arc<SafeHttp>>) -> Self {
        self.resources.http = http;
        self
    }

    /// Keeps the labels of what it stores in `store` (set as the session
    /// is built; the default keeps them in this process only).
    pub fn with_provenance(mut self, store: Arc<dyn ProvenanceStore>) -> Self {
        self.provenance = store;
        self
    }

    pub fn provenance(&self) -> &Arc<dyn ProvenanceStore> {
        &self.provenance
    }

    /// Spawns children through `host` (set as the session is built).
    pub fn with_children(mut self, host: Arc<ChildHost>) -> Self {
        self.children = Some(host);
        self
    }

    pub fn new(
        identity: SessionIdentity,
        policy: Arc<EffectivePolicy>,
        resources: SessionResources,
        saved: Option<SessionState>,
    ) -> Self {
        let state = saved.unwrap_or_else(|| SessionState {
            guard: LoopGuard::new(policy.loop_guard.clone()),
            approved_for_session: BTreeMap::new(),
            taint: BTreeSet::new(),
            taint_sources: Default::default(),
            untrusted: Default::default(),
            taint_notes: TaintNotes::default(),
            boundary: Boundary::new_random(),
            stopped: None,
        });
        Self {
            identity,
            policy,
            resources,
            state,
            credits: None,
            children: None,
            provenance: Arc::new(MemoryProvenance::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_approvals_do_not_survive_a_restart() {
        let mut state = SessionState {
            guard: LoopGuard::new(Default::default()),
            approved_for_session: BTreeMap::from([("files:write".to_string(), BTreeSet::new())]),
            taint: BTreeSet::from([TaintLabel::External]),
            taint_sources: Default::default(),
            untrusted: Default::default(),
            taint_notes: TaintNotes::default(),
            boundary: Boundary::new_random(),
            stopped: None,
        };
        let json = serde_json::to_string(&state).unwrap();
        assert!(!json.contains("files:write"));
        let restored: SessionState = serde_json::from_str(&json).unwrap();
        assert!(restored.approved_for_session.is_empty());
        // Taint does survive: untrusted content is still in the history.
        assert!(restored.taint.contains(&TaintLabel::External));
        state.approved_for_session.clear();
    }

    #[test]
    fn an_approval_covers_only_subsets_of_its_labels() {
        let mut state: SessionState = serde_json::from_value(serde_json::json!({
            "guard": LoopGuard::new(Default::default()),
            "taint": [],
            "boundary": Boundary::new_random(),
            "stopped": null,
        }))
        .unwrap();
        let none = BTreeSet::new();
        let external = BTreeSet::from([TaintLabel::External]);
        let both = BTreeSet::from([TaintLabel::External, TaintLabel::Peer]);
        assert!(
            !state.approval_covers("shell:exec", &none),
            "never approved"
        );
        state
            .approved_for_session
            .insert("shell:exec".into(), external.clone());
        assert!(state.approval_covers("shell:exec", &none));
        assert!(state.approval_covers("shell:exec", &external));
        assert!(!state.approval_covers("shell:exec", &both));
        assert!(!state.approval_covers("files:write", &none));
    }

    #[test]
    fn taint_notes_survive_a_restart_and_old_states_still_load() {
        let mut state: SessionState = serde_json::from_value(serde_json::json!({
            "guard": LoopGuard::new(Default::default()),
            "taint": ["external"],
            "boundary": Boundary::new_random(),
            "stopped": null,
        }))
        .unwrap();
        assert_eq!(state.taint_notes, TaintNotes::default());
        state.taint_notes.known_hosts.insert("docs.example".into());
        state.taint_notes.injections.push((
            "c1".into(),
            BTreeSet::from([FindingKind::InstructionOverride]),
        ));
        let json = serde_json::to_string(&state).unwrap();
        let restored: SessionState = serde_json::from_str(&json).unwrap();
        assert_eq!(restored.taint_notes, state.taint_notes);
    }
}
