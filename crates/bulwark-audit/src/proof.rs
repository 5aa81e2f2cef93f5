//! Inclusion and consistency proofs (RFC 6962 §2.1.1–2.1.2 to generate them,
//! RFC 9162 §2.1.3.2 and §2.1.4.2 to verify them).
//!
//! An inclusion proof shows that one record is in the log at a given position
//! without handing over the log; a consistency proof shows that a later tree
//! only appended to an earlier one, which is what makes the log append-only
//! to anyone holding two signed checkpoints.
//!
//! The verifiers take hashes as byte slices because proofs arrive from outside
//! (JSON, the network, a database). Every length is checked before any
//! hashing, and root comparisons are constant-time.

use crate::merkle::{CompactRange, HASH_LEN, Hash, node_hash};
use subtle::ConstantTimeEq;

/// What a rejected or impossible proof got wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProofError {
    /// The leaf index is not below the tree size.
    #[error("leaf index {index} is out of range for a tree of size {size}")]
    IndexOutOfRange { index: u64, size: u64 },
    /// A proof was requested for more leaves than were supplied.
    #[error("tree size {size} exceeds the {available} leaf hashes supplied")]
    SizeBeyondLeaves { size: u64, available: u64 },
    /// The older tree is larger than the newer one.
    #[error("old tree size {old_size} is larger than new tree size {new_size}")]
    OldSizeAfterNewSize { old_size: u64, new_size: u64 },
    /// Every tree extends the empty tree, so such a proof would prove nothing;
    /// RFC 9162 defines consistency proofs only from non-empty trees.
    #[error("a consistency proof from the empty tree is meaningless")]
    EmptyOldTree,
    /// The proof does not have the number of hashes the sizes call for.
    #[error("proof has {actual} hashes, {expected} expected")]
    WrongProofLength { expected: usize, actual: usize },
    /// A hash is not 32 bytes long.
    #[error("{what} is {len} bytes long, not {HASH_LEN}")]
    BadHashLength { what: HashRole, len: usize },
    /// The hashes chain to a different root: the proof, the leaf or the root
    /// is wrong.
    #[error("the proof does not lead to the expected {which} root")]
    RootMismatch { which: WhichRoot },
}

/// Which input of a verifier a [`ProofError::BadHashLength`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashRole {
    LeafHash,
    Root,
    OldRoot,
    NewRoot,
    /// The proof hash at this position.
    ProofElement(usize),
}

impl std::fmt::Display for HashRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HashRole::LeafHash => f.write_str("the leaf hash"),
            HashRole::Root => f.write_str("the root"),
            HashRole::OldRoot => f.write_str("the old root"),
            HashRole::NewRoot => f.write_str("the new root"),
            HashRole::ProofElement(i) => write!(f, "proof hash {i}"),
        }
    }
}

/// Which root a [`ProofError::RootMismatch`] failed to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhichRoot {
    /// The root of an inclusion proof's tree.
    Tree,
    /// The root of the older tree of a consistency proof.
    Old,
    /// The root of the newer tree of a consistency proof.
    New,
}

impl std::fmt::Display for WhichRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WhichRoot::Tree => "tree",
            WhichRoot::Old => "old",
            WhichRoot::New => "new",
        })
    }
}

/// The inclusion proof (RFC 6962 `PATH`) of leaf `index` in the tree of the
/// first `size` of `leaf_hashes`, lowest sibling first.
///
/// Costs O(size) hashing because interior nodes are recomputed from the
/// leaves; a store that keeps interior nodes can answer faster.
pub fn inclusion_proof(
    leaf_hashes: &[Hash],
    index: u64,
    size: u64,
) -> Result<Vec<Hash>, ProofError> {
    let leaves = prefix(leaf_hashes, size)?;
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    // `index < size <= leaf_hashes.len()`, so it fits in usize.
    let mut m = index as usize;
    let (mut lo, mut hi) = (0usize, leaves.len());
    let mut siblings = Vec::new();
    while hi - lo > 1 {
        let k = split_point(hi - lo);
        if m < k {
            siblings.push(subtree_root(&leaves[lo + k..hi]));
            hi = lo + k;
        } else {
            siblings.push(subtree_root(&leaves[lo..lo + k]));
            lo += k;
            m -= k;
        }
    }
    siblings.reverse();
    Ok(siblings)
}

