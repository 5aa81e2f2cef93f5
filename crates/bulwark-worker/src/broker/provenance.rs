//! The label table, brokered: a worker's session records and looks up the
//! labels of what it writes and reads through the server, which keys the
//! root it names (one of the worker's own three, by kind) to the agent and
//! user it started the worker for.
//!
//! A record is one round trip, answered once the entry is durable, so the
//! write it labels happens only after its labels are stored: a crash in
//! between leaves labels for bytes never written (harmless), never bytes
//! without their labels. Queued audit records leave ahead of it, as ahead
//! of every other store request.

use super::{BrokerClient, unexpected};
use bulwark_kernel::{LabelRoot, ProvenanceError, ProvenanceStore, labels_from_names};
use bulwark_policy::TaintLabel;
use bulwark_protocol::store_ipc::{DigestHex, LabelRootWire, StoreReply, StoreRequest};
use std::collections::BTreeSet;

fn wire(root: LabelRoot) -> LabelRootWire {
    match root {
        LabelRoot::Workspace => LabelRootWire::Workspace,
        LabelRoot::AgentMemory => LabelRootWire::AgentMemory,
        LabelRoot::UserMemory => LabelRootWire::UserMemory,
    }
}

fn failed(err: impl std::fmt::Display) -> ProvenanceError {
    ProvenanceError(err.to_string())
}

/// The agent and user are the server's to bind: nothing here names them.
impl ProvenanceStore for BrokerClient {
    fn record(
        &self,
        root: LabelRoot,
        path: &str,
        digest: [u8; 32],
        labels: &BTreeSet<TaintLabel>,
        source: &str,
    ) -> Result<(), ProvenanceError> {
        self.done(StoreRequest::RecordProvenance {
            root: wire(root),
            path: path.to_owned(),
            digest: DigestHex(digest),
            labels: labels.iter().map(|l| l.name().to_owned()).collect(),
            source: source.to_owned(),
        })
        .map_err(failed)
    }

    fn lookup(
        &self,
        root: LabelRoot,
        path: &str,
        digest: [u8; 32],
    ) -> Result<Option<BTreeSet<TaintLabel>>, ProvenanceError> {
        let request = StoreRequest::Provenance {
            root: wire(root),
            path: path.to_owned(),
            digest: DigestHex(digest),
        };
        let labels = match self.call(request).map_err(failed)? {
            StoreReply::Provenance { labels } => labels,
            other => return Err(failed(unexpected(&other))),
        };
        labels
            .map(|names| labels_from_names(&names, "the server's reply"))
            .transpose()
    }
}
