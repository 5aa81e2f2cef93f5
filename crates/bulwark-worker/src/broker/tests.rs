//! The broker client's audit queue against a scripted server: what leaves
//! when, in which order, and what a lost batch does to later calls.

use super::*;
use bulwark_audit::Decision;
use std::sync::Arc;

/// What the scripted server saw, in order, and what it made durable.
#[derive(Default)]
struct Seen {
    requests: Vec<StoreRequest>,
    /// Record `action`s stored, in order.
    log: Vec<String>,
    /// How many of `log` a flush made durable.
    durable: usize,
}

/// A server answering `client`'s store requests in order, as the
/// supervisor's pump does. `fail_batches` fails every audit batch.
fn serve(
    client: &Arc<BrokerClient>,
    mut events: mpsc::UnboundedReceiver<Event>,
    fail_batches: bool,
) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (client, out) = (client.clone(), seen.clone());
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            let Event::Store {
                request_id,
                request,
            } = event
            else {
                continue;
            };
            let mut seen = out.lock().unwrap();
            seen.requests.push(request.clone());
            let reply = match request {
                StoreRequest::AuditBatch { .. } if fail_batches => StoreReply::Failed {
                    kind: StoreFailure::Internal,
                    message: "disk full".into(),
                },
                StoreRequest::AuditBatch { entries, flush } => {
                    seen.log.extend(entries.into_iter().map(|e| e.action));
                    if flush {
                        seen.durable = seen.log.len();
                    }
                    StoreReply::Done
                }
                // The label table as scripted by path: `tainted` has an
                // entry, `junk` one this build cannot read, others none.
                StoreRequest::Provenance { path, .. } => StoreReply::Provenance {
                    labels: match path.as_str() {
                        "tainted" => Some(vec!["external".into(), "peer".into()]),
                        "clean" => Some(Vec::new()),
                        "junk" => Some(vec!["bogus".into()]),
                        _ => None,
                    },
                },
                StoreRequest::RecordProvenance { path, .. } if path == "full" => {
                    StoreReply::Failed {
                        kind: StoreFailure::Internal,
                        message: "the server could not store this".into(),
                    }
                }
                _ => StoreReply::Done,
            };
            drop(seen);
            assert!(client.deliver(request_id, reply));
        }
    });
    seen
}

fn client() -> (Arc<BrokerClient>, mpsc::UnboundedReceiver<Event>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(BrokerClient::new(tx)), rx)
}

fn record(action: &str) -> AuditRecord {
    AuditRecord {
        time_ms: 1,
        session: "s".into(),
        agent: "a".into(),
        user: "u".into(),
        action: bulwark_audit::Action::parse(action.to_owned()),
        tool: "file_read".into(),
        operation: "read".into(),
        args_digest: String::new(),
        decision: Decision::Allowed,
        reason: bulwark_audit::Reason::Capability,
        detail: String::new(),
        duration_us: 0,
    }
}

