//! The crate's one integration-test binary: each directory beside this one
//! is a module of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server;
mod smoke {}