/// The consistency proof (RFC 6962 `PROOF`) that the tree of the first
/// `new_size` leaf hashes extends the tree of the first `old_size`.
///
/// Empty when the sizes are equal; an error from the empty tree, which the
/// verifier would reject anyway.
pub fn consistency_proof(
    leaf_hashes: &[Hash],
    old_size: u64,
    new_size: u64,
) -> Result<Vec<Hash>, ProofError> {
    let leaves = prefix(leaf_hashes, new_size)?;
    if old_size > new_size {
        return Err(ProofError::OldSizeAfterNewSize { old_size, new_size });
    }
    if old_size == 0 {
        return Err(ProofError::EmptyOldTree);
    }
    // `old_size <= new_size <= leaf_hashes.len()`, so it fits in usize.
    let mut m = old_size as usize;
    let (mut lo, mut hi) = (0usize, leaves.len());
    // RFC 6962 SUBPROOF's flag `b`: whether the current subtree's root is one
    // the old tree's holder already knows (then it is left out).
    let mut known = true;
    let mut siblings = Vec::new();
    let mut seed = None;
    loop {
        let n = hi - lo;
        if m == n {
            if !known {
                seed = Some(subtree_root(&leaves[lo..hi]));
            }
            break;
        }
        let k = split_point(n);
        if m <= k {
            siblings.push(subtree_root(&leaves[lo + k..hi]));
            hi = lo + k;
        } else {
            siblings.push(subtree_root(&leaves[lo..lo + k]));
            lo += k;
            m -= k;
            known = false;
        }
    }
    Ok(seed.into_iter().chain(siblings.into_iter().rev()).collect())
}

/// Verifies that `leaf_hash` is leaf `index` of the tree of `size` leaves
/// whose root is `root`, following RFC 9162 §2.1.3.2 step by step.
pub fn verify_inclusion<P: AsRef<[u8]>>(
    leaf_hash: &[u8],
    index: u64,
    size: u64,
    proof: &[P],
    root: &[u8],
) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let expected = inclusion_proof_len(index, size);
    if proof.len() != expected {
        return Err(ProofError::WrongProofLength {
            expected,
            actual: proof.len(),
        });
    }
    let leaf = to_hash(leaf_hash, HashRole::LeafHash)?;
    let root = to_hash(root, HashRole::Root)?;
    let proof = to_hashes(proof)?;

    let (mut fnode, mut snode) = (index, size - 1);
    let mut r = leaf;
    for p in &proof {
        if snode == 0 {
            return Err(length_mismatch(expected, proof.len()));
        }
        if fnode & 1 == 1 || fnode == snode {
            r = node_hash(p, &r);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(length_mismatch(expected, proof.len()));
    }
    check_root(&r, &root, WhichRoot::Tree)
}

/// Verifies that the tree of `new_size` leaves with root `new_root` extends
/// the tree of `old_size` leaves with root `old_root`, following RFC 9162
/// §2.1.4.2 step by step.
///
/// Equal sizes need an empty proof and identical roots (nothing is hashed, so
/// the roots' length is not checked there, as in the reference
/// implementation). A proof from the empty tree is refused.
pub fn verify_consistency<P: AsRef<[u8]>>(
    old_size: u64,
    new_size: u64,
    old_root: &[u8],
    new_root: &[u8],
    proof: &[P],
) -> Result<(), ProofError> {
    if old_size > new_size {
        return Err(ProofError::OldSizeAfterNewSize { old_size, new_size });
    }
    if old_size == 0 {
        return Err(ProofError::EmptyOldTree);
    }
    if old_size == new_size {
        if !proof.is_empty() {
            return Err(ProofError::WrongProofLength {
                expected: 0,
                actual: proof.len(),
            });
        }
        return if bool::from(old_root.ct_eq(new_root)) {
            Ok(())
        } else {
            Err(ProofError::RootMismatch {
                which: WhichRoot::New,
            })
        };
    }
    let expected = consistency_proof_len(old_size, new_size);
    if proof.len() != expected {
        return Err(ProofError::WrongProofLength {
            expected,
            actual: proof.len(),
        });
    }
    let old_root = to_hash(old_root, HashRole::OldRoot)?;
    let new_root = to_hash(new_root, HashRole::NewRoot)?;
    let mut path = to_hashes(proof)?;
    // Step 2: a power-of-two old tree is itself a node of the new tree, so the
    // proof leaves it out and the verifier supplies it.
    if old_size.is_power_of_two() {
        path.insert(0, old_root);
    }
    let Some((first, rest)) = path.split_first() else {
        return Err(ProofError::WrongProofLength {
            expected,
            actual: proof.len(),
        });
    };

    let (mut fnode, mut snode) = (old_size - 1, new_size - 1);
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if snode == 0 {
            return Err(length_mismatch(expected, proof.len()));
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(length_mismatch(expected, proof.len()));
    }
    check_root(&fr, &old_root, WhichRoot::Old)?;
    check_root(&sr, &new_root, WhichRoot::New)
}

