//! The worker supervisor and the store broker (`bulwark_server::workers`),
//! driven against `bulwark-fake-worker` (src/bin/fake_worker.rs) and a real
//! store.

#[path = "workers/broker.rs"]
mod broker;
#[path = "workers/common.rs"]
mod common;
#[path = "workers/environment.rs"]
mod environment;
#[path = "workers/relay_and_lock.rs"]
mod relay_and_lock;
#[path = "workers/supervisor.rs"]
mod supervisor;
