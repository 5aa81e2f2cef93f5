//! Latency of one `AuditSink::record` on a file-backed store: the door writes
//! one of these per tool call and its whole overhead budget is 20 µs.

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
        action: "tool_call".into(),
        tool: "shell".into(),
        operation: "exec".into(),
        args_digest: AuditRecord::digest_args(&serde_json::json!({"cmd": "ls -la"})),
        decision: Decision::Allowed,
        reason: "capability".into(),
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
    c.bench_function("audit_record_file_wal", |b| {
        b.iter(|| black_box(sink.record(black_box(&record))))
    });

    let mem = match Store::open_in_memory() {
        Ok(s) => s.audit_sink(),
        Err(e) => panic!("open_in_memory: {e}"),
    };
    c.bench_function("audit_record_in_memory", |b| {
        b.iter(|| black_box(mem.record(black_box(&record))))
    });
}

criterion_group!(benches, bench_record);
criterion_main!(benches);
