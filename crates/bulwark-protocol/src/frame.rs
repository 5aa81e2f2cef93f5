//! IPC framing: a 4-byte big-endian body length, then a JSON body holding
//! one [`Command`] or [`Event`].
//!
//! Both ends read bytes that the other side controls (a worker runs agent
//! code paths and model output; the server is its parent), so decoding is
//! strict and bounded:
//!
//! * a length above [`MAX_FRAME_BYTES`] is refused from the 4 header bytes
//!   alone, before any buffer for the body is allocated
//!   (`tokio_util`'s `LengthDelimitedCodec` checks `max_frame_length`
//!   before it reserves);
//! * a body is parsed by serde into the protocol type (unknown fields and
//!   unknown `type`s are refused by `deny_unknown_fields`), then every
//!   length bound is checked with `validate()`;
//! * the stream ending inside a frame is [`FrameError::Truncated`], not a
//!   clean end.
//!
//! Errors carry no text from the peer (no field names, no JSON excerpts),
//! only positions and classes, so they can be logged and shown as they are.

use crate::protocol::{Command, Event, MAX_ID_CHARS, MAX_SHORT_CHARS, MAX_TEXT_CHARS, TooLong};
use bytes::{Bytes, BytesMut};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec, LengthDelimitedCodecError};

/// The largest frame body, in bytes.
///
/// Every *valid* message fits: the longest field is [`MAX_TEXT_CHARS`]
/// characters, and JSON escaping makes one character at most 6 bytes
/// (`\u001f`), so a valid event is at most ~6 MB; anything larger is not
/// a protocol message and is refused unread.
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

const HEADER_BYTES: usize = 4;

// The worst valid event (all fields at their bounds, all characters
// escaped) must fit in one frame, or a valid event could not be sent.
const _: () =
    assert!(6 * (MAX_TEXT_CHARS + 3 * MAX_SHORT_CHARS + 2 * MAX_ID_CHARS) + 4096 < MAX_FRAME_BYTES);

/// The class of a JSON failure (serde_json's own classification).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonCategory {
    /// Not JSON.
    Syntax,
    /// JSON, but not a protocol message: unknown field or `type`, wrong
    /// type of a field, missing field.
    Data,
    /// The body ends in the middle of a JSON value.
    Eof,
}

/// Why a frame was refused.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {declared} bytes refused (at most {max})")]
    TooLarge { declared: u64, max: usize },
    #[error("the stream ended inside a frame ({buffered} bytes buffered)")]
    Truncated { buffered: usize },
    #[error("malformed frame body ({category:?} error at line {line}, column {column})")]
    Malformed {
        category: JsonCategory,
        line: usize,
        column: usize,
    },
    #[error("frame body out of bounds: {0}")]
    Bound(#[from] TooLong),
    #[error("reading or writing the IPC pipe failed: {0}")]
    Io(#[from] std::io::Error),
}

impl From<serde_json::Error> for FrameError {
    fn from(err: serde_json::Error) -> Self {
        use serde_json::error::Category;
        let category = match err.classify() {
            Category::Syntax => JsonCategory::Syntax,
            Category::Data => JsonCategory::Data,
            Category::Eof => JsonCategory::Eof,
            // Reading from a byte slice cannot fail with I/O.
            Category::Io => JsonCategory::Syntax,
        };
        FrameError::Malformed {
            category,
            line: err.line(),
            column: err.column(),
        }
    }
}

/// A message that may cross the IPC pipe: serde plus bound checks.
pub trait Message: Serialize + DeserializeOwned {
    /// Every length bound (`Command::validate` / `Event::validate`).
    fn check(&self) -> Result<(), TooLong>;
}

impl Message for Command {
    fn check(&self) -> Result<(), TooLong> {
        self.validate()
    }
}

impl Message for Event {
    fn check(&self) -> Result<(), TooLong> {
        self.validate()
    }
}

/// Parses and validates one frame body (without its length header).
pub fn decode_body<T: Message>(body: &[u8]) -> Result<T, FrameError> {
    let value: T = serde_json::from_slice(body)?;
    value.check()?;
    Ok(value)
}

/// Serializes one message into a frame body, refusing what the peer would
/// refuse (a bound violation, a body over [`MAX_FRAME_BYTES`]).
pub fn encode_body<T: Message>(value: &T) -> Result<Vec<u8>, FrameError> {
    value.check()?;
    let body = serde_json::to_vec(value)?;
    if body.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge {
            declared: body.len() as u64,
            max: MAX_FRAME_BYTES,
        });
    }
    Ok(body)
}

