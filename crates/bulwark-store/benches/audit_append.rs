//! Audit append cost on a file-backed store. The door records one entry per
//! tool call (budget: 20 µs for the whole door):
//! - `audit_record_batched`: `AuditSink::record`, which queues; the writer
//!   thread commits batches in the background (what the door pays).
//! - `audit_record_then_flush`: record plus the durability barrier each time
//!   (the worst case, a flush per call).
//! - `audit_append_sync`: one autocommit INSERT per record, no batching.
//! - `audit_batch_1000_flush`: throughput, 1000 records then one flush.

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bulwark_audit::{AuditRecord, AuditSink, Decision};
use bulwark_store::Store;
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn sample_record() -> AuditRecord {
    AuditRecord {
        time_ms: 1_700_000_000_000,
        session: "sess-0123456789abcdef".into(),
        agent: "researcher".into(),
        user: "alice".into(),
        action: bulwark_audit::Action::ToolCall,
        tool: "shell".into(),
        operation: "exec".into(),
        args_digest: AuditRecord::digest_args(&serde_json::json!({"cmd": "ls -la"})),
        decision: Decision::Allowed,
        reason: bulwark_audit::Reason::Capability,
        detail: "matched grant shell:exec in agent manifest".into(),
        duration_us: 1234,
    }
}

fn bench_record(c: &mut Criterion) {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    };
    let store = match Store::open(&dir.path().join("bench.db")) {
        Ok(s) => s,
        Err(e) => panic!("open: {e}"),
    };
    let sink = store.audit_sink();
    let record = sample_record();
    c.bench_function("audit_record_batched", |b| {
        b.iter(|| black_box(sink.record(black_box(&record))))
    });
    // Drain the backlog outside any measurement, so the next benchmark's
    // first flushes do not pay for this one's records.
    if let Err(e) = sink.flush() {
        panic!("flush: {e}");
    }
    c.bench_function("audit_record_then_flush", |b| {
        b.iter(|| {
            black_box(sink.record(black_box(&record))).ok();
            black_box(sink.flush())
        })
    });
    c.bench_function("audit_append_sync", |b| {
        b.iter(|| black_box(sink.append(black_box(&record))))
    });
    c.bench_function("audit_batch_1000_flush", |b| {
        b.iter(|| {
            for _ in 0..1000 {
                black_box(sink.record(black_box(&record))).ok();
            }
            black_box(sink.flush())
        })
    });
}

criterion_group!(benches, bench_record);
criterion_main!(benches);
