//! The request codec against untrusted bytes: property tests, and a seeded
//! comparison with an independent, deliberately naive oracle parser.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bulwark_witness::AddCheckpoint;
use bulwark_witness::request::{MAX_PROOF_LINES, MAX_REQUEST_BYTES};
use proptest::prelude::*;

/// A line-splitting reading of the spec, written separately from the
/// parser: `old N`, proof lines, an empty line, the rest is the checkpoint.
fn oracle(body: &[u8]) -> Option<(u64, Vec<[u8; 32]>, String)> {
    if body.len() > MAX_REQUEST_BYTES {
        return None;
    }
    let text = String::from_utf8(body.to_vec()).ok()?;
    if text.bytes().any(|b| b < 0x20 && b != b'\n') {
        return None;
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let old = lines.first()?.strip_prefix("old ")?;
    if old.is_empty()
        || !old.bytes().all(|b| b.is_ascii_digit())
        || (old.len() > 1 && old.starts_with('0'))
    {
        return None;
    }
    let old: u64 = old.parse().ok()?;
    let blank = lines.iter().skip(1).position(|l| l.is_empty())? + 1;
    let mut proof = Vec::new();
    for line in &lines[1..blank] {
        let bytes = BASE64.decode(line).ok()?;
        proof.push(<[u8; 32]>::try_from(bytes.as_slice()).ok()?);
    }
    if proof.len() > MAX_PROOF_LINES {
        return None;
    }
    let checkpoint = lines[blank + 1..].join("\n");
    if checkpoint.is_empty() {
        return None;
    }
    Some((old, proof, checkpoint))
}

fn parsed(body: &[u8]) -> Option<(u64, Vec<[u8; 32]>, String)> {
    AddCheckpoint::parse(body)
        .ok()
        .map(|r| (r.old_size, r.proof, r.checkpoint))
}

const NOTE: &str =
    "o.example/log\n9\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n\u{2014} o AAAAAQ==\n";

/// xorshift64*: a fixed sequence, so a failure replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn parser_agrees_with_the_oracle_on_seeded_mutations() {
    let mut rng = Rng(0x5eed_2026_0017_0009);
    let alphabet = b"old 0123456789\n=+/AZaz\r \xe2\x80\x94";
    let mut accepted = 0;
    for case in 0..20_000 {
        let proof: Vec<[u8; 32]> = (0..rng.below(5)).map(|i| [i as u8; 32]).collect();
        let mut body = AddCheckpoint {
            old_size: rng.next() % 1000,
            proof,
            checkpoint: NOTE.to_owned(),
        }
        .encode()
        .into_bytes();
        for _ in 0..rng.below(4) {
            let at = rng.below(body.len() + 1);
            match rng.below(3) {
                0 if at < body.len() => {
                    body.remove(at);
                }
                1 => body.insert(at, alphabet[rng.below(alphabet.len())]),
                _ if at < body.len() => body[at] = alphabet[rng.below(alphabet.len())],
                _ => {}
            }
        }
        let expected = oracle(&body);
        assert_eq!(parsed(&body), expected, "case {case}: {body:?}");
        accepted += usize::from(expected.is_some());
    }
    // The mutations are not all fatal: both sides of the judgement ran.
    assert!(accepted > 1000, "{accepted}");
}

proptest! {
    #[test]
    fn requests_round_trip(
        old in any::<u64>(),
        proof in proptest::collection::vec(any::<[u8; 32]>(), 0..=MAX_PROOF_LINES),
        checkpoint in "[a-z./]{1,20}\n[0-9]{1,5}\n[A-Za-z0-9+/]{43}=\n\n\u{2014} [a-z]{1,8} [A-Za-z0-9+/]{8}\n",
    ) {
        let request = AddCheckpoint { old_size: old, proof, checkpoint };
        prop_assert_eq!(AddCheckpoint::parse(request.encode().as_bytes()), Ok(request));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_agree_with_the_oracle(
        body in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        prop_assert_eq!(parsed(&body), oracle(&body));
    }

    #[test]
    fn what_parses_re_encodes_to_the_same_bytes(
        body in "old (0|[1-9][0-9]{0,3})\n([A-Za-z0-9+/]{43}=\n){0,3}\n[ -~\n]{1,40}",
    ) {
        if let Ok(request) = AddCheckpoint::parse(body.as_bytes()) {
            prop_assert_eq!(request.encode(), body);
        }
    }
}
