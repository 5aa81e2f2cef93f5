//! Over loopback HTTP: two Bulwark logs (real `bulwark-store` audit logs)
//! witnessing each other, the client's 409 retry, and the statuses a
//! misbehaving log gets.

use crate::common::TestLog;
use bulwark_audit::{AuditRecord, CosignerKey, Decision, Hash, SigningKey, VerifierKey};
use bulwark_store::{SqliteAuditSink, Store};
use bulwark_witness::{ClientError, Identity, Witness, WitnessClient};
use std::sync::Arc;

struct Node {
    _dir: tempfile::TempDir,
    origin: String,
    sink: SqliteAuditSink,
    key: SigningKey,
    witness_url: String,
    witness_key: CosignerKey,
}

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

fn log_key(key: &SigningKey) -> VerifierKey {
    VerifierKey::from_signing_key("bulwark-audit", key).unwrap()
}

/// Starts a witness on loopback following `logs`; returns its URL and key.
async fn start_witness(
    dir: &std::path::Path,
    logs: Vec<(String, VerifierKey)>,
) -> (String, CosignerKey) {
    let identity = Identity::load_or_create(dir, None).unwrap();
    let witness = Witness::open(dir, identity, logs).unwrap();
    let key = witness.cosigner_key().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(bulwark_witness::server::serve(
        listener,
        Arc::new(witness),
        std::future::pending(),
    ));
    (url, key)
}

fn append(sink: &SqliteAuditSink, from: u64, n: u64) {
    for i in from..from + n {
        sink.append(&record(i)).unwrap();
    }
}

