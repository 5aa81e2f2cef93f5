//! A test log kept in memory (leaf hashes and a key), and witness setup.

use bulwark_audit::{Checkpoint, Hash, SigningKey, VerifierKey, generate_signing_key};
use bulwark_witness::{AddCheckpoint, Identity, Witness};

pub struct TestLog {
    pub origin: String,
    pub key: SigningKey,
    pub leaves: Vec<Hash>,
}

impl TestLog {
    pub fn new(origin: &str, size: usize) -> Self {
        let mut log = Self {
            origin: origin.to_owned(),
            key: generate_signing_key(),
            leaves: Vec::new(),
        };
        log.grow(size);
        log
    }

    /// Appends `n` leaves (distinct per log and position).
    pub fn grow(&mut self, n: usize) {
        for _ in 0..n {
            let i = self.leaves.len();
            self.leaves.push(bulwark_audit::leaf_hash(
                format!("{}#{i}", self.origin).as_bytes(),
            ));
        }
    }

    pub fn verifier(&self) -> VerifierKey {
        VerifierKey::from_signing_key("test-log", &self.key).unwrap()
    }

    pub fn root(&self, size: u64) -> Hash {
        bulwark_audit::root(&self.leaves[..size as usize])
    }

    /// The signed checkpoint of the first `size` leaves.
    pub fn note(&self, size: u64) -> String {
        let checkpoint = Checkpoint::new(self.origin.clone(), size, self.root(size));
        bulwark_audit::sign(&checkpoint, &self.key, "test-log").unwrap()
    }

    pub fn proof(&self, old: u64, new: u64) -> Vec<Hash> {
        if old == 0 || old == new {
            return Vec::new();
        }
        bulwark_audit::consistency_proof(&self.leaves, old, new).unwrap()
    }

    /// A well-formed request from `old` to `new`.
    pub fn request(&self, old: u64, new: u64) -> AddCheckpoint {
        AddCheckpoint {
            old_size: old,
            proof: self.proof(old, new),
            checkpoint: self.note(new),
        }
    }
}

pub fn witness_for(dir: &std::path::Path, logs: &[&TestLog]) -> Witness {
    let identity = Identity::load_or_create(dir, Some("witness.test/w1")).unwrap();
    Witness::open(
        dir,
        identity,
        logs.iter()
            .map(|l| (l.origin.clone(), l.verifier()))
            .collect(),
    )
    .unwrap()
}
