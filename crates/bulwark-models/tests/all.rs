//! The crate's one integration-test binary: each file beside this one is a
//! module of it (a binary per file linked the whole dependency tree again).

mod support;

mod fetch_order;
mod fetch_sources;
