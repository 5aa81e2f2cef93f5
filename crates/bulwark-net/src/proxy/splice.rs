//! Byte counting and idle detection on the program's side of a
//! connection, and the tunnel splice that uses them.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// When bytes last moved, and how many, on one stream.
pub(super) struct Activity {
    start: Instant,
    /// Milliseconds after `start` of the last byte either way.
    last: AtomicU64,
    /// Read from the program.
    pub(super) up: AtomicU64,
    /// Written to the program.
    pub(super) down: AtomicU64,
    /// Requests being answered: the connection is busy, not idle, while
    /// SafeHttp (itself bounded by its timeouts) works on one.
    pub(super) busy: AtomicUsize,
}

impl Activity {
    pub(super) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            start: Instant::now(),
            last: AtomicU64::new(0),
            up: AtomicU64::new(0),
            down: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
        })
    }

    pub(super) fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last.load(Ordering::Relaxed))
    }

    /// Resolves once nothing has moved (and nothing was busy) for `idle`.
    pub(super) async fn idle(&self, idle: Duration) {
        loop {
            let deadline = self.last() + idle;
            tokio::time::sleep_until(deadline).await;
            if self.busy.load(Ordering::Relaxed) > 0 {
                self.touch();
                continue;
            }
            if self.last() + idle <= Instant::now() {
                return;
            }
        }
    }
}

/// A stream that records its traffic in an [`Activity`].
pub(super) struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Counted<S> {
    pub(super) fn new(inner: S, activity: Arc<Activity>) -> Self {
        Counted { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before);
        if n > 0 {
            self.activity.up.fetch_add(n as u64, Ordering::Relaxed);
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            self.activity.down.fetch_add(n as u64, Ordering::Relaxed);
            self.activity.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Copy both ways between the program and the host until either side
/// closes, nothing moves for `idle`, or `stop` fires.
pub(super) async fn splice<P, H>(
    program: P,
    mut host: H,
    idle: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> (u64, u64)
where
    P: AsyncRead + AsyncWrite + Unpin,
    H: AsyncRead + AsyncWrite + Unpin,
{
    let activity = Activity::new();
    activity.touch();
    let mut program = Counted::new(program, activity.clone());
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut program, &mut host) => {}
        _ = activity.idle(idle) => {}
        _ = stop.wait_for(|s| *s) => {}
    }
    (
        activity.up.load(Ordering::Relaxed),
        activity.down.load(Ordering::Relaxed),
    )
}
