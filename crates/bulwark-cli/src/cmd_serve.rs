//! `bulwark serve`: the server of `bulwark-server` in front of its worker
//! supervisor (`bulwark_server::workers`), each conversation in its own
//! `bulwark worker` process.
//!
//! The two halves do not know each other: the server talks to a
//! [`Backend`], the supervisor runs workers. [`WorkerBackend`] is the
//! adapter, and this is also where each worker's environment is decided
//! ([`AgentKeys`]): only the keys its one agent may use travel to a worker,
//! never another agent's, never the server's whole environment.

use crate::checkpoints::Checkpointer;
use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use async_trait::async_trait;
use bulwark_kernel::Home;
use bulwark_policy::{Capability, GlobalConfig, parse_model_ref};
use bulwark_protocol::protocol::ErrorCode;
use bulwark_server::workers::env::check_name;
use bulwark_server::workers::{
    Broker, CapScope, CreditLimits, DatabaseBroker, Supervisor, SupervisorConfig, SupervisorError,
    WorkerHandle,
};
use bulwark_server::{
    AppState, Backend, BackendError, BackendStats, ConnectionLimits, Conversation,
    ConversationControl, OpenRequest, ServerConfig,
};
use bulwark_store::Store;
use secrecy::SecretString;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on. The default is loopback only; to serve others,
    /// bind a public address AND list the names clients use with
    /// --allow-host (anything else is refused, which stops DNS rebinding).
    #[arg(long, default_value_t = bulwark_server::DEFAULT_BIND)]
    pub bind: SocketAddr,
    /// A Host header value to accept (`name` or `name:port`); repeatable.
    /// Default: the bind address, localhost, 127.0.0.1 and [::1].
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// A browser Origin to accept for WebSockets (`scheme://host[:port]`);
    /// repeatable. Default: http(s):// + each allowed host.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// Clients reach this server over https (directly or via a proxy that
    /// terminates TLS): send HSTS.
    #[arg(long)]
    pub tls: bool,
    /// Conversations (worker processes) running at once, all users.
    #[arg(long, default_value_t = 64)]
    pub max_workers: usize,
    /// Conversations running at once per user.
    #[arg(long, default_value_t = 4)]
    pub max_workers_per_user: usize,
    /// Seconds a worker may sit without a command or a running turn.
    #[arg(long, default_value_t = 900)]
    pub idle_timeout_secs: u64,
    /// Open connections, all clients together (default 4096, or what the
    /// open-file limit allows). Needs this many open files plus 512.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Connections that have not yet signed in or asked for /health; when
    /// full, the oldest of them is closed to make room.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_pending_connections: usize,
    /// Open connections from one client address.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_connections_per_address: usize,
    /// Seconds a client gets to send a request's headers (and the longest
    /// a kept-alive connection may sit idle).
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub header_timeout_secs: u64,
    /// Seconds a client gets to send a request's body.
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    pub body_timeout_secs: u64,
    /// A reverse proxy (address or CIDR network) whose Forwarded /
    /// X-Forwarded-For headers name the client; repeatable. Without it
    /// those headers are ignored.
    #[arg(long = "trust-proxy", value_name = "CIDR")]
    pub trust_proxies: Vec<String>,
}

/// The smallest connection table `bulwark serve` fits itself to when the
/// open-file limit is too low for the default.
const MIN_CONNECTIONS: usize = 64;

/// The connection limits of `args`, with the open-file limit raised to
/// fit them. A `--max-connections` that does not fit is refused; the
/// default shrinks to what fits (with a note).
fn connection_limits(args: &ServeArgs) -> Result<ConnectionLimits, Failure> {
    let mut limits = ConnectionLimits {
        max: args
            .max_connections
            .unwrap_or(ConnectionLimits::default().max)
            .max(1),
        max_pending: args.max_pending_connections.max(1),
        per_address: args.max_connections_per_address.max(1),
        header_timeout: Duration::from_secs(args.header_timeout_secs.max(1)),
        body_timeout: Duration::from_secs(args.body_timeout_secs.max(1)),
    };
    match bulwark_server::raise_fd_limit(&limits) {
        Ok(_) => Ok(limits),
        Err(e) if args.max_connections.is_none() && e.fits as usize >= MIN_CONNECTIONS => {
            eprintln!(
                "note: the open-file limit is {}, so at most {} connections are served (raise it with `ulimit -n {}` for the default {})",
                e.limit, e.fits, e.needed, limits.max
            );
            limits.max = e.fits as usize;
            Ok(limits)
        }
        Err(e) => Err(usage_error(anyhow!("{e}"))),
    }
}

