//! The witness crate's one integration-test binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/codec.rs"]
mod codec;
#[path = "all/common.rs"]
mod common;
#[path = "all/http.rs"]
mod http;
#[path = "all/state_machine.rs"]
mod state_machine;
