//! The crate's one integration-test binary: each file beside this one is a
//! module of it (a binary per file linked the whole dependency tree again).

mod capability;
mod config_errors;
mod credentials;
mod exec_policy;
mod layering;
mod path_vectors;
mod spawn;
