//! Test fixtures and helpers that the integration tests of several Bulwark
//! crates share, kept here once instead of copied into each crate's tests.
//!
//! Only ever a dev-dependency, and it depends on no bulwark crate: any
//! crate's tests can use it without a dependency cycle. Being test code, it
//! panics on a failed setup step with what failed.

pub mod home;
pub mod http;
pub mod process;
pub mod sse;
