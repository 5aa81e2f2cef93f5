//! Child agents: spawned by a session, funded from its account, given work,
//! recalled.
//!
//! [`ChildHost::spawn`] is the one place a child comes into existence:
//! the `spawn_agent` tool calls it, and so does every other path (the CLI,
//! an embedding program). It loads the child's manifest, computes the
//! child's effective policy under the same layers as the parent's, and
//! refuses (and audits) any child that would hold more than its parent:
//! a tool, a capability, a shell, a model endpoint or a credential the
//! parent was not granted.
//!
//! A child's answers reach the parent as untrusted content (taint `peer`):
//! they are wrapped in the parent's content boundary and, like web pages,
//! cannot authorize a spend or a command without a person agreeing.

use crate::agent::{Silent, TurnEnd};
use crate::approval::Approver;
use crate::credits::SessionCredits;
use crate::factory::{
    FrontEnd, OpenError, OpenSession, Origin, ParentGrant, SessionFactory, SessionRecords,
    SessionSpec, StoreRecords,
};
use crate::home::Home;
use crate::session::SessionIdentity;
use bulwark_audit::{Action, AuditRecord, AuditSink, Decision, Event, Identity, Reason};
use bulwark_policy::{
    AccessFile, CredentialsSection, EffectivePolicy, GlobalConfig, ModelRef, SpawnViolation,
};
use bulwark_policy::{AgentName, TaintLabel, UserName};
use bulwark_store::{
    AccountKind, Actor, ChildRecord, ChildState, LedgerError, NewSession, Policy, Store,
    StoreError, TransferReceipt, TransferRequest,
};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The session a credits or agents tool acts for.
#[derive(Clone)]
pub struct Caller {
    pub identity: SessionIdentity,
    pub policy: Arc<EffectivePolicy>,
    pub credits: Option<SessionCredits>,
    /// The session's taint labels when it called: a child it spawns or
    /// messages inherits them.
    pub taint: BTreeSet<TaintLabel>,
}

impl Caller {
    /// The account the session spends from.
    pub fn wallet(&self) -> String {
        match &self.credits {
            Some(c) => c.wallet.clone(),
            None => agent_wallet(&self.identity.agent),
        }
    }

    pub fn actor(&self) -> Actor {
        Actor {
            user: self.identity.user.clone(),
            agent: self.identity.agent.clone(),
            session: self.identity.id.clone(),
        }
    }
}

/// The account of a top-level agent.
pub fn agent_wallet(agent: &str) -> String {
    format!("agent:{agent}")
}

/// The agent name inside a child id (`<agent>.<hex>`), so a tool's demand
/// can name the agent from its arguments alone.
pub fn child_agent_of(child_id: &str) -> Option<&str> {
    let (agent, suffix) = child_id.split_once('.')?;
    (AgentName::new(agent).is_ok()
        && !suffix.is_empty()
        && suffix.bytes().all(|b| b.is_ascii_hexdigit()))
    .then_some(agent)
}

#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    #[error(
        "spawning `{agent}` was refused: the child would hold more than its parent: {}",
        list(.violations)
    )]
    Refused {
        agent: String,
        violations: Vec<SpawnViolation>,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the audit log could not record the spawn decision: {0}")]
    Audit(String),
}

impl From<OpenError> for ChildError {
    fn from(err: OpenError) -> Self {
        match err {
            OpenError::ChildRefused { agent, violations } => {
                ChildError::Refused { agent, violations }
            }
            other => ChildError::Setup(other.to_string()),
        }
    }
}

