//! One worker process per active conversation, seen from the server: the
//! supervisor that spawns, caps, serializes and reaps workers, and the
//! store broker that answers their store requests. The wire itself is
//! `bulwark_protocol`; the worker's side of it is `bulwark-worker`.
//!
//! * [`Supervisor`]: spawns, caps, serializes and reaps workers.
//! * [`relay`]: what a worker may say to the server, rebuilt field by field.
//! * [`WorkerEnv`]: the allowlisted environment a worker starts with.
//! * [`StoreBroker`]: the database, brokered (a worker never opens it).

mod broker;
mod child;
pub mod env;
mod handle;
mod pump;
pub mod relay;
pub mod supervisor;
mod turns;

pub use broker::{
    Broker, BrokerScope, CreditLimits, DatabaseBroker, MAX_OPEN_HOLDS, StoreBroker, key_prefix,
};
pub use env::{EnvError, WorkerEnv};
pub use relay::relay;
pub use supervisor::{
    CapScope, Conversation, EndReason, OpenRequest, Supervisor, SupervisorConfig, SupervisorError,
    SupervisorStats, WorkerHandle,
};
