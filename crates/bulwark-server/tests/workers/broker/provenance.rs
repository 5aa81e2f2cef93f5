//! The label table through the broker: a worker names one of its own roots
//! by kind, and the server keys it to the agent and user it started the
//! worker for, so no worker reads or writes another's labels.

use super::super::common::{self, say, turn};
use super::{refused, scope};
use bulwark_kernel::{LabelRoot, root_key};
use bulwark_protocol::protocol::Event;
use bulwark_protocol::store_ipc::{
    DigestHex, LabelRootWire, StoreFailure, StoreReply, StoreRequest,
};
use bulwark_server::workers::{Broker, BrokerScope, DatabaseBroker, StoreBroker, Supervisor};
use bulwark_store::Store;

const DIGEST: DigestHex = DigestHex([7; 32]);

fn opened(broker: &DatabaseBroker, user: &str, agent: &str, session: &str) -> BrokerScope {
    let mut s = scope(user, agent);
    let created = broker.handle(
        &mut s,
        StoreRequest::Create {
            session: session.into(),
        },
    );
    assert_eq!(created, StoreReply::Done);
    s
}

fn record(root: LabelRootWire, labels: &[&str]) -> StoreRequest {
    StoreRequest::RecordProvenance {
        root,
        path: "notes.txt".into(),
        digest: DIGEST,
        labels: labels.iter().map(|l| l.to_string()).collect(),
        source: "call-1".into(),
    }
}

fn lookup(broker: &DatabaseBroker, s: &mut BrokerScope, root: LabelRootWire) -> StoreReply {
    let request = StoreRequest::Provenance {
        root,
        path: "notes.txt".into(),
        digest: DIGEST,
    };
    broker.handle(s, request)
}

fn labels(names: &[&str]) -> StoreReply {
    StoreReply::Provenance {
        labels: Some(names.iter().map(|n| n.to_string()).collect()),
    }
}

const NONE: StoreReply = StoreReply::Provenance { labels: None };

#[test]
fn a_workers_labels_are_its_own_users_and_agents() {
    let store = Store::open_in_memory().unwrap();
    let broker = DatabaseBroker::new(store.clone());
    let mut alice = opened(&broker, "alice", "helper", "a1");
    let mut bob = opened(&broker, "bob", "helper", "b1");
    let reply = broker.handle(&mut alice, record(LabelRootWire::Workspace, &["external"]));
    assert_eq!(reply, StoreReply::Done);
    assert_eq!(
        lookup(&broker, &mut alice, LabelRootWire::Workspace),
        labels(&["external"])
    );
    // Bob's worker asks for the same path and bytes: his workspace has
    // no such entry, and alice's is out of his reach.
    assert_eq!(lookup(&broker, &mut bob, LabelRootWire::Workspace), NONE);
    assert_eq!(lookup(&broker, &mut bob, LabelRootWire::UserMemory), NONE);
    // His clean record lands in his own workspace, not over hers.
    let reply = broker.handle(&mut bob, record(LabelRootWire::Workspace, &[]));
    assert_eq!(reply, StoreReply::Done);
    assert_eq!(
        lookup(&broker, &mut bob, LabelRootWire::Workspace),
        labels(&[])
    );
    assert_eq!(
        lookup(&broker, &mut alice, LabelRootWire::Workspace),
        labels(&["external"])
    );
    // In the store, under the server's names.
    let key = |user: &str| root_key(LabelRoot::Workspace, "helper", user);
    assert_eq!(
        store
            .provenance(&key("alice"), "notes.txt", &DIGEST.0)
            .unwrap(),
        Some(vec!["external".to_string()])
    );
    assert_eq!(
        store
            .provenance(&key("bob"), "notes.txt", &DIGEST.0)
            .unwrap(),
        Some(Vec::new())
    );
}

