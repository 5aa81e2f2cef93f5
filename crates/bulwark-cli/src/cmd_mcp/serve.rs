//! `bulwark mcp serve`.

use crate::Failure;
use bulwark_kernel::Home;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The agent's name (a directory under agents/).
    #[arg(value_parser = crate::agent_arg)]
    pub agent: String,
}

pub async fn serve(home: &Home, args: ServeArgs) -> Result<(), Failure> {
    let _ = (home, args);
    Err(crate::usage_error(anyhow::anyhow!(
        "`bulwark mcp serve` is not built yet"
    )))
}