/// The supervisor as the server's [`Backend`].
pub struct WorkerBackend {
    supervisor: Supervisor,
    keys: Arc<AgentKeys>,
}

struct Kill(WorkerHandle);

impl ConversationControl for Kill {
    fn kill(&self) {
        self.0.kill();
    }
}

fn backend_error(err: SupervisorError) -> BackendError {
    match err {
        SupervisorError::AtCapacity { scope, limit } => BackendError::AtCapacity {
            message: match scope {
                CapScope::Global => format!(
                    "the server is running its maximum of {limit} conversations; try again shortly"
                ),
                CapScope::User => format!(
                    "you already have {limit} conversations running; close one and try again"
                ),
            },
            retry_after_secs: 5,
        },
        SupervisorError::Refused { code, message } => match code {
            ErrorCode::Forbidden => BackendError::Forbidden(message),
            ErrorCode::Setup => BackendError::Setup(message),
            _ => BackendError::Internal(message),
        },
        SupervisorError::BadRequest(too_long) => BackendError::Setup(too_long.to_string()),
        SupervisorError::ShuttingDown => {
            BackendError::Internal("the server is shutting down".into())
        }
        other => {
            // Spawn failures, timeouts and protocol breaks are the
            // operator's to read in the log, not the client's.
            tracing::warn!(error = %other, "a worker could not be started");
            BackendError::Internal("the conversation could not be started; try again".into())
        }
    }
}

impl WorkerBackend {
    /// Starts a worker for `request`: a conversation, or (`tools_only`) a
    /// tools-only session for `/mcp`. Both get the same keys, the agent's
    /// (its tools' credential grants need them).
    async fn start(
        &self,
        request: OpenRequest,
        tools_only: bool,
    ) -> Result<Conversation, BackendError> {
        let keys = self.keys.clone();
        let agent = request.agent.clone();
        let keys = tokio::task::spawn_blocking(move || keys.for_agent(&agent))
            .await
            .map_err(|_| BackendError::Internal("the server failed".into()))??;
        let open = bulwark_server::workers::OpenRequest {
            user: request.user,
            agent: request.agent,
            resume: if tools_only { None } else { request.resume },
            keys,
        };
        let conversation = if tools_only {
            self.supervisor.open_tools(open).await
        } else {
            self.supervisor.open(open).await
        }
        .map_err(backend_error)?;
        Ok(Conversation {
            session_id: conversation.session_id,
            history_messages: conversation.history_messages,
            commands: conversation.commands,
            events: conversation.events,
            control: Box::new(Kill(conversation.worker)),
        })
    }
}

#[async_trait]
impl Backend for WorkerBackend {
    async fn open(&self, request: OpenRequest) -> Result<Conversation, BackendError> {
        self.start(request, false).await
    }

    async fn open_tools(&self, request: OpenRequest) -> Result<Conversation, BackendError> {
        self.start(request, true).await
    }

    fn stats(&self) -> BackendStats {
        let stats = self.supervisor.stats();
        BackendStats {
            workers: stats.workers as u64,
            workers_by_user: stats
                .per_user
                .into_iter()
                .map(|(user, n)| (user, n as u64))
                .collect(),
            crashes: stats.crashed + stats.protocol_violations,
            max_workers: Some(self.supervisor.config().max_workers as u64),
        }
    }
}

/// Finds the keys one agent's worker is given: the variables of
/// `config.toml` `[secrets] env`, the agent's credential grants' keys, and
/// the keys of the providers it may use (its model's: the manifest's, else
/// `default_model`; and those its `llm_query` capabilities name), with
/// their values from the start-up snapshot. Nothing of another agent and
/// nothing else of the server's environment: a compromised worker holds
/// only what its own agent could use anyway.
pub(crate) struct AgentKeys {
    home: Home,
    lookup: KeyLookup,
}

