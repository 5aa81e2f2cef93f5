//! How a session reaches one MCP server: the [`Launch`] of a stdio server
//! (in the process sandbox, with an egress proxy for its hosts) or of a
//! Streamable HTTP one (through an egress client of its own), and the
//! audit trail of the proxy.

use crate::agent::KernelError;
use crate::setup::{AgentSetup, ProcessSandbox, domain_secrets, hosts_client};
use bulwark_audit::{Action, AuditRecord, AuditSink, Decision, Event, Identity, Reason};
use bulwark_mcp::client::{ClientLimits, Launch};
use bulwark_net::{
    CallContext, EgressProxy, ProxyConfig, ProxyEvent, ProxyLimits, ProxyObserver,
    ProxyRequestKind, UseOutcome,
};
use bulwark_policy::mcp::{McpServer, McpTransport, mcp_domain};
use bulwark_sandbox::{PrivateHome, SANDBOX_HOME, SandboxSpec, minimal_env};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// CPU seconds a server's process tree may use over the session: a server
/// lives as long as its session, unlike a shell command, but a runaway one
/// is still stopped.
pub(crate) const SERVER_CPU_SECONDS: u64 = 6 * 60 * 60;

/// The socket's name in its private directory.
const PROXY_SOCKET: &str = "egress.sock";

/// A launch, and what must live exactly as long as its connection.
pub(crate) struct Prepared {
    pub(crate) launch: Launch,
    pub(crate) keep: Keep,
    /// The `spawn` record's detail for a process start (`None`: HTTP).
    pub(crate) spawn: Option<String>,
}

/// The egress proxy and its private directory (and an unconfined
/// server's `HOME`); dropping it stops the proxy and removes both.
#[derive(Default)]
pub(crate) struct Keep {
    // Declared first: the proxy stops before its directory is removed.
    proxy: Option<EgressProxy>,
    _dir: Option<PrivateHome>,
}

impl Keep {
    /// The proxy's socket, when the server has one.
    pub(crate) fn socket(&self) -> Option<&Path> {
        self.proxy.as_ref().map(EgressProxy::socket_path)
    }
}

/// Bounds on one server's connection: its `timeout_secs` for the start
/// and for each call, the client's defaults for sizes.
pub(crate) fn client_limits(server: &McpServer) -> ClientLimits {
    let wait = Duration::from_secs(server.timeout_secs.max(1));
    ClientLimits {
        connect_timeout: wait,
        call_timeout: wait,
        ..ClientLimits::default()
    }
}

fn setup_error(server: &str, e: impl std::fmt::Display) -> KernelError {
    KernelError::Setup(format!("MCP server `{server}`: {e}"))
}

