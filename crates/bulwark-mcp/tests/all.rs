//! The crate's one integration-test binary: each file or directory beside
//! this one is a module of it (a binary per file linked the whole
//! dependency tree again).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client;
mod pins;
mod server;
mod vet;