async fn submit(
    client: &WitnessClient,
    log: &Node,
    to: &Node,
    note: &str,
    old: u64,
) -> Result<bulwark_witness::Cosigned, ClientError> {
    let size = bulwark_audit::Checkpoint::parse_body(bulwark_audit::note_text(note).unwrap())
        .unwrap()
        .size;
    let sink = log.sink.clone();
    let proof = move |from: u64| -> Result<Vec<Hash>, String> {
        sink.consistency_proof_between(from, size)
            .map_err(|e| e.to_string())
    };
    client
        .add_checkpoint(&to.witness_url, &to.witness_key, note, old, &proof)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_witness_each_other_over_loopback() {
    // Two homes, each with its own audit log and key, and each running a
    // witness for the other's log.
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (key_a, key_b) = (
        bulwark_audit::generate_signing_key(),
        bulwark_audit::generate_signing_key(),
    );
    let (origin_a, origin_b) = (
        "node-a.test/audit".to_owned(),
        "node-b.test/audit".to_owned(),
    );
    let (url_a, wkey_a) = start_witness(
        &dir_a.path().join("witness"),
        vec![(origin_b.clone(), log_key(&key_b))],
    )
    .await;
    let (url_b, wkey_b) = start_witness(
        &dir_b.path().join("witness"),
        vec![(origin_a.clone(), log_key(&key_a))],
    )
    .await;
    let node = |dir: tempfile::TempDir, origin: String, key: SigningKey, url, wkey| {
        let sink = Store::open(&dir.path().join("bulwark.db"))
            .unwrap()
            .audit_sink();
        Node {
            _dir: dir,
            origin,
            sink,
            key,
            witness_url: url,
            witness_key: wkey,
        }
    };
    let a = node(dir_a, origin_a, key_a, url_a, wkey_a);
    let b = node(dir_b, origin_b, key_b, url_b, wkey_b);
    let client = WitnessClient::new().unwrap();

    for (log, other, first, more) in [(&a, &b, 7u64, 9u64), (&b, &a, 30, 1)] {
        append(&log.sink, 0, first);
        let note = log
            .sink
            .checkpoint(&log.key, &log.origin, "bulwark-audit")
            .unwrap();
        let cosigned = submit(&client, log, other, &note, 0).await.unwrap();
        assert_eq!((cosigned.size, cosigned.old_size), (first, 0));
        let body = bulwark_audit::note_text(&note).unwrap();
        cosigned
            .cosignature
            .verify(body, &other.witness_key)
            .unwrap();
        // The cosignature appended to the note still opens as the log's
        // checkpoint: the format other tools read.
        let witnessed = format!("{note}{}\n", cosigned.cosignature.to_line());
        bulwark_audit::parse_and_verify(&witnessed, &[log_key(&log.key)]).unwrap();

        // The log grows, more records land after the checkpoint, and the
        // next checkpoint is cosigned from the previous size.
        append(&log.sink, first, more);
        let next = log
            .sink
            .checkpoint(&log.key, &log.origin, "bulwark-audit")
            .unwrap();
        append(&log.sink, first + more, 3);
        let cosigned = submit(&client, log, other, &next, first).await.unwrap();
        assert_eq!((cosigned.size, cosigned.old_size), (first + more, first));
        cosigned
            .cosignature
            .verify(bulwark_audit::note_text(&next).unwrap(), &other.witness_key)
            .unwrap();
        // A client that forgot the witness's size learns it from the 409
        // and retries once, with the proof from there.
        let cosigned = submit(&client, log, other, &next, 0).await.unwrap();
        assert_eq!(cosigned.old_size, first + more);
    }

    // A cosignature by the wrong witness key is not accepted.
    let note = a
        .sink
        .checkpoint(&a.key, &a.origin, "bulwark-audit")
        .unwrap();
    let sink = a.sink.clone();
    let err = client
        .add_checkpoint(&b.witness_url, &a.witness_key, &note, 19, &move |from| {
            sink.consistency_proof_between(from, 19)
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::NoCosignature { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_or_forked_log_gets_refused_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let log = TestLog::new("a.example/log", 12);
    let (url, wkey) = start_witness(dir.path(), vec![(log.origin.clone(), log.verifier())]).await;
    let client = WitnessClient::new().unwrap();
    let proof = |from: u64| Ok(log.proof(from, 12));
    client
        .add_checkpoint(&url, &wkey, &log.note(12), 0, &proof)
        .await
        .unwrap();

    // Rolled back to 8: the witness is ahead, the client says so.
    let proof = |from: u64| Ok(log.proof(from, 8));
    let err = client
        .add_checkpoint(&url, &wkey, &log.note(8), 0, &proof)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Conflict {
                witness_size: 12,
                size: 8,
                ..
            }
        ),
        "{err}"
    );

    // A fork of the same size: 409 twice.
    let mut fork = TestLog::new("a.example/log", 0);
    fork.key = log.key.clone();
    fork.leaves = log.leaves.clone();
    fork.leaves[0] = [1; 32];
    let proof = |from: u64| Ok(fork.proof(from, 12));
    let err = client
        .add_checkpoint(&url, &wkey, &fork.note(12), 12, &proof)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Conflict {
                witness_size: 12,
                ..
            }
        ),
        "{err}"
    );

    // The raw statuses and the 409 body the spec prescribes.
    let http = reqwest::Client::new();
    let post = |body: String| http.post(format!("{url}/add-checkpoint")).body(body).send();
    let response = post(log.request(0, 8).encode()).await.unwrap();
    assert_eq!(response.status().as_u16(), 409);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/x.tlog.size"
    );
    assert_eq!(response.text().await.unwrap(), "12\n");
    let mut longer_fork = fork;
    longer_fork.grow(4);
    let response = post(longer_fork.request(12, 16).encode()).await.unwrap();
    assert_eq!(response.status().as_u16(), 422);
    let response = post("old 1\nnot a proof\n\nx\n".into()).await.unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let response = post("x".repeat(bulwark_witness::request::MAX_REQUEST_BYTES + 1))
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    let response = http
        .get(format!("{url}/add-checkpoint"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 405);

    // After all that, the honest log still advances.
    let mut log = log;
    log.grow(5);
    let proof = |from: u64| Ok(log.proof(from, 17));
    let cosigned = client
        .add_checkpoint(&url, &wkey, &log.note(17), 12, &proof)
        .await
        .unwrap();
    assert_eq!(cosigned.old_size, 12);
}