/// Builds the launch of `server` for an agent whose workspace is
/// `workspace`. Egress proxy decisions go to `observer`.
pub(crate) fn prepare(
    server: &McpServer,
    workspace: &Path,
    setup: &AgentSetup,
    observer: Arc<dyn ProxyObserver>,
) -> Result<Prepared, KernelError> {
    let name = server.name.as_str();
    let domain = mcp_domain(name);
    let context = CallContext {
        tool: domain.clone(),
        human_approved: false,
    };
    let command = match &server.transport {
        McpTransport::Http { url } => {
            let http = hosts_client(server.allowed_domains.clone(), false, setup)?;
            return Ok(Prepared {
                launch: Launch::Http {
                    url: url.clone(),
                    http: Arc::new(http),
                    context,
                },
                keep: Keep::default(),
                spawn: None,
            });
        }
        McpTransport::Stdio { command } => command,
    };
    let shown = workspace.display().to_string();
    let argv: Vec<String> = command
        .iter()
        .map(|a| a.replace("{workspace}", &shown))
        .collect();
    if argv.first().is_none_or(String::is_empty) {
        return Err(setup_error(
            name,
            "its `command` is empty; name the program to run",
        ));
    }
    // Nothing inherited: the minimal environment, the server's plain
    // `env`, and the keys a grant names `mcp:<name>` for.
    let mut env = minimal_env(Path::new(SANDBOX_HOME));
    for (key, value) in &server.env {
        env.retain(|(k, _)| k != key);
        env.push((key.clone(), value.clone()));
    }
    let secrets = domain_secrets(setup, &domain);
    let mut held_keys = Vec::new();
    for (_, key, value) in &secrets {
        env.retain(|(k, _)| k != key);
        env.push((
            key.clone(),
            secrecy::ExposeSecret::expose_secret(value).to_string(),
        ));
        held_keys.push(key.clone());
    }
    let program = program_name(&argv);
    let keys = if held_keys.is_empty() {
        String::new()
    } else {
        format!("; keys {}", held_keys.join(","))
    };
    let (helper, enforcement, mut limits) = match &setup.sandbox {
        ProcessSandbox::Unconfined => {
            let home = PrivateHome::create()
                .map_err(|e| setup_error(name, format!("cannot create a HOME: {e}")))?;
            let env = home.apply(&env);
            return Ok(Prepared {
                launch: Launch::Unconfined {
                    argv: argv.clone(),
                    cwd: workspace.to_path_buf(),
                    env,
                },
                keep: Keep {
                    proxy: None,
                    _dir: Some(home),
                },
                spawn: Some(format!(
                    "MCP server {name}: {program}: unconfined (no process sandbox){keys}"
                )),
            });
        }
        ProcessSandbox::Confined {
            helper,
            enforcement,
            limits,
        } => (helper.clone(), *enforcement, *limits),
    };
    limits.cpu_seconds = limits.cpu_seconds.max(SERVER_CPU_SECONDS);
    let mut keep = Keep::default();
    if !server.allowed_domains.is_empty() {
        let dir = PrivateHome::create().map_err(|e| {
            setup_error(
                name,
                format!("cannot create the egress proxy's directory: {e}"),
            )
        })?;
        let socket = dir.path().join(PROXY_SOCKET);
        let http = hosts_client(server.allowed_domains.clone(), false, setup)?;
        let config = ProxyConfig {
            http: Arc::new(http),
            context,
            held_keys,
            limits: ProxyLimits::default(),
        };
        let proxy = EgressProxy::bind(&socket, config, observer)
            .map_err(|e| setup_error(name, format!("the egress proxy could not start: {e}")))?;
        keep = Keep {
            proxy: Some(proxy),
            _dir: Some(dir),
        };
    }
    let mode = match enforcement {
        bulwark_sandbox::Enforcement::Strict => "strict",
        bulwark_sandbox::Enforcement::Permissive => "permissive",
    };
    let egress = match keep.socket() {
        Some(_) => format!("; egress proxy for {}", server.allowed_domains.join(",")),
        None => "; no network".into(),
    };
    let spawn = format!(
        "MCP server {name}: {program}: sandboxed ({mode}); {} argument(s){egress}{keys}",
        argv.len().saturating_sub(1)
    );
    let spec = SandboxSpec {
        argv,
        cwd: workspace.to_path_buf(),
        workspace: workspace.to_path_buf(),
        read_write: Vec::new(),
        read_only: server.read_only.clone(),
        env,
        network: false,
        limits,
        enforcement,
        pids_cgroup: None,
        memory_cgroup: None,
        egress_proxy: keep.socket().map(PathBuf::from),
    };
    Ok(Prepared {
        launch: Launch::Sandboxed { helper, spec },
        keep,
        spawn: Some(spawn),
    })
}

/// The program's file name only, clipped (the argv is configuration, but
/// the audit log names what ran without copying it).
fn program_name(argv: &[String]) -> String {
    let program = argv.first().map(String::as_str).unwrap_or_default();
    let name = program.rsplit('/').next().unwrap_or(program);
    name.chars().take(64).collect()
}

/// A session-lifetime egress proxy for the shell (`[sandbox] shell_hosts`):
/// bound on first use, shared by every command of the session.
pub(crate) struct ShellEgress {
    hosts: Vec<String>,
    setup: AgentSetup,
    state: tokio::sync::Mutex<Option<Keep>>,
}

impl ShellEgress {
    pub(crate) fn new(hosts: Vec<String>, setup: AgentSetup) -> Self {
        Self {
            hosts,
            setup,
            state: tokio::sync::Mutex::new(None),
        }
    }

