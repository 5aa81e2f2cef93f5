//! The provenance requests of a worker: the labels of what its session
//! stored, kept under roots the server names (the worker's agent and user,
//! never names the worker sends).

use super::{BrokerScope, DatabaseBroker, from_store};
use bulwark_protocol::store_ipc::{DigestHex, LabelRootWire, StoreReply};

impl DatabaseBroker {
    /// Records the labels of `path`'s content (`digest`) under `root`.
    pub(super) fn record_provenance(
        &self,
        scope: &BrokerScope,
        root: LabelRootWire,
        path: &str,
        digest: &DigestHex,
        labels: &[String],
        source: &str,
    ) -> StoreReply {
        let names: Vec<&str> = labels.iter().map(String::as_str).collect();
        from_store(self.store.record_provenance(
            &label_root(scope, root),
            path,
            &digest.0,
            &names,
            source,
        ))
    }

    /// The labels recorded for `path`'s content under `root`, if any.
    pub(super) fn provenance(
        &self,
        scope: &BrokerScope,
        root: LabelRootWire,
        path: &str,
        digest: &DigestHex,
    ) -> StoreReply {
        match self
            .store
            .provenance(&label_root(scope, root), path, &digest.0)
        {
            Ok(labels) => StoreReply::Provenance { labels },
            Err(err) => from_store(Err(err)),
        }
    }
}

/// The label-table key of one of the worker's roots: the agent and user are
/// the server's (those it started the worker for), never the worker's.
fn label_root(scope: &BrokerScope, root: LabelRootWire) -> String {
    let root = match root {
        LabelRootWire::Workspace => bulwark_kernel::LabelRoot::Workspace,
        LabelRootWire::AgentMemory => bulwark_kernel::LabelRoot::AgentMemory,
        LabelRootWire::UserMemory => bulwark_kernel::LabelRoot::UserMemory,
    };
    bulwark_kernel::root_key(root, &scope.agent, &scope.user)
}
