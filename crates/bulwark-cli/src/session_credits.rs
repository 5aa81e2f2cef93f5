//! How a `run`/`chat` session or a served worker pays for its work
//! (config.toml `[credits]`), and the child host of a terminal session.

use crate::cmd_keys::check_agent_signature;
use crate::records::Records;
use crate::{Failure, usage_error};
use anyhow::anyhow;
use bulwark_kernel::{
    Approver, ChildHost, Home, LoadedAgent, Session, SessionCredits, agent_wallet,
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
    let home = payer.home.clone();
    let require_signed = payer.global.trust.require_signed;
    let verify = move |agent: &str| {
        check_agent_signature(&home, agent, require_signed)
            .map(|_| ())
            .map_err(|f| f.error.to_string())
    };
    session.children = Some(Arc::new(ChildHost {
        home: payer.home.clone(),
        global: Arc::new(payer.global.clone()),
        access: Arc::new(payer.access.clone()),
        remote: payer.remote,
        store: store.clone(),
        audit: records.audit.clone(),
        approver: payer.approver.clone(),
        parent_model: parse_model_ref(payer.model).map_err(|e| usage_error(anyhow!(e)))?,
        parent_credentials: payer.loaded.manifest.credentials.clone(),
        max_children: MAX_CHILDREN,
        verify_agent: Some(Arc::new(verify)),
    }));
    Ok(())
}