pub(crate) fn list(violations: &[SpawnViolation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Everything needed to spawn and run children of one parent session.
pub struct ChildHost {
    pub home: Home,
    pub global: Arc<GlobalConfig>,
    pub access: Arc<AccessFile>,
    pub remote: bool,
    pub store: Store,
    pub audit: Arc<dyn AuditSink>,
    /// Children's approval requests go to the parent's approver.
    pub approver: Arc<dyn Approver>,
    /// The parent's model endpoint and credential grants: the only ones a
    /// child may use.
    pub parent_model: ModelRef,
    pub parent_credentials: CredentialsSection,
    /// How many children one parent session may have (default 8).
    pub max_children: usize,
}

/// The result of giving a child work.
#[derive(Debug, Clone)]
pub struct ChildReply {
    pub text: String,
    pub state: ChildState,
    /// The untrusted labels the child's session held when its turn ended
    /// (its own and those it inherited): the reply carries them back.
    pub taint: BTreeSet<TaintLabel>,
}

impl ChildHost {
    /// The factory a child's session is opened by: this home, under the
    /// parent's configuration.
    fn factory(&self) -> SessionFactory {
        SessionFactory::with_config(self.home.clone(), self.global.clone(), self.access.clone())
    }

    /// What the parent holds, which the child may not exceed.
    fn parent_grant(&self, caller: &Caller) -> ParentGrant {
        ParentGrant {
            caller: caller.clone(),
            model: self.parent_model.clone(),
            credentials: self.parent_credentials.clone(),
            remote: self.remote,
        }
    }

    fn audit_spawn(
        &self,
        caller: &Caller,
        agent: &str,
        decision: Decision,
        detail: String,
    ) -> Result<(), ChildError> {
        self.audit_check(caller, "spawn", agent, decision, detail)
    }

    /// The `spawn_check` record of holding a child to its parent, at its
    /// spawn (`op` "spawn") or when it is opened for work ("message").
    fn audit_check(
        &self,
        caller: &Caller,
        op: &str,
        agent: &str,
        decision: Decision,
        detail: String,
    ) -> Result<(), ChildError> {
        let request = serde_json::json!({"op": op, "agent": agent});
        self.audit
            .record(&AuditRecord::new(
                Identity::new(
                    caller.identity.id.clone(),
                    caller.identity.agent.clone(),
                    caller.identity.user.clone(),
                ),
                Event::new(Action::SpawnCheck, decision, Reason::SpawnCheck)
                    .tool("agents")
                    .operation(format!("agents:{op}"))
                    .args(&request)
                    .detail(detail),
            ))
            .and_then(|()| self.audit.flush())
            .map_err(|e| ChildError::Audit(e.to_string()))
    }

    /// Spawns a child of `caller` running `agent`, with its own empty
    /// account (funded with [`fund`](Self::fund)). The one spawn path.
    pub fn spawn(&self, caller: &Caller, agent: &str) -> Result<ChildRecord, ChildError> {
        let checked = self.check(caller, agent);
        let violations = match checked {
            Ok(v) => v,
            Err(err) => {
                self.audit_spawn(caller, agent, Decision::Denied, err.to_string())?;
                return Err(err);
            }
        };
        if !violations.is_empty() {
            self.audit_spawn(caller, agent, Decision::Denied, list(&violations))?;
            return Err(ChildError::Refused {
                agent: agent.to_owned(),
                violations,
            });
        }
        let id = format!("{agent}.{:016x}", uuid::Uuid::new_v4().as_u128() as u64);
        let wallet = caller.wallet();
        self.store.ensure_account(&wallet, AccountKind::Agent)?;
        let record = ChildRecord {
            id: id.clone(),
            parent_session: caller.identity.id.clone(),
            parent_account: wallet.clone(),
            user: caller.identity.user.clone(),
            agent: agent.to_owned(),
            account: format!("child:{id}"),
            state: ChildState::Running,
            created_ms: 0,
        };
        // All of a child's credits may go back to its parent, and nowhere
        // else: its own transfers and the recall follow this policy.
        let policy = Policy {
            max_fraction_num: 1,
            max_fraction_den: 1,
            counterparties: vec![wallet],
            ..Policy::default()
        };
        self.audit_spawn(
            caller,
            agent,
            Decision::Allowed,
            format!("child {id} is within its parent's grants"),
        )?;
        self.store.create_session(&NewSession {
            id: id.clone(),
            agent: agent.to_owned(),
            user: caller.identity.user.clone(),
        })?;
        self.store.create_child(&caller.actor(), &record, &policy)?;
        Ok(record)
    }

    /// The violations a child running `agent` would commit; an error when
    /// it cannot even be evaluated (no such agent, bad manifest, too many).
    fn check(&self, caller: &Caller, agent: &str) -> Result<Vec<SpawnViolation>, ChildError> {
        let existing = self.store.children_of(&caller.identity.id)?;
        if existing.len() >= self.max_children {
            return Err(ChildError::Invalid(format!(
                "this session already has {} child agents, the most it may have",
                existing.len()
            )));
        }
        if let Err(err) = AgentName::new(agent) {
            return Err(ChildError::Invalid(err.to_string()));
        }
        self.factory()
            .child_violations(&self.parent_grant(caller), agent)
            .map_err(ChildError::from)
    }

    /// A child of `caller`'s session, or why not.
    pub fn child_of(&self, caller: &Caller, id: &str) -> Result<ChildRecord, ChildError> {
        match self.store.child(id)? {
            Some(c) if c.parent_session == caller.identity.id => Ok(c),
            _ => Err(ChildError::Invalid(format!(
                "this session has no child agent `{id}` (see list_children)"
            ))),
        }
    }

    /// Moves `amount` from the parent's account to the child's, through the
    /// parent's transfer policy; an exhausted child runs again.
    pub fn fund(
        &self,
        caller: &Caller,
        id: &str,
        amount: u64,
        key: &str,
    ) -> Result<TransferReceipt, ChildError> {
        let child = self.child_of(caller, id)?;
        if child.state == ChildState::Stopped {
            return Err(ChildError::Invalid(format!(
                "child `{id}` was recalled; spawn a new one"
            )));
        }
        let ledger = caller
            .credits
            .as_ref()
            .map(|c| c.ledger.clone())
            .unwrap_or_else(|| Arc::new(self.store.clone()));
        let receipt = ledger.transfer(&TransferRequest {
            key: key.to_owned(),
            from: child.parent_account.clone(),
            to: child.account.clone(),
            amount,
            memo: format!("fund child {id}"),
            actor: caller.actor(),
        })?;
        if child.state == ChildState::Exhausted {
            self.store.set_child_state(id, ChildState::Running)?;
        }
        Ok(receipt)
    }

    /// Stops a child for good and moves its whole balance back to the
    /// parent, as a transfer under the child's own policy. Returns the
    /// amount returned.
    pub fn recall(&self, caller: &Caller, id: &str, key: &str) -> Result<u64, ChildError> {
        let child = self.child_of(caller, id)?;
        if child.state != ChildState::Stopped {
            self.store.set_child_state(id, ChildState::Stopped)?;
        }
        let left = self.store.balance(&child.account)?.balance;
        if left == 0 {
            return Ok(0);
        }
        let receipt = self.store.transfer(&TransferRequest {
            key: key.to_owned(),
            from: child.account.clone(),
            to: child.parent_account.clone(),
            amount: left,
            memo: format!("recall child {id}"),
            actor: caller.actor(),
        })?;
        Ok(receipt.amount)
    }

    /// Gives a running child one message and runs its turn, for a program
    /// that has no tool call to name ([`message_for_call`](Self::message_for_call)
    /// with the parent session's id as the source).
    pub async fn message(
        &self,
        caller: &Caller,
        id: &str,
        text: &str,
    ) -> Result<ChildReply, ChildError> {
        let source = caller.identity.id.clone();
        self.message_for_call(caller, id, text, &source).await
    }

    /// Gives a running child one message, sent by the parent's tool call
    /// `call_id`, and runs its turn. The child pays for its model calls
    /// from its own account; when that runs dry it becomes exhausted.
    ///
    /// The child's session takes the parent's labels first (source
    /// `parent:<call_id>`), and, when one is untrusted, the message as
    /// untrusted text: an instruction a page slipped into the parent's
    /// message reaches the child's sinks as what it is.
    pub async fn message_for_call(
        &self,
        caller: &Caller,
        id: &str,
        text: &str,
        call_id: &str,
    ) -> Result<ChildReply, ChildError> {
        let child = self.child_of(caller, id)?;
        if child.state == ChildState::Stopped {
            return Err(ChildError::Invalid(format!(
                "child `{id}` was recalled; spawn a new one"
            )));
        }
        // Opened like every session, and held to the parent's effective
        // policy again: the manifest on disk may have changed since the
        // spawn.
        let names = AgentName::new(child.agent.clone())
            .and_then(|agent| Ok((agent, UserName::new(caller.identity.user.clone())?)));
        let (agent, user) = names.map_err(|e| ChildError::Invalid(e.to_string()))?;
        let spec = SessionSpec {
            agent,
            user,
            origin: Origin::Child {
                parent: Box::new(self.parent_grant(caller)),
                account: child.account.clone(),
            },
            model: None,
            resume: Some(id.to_owned()),
            tools_only: false,
        };
        let records = StoreRecords {
            store: self.store.clone(),
            audit: self.audit.clone(),
        };
        let front = FrontEnd {
            approver: self.approver.clone(),
            records: Box::new(move |_: &GlobalConfig| {
                Ok(Arc::new(records) as Arc<dyn SessionRecords>)
            }),
            warn: Arc::new(|w: &str| tracing::warn!("{w}")),
        };
        let opened = match self.factory().open(spec, front) {
            Ok(opened) => opened,
            Err(err) => {
                let err = ChildError::from(err);
                self.audit_check(
                    caller,
                    "message",
                    &child.agent,
                    Decision::Denied,
                    err.to_string(),
                )?;
                return Err(err);
            }
        };
        let OpenSession {
            kernel,
            mut session,
            mut history,
            agent,
            ..
        } = opened;
        let source = format!("parent:{call_id}");
        session.add_taint_from(caller.taint.iter().copied(), &source);
        if caller.taint.iter().any(|l| l.is_untrusted()) {
            session.add_untrusted_text(text, &caller.taint, &source);
        }
        let setup = |e: crate::agent::KernelError| ChildError::Setup(e.to_string());
        let outcome = kernel
            .run_turn(&mut session, &mut history, &agent, text, &mut Silent)
            .await
            .map_err(setup)?;
        let state = match outcome.end {
            TurnEnd::Unfunded(_) => {
                self.store.set_child_state(id, ChildState::Exhausted)?;
                ChildState::Exhausted
            }
            _ => child.state,
        };
        let taint = session
            .state()
            .taint
            .iter()
            .copied()
            .filter(|l| l.is_untrusted())
            .collect();
        Ok(ChildReply {
            text: outcome.text,
            state,
            taint,
        })
    }
}
