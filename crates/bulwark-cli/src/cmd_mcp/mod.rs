//! `bulwark mcp`: pin an agent's MCP servers' tools, list them, and serve
//! an agent's granted tools to MCP clients.

mod list;
mod pin;
mod serve;

use crate::Failure;
use bulwark_kernel::Home;

#[derive(clap::Subcommand, Debug)]
pub enum McpCommand {
    /// Connect to each of the agent's MCP servers, vet their tools and pin
    /// them (name, description, schema digests): only pinned tools are
    /// offered to the model, and a server whose tools change is refused
    /// until pinned again.
    #[command(
        after_help = "Examples:\n  bulwark mcp pin assistant\n  bulwark mcp pin assistant --server fs\n  bulwark mcp pin assistant --yes            (no questions: for scripts)\n\nEach tool is shown with its description before it is pinned. A tool whose\ndescription fails the checks (injection scanner, length, control characters)\nis not pinned unless --allow-flagged names it."
    )]
    Pin(pin::PinArgs),
    /// Show an agent's MCP servers, how each is reached, its tools and
    /// whether they are pinned.
    #[command(after_help = "Example:\n  bulwark mcp list assistant")]
    List(list::ListArgs),
    /// Serve the agent's granted tools to an MCP client over stdin/stdout
    /// (every call through the door, audited; approvals asked through the
    /// client).
    #[command(
        after_help = "Example (an MCP client's server entry):\n  {\"command\": \"bulwark\", \"args\": [\"mcp\", \"serve\", \"assistant\"]}\n\nOver HTTP, `bulwark serve` offers the same at /mcp to users in access.toml."
    )]
    Serve(serve::ServeArgs),
}

pub async fn mcp(home: &Home, command: McpCommand) -> Result<(), Failure> {
    match command {
        McpCommand::Pin(args) => pin::pin(home, args).await,
        McpCommand::List(args) => list::list(home, args).await,
        McpCommand::Serve(args) => serve::serve(home, args).await,
    }
}
