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
//!
//! `https://` in absolute form is refused (clients tunnel it with CONNECT),
//! as is any other request form. A program holding a secret key
//! ([`ProxyConfig::held_keys`]) that no credential grant sends anywhere can
//! open no tunnel at all: nothing inside a tunnel can be inspected.
//!
//! Bounds: at most `max_connections` connections (tunnels included) at
//! once, the excess answered `503`; a request head of at most
//! `max_head_bytes`, read within `header_timeout`; a connection or tunnel
//! with no byte either way for `idle_timeout` is closed. Each connection
//! is its own task, so one that fails or panics never stops the listener.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};

use crate::{CallContext, CredentialUse, NetError, SafeHttp};

mod serve;
mod splice;

/// How a request reached the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyRequestKind {
    Connect,
    Forward,
    /// A connection that carried no request the proxy could act on: over
    /// `max_connections`, a head too large or too slow, bytes that are not
    /// HTTP. `host` is empty and `port` 0.
    NoRequest,
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
    /// From the program (request body, or tunnel bytes towards the host).
    pub bytes_up: u64,
    /// To the program (response body, or tunnel bytes from the host).
    pub bytes_down: u64,
    /// Credentials injected into (or withheld from) a forwarded request.
    pub credentials: Vec<CredentialUse>,
}

/// Receives every decision the proxy makes. Called on the connection's
/// task: keep it quick (record and return).
pub trait ProxyObserver: Send + Sync {
    fn observe(&self, event: ProxyEvent);
}

/// Bounds on the proxy.
#[derive(Debug, Clone, Copy)]
pub struct ProxyLimits {
    /// Connections (and so tunnels) open at once; more are answered 503.
    pub max_connections: usize,
    /// Largest request head (request line and headers); at least 8 KiB is
    /// used whatever is set (the HTTP parser's minimum buffer).
    pub max_head_bytes: usize,
    /// A request head must arrive whole within this (slowloris).
    pub header_timeout: Duration,
    /// A tunnel or connection idle this long is closed.
    pub idle_timeout: Duration,
}

impl Default for ProxyLimits {
    fn default() -> Self {
        Self {
            max_connections: 64,
            max_head_bytes: 64 * 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// What the proxy applies to each request.
pub struct ProxyConfig {
    /// The client whose policy (allowlist, internal services, resolver,
    /// dialer, credentials, secret store) every request meets. Its
    /// `max_body_bytes` also bounds a forwarded request's body.
    pub http: Arc<SafeHttp>,
    /// Who the requests are for (`mcp:<server>`, `shell`): credential
    /// grants are matched against it.
    pub context: CallContext,
    /// Secret keys the sandboxed program holds in its environment: a
    /// tunnel may only go to hosts a grant of each sends it to (for
    /// `context.tool`). A held key with no grant refuses every tunnel.
    pub held_keys: Vec<String>,
    pub limits: ProxyLimits,
}

/// A running proxy. Dropping it stops accepting, closes open connections
/// and tunnels and removes the socket file.
pub struct EgressProxy {
    path: PathBuf,
    /// The socket file's inode, so drop removes only the file it made.
    inode: (u64, u64),
    shutdown: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
}

impl EgressProxy {
    /// Binds a Unix socket at `path` (which must not exist; its directory
    /// should be private to the process) with mode 0600 and serves it on
    /// the current tokio runtime.
    pub fn bind(
        path: &Path,
        config: ProxyConfig,
        observer: Arc<dyn ProxyObserver>,
    ) -> Result<EgressProxy, NetError> {
        let fail = |detail: String| NetError::Listen {
            path: path.display().to_string(),
            detail,
        };
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| fail("the proxy must be started inside a tokio runtime".into()))?;
        if path.symlink_metadata().is_ok() {
            return Err(fail(
                "the path already exists; remove it or choose another".into(),
            ));
        }
        let std_listener = std::os::unix::net::UnixListener::bind(path)
            .map_err(|e| fail(format!("could not bind: {e}")))?;
        let ready = (|| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            std_listener.set_nonblocking(true)?;
            let meta = path.symlink_metadata()?;
            Ok::<_, std::io::Error>((meta.dev(), meta.ino()))
        })();
        let inode = match ready {
            Ok(i) => i,
            Err(e) => {
                let _ = std::fs::remove_file(path);
                return Err(fail(format!("could not prepare the socket: {e}")));
            }
        };
        let listener = {
            let _guard = runtime.enter();
            tokio::net::UnixListener::from_std(std_listener)
        };
        let listener = match listener {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_file(path);
                return Err(fail(format!("could not register the socket: {e}")));
            }
        };
        let (shutdown, stop) = watch::channel(false);
        let max = config.limits.max_connections.max(1);
        let state = Arc::new(serve::State {
            config,
            observer,
            slots: Arc::new(Semaphore::new(max)),
            stop,
        });
        let accept = runtime.spawn(serve::accept_loop(listener, state));
        Ok(EgressProxy {
            path: path.to_path_buf(),
            inode,
            shutdown,
            accept,
        })
    }

    pub fn socket_path(&self) -> &Path {
        &self.path
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        self.accept.abort();
        let ours = self
            .path
            .symlink_metadata()
            .is_ok_and(|m| (m.dev(), m.ino()) == self.inode);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
