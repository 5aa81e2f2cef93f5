//! An opaque byte stream to `host:port` under SafeHttp's policy: what the
//! egress proxy dials for a `CONNECT`.
//!
//! The host and port are turned into an `http://host:port/` URL and meet
//! exactly the per-hop decision of a request ([`SafeHttp::decide`]: the
//! WHATWG host normalisation, the allowlist with ports, the address table,
//! metadata names), then the same single checked lookup and the same dial
//! with its peer check (`transport.rs`). Nothing is copied from those paths,
//! so a tunnel can never be looser than a request.

use tokio::net::TcpStream;

use crate::check::Target;
use crate::{CallContext, NetError, SafeHttp, clip};

/// Characters that would change what the URL built from a host means (a
/// path, a query, userinfo, another port) or that no host name contains.
fn bad_host_char(c: char) -> bool {
    c.is_control()
        || c.is_whitespace()
        || matches!(
            c,
            '/' | '\\' | '?' | '#' | '@' | '%' | '<' | '>' | '^' | '|'
        )
}

impl SafeHttp {
    /// The pre-flight decision for a tunnel to `host:port`, without any
    /// lookup: returns the host as the policy sees it (the `url` crate's
    /// normalised form: lowercase, punycode, IPv4 in dotted form, IPv6 in
    /// brackets) and the port.
    pub fn check_tunnel(&self, host: &str, port: u16) -> Result<(String, u16), NetError> {
        let target = self.tunnel_target(host, port)?;
        Ok((target.host, target.port))
    }

    /// Open a TCP connection to `host:port` for `ctx`, under the full policy:
    /// the decision of [`SafeHttp::check_tunnel`]; then every key in
    /// `held_keys` (secrets the caller holds and could send inside the
    /// opaque stream) must have a credential grant that sends it to this
    /// host and port for `ctx.tool` (one usable without a human approval),
    /// or the tunnel is refused; then one lookup with every answer checked,
    /// a dial through the client's [`Dialer`](crate::Dialer), and the
    /// connected peer checked before the stream is returned. A held key with
    /// no grant at all (or a client without credentials) refuses every
    /// tunnel. Bounded by the client's `total_timeout`.
    pub async fn open_tunnel(
        &self,
        ctx: &CallContext,
        host: &str,
        port: u16,
        held_keys: &[String],
    ) -> Result<TcpStream, NetError> {
        let target = self.tunnel_target(host, port)?;
        for key in held_keys {
            let granted = self
                .credentials
                .as_ref()
                .is_some_and(|c| c.sends_key(ctx, key, &target.host, target.port));
            if !granted {
                return Err(NetError::HeldKey {
                    host: format!("{}:{}", target.host, target.port),
                    key: key.chars().take(64).collect(),
                    tool: ctx.tool.chars().take(64).collect(),
                });
            }
        }
        let url = clip(target.url.as_str());
        let open = async {
            let addrs = self.addresses(&target).await?;
            self.connect(&target, &addrs).await
        };
        tokio::time::timeout(self.limits.total_timeout, open)
            .await
            .unwrap_or(Err(NetError::Timeout { url }))
    }

    fn tunnel_target(&self, host: &str, port: u16) -> Result<Target, NetError> {
        let shown = || format!("{}:{port}", clip(host));
        if host.is_empty() || host.chars().any(bad_host_char) {
            return Err(NetError::InvalidUrl {
                url: shown(),
                detail: "not a host name or IP address".into(),
            });
        }
        if port == 0 {
            return Err(NetError::InvalidUrl {
                url: shown(),
                detail: "port 0 cannot be connected to".into(),
            });
        }
        let url = crate::parse_url(&format!("http://{host}:{port}/"))?;
        // The host must be the whole authority: anything the parser read
        // as a path, query or other port means `host` was not a host.
        if url.path() != "/" || url.query().is_some() || url.port_or_known_default() != Some(port) {
            return Err(NetError::InvalidUrl {
                url: shown(),
                detail: "not a host name or IP address".into(),
            });
        }
        self.decide(url)
    }
}
