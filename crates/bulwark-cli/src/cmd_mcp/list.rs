//! `bulwark mcp list`.

use crate::Failure;
use bulwark_kernel::Home;

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// The agent's name (a directory under agents/).
    #[arg(value_parser = crate::agent_arg)]
    pub agent: String,
}

pub async fn list(home: &Home, args: ListArgs) -> Result<(), Failure> {
    let _ = (home, args);
    Err(crate::usage_error(anyhow::anyhow!(
        "`bulwark mcp list` is not built yet"
    )))
}