fn batches(seen: &Seen) -> Vec<(usize, bool)> {
    seen.requests
        .iter()
        .filter_map(|r| match r {
            StoreRequest::AuditBatch { entries, flush } => Some((entries.len(), *flush)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_only_queue_and_flush_stores_them_in_order() {
    let (client, events) = client();
    let seen = serve(&client, events, false);
    for action in ["one", "two", "three"] {
        client.record(&record(action)).unwrap();
    }
    assert!(
        seen.lock().unwrap().requests.is_empty(),
        "a record cost a round trip"
    );
    client.flush().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.log, ["one", "two", "three"]);
    assert_eq!(
        seen.durable, 3,
        "flush returned before the records were durable"
    );
    assert_eq!(
        batches(&seen),
        [(3, true)],
        "one request for the whole flush"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_sends_a_batch_and_order_holds_across_batches() {
    let (client, events) = client();
    let seen = serve(&client, events, false);
    let total = MAX_AUDIT_BATCH_ENTRIES + 3;
    for i in 0..total {
        client.record(&record(&i.to_string())).unwrap();
    }
    assert_eq!(
        batches(&seen.lock().unwrap()),
        [(MAX_AUDIT_BATCH_ENTRIES, false)]
    );
    client.flush().unwrap();
    let seen = seen.lock().unwrap();
    let expected: Vec<String> = (0..total).map(|i| i.to_string()).collect();
    assert_eq!(seen.log, expected);
    assert_eq!(seen.durable, total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_record_goes_in_a_batch_of_its_own_within_the_bounds() {
    let (client, events) = client();
    let seen = serve(&client, events, false);
    let mut big = record("big");
    big.detail = "é".repeat(bulwark_protocol::store_ipc::MAX_AUDIT_DETAIL_CHARS);
    for _ in 0..5 {
        client.record(&big).unwrap();
    }
    client.flush().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.log.len(), 5);
    for request in &seen.requests {
        request.validate().unwrap();
        // Every batch, escaped, fits in one frame.
        let body = serde_json::to_vec(request).unwrap();
        assert!(body.len() < bulwark_protocol::MAX_FRAME_BYTES);
    }
    assert!(batches(&seen).len() > 1, "{:?}", batches(&seen));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_records_reach_the_server_before_the_next_request() {
    let (client, events) = client();
    let seen = serve(&client, events, false);
    client.record(&record("before")).unwrap();
    client.save_state("s", "{}").unwrap();
    let seen = seen.lock().unwrap();
    assert!(
        matches!(
            seen.requests.as_slice(),
            [
                StoreRequest::AuditBatch { flush: false, .. },
                StoreRequest::SaveState { .. }
            ]
        ),
        "{:?}",
        seen.requests
    );
    assert_eq!(seen.log, ["before"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_batch_fails_every_later_record_and_flush() {
    let (client, events) = client();
    let seen = serve(&client, events, true);
    client.record(&record("lost")).unwrap();
    assert!(client.flush().is_err());
    assert!(client.record(&record("after")).is_err());
    assert!(client.flush().is_err());
    assert_eq!(
        batches(&seen.lock().unwrap()).len(),
        1,
        "nothing sent after"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_lost_ahead_of_another_request_fails_the_next_flush() {
    let (client, events) = client();
    let _seen = serve(&client, events, true);
    client.record(&record("lost")).unwrap();
    // The batch went out ahead of this request and failed; the request
    // itself was answered.
    client.save_state("s", "{}").unwrap();
    assert!(client.flush().is_err());
    assert!(client.record(&record("after")).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_asks_the_server_only_when_records_went_out_since_the_last() {
    let (client, events) = client();
    let seen = serve(&client, events, false);
    client.flush().unwrap();
    assert!(seen.lock().unwrap().requests.is_empty(), "nothing to flush");
    client.record(&record("carried")).unwrap();
    client.save_state("s", "{}").unwrap();
    // The record went out ahead of `save_state`, not yet durable: the
    // barrier must still be asked for.
    client.flush().unwrap();
    {
        let seen = seen.lock().unwrap();
        assert_eq!(batches(&seen), [(1, false), (0, true)]);
        assert_eq!(seen.durable, 1);
    }
    client.flush().unwrap();
    assert_eq!(batches(&seen.lock().unwrap()).len(), 2, "already durable");
}

mod provenance {
    use super::*;
    use bulwark_kernel::{LabelRoot, ProvenanceStore};
    use bulwark_policy::TaintLabel;
    use bulwark_protocol::store_ipc::{DigestHex, LabelRootWire};
    use std::collections::BTreeSet;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_record_is_one_answered_request_after_the_queued_audit_records() {
        let (client, events) = client();
        let seen = serve(&client, events, false);
        AuditSink::record(&*client, &record("wrote")).unwrap();
        let labels = BTreeSet::from([TaintLabel::Peer, TaintLabel::External]);
        ProvenanceStore::record(
            &*client,
            LabelRoot::UserMemory,
            "n.md",
            [9; 32],
            &labels,
            "c1",
        )
        .unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.log, ["wrote"], "the audit record went first");
        assert_eq!(
            seen.requests.last(),
            Some(&StoreRequest::RecordProvenance {
                root: LabelRootWire::UserMemory,
                path: "n.md".into(),
                digest: DigestHex([9; 32]),
                labels: vec!["external".into(), "peer".into()],
                source: "c1".into(),
            })
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_record_is_an_error_for_the_tool() {
        let (client, events) = client();
        let _seen = serve(&client, events, false);
        let none = BTreeSet::new();
        let err =
            ProvenanceStore::record(&*client, LabelRoot::Workspace, "full", [1; 32], &none, "c")
                .unwrap_err();
        assert!(err.to_string().contains("could not store"), "{err}");
        // Over a bound: not sent at all, and said so.
        let long = "p".repeat(bulwark_protocol::store_ipc::MAX_PROVENANCE_PATH_BYTES + 1);
        let err =
            ProvenanceStore::record(&*client, LabelRoot::Workspace, &long, [1; 32], &none, "c")
                .unwrap_err();
        assert!(err.to_string().contains("not sent"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lookups_tell_labelled_clean_and_absent_apart_and_refuse_unknown_names() {
        let (client, events) = client();
        let _seen = serve(&client, events, false);
        let look =
            |path: &str| ProvenanceStore::lookup(&*client, LabelRoot::Workspace, path, [1; 32]);
        assert_eq!(
            look("tainted").unwrap(),
            Some(BTreeSet::from([TaintLabel::External, TaintLabel::Peer]))
        );
        assert_eq!(look("clean").unwrap(), Some(BTreeSet::new()));
        assert_eq!(look("never").unwrap(), None);
        let err = look("junk").unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_workers_records_give_the_broker_as_its_label_table() {
        use bulwark_kernel::SessionRecords;
        let (client, events) = client();
        let seen = serve(&client, events, false);
        let records = crate::records::WorkerRecords::new(client.clone());
        let table = records.provenance("agent", "user");
        let labels = BTreeSet::from([TaintLabel::External]);
        table
            .record(LabelRoot::Workspace, "f", [2; 32], &labels, "c")
            .unwrap();
        assert!(
            matches!(
                seen.lock().unwrap().requests.as_slice(),
                [StoreRequest::RecordProvenance { .. }]
            ),
            "the label left the process (it was kept in memory before)"
        );
    }
}
