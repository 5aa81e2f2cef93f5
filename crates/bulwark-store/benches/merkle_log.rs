//! Merkle log costs on a file-backed store:
//! - `merkle_append/batch_10000_flush`: 10,000 `AuditSink::record` calls then
//!   one `flush` (durable), leaf hashing included; throughput in records/s.
//! - `merkle_verify/verify_100000`: a full `verify` of a 100,000-record log
//!   with one stored checkpoint (every leaf recomputed, root compared).

use bulwark_audit::{AuditRecord, AuditSink, Decision};
use bulwark_store::Store;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;

fn sample_record(n: u64) -> AuditRecord {
    AuditRecord {
        time_ms: 1_700_000_000_000 + n as i64,
        session: "sess-0123456789abcdef".into(),
        agent: "researcher".into(),
        user: "alice".into(),
        action: "tool_call".into(),
        tool: "shell".into(),
        operation: "exec".into(),
        args_digest: AuditRecord::digest_args(&serde_json::json!({"cmd": "ls -la", "n": n})),
        decision: Decision::Allowed,
        reason: "capability".into(),
        detail: "matched grant shell:exec in agent manifest".into(),
        duration_us: 1234,
    }
}

fn or_die<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}

const BATCH: u64 = 10_000;
const VERIFY_SIZE: u64 = 100_000;

fn bench_append(c: &mut Criterion) {
    let dir = or_die(tempfile::tempdir(), "tempdir");
    let store = or_die(Store::open(&dir.path().join("append.db")), "open");
    let sink = store.audit_sink();
    let records: Vec<AuditRecord> = (0..BATCH).map(sample_record).collect();
    let mut group = c.benchmark_group("merkle_append");
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("batch_10000_flush", |b| {
        b.iter(|| {
            for r in &records {
                or_die(sink.record(black_box(r)), "record");
            }
            or_die(sink.flush(), "flush");
        })
    });
    group.finish();
}

fn bench_verify(c: &mut Criterion) {
    let dir = or_die(tempfile::tempdir(), "tempdir");
    let store = or_die(Store::open(&dir.path().join("verify.db")), "open");
    let sink = store.audit_sink();
    for n in 0..VERIFY_SIZE {
        or_die(sink.record(&sample_record(n)), "record");
    }
    let key = bulwark_audit::generate_signing_key();
    or_die(
        sink.checkpoint(&key, "bench/audit", "bench/audit"),
        "checkpoint",
    );
    let mut group = c.benchmark_group("merkle_verify");
    group.throughput(Throughput::Elements(VERIFY_SIZE));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(15));
    group.bench_function("verify_100000", |b| {
        b.iter(|| {
            let report = or_die(sink.verify(), "verify");
            assert!(report.is_ok() && report.records == VERIFY_SIZE);
            black_box(report)
        })
    });
    group.finish();
}

criterion_group!(benches, bench_append, bench_verify);
criterion_main!(benches);
