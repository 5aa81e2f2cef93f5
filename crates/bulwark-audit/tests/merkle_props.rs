//! Property tests of the Merkle tree: roots agree with a naive recursive
//! RFC 6962 `MTH`, generated proofs verify, and flipping any single bit of a
//! proof hash or a root makes verification fail.

use bulwark_audit::proof::ProofError;
use bulwark_audit::{
    CompactRange, Hash, consistency_proof, empty_root, inclusion_proof, leaf_hash, node_hash, root,
    verify_consistency, verify_inclusion,
};
use proptest::prelude::*;

/// RFC 6962 §2.1 `MTH`, written as literally as possible.
fn reference_root(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => empty_root(),
        1 => leaves[0],
        n => {
            let mut k = 1;
            while k * 2 < n {
                k *= 2;
            }
            node_hash(&reference_root(&leaves[..k]), &reference_root(&leaves[k..]))
        }
    }
}

fn leaves(n: u64, salt: u64) -> Vec<Hash> {
    (0..n)
        .map(|i| leaf_hash(&[salt.to_be_bytes(), i.to_be_bytes()].concat()))
        .collect()
}

/// Every variant of `hash` with exactly one bit flipped.
fn bit_flips(hash: &Hash) -> impl Iterator<Item = Hash> + '_ {
    (0..hash.len() * 8).map(move |bit| {
        let mut flipped = *hash;
        flipped[bit / 8] ^= 1 << (bit % 8);
        flipped
    })
}

fn size_and_index() -> impl Strategy<Value = (u64, u64)> {
    (1u64..=300).prop_flat_map(|n| (Just(n), 0..n))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn root_and_frontier_match_reference(n in 0u64..=300, salt: u64) {
        let leaves = leaves(n, salt);
        let want = reference_root(&leaves);
        prop_assert_eq!(root(&leaves), want);
        let mut range = CompactRange::new();
        for (i, leaf) in leaves.iter().enumerate() {
            range.append(*leaf).unwrap();
            prop_assert_eq!(range.size(), i as u64 + 1);
            prop_assert_eq!(range.nodes().len(), range.size().count_ones() as usize);
        }
        prop_assert_eq!(range.root(), want);
    }

    #[test]
    fn inclusion_proofs_verify_and_every_bit_flip_fails((n, index) in size_and_index(), salt: u64) {
        let leaves = leaves(n, salt);
        let tree_root = root(&leaves);
        let leaf = leaves[index as usize];
        let proof = inclusion_proof(&leaves, index, n).unwrap();
        prop_assert_eq!(verify_inclusion(&leaf, index, n, &proof, &tree_root), Ok(()));

        for position in 0..proof.len() {
            for flipped in bit_flips(&proof[position]) {
                let mut bad = proof.clone();
                bad[position] = flipped;
                prop_assert!(verify_inclusion(&leaf, index, n, &bad, &tree_root).is_err());
            }
        }
        for bad_root in bit_flips(&tree_root) {
            prop_assert!(verify_inclusion(&leaf, index, n, &proof, &bad_root).is_err());
        }
        for bad_leaf in bit_flips(&leaf) {
            prop_assert!(verify_inclusion(&bad_leaf, index, n, &proof, &tree_root).is_err());
        }
        // Wrong position. (A wrong size is not always detectable from the
        // proof alone: the root of 3 leaves is also what a size-4 proof of
        // leaf 0 chains to. Signed checkpoints bind the size to the root.)
        prop_assert!(verify_inclusion(&leaf, index + 1, n, &proof, &tree_root).is_err());
        if index > 0 {
            prop_assert!(verify_inclusion(&leaf, index - 1, n, &proof, &tree_root).is_err());
        }
    }

    #[test]
    fn consistency_proofs_verify_and_every_bit_flip_fails((new, old) in size_and_index(), salt: u64) {
        let old = old + 1; // 1..=new
        let leaves = leaves(new, salt);
        let old_root = root(&leaves[..old as usize]);
        let new_root = root(&leaves);
        let proof = consistency_proof(&leaves, old, new).unwrap();
        prop_assert_eq!(verify_consistency(old, new, &old_root, &new_root, &proof), Ok(()));

        for position in 0..proof.len() {
            for flipped in bit_flips(&proof[position]) {
                let mut bad = proof.clone();
                bad[position] = flipped;
                prop_assert!(verify_consistency(old, new, &old_root, &new_root, &bad).is_err());
            }
        }
        for bad in bit_flips(&old_root) {
            prop_assert!(verify_consistency(old, new, &bad, &new_root, &proof).is_err());
        }
        for bad in bit_flips(&new_root) {
            prop_assert!(verify_consistency(old, new, &old_root, &bad, &proof).is_err());
        }
        // A different old tree is not consistent with this proof.
        if old > 1 {
            let other = root(&leaves[..old as usize - 1]);
            prop_assert!(verify_consistency(old - 1, new, &other, &new_root, &proof).is_err());
        }
    }

    /// Random proofs of the right length for random sizes are rejected (they
    /// would need a hash collision to pass), and never panic.
    #[test]
    fn random_inputs_never_verify(
        (size, index) in size_and_index(),
        hashes in prop::collection::vec(any::<[u8; 32]>(), 0..20),
        root in any::<[u8; 32]>(),
        leaf in any::<[u8; 32]>(),
    ) {
        prop_assert!(verify_inclusion(&leaf, index, size, &hashes, &root).is_err());
        prop_assert!(verify_consistency(index + 1, size + 1, &leaf, &root, &hashes).is_err());
    }
}

