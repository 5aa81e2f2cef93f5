//! A worker queues its audit records, but nothing reaches the model before
//! its record is durable: every tool result is stored (and then sent to the
//! model) only after a flush that made every tool call's record so far
//! durable.

use super::{Bw, open, say, shut_down, turn};
use bulwark_protocol::store_ipc::{StoreReply, StoreRequest};
use bulwark_server::workers::{
    Broker, BrokerScope, DatabaseBroker, StoreBroker, Supervisor, SupervisorConfig,
};
use bulwark_store::Store;
use std::sync::{Arc, Mutex};

/// What the server was asked, in order.
enum Seen {
    /// Audit records of these actions, and whether the batch was a flush.
    Records(Vec<String>, bool),
    /// A stored message.
    Message(String),
    Other,
}

struct Watching(DatabaseBroker, Arc<Mutex<Vec<Seen>>>);

impl StoreBroker for Watching {
    fn handle(&self, scope: &mut BrokerScope, request: StoreRequest) -> StoreReply {
        let seen = match &request {
            StoreRequest::AuditBatch { entries, flush } => Seen::Records(
                entries.iter().map(|e| e.action.to_string()).collect(),
                *flush,
            ),
            StoreRequest::Audit { entry } => Seen::Records(vec![entry.action.to_string()], false),
            StoreRequest::AuditFlush {} => Seen::Records(Vec::new(), true),
            StoreRequest::AppendMessage { content_json, .. } => Seen::Message(content_json.clone()),
            _ => Seen::Other,
        };
        self.1.lock().unwrap().push(seen);
        self.0.handle(scope, request)
    }

    fn end(&self, scope: &BrokerScope) {
        self.0.end(scope);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tool_result_is_stored_or_sent_before_its_record_is_durable() {
    let bw = Bw::init();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut config = SupervisorConfig::new(super::BIN, ["worker"], bw.home());
    let store = Store::open(&bw.path("bulwark.db")).expect("the database opens");
    let broker = Watching(DatabaseBroker::new(store), seen.clone());
    config.broker = Some(Broker::new(broker));
    let supervisor = Supervisor::new(config);
    let mut c = supervisor.open(open("local", "demo", None)).await.unwrap();
    say(&c, 1, "show me").await;
    let _ = turn(&mut c, 1).await;
    shut_down(c).await;

    let seen = seen.lock().unwrap();
    let (mut sent, mut durable, mut results) = (0usize, 0usize, 0usize);
    for item in seen.iter() {
        match item {
            Seen::Records(actions, flush) => {
                sent += actions.iter().filter(|a| *a == "tool_call").count();
                if *flush {
                    durable = sent;
                }
            }
            Seen::Message(json) if json.contains(r#""type":"tool_result""#) => {
                let here = json.matches(r#""type":"tool_result""#).count();
                results += here;
                assert!(
                    durable >= results,
                    "a tool result was stored with {durable} of {results} tool call records durable"
                );
            }
            Seen::Message(_) | Seen::Other => {}
        }
    }
    assert_eq!(results, 5, "the demo turn's five tool results were seen");
}