    /// The proxy's socket, binding it first if needed; its decisions are
    /// audited through `observer` (the first command's).
    pub(crate) async fn socket(
        &self,
        held_keys: Vec<String>,
        observer: Arc<dyn ProxyObserver>,
    ) -> Result<PathBuf, KernelError> {
        let mut state = self.state.lock().await;
        if let Some(path) = state.as_ref().and_then(Keep::socket) {
            return Ok(path.to_path_buf());
        }
        let dir = PrivateHome::create().map_err(|e| {
            KernelError::Setup(format!(
                "cannot create the shell's egress proxy directory: {e}"
            ))
        })?;
        let socket = dir.path().join(PROXY_SOCKET);
        let http = hosts_client(self.hosts.clone(), false, &self.setup)?;
        let config = ProxyConfig {
            http: Arc::new(http),
            context: CallContext {
                tool: "shell".into(),
                human_approved: false,
            },
            held_keys,
            limits: ProxyLimits::default(),
        };
        let proxy = EgressProxy::bind(&socket, config, observer).map_err(|e| {
            KernelError::Setup(format!("the shell's egress proxy could not start: {e}"))
        })?;
        *state = Some(Keep {
            proxy: Some(proxy),
            _dir: Some(dir),
        });
        Ok(socket)
    }
}

/// Writes each proxy decision to the audit log: `egress` records with the
/// host, port, decision and byte counts (never what was sent), and a
/// `credential` record per credential use.
pub(crate) struct EgressAudit {
    pub(crate) audit: Arc<dyn AuditSink>,
    pub(crate) identity: Identity,
    /// The tool domain the proxy serves (`mcp:<server>`, `shell`).
    pub(crate) domain: String,
}

/// A host as the program asked for it: escaped and clipped, for a record.
fn shown_host(host: &str) -> String {
    let escaped: String = host.escape_debug().collect();
    escaped.chars().take(255).collect()
}

