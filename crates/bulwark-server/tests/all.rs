//! The crate's one integration-test binary: each file beside this one is a
//! module of it (a binary per file linked the whole dependency tree again).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod auth_matrix;
mod credits;
mod gate;
mod headers;
mod logs;
mod mcp;
mod rest;
mod workers;
mod ws;
mod ws_fuzz;
