//! The protocol crate's one integration-test binary.

#[path = "all/frame.rs"]
mod frame;
#[path = "all/frame_props.rs"]
mod frame_props;
