//! Every WebSocket text frame a client sends goes through
//! `ClientFrame::parse`. Whatever the bytes: no panic; a frame it accepts
//! is within every bound and survives a serialize/parse round trip; a frame
//! it refuses yields an error frame that is valid JSON with a short message.
#![no_main]

use bulwark_server::ws::frames::{ClientFrame, ServerFrame};
use libfuzzer_sys::fuzz_target;

const MAX: usize = 1 << 21;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ClientFrame::parse(text, MAX) {
        Ok(frame) => {
            let again = serde_json::to_string(&frame).expect("an accepted frame serializes");
            let reparsed = ClientFrame::parse(&again, MAX).expect("and parses again");
            assert_eq!(frame, reparsed);
            if let ClientFrame::Message { text } = &frame {
                assert!(text.chars().count() <= 200_000);
            }
        }
        Err(e) => {
            let json = ServerFrame::error(&e).to_json();
            let v: serde_json::Value = serde_json::from_str(&json).expect("error frames are JSON");
            assert_eq!(v["type"], "error");
            assert!(e.message.chars().count() <= 301, "error messages are bounded");
        }
    }
});
