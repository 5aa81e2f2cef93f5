//! Builds a session from `$BULWARK_HOME`: computes the effective policy once,
//! opens the per-user, per-agent directories, and hands the session only the
//! resources its grants need.

use crate::agent::KernelError;
use crate::home::{Home, LoadedAgent};
use crate::registry::ToolRegistry;
use crate::session::{Session, SessionIdentity, SessionResources, SessionState, ToolLimits};
use bulwark_net::{Credentials, EgressPolicy, HttpLimits, SafeHttp, SecretStore};
use bulwark_policy::{
    AccessFile, Capability, CredentialGrant, EffectivePolicy, ExecPolicy, GlobalConfig,
    InternalService, Manifest, PolicyInputs, SandboxEnforcement, compute_effective,
};
use bulwark_sandbox::{Enforcement, ResourceLimits};
use bulwark_sandbox::{Workspace, minimal_env};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a session is built from besides the effective policy: the
/// operator's internal-service overrides, the agent's credential grants,
/// the runtime's secret store, and the agent's exec policy.
#[derive(Debug, Clone)]
pub struct AgentSetup {
    pub internal: Vec<InternalService>,
    pub grants: BTreeMap<String, CredentialGrant>,
    pub secrets: Arc<SecretStore>,
    pub exec: ExecPolicy,
    pub sandbox: ProcessSandbox,
}

/// How a session's child processes run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessSandbox {
    /// Through the sandbox helper (`<helper> __sandbox-exec`): Landlock,
    /// seccomp, namespaces, rlimits, a pids cgroup. The `bulwark` binary
    /// is its own helper.
    Confined {
        helper: std::path::PathBuf,
        enforcement: Enforcement,
        limits: ResourceLimits,
    },
    /// Environment cleared, process group killed on timeout, output capped,
    /// and nothing more. Only for embedding tests that exercise policy and
    /// have no helper binary; the CLI always confines.
    Unconfined,
}

impl ProcessSandbox {
    /// Confined by this very executable (the `bulwark` binary).
    pub fn this_binary(enforcement: Enforcement, limits: ResourceLimits) -> Self {
        ProcessSandbox::Confined {
            helper: std::env::current_exe()
                .unwrap_or_else(|_| std::path::PathBuf::from("/proc/self/exe")),
            enforcement,
            limits,
        }
    }

    /// The sandbox config.toml asks for.
    pub fn from_config(global: &GlobalConfig) -> Self {
        let mut limits = ResourceLimits::default();
        if let Some(mib) = global.sandbox.memory_mib {
            limits.address_space_bytes = mib.saturating_mul(1024 * 1024);
        }
        if let Some(n) = global.sandbox.max_processes {
            limits.max_processes = n;
        }
        let enforcement = match global.sandbox.enforcement {
            SandboxEnforcement::Strict => Enforcement::Strict,
            SandboxEnforcement::Permissive => Enforcement::Permissive,
        };
        Self::this_binary(enforcement, limits)
    }
}

impl Default for AgentSetup {
    /// No overrides, grants or secrets; the exec policy of a manifest with
    /// no `[exec]` section (capabilities decide, escalators refused).
    fn default() -> Self {
        AgentSetup {
            internal: Vec::new(),
            grants: BTreeMap::new(),
            secrets: Arc::default(),
            exec: Manifest::default_exec_policy(),
            sandbox: ProcessSandbox::this_binary(Enforcement::Strict, ResourceLimits::default()),
        }
    }
}

/// The secret store for `agent`: `[secrets] env` and the agent's grant keys
/// (injectable), and every provider's `api_key_env` (guarded, never
/// injected), read from the environment. Returns the names not set.
pub fn load_secrets(global: &GlobalConfig, agent: &LoadedAgent) -> (SecretStore, Vec<String>) {
    let mut store = SecretStore::new();
    let mut injectable: Vec<&str> = global.secrets.env.iter().map(String::as_str).collect();
    for grant in agent.manifest.credentials.grants.values() {
        injectable.extend(grant.keys.iter().map(String::as_str));
    }
    injectable.sort_unstable();
    injectable.dedup();
    let mut provider_keys: Vec<&str> = global
        .providers
        .values()
        .filter_map(|p| p.api_key_env.as_deref())
        .chain(["ANTHROPIC_API_KEY", "OPENAI_API_KEY"])
        .filter(|k| !injectable.contains(k))
        .collect();
    provider_keys.sort_unstable();
    provider_keys.dedup();
    let env = crate::environment();
    let lookup = |name: &str| env.get(name).cloned();
    let missing = store.load_with(injectable, true, lookup);
    // An unset provider key is normal (another provider is in use).
    let _ = store.load_with(provider_keys, false, lookup);
    (store, missing)
}

