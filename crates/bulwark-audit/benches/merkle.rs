//! Merkle benchmarks at the scale the log must handle: recomputing the root
//! of 1,000,000 records (the full-log verification a CLI `verify` does), and
//! proof generation / verification in a 1,000,000-leaf tree.
//!
//! Run with `cargo bench -p bulwark-audit --bench merkle`; medians are in
//! `target/criterion/<group>/<bench>/new/estimates.json`.

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bulwark_audit::{
    AuditRecord, CompactRange, Decision, Hash, consistency_proof, inclusion_proof, leaf_hash, root,
    verify_consistency, verify_inclusion,
};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;

const N: u64 = 1_000_000;

/// A record shaped like what the door writes (UUID session, hex digest).
fn record(i: u64) -> AuditRecord {
    AuditRecord {
        time_ms: 1_700_000_000_000 + i as i64,
        session: format!("6f1c2e4a-{:04x}-4d5e-9f00-{:012x}", i % 7, i / 1000),
        agent: "main".into(),
        user: "alice".into(),
        action: bulwark_audit::Action::ToolCall,
        tool: "fs".into(),
        operation: "fs:read".into(),
        args_digest: format!("{:064x}", u128::from(i) * 0x9e37_79b9_7f4a_7c15),
        decision: if i.is_multiple_of(10) {
            Decision::Denied
        } else {
            Decision::Allowed
        },
        reason: bulwark_audit::Reason::Ok,
        detail: format!("read {} bytes from src/lib.rs", i % 4096),
        duration_us: i % 10_000,
    }
}

/// All records' canonical encodings in one buffer, with their end offsets:
/// what a verifier reads back from storage.
fn encoded_log() -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut ends = Vec::with_capacity(N as usize);
    for seq in 0..N {
        bytes.extend_from_slice(&record(seq).canonical_bytes(seq).unwrap_or_default());
        ends.push(bytes.len());
    }
    (bytes, ends)
}

fn leaf_hashes(bytes: &[u8], ends: &[usize]) -> Vec<Hash> {
    let mut start = 0;
    ends.iter()
        .map(|&end| {
            let hash = leaf_hash(&bytes[start..end]);
            start = end;
            hash
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let (bytes, ends) = encoded_log();
    let leaves = leaf_hashes(&bytes, &ends);
    let index = 654_321;
    let old_size = 700_001;
    let new_root = root(&leaves);
    let old_root = root(&leaves[..old_size as usize]);

    let mut heavy = c.benchmark_group("merkle_1m");
    heavy
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    heavy.bench_function("root_from_leaf_hashes", |b| {
        b.iter(|| root(black_box(&leaves)))
    });
    heavy.bench_function("root_from_canonical_records", |b| {
        b.iter(|| {
            let mut range = CompactRange::new();
            let mut start = 0;
            for &end in black_box(&ends) {
                let _ = range.append(leaf_hash(&bytes[start..end]));
                start = end;
            }
            range.root()
        })
    });
    heavy.bench_function("root_from_records_encoding_included", |b| {
        // Records are built, and dropped, outside the timed part.
        b.iter_batched_ref(
            || (0..N).map(record).collect::<Vec<_>>(),
            |records| {
                let mut range = CompactRange::new();
                for (seq, record) in records.iter().enumerate() {
                    if let Ok(leaf) = record.leaf_hash(seq as u64) {
                        let _ = range.append(leaf);
                    }
                }
                range.root()
            },
            BatchSize::PerIteration,
        )
    });
    heavy.bench_function("inclusion_proof_generate", |b| {
        b.iter(|| inclusion_proof(black_box(&leaves), index, N))
    });
    heavy.bench_function("consistency_proof_generate", |b| {
        b.iter(|| consistency_proof(black_box(&leaves), old_size, N))
    });
    heavy.finish();

    let inclusion = inclusion_proof(&leaves, index, N).unwrap_or_default();
    let consistency = consistency_proof(&leaves, old_size, N).unwrap_or_default();
    let leaf = leaves[index as usize];
    let mut light = c.benchmark_group("merkle_1m_verify");
    light.bench_function("inclusion_proof_verify", |b| {
        b.iter(|| verify_inclusion(black_box(&leaf), index, N, black_box(&inclusion), &new_root))
    });
    light.bench_function("consistency_proof_verify", |b| {
        b.iter(|| {
            verify_consistency(
                old_size,
                N,
                black_box(&old_root),
                &new_root,
                black_box(&consistency),
            )
        })
    });
    light.finish();
}

criterion_group!(merkle, benches);
criterion_main!(merkle);
