//! Merkle log costs on a file-backed store:
//! - `merkle_append/batch_10000_flush`: 10,000 `AuditSink::record` calls then
//!   one `flush` (durable), leaf hashing included; throughput in records/s.
//! - `merkle_1m_log/*`, on a log of 1,000,000 records with a checkpoint at
//!   its end (a fixture built once in `CARGO_TARGET_TMPDIR` and copied):
//!   - `verify_full`: `verify`, every leaf recomputed from its row;
//!   - `inclusion_proof`, `consistency_proof`: proofs from the stored leaves;
//!   - `checkpoint_incremental_after_10000`: 10,000 more records (untimed),
//!     then `checkpoint_incremental`, which hashes only those;
//!   - `checkpoint_full_after_10000`: the same with `checkpoint`, which
//!     re-verifies everything.
//!
//! The checkpoint benchmarks grow the log by 10,000 records per iteration;
//! their warm-up and measurement times are minimal, so each runs about a
//! dozen iterations.

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bulwark_audit::{AuditRecord, AuditSink, Decision, SigningKey};
use bulwark_store::{SCHEMA_VERSION, SqliteAuditSink, Store};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn sample_record(n: u64) -> AuditRecord {
    AuditRecord {
        time_ms: 1_700_000_000_000 + n as i64,
        session: "sess-0123456789abcdef".into(),
        agent: "researcher".into(),
        user: "alice".into(),
        action: bulwark_audit::Action::ToolCall,
        tool: "shell".into(),
        operation: "exec".into(),
        args_digest: AuditRecord::digest_args(&serde_json::json!({"cmd": "ls -la", "n": n})),
        decision: Decision::Allowed,
        reason: bulwark_audit::Reason::Capability,
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
const LOG_SIZE: u64 = 1_000_000;
const ORIGIN: &str = "bench/audit";

fn bench_key() -> SigningKey {
    SigningKey::from_bytes(&[7; 32])
}

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

fn fixture() -> PathBuf {
    let path =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("audit-1m-v{SCHEMA_VERSION}.db"));
    if path.exists() {
        return path;
    }
    let building = path.with_extension("building");
    let _ = std::fs::remove_file(&building);
    {
        let sink = or_die(Store::open(&building), "open fixture").audit_sink();
        for n in 0..LOG_SIZE {
            or_die(sink.record(&sample_record(n)), "record");
        }
        or_die(sink.checkpoint(&bench_key(), ORIGIN, ORIGIN), "checkpoint");
    }
    let conn = or_die(rusqlite::Connection::open(&building), "reopen");
    or_die(
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())),
        "wal",
    );
    drop(conn);
    or_die(std::fs::rename(&building, &path), "rename fixture");
    path
}

fn open_copy(dir: &Path) -> SqliteAuditSink {
    let path = dir.join("log.db");
    or_die(std::fs::copy(fixture(), &path), "copy fixture");
    or_die(Store::open(&path), "open copy").audit_sink()
}

fn bench_1m(c: &mut Criterion) {
    let dir = or_die(tempfile::tempdir(), "tempdir");
    let sink = open_copy(dir.path());
    let mut group = c.benchmark_group("merkle_1m_log");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(LOG_SIZE));
    group.bench_function("verify_full", |b| {
        b.iter(|| {
            let report = or_die(sink.verify(), "verify");
            assert!(report.is_ok() && report.records == LOG_SIZE);
            black_box(report)
        })
    });
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("inclusion_proof", |b| {
        b.iter(|| black_box(or_die(sink.inclusion_proof(black_box(123_457)), "proof")))
    });
    group.bench_function("consistency_proof", |b| {
        b.iter(|| black_box(or_die(sink.consistency_proof(black_box(654_321)), "proof")))
    });
    let key = bench_key();
    let records: Vec<AuditRecord> = (0..BATCH).map(sample_record).collect();
    group.warm_up_time(Duration::from_millis(1));
    group.measurement_time(Duration::from_millis(1));
    group.bench_function("checkpoint_incremental_after_10000", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                for r in &records {
                    or_die(sink.record(r), "record");
                }
                or_die(sink.flush(), "flush");
                let started = Instant::now();
                black_box(or_die(
                    sink.checkpoint_incremental(&key, ORIGIN, ORIGIN),
                    "checkpoint",
                ));
                total += started.elapsed();
            }
            total
        })
    });
    group.bench_function("checkpoint_full_after_10000", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                for r in &records {
                    or_die(sink.record(r), "record");
                }
                or_die(sink.flush(), "flush");
                let started = Instant::now();
                black_box(or_die(sink.checkpoint(&key, ORIGIN, ORIGIN), "checkpoint"));
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bench_append, bench_1m);
criterion_main!(benches);