impl AgentSetup {
    pub fn for_agent(
        global: &GlobalConfig,
        agent: &LoadedAgent,
        secrets: Arc<SecretStore>,
    ) -> Self {
        AgentSetup {
            internal: global.internal_services(),
            grants: agent.manifest.credentials.grants.clone(),
            secrets,
            exec: agent.manifest.exec_policy(),
            sandbox: ProcessSandbox::from_config(global),
        }
    }
}

/// The local terminal user when no `--user` is given.
pub const LOCAL_USER: &str = bulwark_policy::AccessFile::LOCAL_USER;

pub struct PolicyContext<'a> {
    pub global: &'a GlobalConfig,
    pub access: &'a AccessFile,
    pub agent: &'a LoadedAgent,
    pub user: &'a str,
    pub remote: bool,
}

/// The effective policy of `agent` for `user`: global ∩ manifest ∩ remote
/// sandbox ∩ user restrictions ∩ operation allowlists.
pub fn effective_policy(
    ctx: &PolicyContext<'_>,
    registry: &ToolRegistry,
) -> Result<EffectivePolicy, KernelError> {
    let user_entry = ctx.access.users.get(ctx.user);
    // Only the local operator runs without an entry. Any other name must be
    // in access.toml, or it would inherit the operator's unrestricted view.
    if ctx.user != LOCAL_USER && user_entry.is_none() {
        return Err(KernelError::Setup(format!(
            "user `{}` is not in access.toml: add [users.{}] there, or run as the local operator (no --user)",
            ctx.user, ctx.user
        )));
    }
    let inputs = PolicyInputs {
        global: ctx.global,
        manifest: &ctx.agent.manifest,
        remote: ctx.remote,
        user: user_entry.map(|e| (ctx.user, e)),
    };
    Ok(compute_effective(&inputs, &registry.catalog()))
}

fn open_dir(path: std::path::PathBuf) -> Result<Arc<Workspace>, KernelError> {
    Workspace::open(&path)
        .map(Arc::new)
        .map_err(|e| KernelError::Setup(format!("cannot open {}: {e}", path.display())))
}

/// The egress client a session with `policy` gets: its allowlist, the
/// operator's internal services, its credential grants and the secret store.
pub fn egress_client(policy: &EffectivePolicy, net: &AgentSetup) -> Result<SafeHttp, KernelError> {
    hosts_client(
        policy.sandbox.allowed_domains.clone(),
        policy.sandbox.allow_all,
        net,
    )
}

/// An egress client for `allowed_domains` with the agent's internal
/// services, credential grants and secret store: the session's (above),
/// an MCP server's, or the shell's egress proxy's.
pub(crate) fn hosts_client(
    allowed_domains: Vec<String>,
    allow_all: bool,
    net: &AgentSetup,
) -> Result<SafeHttp, KernelError> {
    let egress = EgressPolicy {
        // `host:port` entries stay whole: the egress client holds every
        // request and every redirect hop to the port (issue 16, item 8).
        allowed_domains,
        allow_all,
    };
    let setup_error =
        |e: bulwark_net::NetError| KernelError::Setup(format!("cannot build the HTTP client: {e}"));
    let credentials = Credentials::new(&net.grants, net.secrets.clone()).map_err(setup_error)?;
    let mut client = SafeHttp::new(egress, HttpLimits::default())
        .map_err(setup_error)?
        .with_credentials(Arc::new(credentials));
    for service in &net.internal {
        client.allow_internal_service(&service.host, service.port);
    }
    Ok(client)
}

/// The secrets grants pass to the `shell` domain's environment.
fn shell_secrets(net: &AgentSetup) -> Vec<(String, String, secrecy::SecretString)> {
    domain_secrets(net, "shell")
}

