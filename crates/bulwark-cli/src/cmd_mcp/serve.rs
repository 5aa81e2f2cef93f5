//! `bulwark mcp serve`: the agent's granted tools to an MCP client on
//! stdin/stdout. The operator at this machine starts it (an MCP client's
//! server entry), so the session is a terminal one: this process opens the
//! database, holds the session's lease and signs the audit checkpoints,
//! the last one as it ends (EOF, Ctrl-C or SIGTERM). stdout carries
//! nothing but protocol frames; warnings and logs go to stderr.

use std::sync::{Arc, OnceLock};

use anyhow::{Context, anyhow};
use bulwark_kernel::mcp_host::SessionToolHost;
use bulwark_kernel::{Home, OpenRecords, Origin, SessionFactory, SessionRecords, Warn};
use bulwark_policy::{AgentName, UserName};

use crate::checkpoints::Shutdown;
use crate::cmd_run::{open_error, open_failure};
use crate::records::Records;
use crate::{Failure, usage_error};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The agent's name (a directory under agents/).
    #[arg(value_parser = crate::agent_arg)]
    pub agent: String,
    /// Act as this user (their restrictions from access.toml apply).
    #[arg(long, default_value = bulwark_kernel::LOCAL_USER, value_parser = user_name)]
    pub user: String,
}

fn user_name(name: &str) -> Result<String, bulwark_policy::NameError> {
    UserName::new(name).map(UserName::into_string)
}

pub async fn serve(home: &Home, args: ServeArgs) -> Result<(), Failure> {
    let shutdown = Shutdown::listen().context("cannot install the Ctrl-C / SIGTERM handlers")?;
    let agent = AgentName::new(&args.agent).map_err(|e| usage_error(anyhow!("{e}")))?;
    let user = UserName::new(&args.user).map_err(|e| usage_error(anyhow!("{e}")))?;
    let origin = Origin::Terminal;
    // The records are opened by the factory when it needs them; this
    // keeps a handle for the checkpoints and the lease (as `run` does).
    let opened: Arc<OnceLock<Arc<Records>>> = Arc::new(OnceLock::new());
    let slot = opened.clone();
    let records_home = home.clone();
    let records_origin = origin.clone();
    let records: OpenRecords = Box::new(move |global| {
        let records =
            Arc::new(Records::open(&records_home, &records_origin, global).map_err(open_error)?);
        let _ = slot.set(records.clone());
        Ok(records as Arc<dyn SessionRecords>)
    });
    let warn: Warn = Arc::new(|warning: &str| eprintln!("warning: {warning}"));
    let result = SessionToolHost::open(
        &SessionFactory::new(home.clone()),
        agent,
        user,
        origin,
        records,
        warn,
    );
    let records = opened.get().cloned();
    let checkpoints = records.as_ref().and_then(|r| r.take_checkpoints());
    let lease = records.as_ref().and_then(|r| r.lease());
    let end = move || {
        if let Some(checkpoints) = checkpoints {
            checkpoints.finish();
        }
        if let Some(lease) = lease {
            lease.release();
        }
    };
    let host = match result {
        Ok(host) => Arc::new(host),
        Err(err) => {
            end();
            return Err(open_failure(err));
        }
    };
    eprintln!(
        "bulwark: serving agent {} over MCP on stdin/stdout · session {} · audit: bulwark audit tail --session {}",
        host.agent(),
        host.session_id(),
        host.session_id()
    );
    let outcome = tokio::select! {
        served = bulwark_mcp::server::serve_stdio(host.clone()) => served,
        () = shutdown.requested() => Ok(()),
    };
    end();
    outcome.map_err(|err| Failure::from(anyhow!("the MCP connection failed: {err}")))
}
