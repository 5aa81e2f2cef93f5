//! One pinned tool of an MCP server as a door tool: domain `mcp:<server>`,
//! operation = the server's tool name, results labelled `mcp`.
//!
//! (Skeleton: the kernel helper builds this.)
