//! The accept loop: each TCP connection gets a slot in the connection
//! table ([`crate::conns`]) and is served by hyper's HTTP/1 server with a
//! header read timeout, which `axum::serve` does not expose.
//!
//! hyper's header timeout starts whenever the connection waits for a
//! request head: right after accept, and again after each response of a
//! kept-alive connection. So a client that connects and sends nothing, one
//! that sends a request slowly (slowloris), and an idle keep-alive
//! connection are all closed after [`ConnectionLimits::header_timeout`].
//! WebSocket upgrades leave hyper's control once switched; they are bounded
//! by their own idle timeout and keep their connection slot while open.
//!
//! Also here: raising the open-file limit at start ([`raise_fd_limit`]).

use crate::app::AppState;
use crate::config::ConnectionLimits;
use crate::conns::ConnHandle;
use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tower::ServiceExt;

/// How long open connections get to finish their request at shutdown.
const DRAIN: Duration = Duration::from_secs(10);

/// The client address the request is attributed to (after
/// [`crate::proxy`]), set by the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub std::net::IpAddr);

/// Accepts and serves connections until `shutdown` completes; then asks
/// each connection to finish its request and waits (at most [`DRAIN`]).
pub(crate) async fn accept_loop(
    listener: TcpListener,
    state: AppState,
    app: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let limits = state.config().limits.connections;
    let tracker = state.conns().clone();
    let (stop_tx, stop_rx) = watch::channel(false);
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // EMFILE and friends: wait instead of spinning. Errors of
                    // one connection (reset before accept) are not worth it.
                    if !is_connection_error(&error) {
                        tracing::error!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let trusted = state.config().trusted_proxies.as_slice();
        let exempt = crate::proxy::is_trusted(peer.ip(), trusted);
        let entry = match tracker.admit(peer.ip(), exempt) {
            Ok(entry) => entry,
            Err(why) => {
                tracing::debug!(peer = %peer.ip(), ?why, "connection refused");
                continue;
            }
        };
        // Without TCP_NODELAY, a turn's first frame waits behind the
        // `accepted` frame for the client's delayed ACK (~40 ms on Linux).
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let app = app.clone();
        let handle = ConnHandle(entry.clone());
        let proxies = state.config().trusted_proxies.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            let client = crate::proxy::client_addr(peer.ip(), req.headers(), &proxies);
            let ext = req.extensions_mut();
            ext.insert(ConnectInfo(peer));
            ext.insert(ClientAddr(client));
            ext.insert(handle.clone());
            app.clone().oneshot(req.map(axum::body::Body::new))
        });
        let mut stop = stop_rx.clone();
        let alive = alive_tx.clone();
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(tcp), service)
                .with_upgrades();
            tokio::pin!(conn);
            tokio::select! {
                served = conn.as_mut() => log_end(served),
                _ = entry.evicted() => {
                    tracing::debug!(peer = %peer.ip(), "pending connection closed to make room");
                }
                _ = crate::app::stopped(&mut stop) => {
                    conn.as_mut().graceful_shutdown();
                    if let Ok(served) = tokio::time::timeout(DRAIN, conn.as_mut()).await {
                        log_end(served);
                    }
                }
            }
            drop(alive);
        });
    }
    state.shutdown();
    stop_tx.send_replace(true);
    drop(alive_tx);
    let _ = tokio::time::timeout(DRAIN + Duration::from_secs(1), alive_rx.recv()).await;
}

fn log_end(served: Result<(), hyper::Error>) {
    if let Err(error) = served {
        // Timeouts and resets are the client's business.
        tracing::debug!(%error, "connection ended with an error");
    }
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// The open-file limit could not be made large enough.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bulwark serve needs {needed} open files ({max} connections + {reserved} for workers, the store and logs) but the limit is {limit}: raise it (`ulimit -n {needed}`, or LimitNOFILE= in a systemd unit) or lower --max-connections to at most {fits}"
)]
pub struct FdLimitError {
    pub needed: u64,
    pub max: usize,
    pub reserved: u64,
    pub limit: u64,
    pub fits: u64,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the limit
/// now in force, or why it is below what `limits` need.
pub fn raise_fd_limit(limits: &ConnectionLimits) -> Result<u64, FdLimitError> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut current = getrlimit(Resource::Nofile);
    let soft = current.current.unwrap_or(u64::MAX);
    let hard = current.maximum.unwrap_or(u64::MAX);
    let mut effective = soft;
    if soft < hard {
        current.current = current.maximum;
        match setrlimit(Resource::Nofile, current) {
            Ok(()) => effective = hard,
            Err(error) => tracing::warn!(%error, soft, hard, "cannot raise the open-file limit"),
        }
    }
    check_fd_limit(limits, effective).map(|()| effective)
}

/// Whether `limit` open files are enough for `limits`.
pub fn check_fd_limit(limits: &ConnectionLimits, limit: u64) -> Result<(), FdLimitError> {
    let needed = limits.fds_needed();
    if limit >= needed {
        return Ok(());
    }
    Err(FdLimitError {
        needed,
        max: limits.max,
        reserved: ConnectionLimits::RESERVED_FDS,
        limit,
        fits: limit.saturating_sub(ConnectionLimits::RESERVED_FDS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_low_fd_limit_is_refused_with_the_numbers_and_the_fix() {
        let limits = ConnectionLimits {
            max: 4096,
            ..ConnectionLimits::default()
        };
        assert!(check_fd_limit(&limits, 1 << 20).is_ok());
        let err = check_fd_limit(&limits, 1024).unwrap_err().to_string();
        assert!(err.contains("4608") && err.contains("1024"), "{err}");
        assert!(
            err.contains("ulimit -n") && err.contains("at most 512"),
            "{err}"
        );
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_limit() {
        use rustix::process::{Resource, getrlimit};
        let hard = getrlimit(Resource::Nofile).maximum.unwrap_or(u64::MAX);
        let small = ConnectionLimits {
            max: 1,
            ..ConnectionLimits::default()
        };
        assert_eq!(raise_fd_limit(&small), Ok(hard));
        assert_eq!(
            getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX),
            hard
        );
    }
}