#[test]
fn index_at_or_beyond_size_is_rejected() {
    let leaves = leaves(4, 0);
    let tree_root = root(&leaves);
    let proof = inclusion_proof(&leaves, 3, 4).unwrap();
    for index in [4, 5, u64::MAX] {
        assert_eq!(
            verify_inclusion(&leaves[3], index, 4, &proof, &tree_root),
            Err(ProofError::IndexOutOfRange { index, size: 4 })
        );
    }
    assert!(verify_inclusion(&leaves[0], 0, 0, &[] as &[Hash], &empty_root()).is_err());
}

#[test]
fn wrong_lengths_are_rejected_before_hashing() {
    let leaves = leaves(5, 1);
    let tree_root = root(&leaves);
    let proof = inclusion_proof(&leaves, 2, 5).unwrap();
    let mut longer = proof.clone();
    longer.push(tree_root);
    assert!(matches!(
        verify_inclusion(&leaves[2], 2, 5, &longer, &tree_root),
        Err(ProofError::WrongProofLength { .. })
    ));
    assert!(matches!(
        verify_inclusion(&leaves[2], 2, 5, &proof[1..], &tree_root),
        Err(ProofError::WrongProofLength { .. })
    ));
    let mut short_hash: Vec<Vec<u8>> = proof.iter().map(|h| h.to_vec()).collect();
    short_hash[0].pop();
    assert!(matches!(
        verify_inclusion(&leaves[2], 2, 5, &short_hash, &tree_root),
        Err(ProofError::BadHashLength { .. })
    ));
    assert!(matches!(
        verify_inclusion(&leaves[2][..31], 2, 5, &proof, &tree_root),
        Err(ProofError::BadHashLength { .. })
    ));
}

#[test]
fn consistency_edge_cases() {
    let leaves = leaves(6, 2);
    let r = |n: usize| root(&leaves[..n]);
    let none: &[Hash] = &[];
    assert_eq!(verify_consistency(3, 3, &r(3), &r(3), none), Ok(()));
    assert!(verify_consistency(3, 3, &r(3), &r(4), none).is_err());
    assert_eq!(
        verify_consistency(0, 6, &empty_root(), &r(6), none),
        Err(ProofError::EmptyOldTree)
    );
    assert_eq!(
        verify_consistency(0, 0, &empty_root(), &empty_root(), none),
        Err(ProofError::EmptyOldTree)
    );
    let proof = consistency_proof(&leaves, 3, 6).unwrap();
    assert!(matches!(
        verify_consistency(6, 3, &r(6), &r(3), &proof),
        Err(ProofError::OldSizeAfterNewSize { .. })
    ));
    assert!(matches!(
        verify_consistency(3, 6, &r(3), &r(6), none),
        Err(ProofError::WrongProofLength { .. })
    ));
}
