//! The worker's end of the IPC pipes.
//!
//! A worker's stdin and stdout *are* the protocol. Two things could break
//! that: anything printing to stdout (a library's banner, a stray debug
//! line) would corrupt the frame stream, and a child process inheriting
//! fd 0 could read commands meant for the worker. [`take_ipc`] therefore
//! moves both pipes to new close-on-exec descriptors, then points fd 0 at
//! `/dev/null` and fd 1 at stderr (which the supervisor logs). Afterwards
//! nothing but the worker's framed writer reaches the server, and no child
//! inherits either pipe.

use std::io::Write;
use std::os::fd::OwnedFd;
use tokio::net::unix::pipe;

/// The lowest descriptor number the moved pipes may take (above 0-2).
const FIRST_PRIVATE_FD: i32 = 3;

/// The pipes, off the standard descriptors. Tokio pipe types, not
/// `tokio::fs::File`: a file hands every read and write to the blocking
/// thread pool, which cost the worker about 25 µs of CPU per relayed event;
/// a non-blocking pipe is one system call on the runtime's own thread.
pub struct IpcPipes {
    /// Commands from the supervisor (was stdin).
    pub commands: pipe::Receiver,
    /// Events to the supervisor (was stdout).
    pub events: pipe::Sender,
}

/// Takes the IPC pipes off fds 0 and 1 (see the module docs). Call once,
/// at the start of worker mode, on a tokio runtime. Fails unless both are
/// pipes: a worker is started by `bulwark serve`, not from a terminal.
pub fn take_ipc() -> std::io::Result<IpcPipes> {
    let _ = std::io::stdout().flush();
    let commands: OwnedFd = rustix::io::fcntl_dupfd_cloexec(std::io::stdin(), FIRST_PRIVATE_FD)?;
    let events: OwnedFd = rustix::io::fcntl_dupfd_cloexec(std::io::stdout(), FIRST_PRIVATE_FD)?;
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    rustix::stdio::dup2_stdout(std::io::stderr())?;
    Ok(IpcPipes {
        commands: pipe::Receiver::from_owned_fd(commands)?,
        events: pipe::Sender::from_owned_fd(events)?,
    })
}
