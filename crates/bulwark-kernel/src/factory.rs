//! The one way a session comes into being.
//!
//! `run`, `chat`, a served worker and a child agent all open their session
//! through [`SessionFactory::open`]: the agent is loaded (its signature
//! checked, a signed agent used from the verified bytes), its effective
//! policy computed, a child held to its parent's effective policy, the
//! model resolved, the door configured, credits attached and the opening
//! audited — decided here, once, by the session's [`Origin`]. What differs
//! between front ends is injected ([`FrontEnd`]): where records go
//! ([`SessionRecords`]), who answers approvals, where warnings are shown.

use crate::agent::{AgentRuntime, Kernel, KernelError};
use crate::agent_load::{AgentFiles, SignatureStatus, VerifiedFiles, Warn, load_agent};
use crate::approval::Approver;
use crate::children::{Caller, ChildHost, agent_wallet};
use crate::credits::SessionCredits;
use crate::door::Door;
use crate::home::{Home, LoadedAgent};
use crate::providers::{default_model, resolve_model_cached, resolve_model_with};
use crate::registry::ToolRegistry;
use crate::session::{Session, SessionIdentity, SessionState, ToolLimits};
use crate::setup::{AgentSetup, PolicyContext, build_session, effective_policy, load_secrets};
use bulwark_audit::{Action, AuditRecord, AuditSink, Decision, Event, Identity, Reason};
use bulwark_llm::Message;
use bulwark_policy::{
    AccessFile, AgentName, CredentialsSection, EffectivePolicy, GlobalConfig, ModelRef, SpawnGrant,
    SpawnViolation, UserName, parse_model_ref, spawn_violations,
};
use bulwark_store::{AccountKind, Actor, Budget};
use std::sync::Arc;

pub use crate::session_records::{SessionRecords, StoreRecords};

/// The most children one session may spawn.
pub const MAX_CHILDREN: usize = 8;

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The operator's to fix: a bad name, no such agent, a manifest or
    /// config that does not parse, no model (the CLI exits 2).
    #[error("{0}")]
    Usage(String),
    /// Refused by policy: a signature that does not hold under
    /// `require_signed`, a model file outside the signed agent, ...
    #[error("{0}")]
    Refused(String),
    /// A signed version older than one this home has run, under
    /// `require_signed`. [`SessionFactory::open`] audits it and reports
    /// it as [`OpenError::Refused`].
    #[error("{reason}")]
    Rollback { reason: String },
    /// A child agent would hold more than its parent.
    #[error(
        "opening `{agent}` was refused: the child would hold more than its parent: {}",
        crate::children::list(.violations)
    )]
    ChildRefused {
        agent: String,
        violations: Vec<SpawnViolation>,
    },
    /// Anything else (the store, the audit log).
    #[error("{0}")]
    Failed(String),
}

impl From<KernelError> for OpenError {
    fn from(err: KernelError) -> Self {
        match err {
            KernelError::Setup(s) => OpenError::Usage(s),
            other => OpenError::Failed(other.to_string()),
        }
    }
}

impl From<bulwark_store::StoreError> for OpenError {
    fn from(err: bulwark_store::StoreError) -> Self {
        OpenError::Failed(err.to_string())
    }
}

/// Who a session serves: decides the remote narrowing of its policy,
/// whether it may spawn children, whether this process records the
/// version of a signed agent run, and whom it answers to.
/// Front ends still to come (the TUI, A2A, the OpenAI-compatible API) add
/// their own variant, so matches outside the kernel need a fallback.
#[derive(Clone)]
#[non_exhaustive]
pub enum Origin {
    /// `run` and `chat`: the operator at this machine's terminal. This
    /// process holds the database and signs checkpoints; its sessions may
    /// spawn child agents.
    Terminal,
    /// A served conversation (`serve`'s worker): a user who reached the
    /// server over the network. config.toml's `[remote]` policy narrows
    /// it; its records go to the server, which also signs checkpoints;
    /// it cannot spawn (it cannot read other agents' manifests).
    Worker,
    /// A child agent of another session: held, every time it is opened,
    /// to its parent's effective policy; paid from its own account.
    Child {
        parent: Box<ParentGrant>,
        /// The child's account (`child:<id>`).
        account: String,
    },
}

