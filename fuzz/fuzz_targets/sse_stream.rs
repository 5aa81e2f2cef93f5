//! The server-sent-events framing of provider responses: bytes from the
//! network, split into chunks wherever the transport pleases. The split must
//! never change the events, and events must be well-formed.
#![no_main]

use arbitrary::Arbitrary;
use bulwark_llm::fuzzing::sse_events;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    /// Chunk boundaries, as byte offsets into `bytes` (clamped).
    cuts: Vec<u16>,
    bytes: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let bytes = &input.bytes;
    let whole = sse_events(bytes, &[]);
    let cuts: Vec<usize> = input.cuts.iter().map(|&c| usize::from(c)).collect();
    let chunked = sse_events(bytes, &cuts);
    assert_eq!(chunked, whole, "cuts {cuts:?} changed the events");
    // One byte at a time is the most hostile split.
    let every: Vec<usize> = (1..bytes.len()).collect();
    assert_eq!(
        sse_events(bytes, &every),
        whole,
        "byte-wise feeding differs"
    );
    for (event, data) in &whole.0 {
        assert!(
            !event.contains(['\n', '\r']),
            "line break in event {event:?}"
        );
        assert!(!data.contains('\r'), "CR in data {data:?}");
    }
});
