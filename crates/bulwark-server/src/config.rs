//! What `bulwark serve` listens on, which names and origins it answers, and
//! its limits.
//!
//! The defaults are for a server on loopback: the Host allowlist is what
//! stops DNS rebinding (a hostile page whose name resolves to 127.0.0.1
//! still sends its own name as Host), and the Origin allowlist is what stops
//! a cross-site page from opening a WebSocket with the user's browser.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The default listen address: loopback only.
pub const DEFAULT_BIND: SocketAddr =
    SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8420);

/// Configuration of one server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen.
    pub bind: SocketAddr,
    /// Accepted `Host` values (`name:port`, or `name` alone for the
    /// scheme's default port), compared case-insensitively. Empty: the
    /// bind address (when it is not a wildcard), `localhost`, `127.0.0.1`
    /// and `[::1]`, each with the port actually bound.
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` values (`scheme://host[:port]`). Empty: the
    /// scheme of [`tls`](Self::tls) with each allowed host.
    pub allowed_origins: Vec<String>,
    /// Whether clients reach this server over https (directly or through a
    /// terminating proxy). Only then are HSTS and
    /// `upgrade-insecure-requests` sent: on plain http they would break
    /// the loopback page and its `ws://` socket.
    pub tls: bool,
    /// Reverse proxies (`--trust-proxy CIDR`) whose `Forwarded` /
    /// `X-Forwarded-For` headers name the client. Empty: those headers are
    /// ignored and the client is the TCP peer. See [`crate::proxy`].
    pub trusted_proxies: Vec<ipnet::IpNet>,
    pub limits: Limits,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self::new(DEFAULT_BIND)
    }
}

impl ServerConfig {
    /// Defaults for `bind`.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            tls: false,
            trusted_proxies: Vec::new(),
            limits: Limits::default(),
        }
    }

    /// The Host and Origin allowlists for a server bound to `bound` (the
    /// real address, which differs from `bind` when its port was 0).
    pub fn host_policy(&self, bound: SocketAddr) -> HostPolicy {
        let hosts = if self.allowed_hosts.is_empty() {
            default_hosts(bound, self.tls)
        } else {
            self.allowed_hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .collect()
        };
        let origins = if self.allowed_origins.is_empty() {
            let scheme = if self.tls { "https" } else { "http" };
            hosts.iter().map(|h| format!("{scheme}://{h}")).collect()
        } else {
            self.allowed_origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .collect()
        };
        HostPolicy { hosts, origins }
    }
}

/// The names this server answers to, resolved for a bound port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPolicy {
    /// Lowercase `host[:port]`.
    pub hosts: Vec<String>,
    /// Lowercase `scheme://host[:port]`.
    pub origins: Vec<String>,
}

impl HostPolicy {
    pub fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim();
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim();
        self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin))
    }
}

fn default_hosts(bound: SocketAddr, tls: bool) -> Vec<String> {
    let port = bound.port();
    let mut names: Vec<String> = Vec::new();
    if !bound.ip().is_unspecified() {
        names.push(match bound.ip() {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        });
    }
    for name in ["localhost", "127.0.0.1", "[::1]"] {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    let default_port = if tls { 443 } else { 80 };
    let mut hosts = Vec::new();
    for name in names {
        hosts.push(format!("{name}:{port}"));
        if port == default_port {
            hosts.push(name);
        }
    }
    hosts
}

/// A GCRA budget: `per_minute` cost units refill over a minute, at most
/// `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub per_minute: u32,
    pub burst: u32,
}

/// What each operation costs against a [`Rate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    pub health: u32,
    /// One REST read.
    pub read: u32,
    /// Opening (or resuming) a conversation.
    pub open: u32,
    /// Sending a message.
    pub message: u32,
    /// Any other WebSocket frame (ping, interrupt, approval, a malformed one).
    pub frame: u32,
    /// One MCP request (`POST /mcp/{agent}`): a tool list, a call, an
    /// `initialize` or a notification alike.
    pub mcp: u32,
}

