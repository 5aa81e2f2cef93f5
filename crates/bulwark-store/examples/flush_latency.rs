//! Diagnostic: the latency distribution (p50..max) of record+flush and of a
//! synchronous append, which criterion's mean hides. `cargo run --release
//! -p bulwark-store --example flush_latency`.

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bulwark_audit::{AuditRecord, AuditSink, Decision};
use bulwark_store::Store;
use std::time::Instant;

fn main() {
    let dir = std::env::temp_dir().join(format!("flushlat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&dir.join("x.db")).unwrap();
    let sink = store.audit_sink();
    let r = AuditRecord {
        time_ms: 1,
        session: "s".into(),
        agent: "a".into(),
        user: "u".into(),
        action: bulwark_audit::Action::ToolCall,
        tool: "t".into(),
        operation: "o".into(),
        args_digest: "d".repeat(64),
        decision: Decision::Allowed,
        reason: bulwark_audit::Reason::Ok,
        detail: String::new(),
        duration_us: 3,
    };
    for (label, mode) in [("record+flush", 0), ("append_sync", 1)] {
        let mut v = Vec::new();
        for _ in 0..3000 {
            let t = Instant::now();
            if mode == 0 {
                sink.record(&r).unwrap();
                sink.flush().unwrap();
            } else {
                sink.append(&r).unwrap();
            }
            v.push(t.elapsed().as_micros() as u64);
        }
        v.sort();
        let p = |q: f64| v[((v.len() as f64 - 1.0) * q) as usize];
        println!(
            "{label:14} p50 {}us p90 {}us p99 {}us max {}us mean {}us",
            p(0.5),
            p(0.9),
            p(0.99),
            v[v.len() - 1],
            v.iter().sum::<u64>() / v.len() as u64
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