/// A variable's value in the server's start-up environment.
type KeyLookup = Box<dyn Fn(&str) -> Option<SecretString> + Send + Sync>;

impl AgentKeys {
    /// Values from the server's start-up environment snapshot.
    pub(crate) fn from_environment(home: &Home) -> Self {
        Self::with_lookup(home, |name| {
            bulwark_kernel::environment().get(name).cloned()
        })
    }

    pub(crate) fn with_lookup(
        home: &Home,
        lookup: impl Fn(&str) -> Option<SecretString> + Send + Sync + 'static,
    ) -> Self {
        Self {
            home: home.clone(),
            lookup: Box::new(lookup),
        }
    }

    /// The names `agent`'s worker may hold. `Err`: the open is refused
    /// with this message (for the user).
    fn names(&self, global: &GlobalConfig, agent: &str) -> Result<Vec<String>, String> {
        let mut names: Vec<String> = global.secrets.env.clone();
        // An agent that does not load is refused by its worker, which says
        // why; it gets no keys of its own.
        if let Ok(loaded) = self.home.load_agent(agent) {
            for grant in loaded.manifest.credentials.grants.values() {
                names.extend(grant.keys.iter().cloned());
            }
            let model = loaded
                .manifest
                .agent
                .model
                .clone()
                .or_else(|| bulwark_kernel::default_model(global))
                .ok_or_else(|| {
                    // The worker would decide without the server's keys,
                    // and pick the bundled local model: refuse here, as
                    // `run` does.
                    format!(
                        "agent `{agent}` names no model and config.toml has no default_model; with a provider key set, \
                         Bulwark does not pick one of its models for you: set [agent] model in its agent.toml, or default_model"
                    )
                })?;
            let mut providers: Vec<String> = Vec::new();
            if let Ok(model) = parse_model_ref(&model) {
                providers.push(model.provider);
            }
            for capability in &loaded.manifest.capabilities {
                if let Capability::LlmQuery { model } = capability {
                    providers.extend(queried_providers(model, global));
                }
            }
            names.extend(
                providers
                    .iter()
                    .filter_map(|p| bulwark_kernel::provider_key_env(p, global)),
            );
        }
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }

    /// The keys of `agent`'s worker, with their values (unset ones are
    /// left out).
    fn for_agent(&self, agent: &str) -> Result<Vec<(String, SecretString)>, BackendError> {
        let global = self
            .home
            .load_global()
            .map_err(|e| BackendError::Setup(e.to_string()))?;
        let names = self.names(&global, agent).map_err(BackendError::Setup)?;
        Ok(names
            .into_iter()
            .filter_map(|name| (self.lookup)(&name).map(|value| (name, value)))
            .collect())
    }

    /// Refuses to start when a key any agent (or config.toml) names could
    /// not be passed to a worker, so the mistake shows at start-up rather
    /// than at some user's first message.
    fn check_names(&self) -> Result<(), Failure> {
        let global = self
            .home
            .load_global()
            .map_err(|e| usage_error(anyhow!("{e}")))?;
        let mut names: Vec<String> = global.secrets.env.clone();
        for agent in self.home.list_agents().unwrap_or_default() {
            names.extend(self.names(&global, &agent).unwrap_or_default());
        }
        for name in names {
            check_name(&name).map_err(|e| {
                usage_error(anyhow!(
                    "the key variable `{name}` cannot be passed to workers: {e}; rename it in config.toml or the agent's credentials"
                ))
            })?;
        }
        Ok(())
    }
}

/// The providers an `llm_query` pattern can name: the one before its `:`,
/// or every known provider when that part is a glob (an agent allowed to
/// query any provider's models needs their keys).
fn queried_providers(pattern: &str, global: &GlobalConfig) -> Vec<String> {
    let provider = pattern.split_once(':').map_or(pattern, |(p, _)| p);
    if provider.contains(['*', '?', '[', '{']) {
        let mut all: Vec<String> = vec!["anthropic".into(), "openai".into()];
        all.extend(global.providers.keys().cloned());
        all
    } else {
        vec![provider.to_owned()]
    }
}

