//! The `bulwark worker` process as a library: one process runs one
//! conversation for `bulwark serve` and speaks [`bulwark_protocol`] over
//! its stdin and stdout. The `bulwark` binary parses the hidden `worker`
//! subcommand ([`WorkerArgs`]) and hands it to [`run_main`], as it hands
//! `__sandbox-exec` to `bulwark_sandbox::helper_main`.
//!
//! * [`confine`]: the worker confines itself to its user's and agent's
//!   data while it has one thread.
//! * `conversation` (private): the loop that reads commands, opens the
//!   session through the kernel's `SessionFactory` and runs its turns.
//! * [`broker`]: the store, every operation a request to the server;
//!   [`records`]: that store as the session's records.
//! * `tools` (private): a tools-only worker's session (serve's `/mcp`):
//!   `ListTools` and `CallTool` through the door, no model.
//! * [`stdio`]: takes the IPC pipes off fds 0 and 1, so nothing but the
//!   framed writer reaches the server and no child inherits either pipe.
//! * [`io`]: reads and writes frames over those pipes.
//!
//! The server's side (spawning, capping and reaping workers, brokering the
//! store) lives in `bulwark-server`; the wire types in `bulwark-protocol`.
#![forbid(unsafe_code)]

pub mod broker;
pub mod confine;
mod conversation;
pub mod error;
pub mod io;
pub mod records;
pub mod stdio;
mod tools;

pub use broker::BrokerClient;
pub use confine::{WorkerArgs, WorkerStart, confine_worker};
pub use error::WorkerError;
pub use records::WorkerRecords;

use bulwark_kernel::Home;

/// Runs worker mode to its end and returns the process's exit status: 0
/// when the conversation ended normally, else the status of the
/// [`WorkerError`] (printed on stderr as `error: ...`, which the
/// supervisor logs).
///
/// Must be called while the process has one thread (before any async
/// runtime exists): it confines the process first, then builds the
/// runtime whose threads inherit the confinement.
pub fn run_main(home: &Home, args: &WorkerArgs) -> u8 {
    match run(home, args) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("error: {}", err.report());
            err.exit_code()
        }
    }
}

fn run(home: &Home, args: &WorkerArgs) -> Result<(), WorkerError> {
    // Landlock binds the calling thread and those it starts later, so the
    // runtime's threads are built inside the confinement.
    let start = confine_worker(home, args);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(WorkerError::Runtime)?;
    let result = runtime.block_on(conversation::worker(home, &start));
    // Nothing is left to wait for: the conversation's records went to the
    // server before `worker` returned.
    runtime.shutdown_background();
    result
}
