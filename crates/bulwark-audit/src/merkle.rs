//! RFC 6962 / RFC 9162 Merkle tree hashing.
//!
//! The audit log is a list of leaves; its tree hash (the "root") commits to
//! every record and their order, so one 32-byte value in a signed checkpoint is
//! enough to detect any later edit, deletion or reordering. Leaves and interior
//! nodes are hashed with different one-byte prefixes (`0x00`, `0x01`) so a leaf
//! can never be passed off as an interior node (second-preimage attack on
//! unprefixed trees).
//!
//! [`CompactRange`] holds only the roots of the perfect subtrees the log
//! currently splits into (at most 64 hashes), which is all an appender or a
//! verifier needs to extend the tree and compute its root in one pass.

use sha2::{Digest, Sha256};

/// Length of every hash in the tree, in bytes.
pub const HASH_LEN: usize = 32;

/// A SHA-256 output: a leaf hash, an interior node hash or a tree root.
pub type Hash = [u8; HASH_LEN];

/// Domain-separation prefix of leaf hashes (RFC 6962 §2.1).
const LEAF_PREFIX: u8 = 0x00;
/// Domain-separation prefix of interior node hashes (RFC 6962 §2.1).
const NODE_PREFIX: u8 = 0x01;

/// `SHA-256(0x00 ‖ data)`: the hash of one leaf (one encoded audit record).
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([LEAF_PREFIX]);
    hasher.update(data);
    hasher.finalize().into()
}

/// [`leaf_hash`] fed in pieces, for data that is not in one buffer (a record
/// encoded field by field).
pub(crate) struct LeafHasher(Sha256);

impl LeafHasher {
    pub(crate) fn new() -> Self {
        let mut hasher = Sha256::new();
        hasher.update([LEAF_PREFIX]);
        Self(hasher)
    }

    pub(crate) fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    pub(crate) fn finalize(self) -> Hash {
        self.0.finalize().into()
    }
}

/// `SHA-256(0x01 ‖ left ‖ right)`: the hash of an interior node.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([NODE_PREFIX]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// The root of the empty tree, `SHA-256("")`, as RFC 6962 defines it.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// The Merkle tree hash (RFC 6962 `MTH`) of the given leaf hashes.
///
/// Linear in the number of leaves and constant in extra memory, so a verifier
/// can recompute the root of a whole log from its records in one pass.
pub fn root(leaf_hashes: &[Hash]) -> Hash {
    CompactRange::from_leaf_hashes(leaf_hashes).root()
}

/// Errors from building or restoring a [`CompactRange`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MerkleError {
    /// The tree already holds `u64::MAX` leaves; sizes are `u64` everywhere.
    #[error("the tree is full: it cannot hold more than u64::MAX leaves")]
    TreeFull,
    /// A stored frontier does not have one hash per set bit of its size, so it
    /// cannot be the frontier of any tree of that size.
    #[error("a frontier of a tree of size {size} has {expected} hashes, not {actual}")]
    FrontierMismatch {
        size: u64,
        expected: u32,
        actual: usize,
    },
}

/// The right frontier of a Merkle tree: the roots of the perfect subtrees
/// that the first `size` leaves decompose into, largest (leftmost) first.
///
/// Appending a leaf merges equal-sized subtrees like binary addition carries
/// (amortised one node hash per leaf, at most 64), and the root folds the
/// frontier from the right. Storing this instead of the whole tree lets the
/// log keep appending after a restart with O(log n) state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactRange {
    size: u64,
    /// One hash per set bit of `size`, most significant bit first.
    nodes: Vec<Hash>,
}

impl CompactRange {
    /// The frontier of the empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// The frontier of the tree over `leaf_hashes`.
    pub fn from_leaf_hashes(leaf_hashes: &[Hash]) -> Self {
        let mut range = Self::new();
        for leaf in leaf_hashes {
            // A slice cannot hold u64::MAX elements, so `append` cannot report
            // a full tree here; stopping would be the only sane reaction.
            if range.append(*leaf).is_err() {
                break;
            }
        }
        range
    }

    /// Restores a frontier saved with [`size`](Self::size) and
    /// [`nodes`](Self::nodes), checking that its shape fits its size (the
    /// hashes themselves can only be checked against a signed root).
    pub fn from_parts(size: u64, nodes: Vec<Hash>) -> Result<Self, MerkleError> {
        let expected = size.count_ones();
        if nodes.len() != expected as usize {
            return Err(MerkleError::FrontierMismatch {
                size,
                expected,
                actual: nodes.len(),
            });
        }
        Ok(Self { size, nodes })
    }

    /// Number of leaves appended so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The perfect-subtree roots, largest (leftmost) first.
    pub fn nodes(&self) -> &[Hash] {
        &self.nodes
    }

    /// Appends one leaf hash in O(log n).
    pub fn append(&mut self, leaf_hash: Hash) -> Result<(), MerkleError> {
        let new_size = self.size.checked_add(1).ok_or(MerkleError::TreeFull)?;
        // Every trailing one bit of the old size is a subtree of the same size
        // as the carry coming in from the right: merge them, smallest first.
        let merges = self.size.trailing_ones() as usize;
        let keep = self.nodes.len().saturating_sub(merges);
        let mut carry = leaf_hash;
        for left in self.nodes.drain(keep..).rev() {
            carry = node_hash(&left, &carry);
        }
        self.nodes.push(carry);
        self.size = new_size;
        Ok(())
    }

    /// The root of the tree over all appended leaves (`SHA-256("")` when
    /// empty).
    pub fn root(&self) -> Hash {
        let mut subtrees = self.nodes.iter().rev();
        let Some(smallest) = subtrees.next() else {
            return empty_root();
        };
        subtrees.fold(*smallest, |right, left| node_hash(left, &right))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_tree_root_is_sha256_of_nothing() {
        assert_eq!(
            hex::encode(empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(root(&[]), empty_root());
    }

    #[test]
    fn single_leaf_root_is_its_leaf_hash() {
        let leaf = leaf_hash(b"x");
        assert_eq!(root(&[leaf]), leaf);
    }

    #[test]
    fn frontier_shape_is_checked_on_restore() {
        let leaves: Vec<Hash> = (0u8..5).map(|i| leaf_hash(&[i])).collect();
        let range = CompactRange::from_leaf_hashes(&leaves);
        assert_eq!(range.nodes().len(), 2);
        let restored = CompactRange::from_parts(range.size(), range.nodes().to_vec());
        assert_eq!(restored.as_ref(), Ok(&range));
        assert!(matches!(
            CompactRange::from_parts(6, range.nodes()[..1].to_vec()),
            Err(MerkleError::FrontierMismatch { .. })
        ));
    }

    #[test]
    fn full_tree_refuses_another_leaf() {
        let nodes = vec![[0u8; HASH_LEN]; 64];
        let mut range = CompactRange::from_parts(u64::MAX, nodes).unwrap();
        assert_eq!(range.append([1; HASH_LEN]), Err(MerkleError::TreeFull));
        assert_eq!(range.size(), u64::MAX);
    }
}