pub async fn serve(home: &Home, args: ServeArgs) -> Result<(), Failure> {
    let connections = connection_limits(&args)?;
    let trusted_proxies = args
        .trust_proxies
        .iter()
        .map(|t| bulwark_server::proxy::parse_trusted(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| usage_error(anyhow!("--trust-proxy: {e}")))?;
    if !home.access_path().is_file() {
        eprintln!(
            "note: {} does not exist, so nobody can sign in; create a user with `bulwark access create <name>`",
            home.access_path().display()
        );
    }
    std::fs::create_dir_all(home.root())
        .with_context(|| format!("cannot create {}", home.root().display()))?;
    let store = Store::open(&home.db_path())
        .with_context(|| format!("cannot open {}", home.db_path().display()))?;
    // Workers never open the database (it holds every user's
    // conversations): the server performs their store operations, each for
    // the worker's own conversation, and stamps their audit records with
    // its identity. Workers are confined away from keys/ too, where the
    // audit signing key is: the server signs checkpoints of what they
    // record, periodically and once more at shutdown. A log that does not
    // verify stops the server as it stops `run`.
    crate::cmd_audit::require_verified(home, &store.audit_sink())?;
    let audit_config = home
        .load_global()
        .map_err(|e| usage_error(anyhow!("{e}")))?
        .audit;
    let checkpoints = Checkpointer::start(home, store.audit_sink(), &audit_config);
    let program =
        std::env::current_exe().context("cannot find the bulwark binary to run workers")?;
    let mut supervisor_config = SupervisorConfig::new(program, ["worker"], home.root());
    let keys = AgentKeys::from_environment(home);
    keys.check_names()?;
    supervisor_config.max_workers = args.max_workers.max(1);
    supervisor_config.max_workers_per_user = args.max_workers_per_user.max(1);
    supervisor_config.idle_timeout = Duration::from_secs(args.idle_timeout_secs.max(1));
    // Each hold re-reads the user's limits, so access.toml edits apply at
    // once; a user no longer listed (or a file that does not parse)
    // reserves nothing.
    let limits_home = home.clone();
    supervisor_config.broker = Some(Broker::new(DatabaseBroker::new(store.clone()).with_limits(
        move |user| {
            let access = limits_home.load_access().map_err(|e| e.to_string())?;
            let entry = access
                .users
                .get(user)
                .ok_or_else(|| format!("user `{user}` is not in access.toml"))?;
            let limits = entry.limits;
            Ok(CreditLimits {
                per_session: limits.and_then(|l| l.credits_per_session),
                per_day: limits.and_then(|l| l.credits_per_day),
                per_month: limits.and_then(|l| l.credits_per_month),
            })
        },
    )));
    let supervisor = Supervisor::new(supervisor_config);

    let mut config = ServerConfig::new(args.bind);
    config.allowed_hosts = args.allow_hosts;
    config.allowed_origins = args.allow_origins;
    config.tls = args.tls;
    config.trusted_proxies = trusted_proxies;
    config.limits.connections = connections;
    let backend = Arc::new(WorkerBackend {
        supervisor: supervisor.clone(),
        keys: Arc::new(keys),
    });
    let state = AppState::new(config, home.clone(), store, backend);
    let shutdown = async {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    };
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .map_err(|e| {
            usage_error(anyhow!(
                "cannot listen on {}: {e} (is another server using the port? choose one with --bind)",
                args.bind
            ))
        })?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    eprintln!(
        "bulwark serve: listening on http://{bound} (Ctrl-C stops; workers are shut down cleanly)"
    );
    let served = bulwark_server::serve_on(listener, state, shutdown).await;
    supervisor.shutdown().await;
    checkpoints.finish();
    served.map_err(|e| Failure {
        code: 1,
        error: anyhow!("{e}"),
    })
}

#[cfg(test)]
mod tests;
