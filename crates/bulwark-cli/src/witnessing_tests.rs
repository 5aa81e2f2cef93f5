//! The witnessing glue against real witnesses on loopback and a real
//! audit log (in memory), without the checkpoint wiring.

use super::*;
use bulwark_audit::{AuditRecord, Decision, SigningKey, VerifierKey};
use bulwark_policy::WitnessEntry;
use bulwark_store::Store;
use std::sync::Arc;

const ORIGIN: &str = "node.test/audit";

fn record(n: u64) -> AuditRecord {
    AuditRecord {
        time_ms: 1_700_000_000_000 + n as i64,
        session: "s".into(),
        agent: "a".into(),
        user: "local".into(),
        action: bulwark_audit::Action::ToolCall,
        tool: "shell".into(),
        operation: "exec".into(),
        args_digest: String::new(),
        decision: Decision::Allowed,
        reason: bulwark_audit::Reason::Ok,
        detail: String::new(),
        duration_us: n,
    }
}

struct Log {
    sink: SqliteAuditSink,
    key: SigningKey,
    appended: u64,
}

impl Log {
    fn new() -> Self {
        Self {
            sink: Store::open_in_memory().unwrap().audit_sink(),
            key: bulwark_audit::generate_signing_key(),
            appended: 0,
        }
    }
    fn grow_and_sign(&mut self, n: u64) -> String {
        for i in self.appended..self.appended + n {
            self.sink.append(&record(i)).unwrap();
        }
        self.appended += n;
        self.sink
            .checkpoint(&self.key, ORIGIN, "bulwark-audit")
            .unwrap()
    }
    fn vkey(&self) -> VerifierKey {
        VerifierKey::from_signing_key("bulwark-audit", &self.key).unwrap()
    }
}

/// A witness on loopback following the log; its `[[audit.witnesses]]` entry.
async fn witness(dir: &std::path::Path, log: &Log, name: &str) -> WitnessEntry {
    let identity = bulwark_witness::Identity::load_or_create(dir, Some(name)).unwrap();
    let witness =
        bulwark_witness::Witness::open(dir, identity, vec![(ORIGIN.to_owned(), log.vkey())])
            .unwrap();
    let key = witness.cosigner_key().unwrap().to_vkey();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(bulwark_witness::server::serve(
        listener,
        Arc::new(witness),
        std::future::pending(),
    ));
    WitnessEntry { url, key }
}

/// A witness entry whose server is not running (a closed loopback port).
async fn unreachable_witness() -> WitnessEntry {
    let key = bulwark_audit::CosignerKey::from_signing_key(
        "down.test/w",
        &bulwark_audit::generate_signing_key(),
    )
    .unwrap()
    .to_vkey();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    WitnessEntry { url, key }
}

/// Agents may start: `require_witnesses` passes.
#[track_caller]
fn must_start(config: &AuditSection, sink: &SqliteAuditSink) {
    if let Err(failure) = require_witnesses(config, sink) {
        panic!("agents were refused: {:#}", failure.error);
    }
}