/// The secrets grants pass to the environment of the programs of tool
/// domain `domain` (`shell`, `mcp:<server>`): (grant, key, value).
/// Approval-required grants pass nothing (no human is asked before a
/// process starts). A `tools = ["*"]` grant reaches the shell but no MCP
/// server: a server is third-party code, and gets a key only where a
/// grant names it.
pub(crate) fn domain_secrets(
    net: &AgentSetup,
    domain: &str,
) -> Vec<(String, String, secrecy::SecretString)> {
    let wildcard = bulwark_policy::mcp::mcp_server_of(domain).is_none();
    let mut out = Vec::new();
    for (name, grant) in &net.grants {
        if !grant
            .tools
            .iter()
            .any(|t| t == domain || (wildcard && t == "*"))
            || grant.approval == Some(bulwark_policy::GrantApproval::Required)
        {
            continue;
        }
        for key in &grant.keys {
            if let Some(value) = net.secrets.injectable(key) {
                out.push((name.clone(), key.clone(), value.clone()));
            }
        }
    }
    out
}

/// Opens the session's resources and builds the session around `policy`.
///
/// Front ends open sessions through [`crate::SessionFactory`], which calls
/// this after loading and checking the agent; an embedding program or a
/// test that computes its own policy calls it directly, then sets credits
/// and a child host with [`Session::with_credits`] and
/// [`Session::with_children`] before the session is used.
pub fn build_session(
    home: &Home,
    identity: SessionIdentity,
    policy: Arc<EffectivePolicy>,
    limits: ToolLimits,
    saved: Option<SessionState>,
    net: &AgentSetup,
) -> Result<Session, KernelError> {
    let workspace = open_dir(home.workspace_dir(&identity.user, &identity.agent)?)?;
    let memory_agent = open_dir(home.agent_memory_dir(&identity.user, &identity.agent)?)?;
    let memory_user = open_dir(home.user_memory_dir(&identity.user)?)?;
    let wants_net = policy
        .capabilities
        .iter()
        .any(|c| matches!(c, Capability::NetConnect { .. }));
    let http = if wants_net {
        Some(Arc::new(egress_client(&policy, net)?))
    } else {
        None
    };
    let process_cwd = workspace.root().to_path_buf();
    let resources = SessionResources {
        // HOME is replaced per command (the sandbox's private home, or a
        // fresh directory for an unconfined run): never the workspace.
        process_env: minimal_env(std::path::Path::new(bulwark_sandbox::SANDBOX_HOME)),
        process_secrets: shell_secrets(net),
        secrets: net.secrets.clone(),
        process_cwd,
        workspace,
        memory_agent,
        memory_user,
        http,
        exec_policy: net.exec.clone(),
        sandbox: net.sandbox.clone(),
        limits,
    };
    Ok(Session::new(identity, policy, resources, saved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulwark_policy::GrantApproval;

    fn grant(keys: &[&str], tools: &[&str], approval: Option<GrantApproval>) -> CredentialGrant {
        CredentialGrant {
            keys: keys.iter().map(|s| s.to_string()).collect(),
            tools: tools.iter().map(|s| s.to_string()).collect(),
            hosts: Vec::new(),
            inject: Vec::new(),
            approval,
        }
    }

    #[test]
    fn an_mcp_server_gets_only_the_keys_a_grant_names_it_for() {
        let mut secrets = SecretStore::new();
        for key in ["FS_TOKEN", "ALL_TOKEN", "ASK_TOKEN", "SHELL_TOKEN"] {
            secrets.insert(key, secrecy::SecretString::from("v".repeat(12)), true);
        }
        let setup = AgentSetup {
            grants: BTreeMap::from([
                ("fs".to_string(), grant(&["FS_TOKEN"], &["mcp:fs"], None)),
                ("all".to_string(), grant(&["ALL_TOKEN"], &["*"], None)),
                (
                    "ask".to_string(),
                    grant(&["ASK_TOKEN"], &["mcp:fs"], Some(GrantApproval::Required)),
                ),
                ("sh".to_string(), grant(&["SHELL_TOKEN"], &["shell"], None)),
            ]),
            secrets: Arc::new(secrets),
            ..AgentSetup::default()
        };
        let keys = |domain: &str| -> Vec<String> {
            domain_secrets(&setup, domain)
                .into_iter()
                .map(|(_, k, _)| k)
                .collect()
        };
        // Not a `*` grant (third-party code), not an approval-required one.
        assert_eq!(keys("mcp:fs"), vec!["FS_TOKEN".to_string()]);
        assert!(keys("mcp:other").is_empty());
        // The shell's, as before: its own and `*`.
        assert_eq!(
            keys("shell"),
            vec!["ALL_TOKEN".to_string(), "SHELL_TOKEN".to_string()]
        );
    }
}
