//! The crate's one integration-test binary: each file beside this one is a
//! module of it (a binary per file linked the whole dependency tree again).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod capability;
mod config_errors;
mod credentials;
mod exec_policy;
mod injection;
mod layering;
mod mcp;
mod path_vectors;
mod spawn;
mod taint_rules;
mod taint_spawn;
mod value_taint;
