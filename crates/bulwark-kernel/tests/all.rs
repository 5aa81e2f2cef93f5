//! The crate's one integration-test binary: each file beside this one is a
//! module of it (a binary per file linked the whole dependency tree again).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod agent_loop;
mod credentials;
mod credits;
mod credits_concurrency;
mod dojo;
mod door;
mod exec;
mod interrupt;
mod mcp;
mod mcp_host;
mod path_choices;
mod scope;
mod spawn_paths;
mod taint_seams;
mod traversal_vectors;
mod web;
