//! A session's MCP servers: their pinned tools as door tools, and their
//! connections, started on first use and checked against the pins.
//!
//! (Skeleton: the kernel helper builds this.)
