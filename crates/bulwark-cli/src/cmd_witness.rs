//! `bulwark witness serve | key`: run a C2SP tlog-witness for other logs
//! (another machine's Bulwark, or a peer this node witnesses in turn).
//!
//! The witness's name and key live in `<data>/witness.key` (owner-only,
//! made on first use), its per-log state in `<data>/witness.db`; `<data>`
//! defaults to `$BULWARK_HOME/witness`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use bulwark_audit::VerifierKey;
use bulwark_kernel::Home;
use bulwark_witness::{Identity, Witness};

/// The default listening address: loopback, so nothing is exposed unless
/// the operator says so.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7380";

#[derive(clap::Subcommand, Debug)]
pub enum WitnessCommand {
    /// Run a witness: cosign checkpoints of the given logs that are
    /// consistent with the last one it cosigned, refuse the others.
    #[command(
        after_help = "Example (on the witnessing machine):\n  bulwark witness serve --listen 10.0.0.2:7380 \\\n    --log 'alice.example/audit=bulwark-audit+1a2b3c4d+AU9x...'\n\nThe --log value is the log's origin ([audit] origin of its config; default\nbulwark.local/audit), '=', and the vkey that `bulwark audit key` prints on\nthe log's machine. Then, in the log's config.toml:\n  [[audit.witnesses]]\n  url = \"http://10.0.0.2:7380\"\n  key = \"<the line `bulwark witness key` prints here>\"\n\nProtocol: c2sp.org/tlog-witness (POST /add-checkpoint). The witness keeps,\nper origin, the latest checkpoint it cosigned, and refuses rolled-back or\nforked checkpoints (HTTP 409/422). Stop it with Ctrl-C or SIGTERM."
    )]
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = DEFAULT_LISTEN)]
        listen: SocketAddr,
        /// The witness's directory (key and state) [default: $BULWARK_HOME/witness].
        #[arg(long, value_name = "DIR")]
        data: Option<PathBuf>,
        /// The witness's name, fixed when its key is first made
        /// [default: bulwark-witness].
        #[arg(long)]
        name: Option<String>,
        /// A log to witness: ORIGIN=VKEY (repeatable).
        #[arg(long = "log", value_name = "ORIGIN=VKEY", required = true)]
        logs: Vec<String>,
    },
    /// Print the witness's verifier key (making the key if needed), the
    /// line logs put in `[[audit.witnesses]] key`.
    #[command(after_help = "Example:\n  bulwark witness key --data /var/lib/bulwark-witness")]
    Key {
        /// The witness's directory [default: $BULWARK_HOME/witness].
        #[arg(long, value_name = "DIR")]
        data: Option<PathBuf>,
        /// The witness's name, fixed when its key is first made.
        #[arg(long)]
        name: Option<String>,
    },
}

pub async fn witness(home: &Home, command: WitnessCommand) -> Result<(), Failure> {
    match command {
        WitnessCommand::Serve {
            listen,
            data,
            name,
            logs,
        } => serve(&data_dir(home, data), listen, name.as_deref(), &logs).await,
        WitnessCommand::Key { data, name } => {
            let identity = Identity::load_or_create(&data_dir(home, data), name.as_deref())
                .map_err(usage_error)?;
            println!("{}", identity.cosigner_key()?.to_vkey());
            Ok(())
        }
    }
}

fn data_dir(home: &Home, data: Option<PathBuf>) -> PathBuf {
    data.unwrap_or_else(|| home.root().join("witness"))
}

/// Parses `ORIGIN=VKEY` (the origin may not contain `=`; a vkey's base64
/// may end in `=`, so the split is at the first one).
fn parse_log(arg: &str) -> Result<(String, VerifierKey), Failure> {
    let (origin, vkey) = arg.split_once('=').ok_or_else(|| {
        usage_error(anyhow!(
            "--log {arg:?}: expected ORIGIN=VKEY, e.g. bulwark.local/audit=bulwark-audit+1a2b3c4d+AU9x..."
        ))
    })?;
    let key = VerifierKey::parse(vkey).map_err(|e| {
        usage_error(anyhow!(
            "--log {arg:?}: {vkey:?} is not a log verifier key ({e}); use the line `bulwark audit key` prints on the log's machine"
        ))
    })?;
    Ok((origin.to_owned(), key))
}

async fn serve(
    dir: &Path,
    listen: SocketAddr,
    name: Option<&str>,
    logs: &[String],
) -> Result<(), Failure> {
    let logs = logs
        .iter()
        .map(|l| parse_log(l))
        .collect::<Result<Vec<_>, _>>()?;
    let identity = Identity::load_or_create(dir, name).map_err(usage_error)?;
    let vkey = identity.cosigner_key()?.to_vkey();
    let origins: Vec<String> = logs.iter().map(|(o, _)| o.clone()).collect();
    let witness = Witness::open(dir, identity, logs).map_err(usage_error)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let bound = listener.local_addr()?;
    // The first line is what scripts (and tests) wait for.
    println!("witness listening on http://{bound}");
    println!("witness key: {vkey}");
    println!("witnessing: {}", origins.join(", "));
    bulwark_witness::server::serve(listener, Arc::new(witness), shutdown_signal())
        .await
        .context("the witness server failed")?;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