impl Origin {
    /// Whether this process signs the log's checkpoints for the session:
    /// only a terminal session does (the server signs for its workers, the
    /// parent's process for its children).
    pub fn signs_checkpoints(&self) -> bool {
        matches!(self, Origin::Terminal)
    }

    fn remote(&self) -> bool {
        match self {
            Origin::Terminal => false,
            Origin::Worker => true,
            Origin::Child { parent, .. } => parent.remote,
        }
    }
}

/// What a parent session holds, which its children may not exceed.
#[derive(Clone)]
pub struct ParentGrant {
    /// The parent session: identity, effective policy, credits.
    pub caller: Caller,
    /// The parent's model endpoint.
    pub model: ModelRef,
    /// The parent's credential grants.
    pub credentials: CredentialsSection,
    /// Whether the parent is a served (remote) session.
    pub remote: bool,
}

/// What to open.
pub struct SessionSpec {
    /// Typed: a name that is not a safe directory name cannot be asked for.
    pub agent: AgentName,
    pub user: UserName,
    pub origin: Origin,
    /// `--model`, replacing the agent's own.
    pub model: Option<String>,
    /// The stored session to resume.
    pub resume: Option<String>,
    /// A session that only serves tool calls an MCP client makes (`bulwark
    /// mcp serve`, serve's `/mcp`): no model is resolved or called, and
    /// tools that need one (child agents) are not offered. Every other
    /// check is the same as a conversation's.
    pub tools_only: bool,
}

/// Opens the session's records; called once, after the names and the
/// agent's signature were checked (so a bad name creates no database).
pub type OpenRecords =
    Box<dyn FnOnce(&GlobalConfig) -> Result<Arc<dyn SessionRecords>, OpenError> + Send>;

/// What a front end brings to a session.
pub struct FrontEnd {
    /// Answers the door's approval requests (and its children's).
    pub approver: Arc<dyn Approver>,
    pub records: OpenRecords,
    /// Shows the operator a warning (a tolerated invalid signature, a
    /// credential not set).
    pub warn: Warn,
}

/// A session ready to take turns, and what the front end prints.
pub struct OpenSession {
    pub kernel: Kernel,
    pub session: Session,
    pub history: Vec<Message>,
    pub agent: AgentRuntime,
    pub records: Arc<dyn SessionRecords>,
    /// The agent's signature as checked.
    pub signature: SignatureStatus,
}

/// Opens sessions of the agents of one `$BULWARK_HOME`.
pub struct SessionFactory {
    home: Home,
    /// Fixed configuration (a child uses its parent's); `None`: read
    /// config.toml and access.toml at each open.
    config: Option<(Arc<GlobalConfig>, Arc<AccessFile>)>,
}

/// A child's agent, loaded and held to its parent.
struct ChildAgent {
    files: AgentFiles,
    policy: EffectivePolicy,
    model: String,
    violations: Vec<SpawnViolation>,
}

impl SessionFactory {
    /// A factory reading its configuration from `home` at each open.
    pub fn new(home: Home) -> Self {
        Self { home, config: None }
    }

    /// A factory with a fixed configuration.
    pub fn with_config(home: Home, global: Arc<GlobalConfig>, access: Arc<AccessFile>) -> Self {
        Self {
            home,
            config: Some((global, access)),
        }
    }

    pub fn home(&self) -> &Home {
        &self.home
    }

    fn config(&self) -> Result<(Arc<GlobalConfig>, Arc<AccessFile>, Digests), OpenError> {
        match &self.config {
            Some((global, access)) => Ok((global.clone(), access.clone(), Digests::default())),
            None => {
                let (global, config) = self.home.load_global_digested()?;
                let (access, access_digest) = self.home.load_access_digested()?;
                Ok((
                    Arc::new(global),
                    Arc::new(access),
                    Digests {
                        config,
                        access: access_digest,
                    },
                ))
            }
        }
    }

    /// The violations a child of `parent` running `agent` would commit (a
    /// spawn's check): its agent loaded as a session would load it.
    pub(crate) fn child_violations(
        &self,
        parent: &ParentGrant,
        agent: &str,
    ) -> Result<Vec<SpawnViolation>, OpenError> {
        let (global, access, _) = self.config()?;
        let warn: Warn = Arc::new(|w: &str| tracing::warn!("{w}"));
        let child = self.child_agent(parent, agent, &global, &access, &warn)?;
        Ok(child.violations)
    }

