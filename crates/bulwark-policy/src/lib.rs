//! Capabilities, manifests, config layering and the loop guard: pure policy, no I/O.
#![forbid(unsafe_code)]

mod taint;

pub use taint::TaintLabel;
