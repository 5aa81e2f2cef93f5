//! A session as an MCP tool host: the door behind `bulwark mcp serve` and
//! the `/mcp` endpoint of `bulwark serve`.
//!
//! (Skeleton: the MCP-server helper builds this.)