    fn child_agent(
        &self,
        parent: &ParentGrant,
        agent: &str,
        global: &GlobalConfig,
        access: &AccessFile,
        warn: &Warn,
    ) -> Result<ChildAgent, OpenError> {
        let agent = AgentName::new(agent)
            .map_err(|e| OpenError::Usage(e.to_string()))?
            .into_string();
        let agent = agent.as_str();
        let files = load_agent(&self.home, agent, global.trust.require_signed, &**warn)?;
        let user = &parent.caller.identity.user;
        let policy = policy_of(global, access, &files.loaded, user, parent.remote)?;
        let model = match &files.loaded.manifest.agent.model {
            Some(m) => m.clone(),
            None => parent.model.to_string(),
        };
        let model_ref = parse_model_ref(&model).map_err(OpenError::Usage)?;
        if let Some(verified) = &files.verified {
            let field = model_field(None, &files.loaded, true);
            let vf = VerifiedFiles::new(
                verified.clone(),
                global.trust.require_signed,
                field,
                &model,
                warn.clone(),
            )
            .map_err(|e| OpenError::Refused(e.to_string()))?;
            vf.check_model_paths(&model, global)
                .map_err(|e| OpenError::Refused(e.to_string()))?;
        }
        let violations = spawn_violations(
            &SpawnGrant {
                policy: &parent.caller.policy,
                model: &parent.model,
                credentials: &parent.credentials,
            },
            agent,
            &SpawnGrant {
                policy: &policy,
                model: &model_ref,
                credentials: &files.loaded.manifest.credentials,
            },
        );
        Ok(ChildAgent {
            files,
            policy,
            model,
            violations,
        })
    }

