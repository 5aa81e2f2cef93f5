//! The transparency-dev/merkle conformance vectors (copied into
//! `tests/vectors/merkle/`): every valid proof verifies, every corrupted one
//! is rejected, and proofs we generate for the same trees are byte-identical.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bulwark_audit::{
    Hash, consistency_proof, inclusion_proof, leaf_hash, root, verify_consistency, verify_inclusion,
};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Files in the copied vector set; a walk that finds fewer means files went
/// missing, not that the verifier got better.
const INCLUSION_FILES: usize = 98;
const CONSISTENCY_FILES: usize = 98;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InclusionCase {
    leaf_idx: u64,
    tree_size: u64,
    root: String,
    leaf_hash: String,
    proof: Option<Vec<String>>,
    desc: String,
    want_err: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsistencyCase {
    size1: u64,
    size2: u64,
    root1: String,
    root2: String,
    proof: Option<Vec<String>>,
    desc: String,
    #[serde(rename = "wantErr")]
    want_err: bool,
}

fn vector_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors/merkle")
        .join(kind)
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn b64(text: &str) -> Vec<u8> {
    BASE64.decode(text).unwrap()
}

fn b64_list(list: &Option<Vec<String>>) -> Vec<Vec<u8>> {
    list.iter().flatten().map(|s| b64(s)).collect()
}

fn load<T: for<'de> Deserialize<'de>>(path: &Path) -> T {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_inclusion_vector_is_decided_as_expected() {
    let files = json_files(&vector_dir("inclusion"));
    assert_eq!(files.len(), INCLUSION_FILES);
    let (mut valid, mut rejected) = (0, 0);
    for path in &files {
        let case: InclusionCase = load(path);
        let result = verify_inclusion(
            &b64(&case.leaf_hash),
            case.leaf_idx,
            case.tree_size,
            &b64_list(&case.proof),
            &b64(&case.root),
        );
        assert_eq!(
            result.is_err(),
            case.want_err,
            "{} ({}): {result:?}",
            path.display(),
            case.desc
        );
        if case.want_err {
            rejected += 1
        } else {
            valid += 1
        }
    }
    assert_eq!((valid, rejected), (6, 92));
}

#[test]
fn every_consistency_vector_is_decided_as_expected() {
    let files = json_files(&vector_dir("consistency"));
    assert_eq!(files.len(), CONSISTENCY_FILES);
    let (mut valid, mut rejected) = (0, 0);
    for path in &files {
        let case: ConsistencyCase = load(path);
        let result = verify_consistency(
            case.size1,
            case.size2,
            &b64(&case.root1),
            &b64(&case.root2),
            &b64_list(&case.proof),
        );
        assert_eq!(
            result.is_err(),
            case.want_err,
            "{} ({}): {result:?}",
            path.display(),
            case.desc
        );
        if case.want_err {
            rejected += 1
        } else {
            valid += 1
        }
    }
    assert_eq!((valid, rejected), (6, 92));
}

/// The eight leaves the vectors were generated from (RFC 6962 test data).
fn reference_leaves() -> Vec<Hash> {
    [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
    .iter()
    .map(|h| leaf_hash(&hex::decode(h).unwrap()))
    .collect()
}

#[test]
fn reference_tree_roots_match_rfc6962_test_data() {
    let want = [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];
    let leaves = reference_leaves();
    for (size, want) in (1..=8).zip(want) {
        assert_eq!(hex::encode(root(&leaves[..size])), want, "size {size}");
    }
}

/// Our generators produce exactly the proofs in the happy-path vectors that
/// are over the reference tree.
#[test]
fn generated_proofs_equal_happy_path_vectors() {
    let leaves = reference_leaves();
    let mut compared = 0;
    for path in json_files(&vector_dir("inclusion")) {
        let case: InclusionCase = load(&path);
        let leaf = b64(&case.leaf_hash);
        let Some(index) = usize::try_from(case.leaf_idx)
            .ok()
            .filter(|&i| i < leaves.len())
        else {
            continue;
        };
        if case.want_err || case.tree_size > 8 || leaf != leaves[index] {
            continue;
        }
        let proof = inclusion_proof(&leaves, case.leaf_idx, case.tree_size).unwrap();
        let proof: Vec<Vec<u8>> = proof.iter().map(|h| h.to_vec()).collect();
        assert_eq!(proof, b64_list(&case.proof), "{}", path.display());
        compared += 1;
    }
    for path in json_files(&vector_dir("consistency")) {
        let case: ConsistencyCase = load(&path);
        if case.want_err || case.size1 == 0 || case.size2 > 8 {
            continue;
        }
        let old_root = root(&leaves[..case.size1 as usize]);
        if b64(&case.root1) != old_root {
            continue;
        }
        let proof = consistency_proof(&leaves, case.size1, case.size2).unwrap();
        let proof: Vec<Vec<u8>> = proof.iter().map(|h| h.to_vec()).collect();
        assert_eq!(proof, b64_list(&case.proof), "{}", path.display());
        compared += 1;
    }
    assert!(compared >= 8, "only {compared} happy paths compared");
}
