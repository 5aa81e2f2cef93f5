//! Builds a session from `$BULWARK_HOME`: computes the effective policy once,
//! opens the per-user, per-agent directories, and hands the session only the
//! resources its grants need.

use crate::agent::KernelError;
use crate::home::{Home, LoadedAgent};
use crate::registry::ToolRegistry;
use crate::session::{Session, SessionIdentity, SessionResources, SessionState, ToolLimits};
use bulwark_net::{EgressPolicy, HttpLimits, SafeHttp};
use bulwark_policy::{
    AccessFile, Capability, EffectivePolicy, GlobalConfig, PolicyInputs, compute_effective,
};
use bulwark_sandbox::{Workspace, minimal_env};
use std::sync::Arc;

/// The local terminal user when no `--user` is given.
pub const LOCAL_USER: &str = "local";

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

/// Opens the session's resources and builds the session around `policy`.
pub fn build_session(
    home: &Home,
    identity: SessionIdentity,
    policy: Arc<EffectivePolicy>,
    limits: ToolLimits,
    saved: Option<SessionState>,
) -> Result<Session, KernelError> {
    let workspace = open_dir(home.workspace_dir(&identity.user, &identity.agent)?)?;
    let memory_agent = open_dir(home.agent_memory_dir(&identity.user, &identity.agent)?)?;
    let memory_user = open_dir(home.user_memory_dir(&identity.user)?)?;
    let wants_net = policy
        .capabilities
        .iter()
        .any(|c| matches!(c, Capability::NetConnect { .. }));
    let http = if wants_net {
        let egress = EgressPolicy {
            allowed_domains: policy.sandbox.allowed_domains.clone(),
            allow_all: policy.sandbox.allow_all,
        };
        let client = SafeHttp::new(egress, HttpLimits::default())
            .map_err(|e| KernelError::Setup(format!("cannot build the HTTP client: {e}")))?;
        Some(Arc::new(client))
    } else {
        None
    };
    let process_cwd = workspace.root().to_path_buf();
    let resources = SessionResources {
        process_env: minimal_env(&process_cwd),
        process_cwd,
        workspace,
        memory_agent,
        memory_user,
        http,
        limits,
    };
    Ok(Session::new(identity, policy, resources, saved))
}