    /// Opens the session `spec` names. Nothing is stored and no record
    /// written for a session that cannot be opened, except the audit of a
    /// refused rollback.
    pub fn open(&self, spec: SessionSpec, front: FrontEnd) -> Result<OpenSession, OpenError> {
        let SessionSpec {
            agent,
            user,
            origin,
            model: model_override,
            resume,
            tools_only,
        } = spec;
        let FrontEnd {
            approver,
            records: open_records,
            warn,
        } = front;
        let (agent_name, user) = (agent.into_string(), user.into_string());
        let (global, access, digests) = self.config()?;
        let require_signed = global.trust.require_signed;
        let loaded_child = match &origin {
            Origin::Child { parent, .. } => {
                match self.child_agent(parent, &agent_name, &global, &access, &warn) {
                    Err(OpenError::Rollback { reason }) => {
                        let records = open_records(&global)?;
                        return Err(refuse_rollback(
                            &*records.audit(),
                            &agent_name,
                            &user,
                            reason,
                        ));
                    }
                    other => Some(other?),
                }
            }
            _ => None,
        };
        let (files, policy, model) = match loaded_child {
            Some(child) => {
                if !child.violations.is_empty() {
                    return Err(OpenError::ChildRefused {
                        agent: agent_name,
                        violations: child.violations,
                    });
                }
                (child.files, child.policy, child.model)
            }
            None => {
                let files = match load_agent(&self.home, &agent_name, require_signed, &*warn) {
                    Err(OpenError::Rollback { reason }) => {
                        let records = open_records(&global)?;
                        return Err(refuse_rollback(
                            &*records.audit(),
                            &agent_name,
                            &user,
                            reason,
                        ));
                    }
                    other => other?,
                };
                let mut policy =
                    policy_of(&global, &access, &files.loaded, &user, origin.remote())?;
                if tools_only {
                    // A tools-only session has no model, and child agents
                    // need one: their tools are neither offered nor
                    // dispatched (the door refuses an ungranted domain).
                    policy.tools.remove("agents");
                }
                let model = match tools_only {
                    true => String::new(),
                    false => model_override
                        .clone()
                        .or_else(|| files.loaded.manifest.agent.model.clone())
                        .or_else(|| default_model(&global))
                        .ok_or_else(|| {
                            OpenError::Usage(format!(
                                "agent `{agent_name}` names no model and config.toml has no default_model; with a provider key set, \
                                 Bulwark does not pick one of its models for you: pass --model provider:model, or set default_model"
                            ))
                        })?,
                };
                (files, policy, model)
            }
        };
        let AgentFiles {
            loaded,
            signature,
            verified,
        } = files;
        let is_child = matches!(origin, Origin::Child { .. });
        let mut sources = loaded.sources.clone();
        let kv_cache = self.home.kv_cache_dir(&user, &agent_name).ok();
        let kv_cache = kv_cache.as_deref();
        let resolved = match &verified {
            // No model is resolved (nor its files checked, nor its key
            // read): none is ever called.
            _ if tools_only && !is_child => no_model(),
            Some(verified) => {
                let field = model_field(model_override.as_deref(), &loaded, is_child);
                let files = VerifiedFiles::new(
                    verified.clone(),
                    require_signed,
                    field,
                    &model,
                    warn.clone(),
                )
                .map_err(|e| OpenError::Refused(e.to_string()))?;
                let resolved = files.check_model_paths(&model, &global).and_then(|()| {
                    resolve_model_with(&model, &global, &loaded.dir, &files, kv_cache)
                });
                sources.extend(files.take_used());
                resolved.map_err(|err| {
                    if files.refused() {
                        OpenError::Refused(err.to_string())
                    } else {
                        OpenError::from(err)
                    }
                })?
            }
            None => resolve_model_cached(&model, &global, &loaded.dir, kv_cache)?,
        };
        let (secrets, missing) = load_secrets(&global, &loaded);
        if !missing.is_empty() {
            warn(&format!(
                "credential keys not set in the environment: {}; requests that need them will be refused (see `bulwark credentials check {agent_name}`)",
                missing.join(", ")
            ));
        }
        let net = AgentSetup::for_agent(&global, &loaded, Arc::new(secrets));
        let limits = ToolLimits::from_config(&global);

        let records = open_records(&global)?;
        let audit = records.audit();
        // The highest version run is recorded as the run starts (under a
        // lock, checked again: a concurrent run may have run a newer one).
        // Only the terminal records it: a served worker may read trust/
        // but not write it, and a child's version is its parent's run's.
        if let (Some(verified), Origin::Terminal) = (&verified, &origin) {
            let trust_dir = self.home.root().join(bulwark_trust::TRUST_DIR);
            match bulwark_trust::record_version(
                &trust_dir,
                &agent_name,
                &verified.signers,
                verified.version,
            ) {
                Ok(_) => {}
                Err(err @ bulwark_trust::TrustError::Rollback { .. }) if require_signed => {
                    let reason = format!("{err}. {}", crate::agent_load::REQUIRE_SIGNED_POLICY);
                    return Err(refuse_rollback(&*audit, &agent_name, &user, reason));
                }
                Err(err) => warn(&format!("the version run was not recorded: {err}")),
            }
        }
        let mut registry = ToolRegistry::builtin();
        // The MCP servers' pinned tools join the door's tools; no server
        // starts before a call to one of its tools is approved.
        let mcp = crate::mcp_hub::McpHub::open(&self.home, &user, &agent_name, &policy, &net)?;
        for warning in mcp.warnings() {
            warn(warning);
        }
        mcp.register(&mut registry);
        let door = Door::new(registry, audit.clone(), approver.clone())
            .with_recorded_arguments(global.audit.record_arguments);
        let id = match &resume {
            Some(id) => {
                // Checked before the claim so a mistyped or foreign id gets
                // its own message; the state is read after it (below), so
                // no other process can save over what this one loaded.
                records.resume(id, &agent_name, &user)?;
                id.clone()
            }
            None => new_session_id(),
        };
        let conversations = records.claim(&id, &agent_name, &user)?;
        let kernel = Kernel::with_shared_store(door, conversations);
        let (saved, history) = match &resume {
            Some(id) => {
                let saved: Option<SessionState> = records
                    .resume(id, &agent_name, &user)?
                    .map(|json| serde_json::from_str(&json))
                    .transpose()
                    .map_err(|e| {
                        OpenError::Failed(format!("the stored session state is unreadable: {e}"))
                    })?;
                (saved, kernel.history(id)?)
            }
            None => (None, Vec::new()),
        };
        let identity = SessionIdentity {
            id: id.clone(),
            agent: agent_name.clone(),
            user: user.clone(),
        };
        let policy = Arc::new(policy);
        let mut session = build_session(&self.home, identity.clone(), policy, limits, saved, &net)?;
        let credits = self.credits(&origin, &identity, &global, &access, &*records)?;
        session = session
            .with_credits(credits)
            .with_provenance(records.provenance(&agent_name, &user));
        if let (Origin::Terminal, Some(store), false) = (&origin, records.database(), tools_only) {
            session = session.with_children(Arc::new(ChildHost {
                home: self.home.clone(),
                global: global.clone(),
                access: access.clone(),
                remote: false,
                store: store.clone(),
                audit: audit.clone(),
                approver,
                parent_model: parse_model_ref(&model).map_err(OpenError::Usage)?,
                parent_credentials: loaded.manifest.credentials.clone(),
                max_children: MAX_CHILDREN,
            }));
        }
        // Only a session that could be built is stored: a failed setup
        // leaves no half-made session behind.
        if resume.is_none() {
            records.create(&id, &agent_name, &user)?;
        }
        if !is_child {
            // A child's opening is audited by its parent's spawn check.
            let describe = describe_sources(&digests, &sources, &signature);
            audit
                .record(&opening_record(
                    &identity,
                    Action::ConfigLoad,
                    Reason::ConfigLoad,
                    describe,
                ))
                .map_err(|e| {
                    OpenError::Failed(format!(
                        "the audit log refused the configuration record: {e}"
                    ))
                })?;
            let tools = session.policy().tools.keys().cloned().collect::<Vec<_>>();
            let detail = match tools_only {
                true => format!("tools only (an MCP client); tools {}", tools.join(",")),
                false => format!(
                    "model {}:{}; tools {}",
                    resolved.provider,
                    resolved.model,
                    tools.join(",")
                ),
            };
            audit
                .record(&opening_record(
                    &identity,
                    Action::SessionStart,
                    Reason::PolicyLoad,
                    detail,
                ))
                .map_err(|e| {
                    OpenError::Failed(format!(
                        "the audit log refused the session start record: {e}"
                    ))
                })?;
        }
        let assistant_turns = history
            .iter()
            .filter(|m| m.role == bulwark_llm::Role::Assistant)
            .count();
        if assistant_turns > 0 {
            resolved.driver.resume_after(assistant_turns);
        }
        let manifest = &loaded.manifest.agent;
        let agent = AgentRuntime {
            name: agent_name,
            system_prompt: loaded.system_prompt.clone(),
            model: resolved.model,
            driver: resolved.driver,
            max_turns: manifest.max_turns,
            max_tokens: manifest.max_tokens,
        };
        Ok(OpenSession {
            kernel,
            session,
            history,
            agent,
            records,
            signature,
        })
    }

