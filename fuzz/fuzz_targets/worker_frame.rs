//! The frame decoder sees bytes a worker (or its parent) controls. It must
//! never panic; whatever it accepts must be a valid message that encodes
//! back to the same value; and how the bytes are split across reads must
//! not change what is decoded.
#![no_main]

use bulwark_protocol::frame::{EventCodec, decode_all, encode_frame};
use bulwark_protocol::protocol::{Command, Event};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

fuzz_target!(|data: &[u8]| {
    let (events, err) = decode_all::<Event>(data);
    for event in &events {
        assert!(event.validate().is_ok());
        let again = encode_frame(event).expect("a decoded event encodes");
        assert_eq!(decode_all::<Event>(&again).0, vec![event.clone()]);
    }
    let _ = decode_all::<Command>(data);

    // The same bytes in reads of varying size, as a pipe delivers them.
    let mut codec = EventCodec::new();
    let mut buf = BytesMut::new();
    let mut split = Vec::new();
    let mut failed = false;
    let mut rest = data;
    'feed: while !rest.is_empty() {
        let take = (usize::from(rest[0]) % 7 + 1).min(rest.len());
        buf.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(event)) => split.push(event),
                Ok(None) => break,
                Err(_) => {
                    failed = true;
                    break 'feed;
                }
            }
        }
    }
    if !failed && codec.decode_eof(&mut buf).is_err() {
        failed = true;
    }
    assert_eq!(split, events);
    assert_eq!(failed, err.is_some());
});