/// A `tokio_util` codec for frames of `T` (use with `FramedRead` /
/// `FramedWrite`). Decoding yields validated values; encoding writes the
/// length header and body.
pub struct FrameCodec<T> {
    /// Keeps the header in the buffer until the whole frame is there
    /// (`num_skip(0)`, the header counted by `length_adjustment`), so a
    /// stream that ends after a header is seen as truncated, not as a
    /// clean end.
    framing: LengthDelimitedCodec,
    /// The plain codec (header, then body) for writing.
    writing: LengthDelimitedCodec,
    _message: PhantomData<fn() -> T>,
}

/// Frames the server writes and the worker reads.
pub type CommandCodec = FrameCodec<Command>;
/// Frames the worker writes and the server reads.
pub type EventCodec = FrameCodec<Event>;

impl<T> FrameCodec<T> {
    pub fn new() -> Self {
        let framing = LengthDelimitedCodec::builder()
            .big_endian()
            .length_field_offset(0)
            .length_field_length(HEADER_BYTES)
            .length_adjustment(HEADER_BYTES as isize)
            .num_skip(0)
            .max_frame_length(MAX_FRAME_BYTES)
            .new_codec();
        let writing = LengthDelimitedCodec::builder()
            .big_endian()
            .length_field_length(HEADER_BYTES)
            .max_frame_length(MAX_FRAME_BYTES)
            .new_codec();
        Self {
            framing,
            writing,
            _message: PhantomData,
        }
    }
}

impl<T> Default for FrameCodec<T> {
    fn default() -> Self {
        Self::new()
    }
}

fn declared_length(src: &BytesMut) -> u64 {
    match src.get(..HEADER_BYTES) {
        Some(&[a, b, c, d]) => u64::from(u32::from_be_bytes([a, b, c, d])),
        _ => 0,
    }
}

impl<T: Message> Decoder for FrameCodec<T> {
    type Item = T;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<T>, FrameError> {
        // With num_skip(0) a pending frame's header is always at the front.
        let declared = declared_length(src);
        match self.framing.decode(src) {
            Ok(Some(frame)) => {
                let body = frame.get(HEADER_BYTES..).unwrap_or_default();
                decode_body(body).map(Some)
            }
            Ok(None) => Ok(None),
            Err(err)
                if err
                    .get_ref()
                    .is_some_and(|inner| inner.is::<LengthDelimitedCodecError>()) =>
            {
                Err(FrameError::TooLarge {
                    declared,
                    max: MAX_FRAME_BYTES,
                })
            }
            Err(err) => Err(FrameError::Io(err)),
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<T>, FrameError> {
        match self.decode(src)? {
            Some(value) => Ok(Some(value)),
            None if src.is_empty() => Ok(None),
            None => Err(FrameError::Truncated {
                buffered: src.len(),
            }),
        }
    }
}

impl<T: Message> Encoder<&T> for FrameCodec<T> {
    type Error = FrameError;

    fn encode(&mut self, value: &T, dst: &mut BytesMut) -> Result<(), FrameError> {
        let body = encode_body(value)?;
        self.writing.encode(Bytes::from(body), dst)?;
        Ok(())
    }
}

impl<T: Message> Encoder<T> for FrameCodec<T> {
    type Error = FrameError;

    fn encode(&mut self, value: T, dst: &mut BytesMut) -> Result<(), FrameError> {
        <Self as Encoder<&T>>::encode(self, &value, dst)
    }
}

/// One whole frame (header and body) as bytes, for tests and tools.
pub fn encode_frame<T: Message>(value: &T) -> Result<Vec<u8>, FrameError> {
    let mut buf = BytesMut::new();
    FrameCodec::<T>::new().encode(value, &mut buf)?;
    Ok(buf.to_vec())
}

/// Decodes every frame in `bytes`, as a reader that then hits the end of
/// the stream would: values until the first error, then that error (a
/// partial frame at the end is [`FrameError::Truncated`]). Never panics.
pub fn decode_all<T: Message>(bytes: &[u8]) -> (Vec<T>, Option<FrameError>) {
    let mut codec = FrameCodec::<T>::new();
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    loop {
        match codec.decode_eof(&mut buf) {
            Ok(Some(value)) => out.push(value),
            Ok(None) => return (out, None),
            Err(err) => return (out, Some(err)),
        }
    }
}