    /// How the session pays: a terminal or served session from its agent's
    /// account (under `[credits]`), a child from its own account on its
    /// parent's terms.
    fn credits(
        &self,
        origin: &Origin,
        identity: &SessionIdentity,
        global: &GlobalConfig,
        access: &AccessFile,
        records: &dyn SessionRecords,
    ) -> Result<Option<SessionCredits>, OpenError> {
        let actor = Actor {
            user: identity.user.clone(),
            agent: identity.agent.clone(),
            session: identity.id.clone(),
        };
        if let Origin::Child { parent, account } = origin {
            return Ok(parent.caller.credits.as_ref().map(|c| SessionCredits {
                wallet: account.clone(),
                actor,
                ..c.clone()
            }));
        }
        let wallet = agent_wallet(&identity.agent);
        if let Some(store) = records.database() {
            store
                .ensure_account(&wallet, AccountKind::Agent)
                .map_err(|e| {
                    OpenError::Failed(format!("cannot open the credits account {wallet}: {e}"))
                })?;
        }
        let Some(prices) = &global.credits else {
            return Ok(None);
        };
        let limits = access.users.get(&identity.user).and_then(|u| u.limits);
        Ok(Some(SessionCredits {
            ledger: records.ledger(),
            wallet,
            prices: prices.clone(),
            budget: Some(Budget {
                user: identity.user.clone(),
                session: identity.id.clone(),
                per_session: limits.and_then(|l| l.credits_per_session),
                per_day: limits.and_then(|l| l.credits_per_day),
                per_month: limits.and_then(|l| l.credits_per_month),
            }),
            actor,
        }))
    }
}

