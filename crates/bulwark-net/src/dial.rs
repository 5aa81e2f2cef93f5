//! Opening the TCP connection, and checking whom it reached.
//!
//! The address check that matters is the one made on the socket actually
//! opened: after `connect` and before a single TLS or HTTP byte is written,
//! the socket's peer address must be the address that was checked and must
//! itself pass the special-purpose table. A dialer that lands somewhere else
//! (a misbehaving proxy, NAT trickery, or a bug in a custom [`Dialer`])
//! is caught here rather than trusted.

use std::io;
use std::net::SocketAddr;

use futures_util::future::BoxFuture;
use tokio::net::TcpStream;

/// Opens TCP connections. Production uses [`TcpDialer`]; tests substitute
/// dialers that record or redirect, to show that nothing forbidden is ever
/// dialled and that the peer check catches a socket that lands elsewhere.
pub trait Dialer: Send + Sync + std::fmt::Debug {
    fn dial(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>>;
}

/// Plain `connect(2)` to the given address; no name resolution, no proxy.
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpDialer;

impl Dialer for TcpDialer {
    fn dial(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>> {
        Box::pin(async move {
            let stream = TcpStream::connect(addr).await?;
            // Small requests, answered once: no Nagle delay.
            stream.set_nodelay(true)?;
            Ok(stream)
        })
    }
}