impl ProxyObserver for EgressAudit {
    fn observe(&self, event: ProxyEvent) {
        let kind = match event.kind {
            ProxyRequestKind::Connect => "CONNECT",
            ProxyRequestKind::Forward => "forward",
            // Over the connection limit, an oversized or slow head, bytes
            // that are not HTTP: refused before any host was named.
            ProxyRequestKind::NoRequest => "malformed or over-limit request",
        };
        let host = shown_host(&event.host);
        let (decision, verdict) = match &event.refused {
            None => (Decision::Allowed, "allowed".to_string()),
            Some(why) => (
                Decision::Denied,
                format!("refused: {}", why.chars().take(300).collect::<String>()),
            ),
        };
        let detail = format!(
            "{kind} {host}:{} {verdict}; {} bytes up, {} bytes down",
            event.port, event.bytes_up, event.bytes_down
        );
        let mut records = vec![AuditRecord::new(
            self.identity.clone(),
            Event::new(Action::Egress, decision, Reason::Egress)
                .tool(self.domain.clone())
                .detail(detail),
        )];
        for used in &event.credentials {
            let grant = used.grant.as_deref().unwrap_or("(legacy mode, no grant)");
            let (decision, what) = match used.outcome {
                UseOutcome::Injected => (Decision::Allowed, "injected"),
                UseOutcome::Substituted => (Decision::Allowed, "substituted for a placeholder"),
                UseOutcome::SkippedNeedsApproval => (
                    Decision::Denied,
                    "not used: the grant requires a human approval",
                ),
            };
            records.push(AuditRecord::new(
                self.identity.clone(),
                Event::new(Action::Credential, decision, Reason::Credential)
                    .tool(self.domain.clone())
                    .detail(format!(
                        "grant {grant}: keys {} to {} through the egress proxy: {what}",
                        used.keys.join(","),
                        shown_host(&used.host)
                    )),
            ));
        }
        for record in records {
            if let Err(err) = self.audit.record(&record) {
                tracing::error!(domain = %self.domain, "an egress proxy decision could not be audited: {err}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulwark_audit::MemorySink;
    use bulwark_net::CredentialUse;

    fn observer() -> (Arc<MemorySink>, EgressAudit) {
        let sink = Arc::new(MemorySink::new());
        let audit = EgressAudit {
            audit: sink.clone(),
            identity: Identity::new("s1", "tester", "local"),
            domain: "mcp:fs".into(),
        };
        (sink, audit)
    }

    #[test]
    fn proxy_decisions_are_audited_without_contents() {
        let (sink, audit) = observer();
        audit.observe(ProxyEvent {
            kind: ProxyRequestKind::Connect,
            host: "registry.example".into(),
            port: 443,
            refused: None,
            bytes_up: 120,
            bytes_down: 4096,
            credentials: Vec::new(),
        });
        audit.observe(ProxyEvent {
            kind: ProxyRequestKind::Forward,
            host: "10.0.0.1\nforged line".into(),
            port: 80,
            refused: Some("10.0.0.0/8 is a private address".into()),
            bytes_up: 0,
            bytes_down: 0,
            credentials: vec![CredentialUse {
                grant: Some("gh".into()),
                keys: vec!["GH_TOKEN".into()],
                host: "api.example".into(),
                outcome: UseOutcome::Injected,
            }],
        });
        let records = sink.records();
        assert_eq!(records.len(), 3);
        assert_eq!(records[0].action, Action::Egress);
        assert_eq!(records[0].decision, Decision::Allowed);
        assert_eq!(records[0].tool, "mcp:fs");
        assert!(
            records[0]
                .detail
                .contains("CONNECT registry.example:443 allowed")
        );
        assert!(records[0].detail.contains("4096 bytes down"));
        assert_eq!(records[1].decision, Decision::Denied);
        assert_eq!(records[1].reason, Reason::Egress);
        assert!(
            !records[1].detail.contains('\n'),
            "a host cannot forge a line: {}",
            records[1].detail
        );
        assert!(records[1].detail.contains("private address"));
        assert_eq!(records[2].action, Action::Credential);
        assert!(records[2].detail.contains("GH_TOKEN"));
    }

    fn stdio(command: &[&str], hosts: &[&str]) -> McpServer {
        McpServer {
            name: "fs".into(),
            transport: McpTransport::Stdio {
                command: command.iter().map(|s| s.to_string()).collect(),
            },
            allowed_domains: hosts.iter().map(|s| s.to_string()).collect(),
            env: [("MODE".to_string(), "x".to_string())].into(),
            read_only: vec![PathBuf::from("/opt/tools")],
            timeout_secs: 7,
        }
    }

    #[tokio::test]
    async fn a_sandboxed_server_gets_the_workspace_its_env_and_long_cpu_time() {
        let (_, audit) = observer();
        let setup = AgentSetup::default();
        let ws = Path::new("/w/space");
        let prepared = prepare(
            &stdio(&["srv", "--root", "{workspace}/data"], &[]),
            ws,
            &setup,
            Arc::new(audit),
        )
        .expect("prepared");
        let Launch::Sandboxed { spec, .. } = prepared.launch else {
            panic!("the default setup confines");
        };
        assert_eq!(spec.argv, vec!["srv", "--root", "/w/space/data"]);
        assert_eq!(spec.cwd, ws);
        assert_eq!(spec.workspace, ws);
        assert!(!spec.network);
        assert_eq!(spec.egress_proxy, None, "no hosts, no proxy");
        assert_eq!(spec.read_only, vec![PathBuf::from("/opt/tools")]);
        assert!(spec.env.contains(&("MODE".into(), "x".into())));
        assert!(spec.limits.cpu_seconds >= SERVER_CPU_SECONDS);
        let spawn = prepared.spawn.expect("a process start is recorded");
        assert!(
            spawn.contains("MCP server fs: srv: sandboxed (strict)"),
            "{spawn}"
        );
        assert_eq!(
            client_limits(&stdio(&["srv"], &[])).call_timeout.as_secs(),
            7
        );
    }

    #[test]
    fn an_empty_command_is_refused() {
        let (_, audit) = observer();
        let err = prepare(
            &stdio(&[], &[]),
            Path::new("/w"),
            &AgentSetup::default(),
            Arc::new(audit),
        )
        .err()
        .expect("refused");
        assert!(err.to_string().contains("`command` is empty"), "{err}");
    }
}
