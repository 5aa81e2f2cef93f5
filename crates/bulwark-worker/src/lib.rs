//! The worker's side of the wire: one `bulwark worker` process runs one
//! conversation and speaks [`bulwark_protocol`] over its stdin and stdout.
//!
//! * [`stdio`]: takes the IPC pipes off fds 0 and 1, so nothing but the
//!   framed writer reaches the server and no child inherits either pipe.
//! * [`io`]: reads and writes frames over those pipes.
//!
//! The server's side (spawning, capping and reaping workers, brokering the
//! store) lives in `bulwark-server`; the wire types in `bulwark-protocol`.
#![forbid(unsafe_code)]

pub mod io;
pub mod stdio;