/// Number of hashes in the inclusion proof of `index` in a tree of `size`
/// (`index < size`): the levels below the point where the paths to `index`
/// and to the last leaf part, plus one per left subtree above it.
fn inclusion_proof_len(index: u64, size: u64) -> usize {
    let (inner, border) = decompose(index, size);
    (inner + border) as usize
}

/// Number of hashes in the consistency proof between `0 < old < new`: the
/// inclusion proof of the old tree's last perfect subtree, plus that subtree's
/// own root unless the old tree is exactly that subtree.
fn consistency_proof_len(old_size: u64, new_size: u64) -> usize {
    let (inner, border) = decompose(old_size - 1, new_size);
    let shift = old_size.trailing_zeros();
    let seed = u32::from(!old_size.is_power_of_two());
    (seed + inner.saturating_sub(shift) + border) as usize
}

/// Splits an inclusion path into the levels below the fork with the tree's
/// right border (`inner`) and the left siblings above it (`border`).
fn decompose(index: u64, size: u64) -> (u32, u32) {
    let inner = u64::BITS - (index ^ (size - 1)).leading_zeros();
    let border = index.checked_shr(inner).unwrap_or(0).count_ones();
    (inner, border)
}

/// RFC 6962's `k`: the largest power of two smaller than `n` (`n >= 2`).
fn split_point(n: usize) -> usize {
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

fn subtree_root(leaves: &[Hash]) -> Hash {
    CompactRange::from_leaf_hashes(leaves).root()
}

fn prefix(leaf_hashes: &[Hash], size: u64) -> Result<&[Hash], ProofError> {
    usize::try_from(size)
        .ok()
        .and_then(|n| leaf_hashes.get(..n))
        .ok_or(ProofError::SizeBeyondLeaves {
            size,
            available: leaf_hashes.len() as u64,
        })
}

fn to_hash(bytes: &[u8], what: HashRole) -> Result<Hash, ProofError> {
    Hash::try_from(bytes).map_err(|_| ProofError::BadHashLength {
        what,
        len: bytes.len(),
    })
}

fn to_hashes<P: AsRef<[u8]>>(proof: &[P]) -> Result<Vec<Hash>, ProofError> {
    proof
        .iter()
        .enumerate()
        .map(|(i, p)| to_hash(p.as_ref(), HashRole::ProofElement(i)))
        .collect()
}

/// The RFC's in-loop length failures; unreachable after the up-front length
/// check, kept so the loop is the RFC's algorithm verbatim.
fn length_mismatch(expected: usize, actual: usize) -> ProofError {
    ProofError::WrongProofLength { expected, actual }
}

fn check_root(computed: &Hash, expected: &Hash, which: WhichRoot) -> Result<(), ProofError> {
    if bool::from(computed.ct_eq(expected)) {
        Ok(())
    } else {
        Err(ProofError::RootMismatch { which })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_point_is_largest_power_of_two_below() {
        let got: Vec<usize> = (2..=9).map(split_point).collect();
        assert_eq!(got, [1, 2, 2, 4, 4, 4, 4, 8]);
    }

    #[test]
    fn proof_lengths_match_generated_proofs() {
        let leaves: Vec<Hash> = (0u32..70)
            .map(|i| crate::leaf_hash(&i.to_be_bytes()))
            .collect();
        for size in 1..=70u64 {
            for index in 0..size {
                let proof = inclusion_proof(&leaves, index, size).unwrap();
                assert_eq!(
                    proof.len(),
                    inclusion_proof_len(index, size),
                    "{index}/{size}"
                );
            }
            for old in 1..size {
                let proof = consistency_proof(&leaves, old, size).unwrap();
                assert_eq!(
                    proof.len(),
                    consistency_proof_len(old, size),
                    "{old}/{size}"
                );
            }
        }
    }

    #[test]
    fn generation_refuses_impossible_requests() {
        let leaves = [[0u8; HASH_LEN]; 3];
        assert!(matches!(
            inclusion_proof(&leaves, 3, 3),
            Err(ProofError::IndexOutOfRange { .. })
        ));
        assert!(matches!(
            inclusion_proof(&leaves, 0, 4),
            Err(ProofError::SizeBeyondLeaves { .. })
        ));
        assert_eq!(
            consistency_proof(&leaves, 0, 3),
            Err(ProofError::EmptyOldTree)
        );
        assert!(matches!(
            consistency_proof(&leaves, 3, 2),
            Err(ProofError::OldSizeAfterNewSize { .. })
        ));
        assert_eq!(consistency_proof(&leaves, 3, 3), Ok(vec![]));
    }
}
