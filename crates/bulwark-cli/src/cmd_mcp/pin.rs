//! `bulwark mcp pin`.

use crate::Failure;
use bulwark_kernel::Home;

#[derive(clap::Args, Debug)]
pub struct PinArgs {
    /// The agent's name (a directory under agents/).
    #[arg(value_parser = crate::agent_arg)]
    pub agent: String,
}

pub async fn pin(home: &Home, args: PinArgs) -> Result<(), Failure> {
    let _ = (home, args);
    Err(crate::usage_error(anyhow::anyhow!(
        "`bulwark mcp pin` is not built yet"
    )))
}
