//! The agent loop, the one door every tool call passes, built-in tools and approvals.
#![forbid(unsafe_code)]
