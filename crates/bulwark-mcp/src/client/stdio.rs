//! The stdio transport: newline-delimited JSON-RPC over a server's stdin
//! and stdout, with every incoming line bounded.
//!
//! rmcp's own `AsyncRwTransport` drops an oversized line and keeps reading,
//! and silently skips a line that is not JSON. Both are right for a
//! general-purpose SDK and wrong here: a server that sends either is broken
//! or hostile, and the caller must learn which (a typed error) instead of
//! waiting for an answer that will never come. So this transport stops at
//! the first such line, records why in a [`Fault`], and reports the stream
//! closed; the client turns that into `TooLarge` or `Protocol`. It never
//! holds more than the bound plus one read buffer of a line.

use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Bytes read from the server per `read` call.
const READ_BUFFER: usize = 64 * 1024;
/// Characters of a parse error kept for the operator.
const DETAIL_CHARS: usize = 200;

/// Why a connection was given up on, recorded by the transport that saw it
/// and read by the client when a request fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// A message larger than the limit.
    TooLarge,
    /// A message that is not JSON-RPC.
    Malformed(String),
    /// The HTTP layer refused or failed (already a complete message).
    Http(String),
}

/// The first fault of one connection (later ones are consequences).
#[derive(Debug, Default)]
pub(crate) struct Fault(Mutex<Option<FaultKind>>);

impl Fault {
    pub(crate) fn set(&self, kind: FaultKind) {
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(kind);
        }
    }

    pub(crate) fn get(&self) -> Option<FaultKind> {
        self.0.lock().ok().and_then(|slot| slot.clone())
    }
}

/// One stdio connection, client side.
pub(crate) struct StdioTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    max_line: usize,
    write: Arc<tokio::sync::Mutex<Option<W>>>,
    fault: Arc<Fault>,
    done: bool,
}

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub(crate) fn new(read: R, write: W, max_line: usize, fault: Arc<Fault>) -> Self {
        StdioTransport {
            read: BufReader::with_capacity(READ_BUFFER, read),
            line: Vec::new(),
            max_line,
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
            fault,
            done: false,
        }
    }

    /// Reads one line into `self.line` (without its `\n`); `false` at the
    /// end of the stream or on a fault. Cancel-safe: bytes are moved from
    /// the reader's buffer to `self.line` and consumed with no await in
    /// between, so a dropped call resumes where it stopped.
    async fn read_line(&mut self) -> bool {
        loop {
            let (taken, complete) = {
                let available = match self.read.fill_buf().await {
                    Ok(available) => available,
                    Err(e) => {
                        tracing::debug!(error = %e, "MCP server stdout read failed");
                        return false;
                    }
                };
                if available.is_empty() {
                    return false;
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |i| i + 1);
                let content = newline.map_or(take, |i| i);
                if self.line.len().saturating_add(content) > self.max_line {
                    self.line = Vec::new();
                    self.fault.set(FaultKind::TooLarge);
                    return false;
                }
                self.line.extend_from_slice(&available[..content]);
                (take, newline.is_some())
            };
            self.read.consume(taken);
            if complete {
                return true;
            }
        }
    }
}

impl<R, W> Transport<RoleClient> for StdioTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        let encoded = serde_json::to_vec(&item);
        async move {
            let mut bytes = encoded.map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut guard = write.lock().await;
            let Some(writer) = guard.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the MCP connection is closed",
                ));
            };
            writer.write_all(&bytes).await?;
            writer.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if self.done || !self.read_line().await {
                self.done = true;
                return None;
            }
            let line = std::mem::take(&mut self.line);
            let text = line.strip_suffix(b"\r").unwrap_or(&line);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(text) {
                Ok(message) => return Some(message),
                Err(e) => {
                    let detail: String = format!("a message is not valid JSON-RPC ({e})")
                        .chars()
                        .take(DETAIL_CHARS)
                        .collect();
                    self.fault.set(FaultKind::Malformed(detail));
                    self.done = true;
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let writer = self.write.lock().await.take();
        if let Some(mut writer) = writer {
            let _ = writer.shutdown().await;
        }
        self.done = true;
        Ok(())
    }
}
