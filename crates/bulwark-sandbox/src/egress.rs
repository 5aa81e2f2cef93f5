//! The sandbox's one way out: an egress proxy on a Unix socket.
//!
//! A command with `network = false` lives in an empty network namespace.
//! When its spec names an `egress_proxy` socket, the helper brings up
//! loopback in that namespace and relays TCP connections to
//! `127.0.0.1:`[`EGRESS_PROXY_PORT`] to the socket, so programs that
//! honour `HTTP_PROXY`/`HTTPS_PROXY` (curl, git, npm, pip, Python's
//! `httpx`, Node's `undici` with a proxy agent) reach exactly what the
//! proxy on the host allows, and nothing else: there is no route out of
//! the namespace, and the socket is the only host object it can connect to.

/// The loopback port inside the sandbox's network namespace that relays to
/// the egress proxy socket.
pub const EGRESS_PROXY_PORT: u16 = 3128;

/// The proxy URL the command's environment names.
pub fn egress_proxy_url() -> String {
    format!("http://127.0.0.1:{EGRESS_PROXY_PORT}")
}