fn policy_of(
    global: &GlobalConfig,
    access: &AccessFile,
    loaded: &LoadedAgent,
    user: &str,
    remote: bool,
) -> Result<EffectivePolicy, OpenError> {
    Ok(effective_policy(
        &PolicyContext {
            global,
            access,
            agent: loaded,
            user,
            remote,
        },
        &ToolRegistry::builtin(),
    )?)
}

/// The model of a tools-only session: none. A turn run on it anyway is
/// refused, never sent anywhere.
fn no_model() -> crate::providers::ResolvedModel {
    crate::providers::ResolvedModel {
        provider: "none".into(),
        model: "none".into(),
        driver: Arc::new(NoModel),
        endpoint: String::new(),
        key_env: None,
    }
}

struct NoModel;

#[async_trait::async_trait]
impl bulwark_llm::LlmDriver for NoModel {
    fn provider(&self) -> &str {
        "none"
    }

    async fn chat(
        &self,
        _request: &bulwark_llm::ChatRequest,
        _on_event: &mut (dyn FnMut(bulwark_llm::StreamEvent) + Send),
    ) -> Result<bulwark_llm::ChatResponse, bulwark_llm::LlmError> {
        Err(bulwark_llm::LlmError::Config(
            "this session serves tool calls only (an MCP client drives it); it has no model".into(),
        ))
    }
}

/// Where the model reference came from, for errors about its files.
fn model_field(model_override: Option<&str>, loaded: &LoadedAgent, child: bool) -> &'static str {
    if model_override.is_some() {
        "--model"
    } else if loaded.manifest.agent.model.is_some() {
        "agent.toml [agent] model"
    } else if child {
        "the parent agent's model"
    } else {
        "config.toml default_model"
    }
}

fn new_session_id() -> String {
    // Session ids only need to be unique and unguessable enough not to collide.
    format!("{:x}", uuid::Uuid::new_v4().as_u128())
}

/// SHA-256 of config.toml and access.toml as parsed (`None`: absent).
#[derive(Default)]
struct Digests {
    config: Option<[u8; 32]>,
    access: Option<[u8; 32]>,
}

/// The `config_load` record's detail: digests of the exact bytes parsed,
/// and the agent's signature status.
fn describe_sources(
    digests: &Digests,
    agent: &[(String, [u8; 32])],
    signature: &SignatureStatus,
) -> String {
    let digest = |d: &Option<[u8; 32]>, absent: &str| match d {
        Some(d) => format!("sha256:{}", hex::encode(d)),
        None => absent.to_string(),
    };
    let mut parts = vec![
        format!(
            "config.toml {}",
            digest(&digests.config, "absent (defaults)")
        ),
        format!("access.toml {}", digest(&digests.access, "absent")),
    ];
    for (path, d) in agent {
        parts.push(format!("{path} sha256:{}", hex::encode(d)));
    }
    parts.push(match signature {
        SignatureStatus::Valid {
            signer,
            key_id,
            version,
            ..
        } => format!("signed by {signer} ({key_id:08x}) version {version}"),
        SignatureStatus::Unsigned => "unsigned".to_string(),
        SignatureStatus::Invalid { .. } => "signature invalid".to_string(),
    });
    parts.join("; ")
}

fn opening_record(
    identity: &SessionIdentity,
    action: Action,
    reason: Reason,
    detail: String,
) -> AuditRecord {
    AuditRecord::new(
        Identity::new(
            identity.id.clone(),
            identity.agent.clone(),
            identity.user.clone(),
        ),
        Event::new(action, Decision::Allowed, reason).detail(detail),
    )
}

/// Audits the refusal of a rolled-back agent, and says why (and whether
/// the refusal could not be audited).
fn refuse_rollback(audit: &dyn AuditSink, agent: &str, user: &str, reason: String) -> OpenError {
    let record = AuditRecord::new(
        Identity::new(new_session_id(), agent, user),
        Event::new(Action::ConfigLoad, Decision::Denied, Reason::Rollback).detail(reason.clone()),
    );
    match audit.record(&record).and_then(|()| audit.flush()) {
        Ok(()) => OpenError::Refused(reason),
        Err(err) => OpenError::Refused(format!(
            "{reason} (and the refusal could not be audited: {err})"
        )),
    }
}
