//! A served session's labels reach the server's label table: the worker's
//! records hand the kernel the broker client as its provenance store, each
//! record crosses the IPC frames to the server's broker, and the entry is
//! then the same one a `bulwark run` session of that agent and user reads.

use bulwark_kernel::{
    LabelRoot, ProvenanceStore, SessionRecords, StoreProvenance, content_digest, root_key,
};
use bulwark_policy::TaintLabel;
use bulwark_protocol::frame::{decode_all, encode_frame};
use bulwark_protocol::protocol::{Command, Event};
use bulwark_server::workers::{BrokerScope, DatabaseBroker, StoreBroker};
use bulwark_store::Store;
use bulwark_worker::{BrokerClient, WorkerRecords};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The server's side for a worker of `user` with `agent`: every request
/// and reply goes through the frame codecs, as over the worker's pipes.
fn serve(store: &Store, user: &str, agent: &str) -> Arc<BrokerClient> {
    let (events, mut from_worker) = tokio::sync::mpsc::unbounded_channel();
    let client = Arc::new(BrokerClient::new(events));
    let broker = Arc::new(DatabaseBroker::new(store.clone()));
    let mut scope = BrokerScope::new(user, agent);
    let answers = client.clone();
    tokio::spawn(async move {
        while let Some(event) = from_worker.recv().await {
            let (mut decoded, err) = decode_all::<Event>(&encode_frame(&event).unwrap());
            assert!(err.is_none(), "{err:?}");
            let Some(Event::Store {
                request_id,
                request,
            }) = decoded.pop()
            else {
                continue;
            };
            let (b, mut s) = (broker.clone(), scope.clone());
            let (next, reply) = tokio::task::spawn_blocking(move || {
                let reply = b.handle(&mut s, request);
                (s, reply)
            })
            .await
            .unwrap();
            scope = next;
            let command = Command::StoreReply { request_id, reply };
            let (mut decoded, err) = decode_all::<Command>(&encode_frame(&command).unwrap());
            assert!(err.is_none(), "{err:?}");
            let Some(Command::StoreReply { request_id, reply }) = decoded.pop() else {
                panic!("a store reply");
            };
            assert!(answers.deliver(request_id, reply));
        }
    });
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_sessions_labels_reach_the_servers_label_table() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("bulwark.db")).unwrap();
    let records = WorkerRecords::new(serve(&store, "alice", "demo"));
    records.create("w1", "demo", "alice").unwrap();
    // What the kernel's session is given as its label table.
    let table = records.provenance("demo", "alice");
    let digest = content_digest(b"text fetched from a web page");
    let external = BTreeSet::from([TaintLabel::External]);
    table
        .record(
            LabelRoot::Workspace,
            "notes.txt",
            digest,
            &external,
            "call-1",
        )
        .unwrap();

    // In the server's database, under alice's and demo's names.
    let key = root_key(LabelRoot::Workspace, "demo", "alice");
    assert_eq!(
        store.provenance(&key, "notes.txt", &digest).unwrap(),
        Some(vec!["external".to_string()]),
        "the label stayed in the worker"
    );
    // A later `bulwark run` of the same agent and user reads it back, and
    // so does the worker; bob's sessions do not.
    let run = |user: &str| StoreProvenance {
        store: store.clone(),
        agent: "demo".into(),
        user: user.into(),
    };
    let read = |p: &dyn ProvenanceStore| p.lookup(LabelRoot::Workspace, "notes.txt", digest);
    assert_eq!(read(&run("alice")).unwrap(), Some(external.clone()));
    assert_eq!(read(table.as_ref()).unwrap(), Some(external));
    assert_eq!(read(&run("bob")).unwrap(), None);
}
