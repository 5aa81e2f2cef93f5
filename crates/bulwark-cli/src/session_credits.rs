//! How a `run`/`chat` session or a served worker pays for its work
//! (config.toml `[credits]`), and the child host of a terminal session.

use crate::cmd_keys::{SignatureStatus, check_agent_signature};
use crate::records::Records;
use crate::verified_agent::{VerifiedFiles, after_check_hook, loaded_from_bundle};
use crate::{Failure, usage_error};
use anyhow::anyhow;
use bulwark_kernel::{
    AgentCheck, Approver, ChildHost, Home, LoadedAgent, Session, SessionCredits, VerifiedChild,
    agent_wallet,
};
use bulwark_policy::{AccessFile, GlobalConfig, parse_model_ref};
use bulwark_store::{AccountKind, Actor, Budget};
use std::sync::Arc;

/// The most children one session may spawn.
const MAX_CHILDREN: usize = 8;

/// What `attach` needs besides the session.
pub(crate) struct Payer<'a> {
    pub(crate) home: &'a Home,
    pub(crate) global: &'a GlobalConfig,
    pub(crate) access: &'a AccessFile,
    pub(crate) loaded: &'a LoadedAgent,
    pub(crate) model: &'a str,
    pub(crate) remote: bool,
    pub(crate) approver: Arc<dyn Approver>,
}

/// Gives `session` its account (when `[credits]` is configured) and, in a
/// terminal session, the host its child agents are spawned through.
pub(crate) fn attach(
    session: &mut Session,
    records: &Records,
    payer: &Payer<'_>,
) -> Result<(), Failure> {
    let identity = session.identity.clone();
    let wallet = agent_wallet(&identity.agent);
    if let Some(store) = records.database() {
        store
            .ensure_account(&wallet, AccountKind::Agent)
            .map_err(|e| anyhow!("cannot open the credits account {wallet}: {e}"))?;
    }
    if let Some(prices) = &payer.global.credits {
        let limits = payer
            .access
            .users
            .get(&identity.user)
            .and_then(|u| u.limits);
        let budget = Budget {
            user: identity.user.clone(),
            session: identity.id.clone(),
            per_session: limits.and_then(|l| l.credits_per_session),
            per_day: limits.and_then(|l| l.credits_per_day),
            per_month: limits.and_then(|l| l.credits_per_month),
        };
        session.credits = Some(SessionCredits {
            ledger: records.ledger(),
            wallet,
            prices: prices.clone(),
            budget: Some(budget),
            actor: Actor {
                user: identity.user.clone(),
                agent: identity.agent.clone(),
                session: identity.id.clone(),
            },
        });
    }
    let Some(store) = records.database() else {
        // A served worker cannot read other agents' manifests (it is
        // confined to its own): its sessions cannot spawn.
        return Ok(());
    };
    let global = Arc::new(payer.global.clone());
    let verify = child_check(payer.home.clone(), global.clone(), payer.model.to_owned());
    session.children = Some(Arc::new(ChildHost {
        home: payer.home.clone(),
        global,
        access: Arc::new(payer.access.clone()),
        remote: payer.remote,
        store: store.clone(),
        audit: records.audit.clone(),
        approver: payer.approver.clone(),
        parent_model: parse_model_ref(payer.model).map_err(|e| usage_error(anyhow!(e)))?,
        parent_credentials: payer.loaded.manifest.credentials.clone(),
        max_children: MAX_CHILDREN,
        verify_agent: Some(verify),
    }));
    Ok(())
}

/// The check of a child agent before it is spawned or given work: its
/// signature (refused under `require_signed` unless valid, and a rolled
/// back version is refused), then, when it holds, the agent as verified.
/// The child is built from those bytes and its model files are served from
/// them: nothing of the agent is read from the disk after the check.
fn child_check(home: Home, global: Arc<GlobalConfig>, parent_model: String) -> AgentCheck {
    let require_signed = global.trust.require_signed;
    Arc::new(move |agent: &str| {
        let status =
            check_agent_signature(&home, agent, require_signed).map_err(|f| f.error.to_string())?;
        after_check_hook(agent);
        let SignatureStatus::Valid {
            agent: verified, ..
        } = status
        else {
            // Unsigned, or an invalid signature tolerated without
            // `require_signed`: loaded from the disk, unverified.
            return Ok(None);
        };
        let loaded = loaded_from_bundle(agent, &verified).map_err(|f| f.error.to_string())?;
        // The model the child will run: its own, or its parent's.
        let (field, model) = match &loaded.manifest.agent.model {
            Some(model) => ("agent.toml [agent] model", model.clone()),
            None => ("the parent agent's model", parent_model.clone()),
        };
        let files = VerifiedFiles::new(verified, require_signed, field, model.as_str())
            .map_err(|e| e.to_string())?;
        files
            .check_model_paths(&model, &global)
            .map_err(|e| e.to_string())?;
        Ok(Some(VerifiedChild {
            loaded,
            files: Arc::new(files),
        }))
    })
}
