//! HMAC-SHA256 with constant-time verification.
//!
//! Lives here, next to the other primitives the audit log is checked with, so
//! that later token code shares one audited implementation instead of each
//! caller comparing tags with `==` (which leaks, through timing, how many
//! leading bytes of a forged tag were right).

use hmac::digest::Key;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// Length of an HMAC-SHA256 tag in bytes.
pub const HMAC_SHA256_LEN: usize = 32;

/// SHA-256's block size: the length HMAC pads or hashes every key to.
const BLOCK_LEN: usize = 64;

/// `HMAC-SHA256(key, msg)` (RFC 2104). Keys of any length are accepted.
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; HMAC_SHA256_LEN] {
    let mut mac = keyed(key);
    mac.update(msg);
    mac.finalize().into_bytes().into()
}

/// Whether `tag` is exactly the full 32-byte `HMAC-SHA256(key, msg)`,
/// compared in constant time.
///
/// Truncated tags are refused rather than compared on a prefix: accepting a
/// caller-chosen length would let a one-byte tag be forged in 256 tries.
pub fn hmac_sha256_verify(key: &[u8], msg: &[u8], tag: &[u8]) -> bool {
    let mut mac = keyed(key);
    mac.update(msg);
    // `verify_slice` checks the length and compares with `subtle::ConstantTimeEq`.
    mac.verify_slice(tag).is_ok()
}

/// Whether `a` and `b` are equal, in time that depends on their lengths
/// only: for tokens, MACs and digests that stand in for a secret.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// An HMAC instance for `key`.
///
/// RFC 2104 §2 first brings every key to the block size (hashing longer ones,
/// zero-padding shorter ones). Doing that here hands `Mac::new` a block-sized
/// key, which yields the same MAC and is the constructor without an error
/// path to handle.
fn keyed(key: &[u8]) -> HmacSha256 {
    let mut block = Key::<HmacSha256>::default();
    if key.len() > BLOCK_LEN {
        block[..HMAC_SHA256_LEN].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    <HmacSha256 as Mac>::new(&block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"token-1", b"token-1"));
        assert!(!constant_time_eq(b"token-1", b"token-2"));
        assert!(
            !constant_time_eq(b"token", b"token-1"),
            "a prefix is not equal"
        );
        assert!(!constant_time_eq(b"token-1", b"token"));
    }

    /// RFC 4231 test case 2 ("Jefe").
    #[test]
    fn rfc4231_case_2() {
        let tag = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(tag),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(hmac_sha256_verify(
            b"Jefe",
            b"what do ya want for nothing?",
            &tag
        ));
        assert!(!hmac_sha256_verify(
            b"Jefe",
            b"what do ya want for nothing?",
            &tag[..16]
        ));
        assert!(!hmac_sha256_verify(
            b"Jefe",
            b"what do ya want for nothing!",
            &tag
        ));
    }

    /// RFC 4231 test case 6: a 131-byte key, longer than the block.
    #[test]
    fn rfc4231_case_6_long_key() {
        let key = [0xaa; 131];
        let tag = hmac_sha256(
            &key,
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex::encode(tag),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }
}
