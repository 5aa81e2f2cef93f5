//! The worker supervisor and the store broker (`bulwark_server::workers`),
//! driven against `bulwark-fake-worker` (src/bin/fake_worker.rs) and a real
//! store.

mod broker;
mod common;
mod environment;
mod relay_and_lock;
mod supervisor;
mod tools;
