//! The one error type of this crate: what went wrong, with which server,
//! and what to do.

/// Why talking to an MCP server failed. Messages name the server and never
/// carry more than a bounded excerpt of what it sent.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server could not be started or reached.
    #[error("MCP server `{server}` could not be started: {detail}")]
    Launch { server: String, detail: String },
    /// The server broke the protocol (malformed or oversized JSON-RPC, an
    /// answer to a request never sent, a version neither side speaks).
    #[error("MCP server `{server}` broke the protocol: {detail}")]
    Protocol { server: String, detail: String },
    /// The server did not answer in time; the request was cancelled.
    #[error("MCP server `{server}` did not answer within {seconds} s")]
    Timeout { server: String, seconds: u64 },
    /// A message was larger than the bound.
    #[error("MCP server `{server}` sent a message of more than {limit} bytes; it was dropped")]
    TooLarge { server: String, limit: usize },
    /// The server answered with a JSON-RPC error.
    #[error("MCP server `{server}` refused the request: {detail}")]
    Server { server: String, detail: String },
    /// The connection is gone (the process exited, the stream closed).
    #[error("MCP server `{server}` closed the connection{detail}")]
    Closed { server: String, detail: String },
    /// A pin file could not be read or written.
    #[error("MCP pins at {path}: {detail}")]
    Pins { path: String, detail: String },
}
