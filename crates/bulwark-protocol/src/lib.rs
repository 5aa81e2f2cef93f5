//! The wire between `bulwark serve` and a `bulwark worker` process: the
//! types are the schema, and both ends link this one crate, so they cannot
//! drift apart.
//!
//! * [`protocol`]: the commands (server → worker) and events (worker →
//!   server), every field bounded and checked on receipt.
//! * [`frame`]: length-prefixed JSON frames with a hard size limit, and
//!   the codecs that refuse anything else.
//! * [`store_ipc`]: the store requests a worker may make and their replies
//!   (the server performs them; a worker never opens the database).
//!
//! Types and codecs only: spawning, supervising and brokering live in
//! `bulwark-server`, the worker's side of the pipes in `bulwark-worker`.
#![forbid(unsafe_code)]

pub mod frame;
pub mod protocol;
pub mod store_ipc;

pub use frame::{FrameCodec, FrameError, MAX_FRAME_BYTES};
