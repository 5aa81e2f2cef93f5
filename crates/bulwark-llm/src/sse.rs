//! Server-sent events framing (the WHATWG `text/event-stream` format).
//!
//! Why not a crate: the candidates (`eventsource-stream`, `reqwest-eventsource`)
//! wrap the whole byte stream and own the read loop, which hides the two
//! things this runtime must control itself: the byte cap counted on the raw
//! response while it streams, and the difference between "the stream ended
//! cleanly" and "the connection broke". The framing itself is small and fully
//! specified: lines end in CRLF, LF or CR; `:` starts a comment; `data` lines
//! accumulate; a blank line dispatches. This parser is incremental (chunks may
//! split lines, CRLF pairs and UTF-8 sequences anywhere; a property test
//! checks that the split never matters) and never panics on any input.

use std::collections::VecDeque;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` when absent (as the spec says).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// The stream carried bytes that are not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event stream line is not UTF-8")]
pub struct SseError;

/// Incremental parser: [`SseParser::feed`] bytes as they arrive, then take
/// events with [`SseParser::next_event`].
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous byte was a CR, so an immediately following LF belongs to it.
    after_cr: bool,
    /// Nothing has been seen yet, so a leading byte-order mark is dropped.
    at_start: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    ready: VecDeque<SseEvent>,
}

const BOM: &[u8] = "\u{feff}".as_bytes();

impl SseParser {
    pub fn new() -> Self {
        Self {
            at_start: true,
            ..Self::default()
        }
    }

    /// Consume a chunk. Any complete events become available to `next_event`.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), SseError> {
        for &byte in chunk {
            if self.after_cr && byte == b'\n' {
                self.after_cr = false;
                continue;
            }
            self.after_cr = false;
            match byte {
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.process_line(&line)?;
                }
                _ => {
                    self.line.push(byte);
                    if self.at_start && self.line.len() == BOM.len() {
                        self.at_start = false;
                        if self.line == BOM {
                            self.line.clear();
                        }
                    } else if self.at_start && !BOM.starts_with(&self.line) {
                        self.at_start = false;
                    }
                }
            }
        }
        Ok(())
    }

    /// The next complete event, if one has been dispatched.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        self.ready.pop_front()
    }

    fn process_line(&mut self, line: &[u8]) -> Result<(), SseError> {
        self.at_start = false;
        if line.is_empty() {
            self.dispatch();
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError)?;
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // `id` and `retry` drive browser reconnection, which a one-shot
            // model response never does; unknown fields are ignored by spec.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self) {
        let event = self.event.take();
        if !self.has_data {
            return;
        }
        self.has_data = false;
        self.ready.push_back(SseEvent {
            event: event.unwrap_or_else(|| "message".to_owned()),
            data: std::mem::take(&mut self.data),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk).unwrap();
            while let Some(event) = parser.next_event() {
                out.push(event);
            }
        }
        out
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn named_events_and_default_name() {
        let got = parse_all(&[b"event: ping\ndata: {}\n\ndata: x\n\n"]);
        assert_eq!(got, vec![ev("ping", "{}"), ev("message", "x")]);
    }

    #[test]
    fn line_endings_crlf_cr_lf_even_split() {
        let got = parse_all(&[b"data: a\r", b"\n\r", b"\ndata: b\r\rdata:c\n\n"]);
        assert_eq!(
            got,
            vec![ev("message", "a"), ev("message", "b"), ev("message", "c")]
        );
    }

    #[test]
    fn multi_line_data_comments_and_bom() {
        let got = parse_all(&[b"\xEF\xBB", b"\xBF: comment\ndata: 1\ndata:2\nid: 7\n\n"]);
        assert_eq!(got, vec![ev("message", "1\n2")]);
    }

    #[test]
    fn incomplete_event_is_not_dispatched() {
        assert!(parse_all(&[b"data: {\"type\":\"message_stop\"}\n"]).is_empty());
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        assert!(parse_all(&[b"event: x\n\n"]).is_empty());
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut parser = SseParser::new();
        assert_eq!(parser.feed(b"data: \xff\n"), Err(SseError));
    }

    proptest! {
        /// Any split of the byte stream yields the same events as no split.
        #[test]
        fn splitting_never_changes_the_events(
            text in "(((event|data|id)?:? ?[a-zé{}\" ]{0,6})?(\r\n|\n|\r)){0,12}",
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let bytes = text.as_bytes();
            let whole = parse_all(&[bytes]);
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut start = 0;
            for point in points {
                chunks.push(&bytes[start..point]);
                start = point;
            }
            chunks.push(&bytes[start..]);
            prop_assert_eq!(parse_all(&chunks), whole);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut parser = SseParser::new();
            let _ = parser.feed(&bytes);
            while parser.next_event().is_some() {}
        }
    }
}
