//! The Model Context Protocol both ways, on the maintained SDK (`rmcp`).
//!
//! * [`client`]: a bounded client for one server, stdio (a process in the
//!   sandbox, see [`client::Launch`]) or Streamable HTTP (through the
//!   session's egress client). It speaks 2026-07-28 and falls back to
//!   2025-11-25; every message it accepts is size- and time-bounded, so a
//!   server that floods, hangs or answers garbage costs one error.
//! * [`pins`]: what an operator approved of a server's tools (name,
//!   description, schema digests), and the comparison a live tool list must
//!   pass before any of its tools is called (rug pulls).
//! * [`vet`]: checks of a tool's description and name before they are
//!   shown to a model or pinned (the injection scanner, length, control
//!   characters, the name a model sees).
//! * [`server`]: Bulwark as an MCP server: a [`server::ToolHost`] (the
//!   door, in the binary) exposed over stdio or Streamable HTTP, with
//!   approvals asked through the client (elicitation, or MRTR input
//!   requests on 2026-07-28) or refused when it cannot answer.
//!
//! The kernel never sees rmcp types: it gets [`client::LiveTool`],
//! [`client::CallOutcome`] and [`McpError`].
#![forbid(unsafe_code)]

pub mod client;
mod error;
mod http_transport;
pub mod pins;
pub mod server;
pub mod vet;

pub use error::McpError;
