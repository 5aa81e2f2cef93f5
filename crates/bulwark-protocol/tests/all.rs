//! The protocol crate's one integration-test binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/frame.rs"]
mod frame;
#[path = "all/frame_props.rs"]
mod frame_props;
#[path = "all/provenance.rs"]
mod provenance;
#[path = "all/tools.rs"]
mod tools;
