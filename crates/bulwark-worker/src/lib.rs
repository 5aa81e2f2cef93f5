//! One worker process per active conversation, and the wire between it and
//! the server.
//!
//! * [`protocol`]: the commands and events (the type is the schema).
//! * [`frame`]: length-prefixed JSON frames with a hard size limit.
//! * [`relay`]: what a worker may say to the server, rebuilt field by field.
//! * [`Supervisor`]: spawns, caps, serializes and reaps workers.
//! * [`stdio`], [`io`]: the worker's side of the pipes.
//! * [`store_ipc`], [`StoreBroker`]: the database, brokered by the server
//!   (a worker never opens it).
#![forbid(unsafe_code)]

mod broker;
mod child;
pub mod env;
pub mod frame;
mod handle;
pub mod io;
pub mod protocol;
mod pump;
pub mod relay;
pub mod stdio;
pub mod store_ipc;
pub mod supervisor;
mod turns;

pub use broker::{
    Broker, BrokerScope, CreditLimits, DatabaseBroker, MAX_OPEN_HOLDS, StoreBroker, key_prefix,
};
pub use env::{EnvError, WorkerEnv};
pub use frame::{FrameCodec, FrameError, MAX_FRAME_BYTES};
pub use relay::relay;
pub use supervisor::{
    CapScope, Conversation, EndReason, OpenRequest, Supervisor, SupervisorConfig, SupervisorError,
    SupervisorStats, WorkerHandle,
};
