//! The relay path of one worker event, piece by piece: the worker encodes
//! it into an IPC frame, the server's pump decodes and validates the frame
//! and rebuilds the event field by field ([`relay`]). Measured for the two
//! events a conversation sends most: a streamed text delta (one word, as
//! the script model and most providers stream) and a tool call.
//!
//! What it leaves out: the pipe itself, and the server's mapping of the
//! rebuilt event to a client frame and its JSON (in `ws`);
//! `crates/bulwark-cli/tests/serve_load.rs` measures the whole path
//! end to end.
//!
//! Run with `cargo bench -p bulwark-server --bench relay`; medians are in
//! `target/criterion/<group>/<bench>/new/estimates.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bulwark_protocol::frame::{EventCodec, encode_frame};
use bulwark_protocol::protocol::Event;
use bulwark_server::workers::relay;
use bytes::BytesMut;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use tokio_util::codec::{Decoder, Encoder};

fn text_delta() -> Event {
    Event::TextDelta {
        message_id: 42,
        text: "streams ".into(),
    }
}

fn tool_call() -> Event {
    Event::ToolCall {
        message_id: 42,
        call_id: "toolu_01A09q90qw90lq917835lq9".into(),
        tool: "file_write".into(),
        summary: r##"{"path":"out/report.md","content":"# Weekly report\n\nThe relay carried 12,840 frames in 1.3 s…"}"##
            .into(),
    }
}

fn bench_event(c: &mut Criterion, name: &str, event: &Event) {
    let frame = encode_frame(event).expect("a valid event encodes");
    let mut group = c.benchmark_group(format!("relay_{name}"));
    group.throughput(Throughput::Bytes(frame.len() as u64));

    // Worker side: the event into a frame (bound checks, JSON, header).
    let mut codec = EventCodec::new();
    let mut out = BytesMut::with_capacity(4096);
    group.bench_function("encode", |b| {
        b.iter(|| {
            out.clear();
            codec
                .encode(black_box(event), &mut out)
                .expect("a valid event encodes");
            black_box(out.len())
        })
    });

    // Server side: the frame back into a validated event.
    let mut codec = EventCodec::new();
    group.bench_function("decode", |b| {
        b.iter_batched_ref(
            || BytesMut::from(&frame[..]),
            |buf| {
                codec
                    .decode(buf)
                    .expect("a valid frame")
                    .expect("a whole frame")
            },
            BatchSize::SmallInput,
        )
    });

    // Server side: bounds checked again, the event rebuilt field by field.
    group.bench_function("rebuild", |b| {
        b.iter(|| relay(black_box(event)).expect("an allowed event"))
    });

    // All three, as one event crosses from the worker to the server.
    let mut encoder = EventCodec::new();
    let mut decoder = EventCodec::new();
    let mut wire = BytesMut::with_capacity(4096);
    group.bench_function("encode_decode_rebuild", |b| {
        b.iter(|| {
            encoder
                .encode(black_box(event), &mut wire)
                .expect("a valid event encodes");
            let decoded = decoder
                .decode(&mut wire)
                .expect("a valid frame")
                .expect("a whole frame");
            relay(&decoded).expect("an allowed event")
        })
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    bench_event(c, "text_delta", &text_delta());
    bench_event(c, "tool_call", &tool_call());
}

criterion_group!(relay_path, benches);
criterion_main!(relay_path);
