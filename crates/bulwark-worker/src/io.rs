//! Reading and writing frames over any async byte stream, for code that
//! does not want the `tokio_util` / `futures` stream vocabulary (the
//! worker's side of the pipes).

use bulwark_protocol::frame::{FrameCodec, FrameError, Message};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{FramedRead, FramedWrite};

/// Reads validated messages of type `T`.
pub struct FrameReader<R, T> {
    inner: FramedRead<R, FrameCodec<T>>,
}

impl<R: AsyncRead + Unpin, T: Message> FrameReader<R, T> {
    pub fn new(reader: R) -> Self {
        Self {
            inner: FramedRead::new(reader, FrameCodec::new()),
        }
    }

    /// The next message; `None` at a clean end of the stream. After an
    /// error the stream is unusable (framing is lost): stop reading.
    pub async fn next(&mut self) -> Option<Result<T, FrameError>> {
        self.inner.next().await
    }
}

/// Writes messages of type `T`, each flushed as it is sent.
pub struct FrameWriter<W, T> {
    inner: FramedWrite<W, FrameCodec<T>>,
}

impl<W: AsyncWrite + Unpin, T: Message> FrameWriter<W, T> {
    pub fn new(writer: W) -> Self {
        Self {
            inner: FramedWrite::new(writer, FrameCodec::new()),
        }
    }

    /// Sends one message. A bound violation is refused before anything is
    /// written ([`FrameError::Bound`]), so the stream stays usable.
    pub async fn send(&mut self, message: T) -> Result<(), FrameError> {
        self.inner.send(message).await
    }

    /// Queues one message without flushing, so a burst of messages leaves
    /// in few writes; call [`flush`](Self::flush) after the burst. Bound
    /// violations are refused as in [`send`](Self::send).
    pub async fn feed(&mut self, message: T) -> Result<(), FrameError> {
        self.inner.feed(message).await
    }

    /// Writes out everything queued by [`feed`](Self::feed).
    pub async fn flush(&mut self) -> Result<(), FrameError> {
        SinkExt::<T>::flush(&mut self.inner).await
    }
}