/// Bounds on everything a client can make the server hold or do.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest REST request body.
    pub rest_body_bytes: usize,
    /// Largest MCP request body (`/mcp`); at most `rest_body_bytes`, which
    /// the router enforces for every route.
    pub mcp_body_bytes: usize,
    /// Largest WebSocket message the transport accepts. A bigger one
    /// closes the connection (1009): its bytes cannot be skipped safely.
    pub ws_transport_max_bytes: usize,
    /// Largest text frame the server parses; a bigger one below the
    /// transport limit gets an `error` frame and the connection stays.
    pub ws_frame_max_bytes: usize,
    /// A connection with no client frame for this long is closed.
    pub ws_idle_timeout: Duration,
    /// Close after this many consecutive bad frames.
    pub ws_max_consecutive_errors: u32,
    /// Concurrent WebSocket connections per user (a user's
    /// `limits.max_connections` in access.toml overrides it).
    pub ws_connections_per_user: u32,
    /// How long a conversation with no subscribed connection is kept
    /// (its turn finishes and is buffered for a reconnect), then shut down.
    pub ws_detached_grace: Duration,
    /// How long opening a conversation may take.
    pub open_timeout: Duration,
    /// Replay buffer per live session: at most this many frames ...
    pub replay_frames: usize,
    /// ... and this many bytes of serialized frames.
    pub replay_bytes: usize,
    /// Per authenticated user (a user's `limits.requests_per_minute`
    /// overrides `per_minute`).
    pub user_rate: Rate,
    /// Per client IP, for every request including `/health`.
    pub ip_rate: Rate,
    /// Failed authentications per client network (the /24 of an IPv4
    /// address, the /64 of an IPv6 one) before every failing attempt from
    /// it is answered 429 until the budget refills. A valid token is never
    /// refused by this throttle.
    pub auth_failures: Rate,
    /// Failed authentications from all networks together (each network's
    /// failures count here only while within its own budget); once spent,
    /// every failing attempt is answered 429 until it refills.
    pub auth_failures_global: Rate,
    pub costs: Costs,
    /// Most sessions one listing returns.
    pub max_listed_sessions: usize,
    /// How often access.toml and the server secret are checked for changes.
    pub access_poll: Duration,
    /// Failed sign-ins are audited as one `auth_failure` record per client
    /// network and window of this length (never one per attempt).
    pub auth_failure_window: Duration,
    pub connections: ConnectionLimits,
}

/// Bounds on open TCP connections and on how long a client may take to
/// send a request (slowloris). See [`crate::conns`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open connections, all clients together (WebSockets included).
    pub max: usize,
    /// Connections that have not yet authenticated or asked for `/health`
    /// ("pending"). When full, the oldest pending connection is closed to
    /// make room, so `max - max_pending` slots stay for signed-in users.
    /// At most three quarters of `max` (a larger value is lowered to that).
    pub max_pending: usize,
    /// Open connections from one client address (a trusted proxy is exempt).
    pub per_address: usize,
    /// Time to send a request's headers, and the longest a kept-alive
    /// connection may sit between requests.
    pub header_timeout: Duration,
    /// Time to send a request's body.
    pub body_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max: 4096,
            max_pending: 1024,
            per_address: 256,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
        }
    }
}

impl ConnectionLimits {
    /// Descriptors kept for everything that is not a client connection:
    /// the listener, the store and audit files, pipes to workers, logs.
    pub const RESERVED_FDS: u64 = 512;

    /// The open-file limit these caps need.
    pub fn fds_needed(&self) -> u64 {
        self.max as u64 + Self::RESERVED_FDS
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            rest_body_bytes: 1 << 20,
            mcp_body_bytes: 1 << 20,
            ws_transport_max_bytes: 4 << 20,
            // 200,000 characters, each escaped as `\uXXXX` at worst, plus the envelope.
            ws_frame_max_bytes: bulwark_protocol::protocol::MAX_MESSAGE_CHARS * 6 + 4096,
            ws_idle_timeout: Duration::from_secs(300),
            ws_max_consecutive_errors: 50,
            ws_connections_per_user: 8,
            ws_detached_grace: Duration::from_secs(120),
            open_timeout: Duration::from_secs(120),
            replay_frames: 1024,
            replay_bytes: 8 << 20,
            user_rate: Rate {
                per_minute: 600,
                burst: 200,
            },
            ip_rate: Rate {
                per_minute: 1200,
                burst: 400,
            },
            auth_failures: Rate {
                per_minute: 10,
                burst: 10,
            },
            auth_failures_global: Rate {
                per_minute: 120,
                burst: 100,
            },
            costs: Costs {
                health: 1,
                read: 2,
                open: 20,
                message: 20,
                frame: 1,
                mcp: 4,
            },
            max_listed_sessions: 500,
            access_poll: Duration::from_millis(200),
            auth_failure_window: Duration::from_secs(60),
            connections: ConnectionLimits::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_hosts_carry_the_bound_port() {
        let c = ServerConfig::default();
        let p = c.host_policy("127.0.0.1:8420".parse().unwrap());
        assert_eq!(
            p.hosts,
            ["127.0.0.1:8420", "localhost:8420", "[::1]:8420"].map(String::from)
        );
        assert!(p.host_allowed("LOCALHOST:8420"));
        assert!(!p.host_allowed("localhost"));
        assert!(!p.host_allowed("evil.example:8420"));
        assert!(p.origin_allowed("http://localhost:8420"));
        assert!(!p.origin_allowed("https://localhost:8420"));
        assert!(!p.origin_allowed("null"));
    }

    #[test]
    fn wildcard_bind_is_not_a_host_name() {
        let c = ServerConfig::default();
        let p = c.host_policy("0.0.0.0:80".parse().unwrap());
        assert!(p.host_allowed("localhost") && p.host_allowed("localhost:80"));
        assert!(!p.host_allowed("0.0.0.0:80"));
        let v6 = c.host_policy("[::1]:9000".parse().unwrap());
        assert_eq!(v6.hosts[0], "[::1]:9000");
    }
}
