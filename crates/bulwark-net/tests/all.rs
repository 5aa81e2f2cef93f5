//! The crate's one integration-test binary: each file beside this one is a
//! module of it (a binary per file linked the whole dependency tree again).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod address_vectors;
mod connect;
mod credentials;
mod http;
mod limits;
mod never_dialled;
mod proxy;
mod redirects;