fn config(witnesses: Vec<WitnessEntry>, require: usize) -> AuditSection {
    AuditSection {
        origin: Some(ORIGIN.to_owned()),
        witnesses,
        require_witnesses: Some(require),
        ..AuditSection::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_are_witnessed_stored_and_required() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::new();
    let up = witness(&dir.path().join("w1"), &log, "w1.test/w").await;
    let down = unreachable_witness().await;
    let config = config(vec![up.clone(), down.clone()], 1);

    // No checkpoint yet: agents may not start.
    let err = require_witnesses(&config, &log.sink).unwrap_err();
    assert!(format!("{:#}", err.error).contains("no checkpoint yet"));

    let note = log.grow_and_sign(6);
    // Signed but not witnessed: still refused, naming who is missing.
    let err = require_witnesses(&config, &log.sink).unwrap_err();
    let message = format!("{:#}", err.error);
    assert!(message.contains("only 0 witness(es)"), "{message}");
    assert!(message.contains("w1.test/w"), "{message}");

    // One witness is down: the other still cosigns.
    let report = witness_checkpoint(&config, &log.sink, &note).await.unwrap();
    assert_eq!((report.size, report.cosigned()), (6, 1));
    assert!(report.outcomes[0].result.is_ok(), "{report:?}");
    let failures: Vec<String> = report.failures().collect();
    assert_eq!(failures.len(), 1);
    assert!(failures[0].contains("down.test/w"), "{failures:?}");
    must_start(&config, &log.sink);
    let cosigners = cosigners_of_latest(&config, &log.sink).unwrap().unwrap();
    assert_eq!(cosigners.cosigned.len(), 1);
    assert_eq!(cosigners.cosigned[0].name, "w1.test/w");
    assert_eq!(cosigners.missing.len(), 1);
    assert!(cosigners.describe()[0].contains("1 of 2"));

    // A new checkpoint is not covered by the old cosignature...
    let note = log.grow_and_sign(5);
    assert!(require_witnesses(&config, &log.sink).is_err());
    // ...until it is witnessed, from the size the witness last cosigned
    // (records appended after the checkpoint do not matter), from a
    // blocking caller as checkpoints.rs has.
    log.sink.append(&record(99)).unwrap();
    let (cfg, sink) = (config.clone(), log.sink.clone());
    let report =
        tokio::task::spawn_blocking(move || witness_checkpoint_blocking(&cfg, &sink, &note))
            .await
            .unwrap()
            .unwrap();
    assert_eq!((report.size, report.cosigned()), (11, 1), "{report:?}");
    assert_eq!(log.sink.latest_cosigned_size(&up.key).unwrap(), Some(11));
    must_start(&config, &log.sink);

    // Requiring both fails while one is down.
    let both = self::config(vec![up, down], 2);
    let err = require_witnesses(&both, &log.sink).unwrap_err();
    assert!(format!("{:#}", err.error).contains("only 1 witness(es)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_stored_cosignature_does_not_count() {
    let mut log = Log::new();
    let note = log.grow_and_sign(4);
    let latest = log.sink.latest_checkpoint().unwrap().unwrap();
    // A cosignature line by a key that is not the configured witness's,
    // stored under the configured witness's name (someone with write
    // access to the database file).
    let configured = bulwark_audit::CosignerKey::from_signing_key(
        "w.test/w",
        &bulwark_audit::generate_signing_key(),
    )
    .unwrap();
    let forger = bulwark_audit::generate_signing_key();
    let body = bulwark_audit::note_text(&note).unwrap();
    let mut forged = bulwark_audit::cosign(body, &forger, "w.test/w", 1).unwrap();
    forged.key_id = configured.key_id();
    log.sink
        .add_cosignature(&NewCosignature {
            size: latest.size,
            root: latest.root,
            witness: &configured.to_vkey(),
            line: &forged.to_line(),
            timestamp: 1,
        })
        .unwrap();
    let config = config(
        vec![WitnessEntry {
            url: "http://127.0.0.1:9".into(),
            key: configured.to_vkey(),
        }],
        1,
    );
    let cosigners = cosigners_of_latest(&config, &log.sink).unwrap().unwrap();
    assert!(cosigners.cosigned.is_empty());
    assert!(
        cosigners.missing[0].1.contains("does not verify"),
        "{cosigners:?}"
    );
    assert!(require_witnesses(&config, &log.sink).is_err());
}

#[test]
fn without_witnesses_nothing_is_sent_or_required() {
    let mut log = Log::new();
    let note = log.grow_and_sign(2);
    let config = AuditSection::default();
    let report = witness_checkpoint_blocking(&config, &log.sink, &note).unwrap();
    assert_eq!((report.size, report.outcomes.len()), (2, 0));
    must_start(&config, &log.sink);
}
