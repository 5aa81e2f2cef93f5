//! The built-in tools. Each is one operation of a policy domain.

mod agents;
mod credits;
mod files;
pub(crate) mod mcp;
mod memory;
mod shell;
mod time;
pub(crate) mod web;

use crate::tool::Tool;
use std::sync::Arc;

/// Every built-in tool, in a stable order.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(files::FileRead::new()),
        Arc::new(files::FileWrite::new()),
        Arc::new(files::FileList::new()),
        Arc::new(files::FileEdit::new()),
        Arc::new(files::FileSearch::new()),
        Arc::new(shell::ShellExec::new()),
        Arc::new(web::WebFetch::new()),
        Arc::new(memory::MemoryRead::new()),
        Arc::new(memory::MemoryWrite::new()),
        Arc::new(memory::MemoryList::new()),
        Arc::new(time::TimeNow::new()),
        Arc::new(credits::CreditsBalance::new()),
        Arc::new(credits::TransferCredits::new()),
        Arc::new(agents::SpawnAgent::new()),
        Arc::new(agents::FundChild::new()),
        Arc::new(agents::MessageChild::new()),
        Arc::new(agents::RecallChild::new()),
        Arc::new(agents::ListChildren::new()),
    ]
}