#[test]
fn user_memory_is_shared_by_a_users_agents_and_workspaces_are_not() {
    let store = Store::open_in_memory().unwrap();
    let broker = DatabaseBroker::new(store.clone());
    let mut helper = opened(&broker, "alice", "helper", "a1");
    let mut other = opened(&broker, "alice", "other", "a2");
    let mut bob = opened(&broker, "bob", "helper", "b1");
    for root in [LabelRootWire::UserMemory, LabelRootWire::AgentMemory] {
        let reply = broker.handle(&mut helper, record(root, &["peer"]));
        assert_eq!(reply, StoreReply::Done);
    }
    assert_eq!(
        lookup(&broker, &mut other, LabelRootWire::UserMemory),
        labels(&["peer"])
    );
    assert_eq!(
        lookup(&broker, &mut other, LabelRootWire::AgentMemory),
        NONE
    );
    assert_eq!(lookup(&broker, &mut other, LabelRootWire::Workspace), NONE);
    assert_eq!(lookup(&broker, &mut bob, LabelRootWire::UserMemory), NONE);
    assert_eq!(lookup(&broker, &mut bob, LabelRootWire::AgentMemory), NONE);
}

#[test]
fn labels_need_an_open_session_and_refused_input_stores_nothing() {
    let store = Store::open_in_memory().unwrap();
    let broker = DatabaseBroker::new(store.clone());
    let mut early = scope("alice", "helper");
    let reply = broker.handle(&mut early, record(LabelRootWire::Workspace, &["external"]));
    assert_eq!(refused(&reply), Some(StoreFailure::Forbidden), "{reply:?}");
    let reply = lookup(&broker, &mut early, LabelRootWire::Workspace);
    assert_eq!(refused(&reply), Some(StoreFailure::Forbidden), "{reply:?}");

    let mut alice = opened(&broker, "alice", "helper", "a1");
    for path in ["", "a\nb"] {
        let request = StoreRequest::RecordProvenance {
            root: LabelRootWire::Workspace,
            path: path.into(),
            digest: DIGEST,
            labels: vec!["external".into()],
            source: "c".into(),
        };
        let reply = broker.handle(&mut alice, request);
        match &reply {
            StoreReply::Failed {
                kind: StoreFailure::Forbidden,
                message,
            } => assert!(message.contains("path"), "{message}"),
            other => panic!("{path:?}: {other:?}"),
        }
    }
}

#[test]
fn a_label_that_is_not_a_taint_label_is_a_violation() {
    let alice = scope("alice", "helper");
    for bad in ["EXTERNAL", "bogus", "external ", ""] {
        let request = record(LabelRootWire::Workspace, &["external", bad]);
        assert!(alice.violation(&request).is_some(), "{bad:?}");
    }
    for good in bulwark_policy::TaintLabel::ALL {
        let request = record(LabelRootWire::Workspace, &[good.name()]);
        assert_eq!(alice.violation(&request), None, "{good:?}");
    }
    assert_eq!(
        alice.violation(&record(LabelRootWire::Workspace, &[])),
        None
    );
}

/// Two workers of different users, through the supervisor: what one
/// records, the other cannot see; a later worker of the first user can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_workers_of_two_users_see_only_their_own_labels() {
    let store = Store::open_in_memory().unwrap();
    let mut config = common::config("stored");
    config.broker = Some(Broker::new(DatabaseBroker::new(store.clone())));
    let supervisor = Supervisor::new(config);
    let said = async |user: &str, text: &str| {
        let mut c = supervisor.open(common::request(user)).await.unwrap();
        say(&c, 1, text).await;
        let events = turn(&mut c, 1).await;
        events
            .iter()
            .filter_map(|e| match e {
                Event::TextDelta { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect::<String>()
    };
    let alice = said("alice", "label").await;
    assert!(alice.contains("recorded: Done"), "{alice}");
    assert!(
        alice.contains(r#"labels: Provenance { labels: Some(["external"]) }"#),
        "{alice}"
    );
    let bob = said("bob", "lookup").await;
    assert!(bob.contains("labels: Provenance { labels: None }"), "{bob}");
    let again = said("alice", "lookup").await;
    assert!(again.contains(r#"Some(["external"])"#), "{again}");
    let key = |user: &str| root_key(LabelRoot::Workspace, "demo", user);
    assert_eq!(
        store
            .provenance(&key("alice"), "notes.txt", &DIGEST.0)
            .unwrap(),
        Some(vec!["external".to_string()])
    );
    assert_eq!(
        store
            .provenance(&key("bob"), "notes.txt", &DIGEST.0)
            .unwrap(),
        None
    );
}
