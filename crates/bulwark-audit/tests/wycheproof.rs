//! Wycheproof vectors (copied into `tests/vectors/wycheproof/`) for the two
//! primitives the log trusts from dependencies: Ed25519 strict verification
//! (ed25519-dalek) and HMAC-SHA256 (hmac + sha2, via `hmac_sha256_verify`).

use bulwark_audit::mac::HMAC_SHA256_LEN;
use bulwark_audit::{VerifyingKey, hmac_sha256, hmac_sha256_verify};
use ed25519_dalek::Signature;
use serde::Deserialize;
use std::path::Path;
use subtle::ConstantTimeEq;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File<G> {
    number_of_tests: usize,
    test_groups: Vec<G>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EddsaGroup {
    public_key: EddsaKey,
    tests: Vec<EddsaCase>,
}

#[derive(Deserialize)]
struct EddsaKey {
    pk: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EddsaCase {
    tc_id: u32,
    comment: String,
    msg: String,
    sig: String,
    result: Verdict,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MacGroup {
    tag_size: usize,
    tests: Vec<MacCase>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MacCase {
    tc_id: u32,
    key: String,
    msg: String,
    tag: String,
    result: Verdict,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Verdict {
    Valid,
    Invalid,
    Acceptable,
}

/// Counts of cases by expected result, and of acceptable ones we accepted.
#[derive(Default, Debug, PartialEq, Eq)]
struct Tally {
    valid: usize,
    invalid: usize,
    acceptable: usize,
    acceptable_accepted: usize,
}

impl Tally {
    fn record(&mut self, id: u32, want: Verdict, accepted: bool, note: &str) {
        match want {
            Verdict::Valid => {
                assert!(accepted, "tcId {id} ({note}) is valid but was rejected");
                self.valid += 1;
            }
            Verdict::Invalid => {
                assert!(!accepted, "tcId {id} ({note}) is invalid but was accepted");
                self.invalid += 1;
            }
            Verdict::Acceptable => {
                self.acceptable += 1;
                self.acceptable_accepted += usize::from(accepted);
            }
        }
    }

    fn total(&self) -> usize {
        self.valid + self.invalid + self.acceptable
    }
}

fn load<T: for<'de> Deserialize<'de>>(name: &str) -> T {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors/wycheproof")
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// Strict Ed25519 verification as the checkpoint code does it: the key must
/// decode, the signature must be 64 bytes, and `verify_strict` must pass.
fn ed25519_accepts(pk: &[u8], msg: &[u8], sig: &[u8]) -> bool {
    let Ok(pk) = <[u8; 32]>::try_from(pk) else {
        return false;
    };
    let Ok(key) = VerifyingKey::from_bytes(&pk) else {
        return false;
    };
    let Ok(sig) = Signature::from_slice(sig) else {
        return false;
    };
    key.verify_strict(msg, &sig).is_ok()
}

#[test]
fn ed25519_strict_verification() {
    let file: File<EddsaGroup> = load("ed25519_test.json");
    let mut tally = Tally::default();
    for group in &file.test_groups {
        let pk = hex::decode(&group.public_key.pk).unwrap();
        for case in &group.tests {
            let accepted = ed25519_accepts(
                &pk,
                &hex::decode(&case.msg).unwrap(),
                &hex::decode(&case.sig).unwrap(),
            );
            tally.record(case.tc_id, case.result, accepted, &case.comment);
        }
    }
    assert_eq!(tally.total(), file.number_of_tests);
    println!("ed25519: {tally:?}");
    assert_eq!(
        tally,
        Tally {
            valid: 88,
            invalid: 63,
            acceptable: 0,
            acceptable_accepted: 0
        }
    );
}

#[test]
fn hmac_sha256_verification() {
    let file: File<MacGroup> = load("hmac_sha256_test.json");
    let mut tally = Tally::default();
    for group in &file.test_groups {
        for case in &group.tests {
            let key = hex::decode(&case.key).unwrap();
            let msg = hex::decode(&case.msg).unwrap();
            let tag = hex::decode(&case.tag).unwrap();
            let accepted = if group.tag_size == HMAC_SHA256_LEN * 8 {
                hmac_sha256_verify(&key, &msg, &tag)
            } else {
                // Truncated-tag groups: the library refuses short tags
                // outright, so check the vector's truncation here with a
                // constant-time comparison of the leftmost bytes.
                assert!(!hmac_sha256_verify(&key, &msg, &tag), "tcId {}", case.tc_id);
                let full = hmac_sha256(&key, &msg);
                tag.len() == group.tag_size / 8 && bool::from(full[..tag.len()].ct_eq(&tag))
            };
            tally.record(case.tc_id, case.result, accepted, "");
        }
    }
    assert_eq!(tally.total(), file.number_of_tests);
    println!("hmac-sha256: {tally:?}");
    assert_eq!(
        tally,
        Tally {
            valid: 66,
            invalid: 108,
            acceptable: 0,
            acceptable_accepted: 0
        }
    );
}
