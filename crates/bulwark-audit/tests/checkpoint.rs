//! Signed checkpoints and notes: round trips, interoperability with Go's
//! `sumdb/note` known-answer vectors, and strict rejection of everything else.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bulwark_audit::note::{MAX_SIGNATURES, key_id, open_note, sign_note};
use bulwark_audit::{
    Checkpoint, CheckpointError, SigningKey, VerifierKey, generate_signing_key, leaf_hash,
    parse_and_verify, root, sign,
};

/// Go `sumdb/note` test vectors (golang.org/x/mod/sumdb/note): a signer key,
/// its verifier key, and a note it signed.
const GO_SKEY: &str =
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
const GO_VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
const GO_TEXT: &str = "If you think cryptography is the answer to your problem,\n\
                       then you don't know what your problem is.\n";
const GO_SIGNATURE_LINE: &str = "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";

fn go_signing_key() -> SigningKey {
    let encoded = GO_SKEY.splitn(5, '+').nth(4).unwrap();
    let bytes = BASE64.decode(encoded).unwrap();
    assert_eq!(bytes[0], 1);
    SigningKey::from_bytes(&bytes[1..].try_into().unwrap())
}

fn sample_checkpoint() -> Checkpoint {
    let leaves: Vec<_> = (0u8..7).map(|i| leaf_hash(&[i])).collect();
    Checkpoint::new("bulwark.example/audit", 7, root(&leaves))
}

fn key_and_verifier(name: &str) -> (SigningKey, VerifierKey) {
    let key = generate_signing_key();
    let verifier = VerifierKey::from_signing_key(name, &key).unwrap();
    (key, verifier)
}

#[test]
fn go_note_vectors_interoperate() {
    let key = go_signing_key();
    let verifier = VerifierKey::parse(GO_VKEY).unwrap();
    assert_eq!(verifier.key_id(), 0xc74f20a3);
    assert_eq!(key_id("PeterNeumann", &key.verifying_key()), 0xc74f20a3);
    assert_eq!(verifier.verifying_key(), &key.verifying_key());
    assert_eq!(verifier.to_vkey(), GO_VKEY);

    // Ed25519 is deterministic: we must produce Go's note byte for byte.
    let note = sign_note(GO_TEXT, &key, "PeterNeumann").unwrap();
    assert_eq!(note, format!("{GO_TEXT}\n{GO_SIGNATURE_LINE}"));
    assert_eq!(
        open_note(&note, std::slice::from_ref(&verifier)),
        Ok(GO_TEXT)
    );
    let tampered = note.replace("cryptography", "cryptographY");
    assert!(matches!(
        open_note(&tampered, &[verifier]),
        Err(CheckpointError::BadSignature { .. })
    ));
}

#[test]
fn mangled_vkeys_are_rejected() {
    // Go's TestNewVerifier: every proper substring and every single-byte
    // increment of a valid vkey is refused.
    let bytes = GO_VKEY.as_bytes();
    for i in 0..=bytes.len() {
        for j in i + 1..=bytes.len() {
            if (i, j) != (0, bytes.len()) {
                let part = &GO_VKEY[i..j];
                assert!(VerifierKey::parse(part).is_err(), "{part}");
            }
        }
    }
    for i in 0..bytes.len() {
        let mut mangled = bytes.to_vec();
        mangled[i] += 1;
        let mangled = String::from_utf8(mangled).unwrap();
        assert!(VerifierKey::parse(&mangled).is_err(), "{mangled}");
    }
    let wrong_length = "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==";
    let unknown_alg = "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    let upper_id = "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    for vkey in [wrong_length, unknown_alg, upper_id] {
        assert!(VerifierKey::parse(vkey).is_err(), "{vkey}");
    }
}

#[test]
fn vkeys_round_trip() {
    let (_, verifier) = key_and_verifier("bulwark.example/audit");
    let text = verifier.to_string();
    assert_eq!(text.parse::<VerifierKey>(), Ok(verifier));
}

#[test]
fn signed_checkpoints_round_trip() {
    let (key, verifier) = key_and_verifier("bulwark.example/audit");
    let mut checkpoint = sample_checkpoint();
    let note = sign(&checkpoint, &key, "bulwark.example/audit").unwrap();
    let body = checkpoint.body().unwrap();
    assert!(note.starts_with(&format!("{body}\n— bulwark.example/audit ")));
    assert_eq!(
        parse_and_verify(&note, std::slice::from_ref(&verifier)),
        Ok(checkpoint.clone())
    );

    checkpoint.extensions = vec!["timestamp 1700000000".into(), "x".into()];
    let note = sign(&checkpoint, &key, "bulwark.example/audit").unwrap();
    assert_eq!(parse_and_verify(&note, &[verifier]), Ok(checkpoint));
}

#[test]
fn body_has_the_tlog_checkpoint_layout() {
    let checkpoint = Checkpoint::new("example.com/behind-the-sofa", 20852163, [0; 32]);
    assert_eq!(
        checkpoint.body().unwrap(),
        "example.com/behind-the-sofa\n20852163\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
    );
}

#[test]
fn unknown_signers_are_ignored_but_one_trusted_signature_is_required() {
    let (log_key, log_verifier) = key_and_verifier("log");
    let (witness_key, witness_verifier) = key_and_verifier("witness");
    let note = sign(&sample_checkpoint(), &log_key, "log").unwrap();
    // A cosignature by a key we do not know, appended after ours.
    let body = sample_checkpoint().body().unwrap();
    let cosigned = sign_note(&body, &witness_key, "witness").unwrap();
    let witness_line = &cosigned[body.len() + 1..];
    let both = format!("{note}{witness_line}");

    assert!(parse_and_verify(&both, std::slice::from_ref(&log_verifier)).is_ok());
    assert!(parse_and_verify(&both, std::slice::from_ref(&witness_verifier)).is_ok());
    assert!(parse_and_verify(&both, &[log_verifier.clone(), witness_verifier]).is_ok());
    assert_eq!(
        parse_and_verify(&note, &[]),
        Err(CheckpointError::NoTrustedSignature)
    );

    // Same name, different key: not "known", so ignored, hence no trusted
    // signature at all.
    let (_, impostor) = key_and_verifier("log");
    assert_eq!(
        parse_and_verify(&note, &[impostor]),
        Err(CheckpointError::NoTrustedSignature)
    );

    // A known key's bad signature rejects the note even if another verifies.
    let (other_key, _) = key_and_verifier("x");
    let forged = sign_note(&body, &other_key, "witness").unwrap();
    let mut line = forged[body.len() + 1..].to_owned();
    // Give the forged line the log key's ID so it claims to be the log's.
    let fields: Vec<&str> = line.trim_end().split(' ').collect();
    let mut blob = BASE64.decode(fields[2]).unwrap();
    blob[..4].copy_from_slice(&log_verifier.key_id().to_be_bytes());
    line = format!("— log {}\n", BASE64.encode(blob));
    let with_forgery = format!("{note}{line}");
    assert!(matches!(
        parse_and_verify(&with_forgery, &[log_verifier]),
        Err(CheckpointError::BadSignature { .. })
    ));
}

#[test]
fn malformed_notes_are_rejected() {
    let (key, verifier) = key_and_verifier("log");
    let note = sign(&sample_checkpoint(), &key, "log").unwrap();
    let known = [verifier];
    assert!(parse_and_verify(&note, &known).is_ok());

    let sig_start = note.rfind("\n\n").unwrap() + 2;
    let cases: Vec<(&str, String)> = vec![
        ("no final newline", note.trim_end_matches('\n').to_owned()),
        ("trailing garbage", format!("{note}garbage")),
        ("trailing blank line", format!("{note}\n")),
        ("CRLF", note.replace('\n', "\r\n")),
        ("tab", note.replacen("log ", "log\t", 1)),
        ("hyphen instead of em dash", note.replace('—', "-")),
        ("no space after dash", note.replace("— ", "—")),
        ("two spaces", note.replace("— log ", "— log  ")),
        ("no blank line", note.replacen("\n\n", "\n", 1)),
        ("empty signature block", note[..sig_start].to_owned()),
        (
            "signature without key",
            format!("{}— log \n", &note[..sig_start]),
        ),
        (
            "short signature",
            format!("{}— log AAAA\n", &note[..sig_start]),
        ),
        ("unpadded base64", note.replace("=\n", "\n")),
    ];
    for (what, text) in cases {
        assert!(
            parse_and_verify(&text, &known).is_err(),
            "{what} accepted:\n{text}"
        );
    }
}

#[test]
fn malformed_bodies_are_rejected_even_when_signed() {
    let (key, verifier) = key_and_verifier("log");
    let known = [verifier];
    let root = BASE64.encode([7u8; 32]);
    let bodies = [
        format!("\n5\n{root}\n"),
        format!("origin\n05\n{root}\n"),
        format!("origin\n+5\n{root}\n"),
        format!("origin\n-1\n{root}\n"),
        format!("origin\n 5\n{root}\n"),
        format!("origin\n18446744073709551616\n{root}\n"),
        "origin\n5\n".to_owned(),
        "origin\n5\nAAAA\n".to_owned(),
        format!("origin\n5\n{}\n", root.trim_end_matches('=')),
        format!("origin\n5\n{}\n", BASE64.encode([7u8; 33])),
        format!("origin\n5\n{root}\n\next\n"),
        "origin\n".to_owned(),
    ];
    for body in bodies {
        let note = sign_note(&body, &key, "log").unwrap();
        assert!(
            matches!(
                parse_and_verify(&note, &known),
                Err(CheckpointError::MalformedBody(_))
            ),
            "accepted body {body:?}"
        );
    }
    let ok = sign_note(&format!("origin\n0\n{root}\n"), &key, "log").unwrap();
    assert_eq!(parse_and_verify(&ok, &known).unwrap().size, 0);
    let max = sign_note(
        &format!("origin\n18446744073709551615\n{root}\n"),
        &key,
        "log",
    )
    .unwrap();
    assert_eq!(parse_and_verify(&max, &known).unwrap().size, u64::MAX);
}

#[test]
fn invalid_names_and_bodies_cannot_be_signed() {
    let key = generate_signing_key();
    for name in ["", "a b", "a+b", "a\u{a0}b", "a\nb", "a\u{2003}b"] {
        assert_eq!(
            sign(&sample_checkpoint(), &key, name),
            Err(CheckpointError::InvalidKeyName),
            "{name:?}"
        );
        assert!(VerifierKey::from_signing_key(name, &key).is_err());
    }
    let mut checkpoint = sample_checkpoint();
    checkpoint.origin = "two\nlines".into();
    assert!(sign(&checkpoint, &key, "log").is_err());
    checkpoint.origin = String::new();
    assert!(sign(&checkpoint, &key, "log").is_err());
    let mut checkpoint = sample_checkpoint();
    checkpoint.extensions = vec![String::new()];
    assert!(sign(&checkpoint, &key, "log").is_err());
    assert!(sign_note("no newline", &key, "log").is_err());
}

#[test]
fn signature_count_is_limited() {
    let (key, verifier) = key_and_verifier("log");
    let note = sign(&sample_checkpoint(), &key, "log").unwrap();
    let line = &note[note.rfind("\n\n").unwrap() + 2..];
    let many = format!("{note}{}", line.repeat(MAX_SIGNATURES - 1));
    assert!(parse_and_verify(&many, std::slice::from_ref(&verifier)).is_ok());
    let too_many = format!("{many}{line}");
    assert_eq!(
        parse_and_verify(&too_many, &[verifier]),
        Err(CheckpointError::TooManySignatures)
    );
}

#[test]
fn malleated_signature_is_rejected() {
    // Adding the group order L to S gives a signature that lax verifiers
    // accept; verify_strict must not.
    let (key, verifier) = key_and_verifier("log");
    let note = sign(&sample_checkpoint(), &key, "log").unwrap();
    let start = note.rfind(' ').unwrap() + 1;
    let mut blob = BASE64.decode(note[start..].trim_end()).unwrap();
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let s = &mut blob[4 + 32..];
    let mut carry = 0u16;
    for (byte, l) in s.iter_mut().zip(L) {
        let sum = u16::from(*byte) + u16::from(l) + carry;
        *byte = sum as u8;
        carry = sum >> 8;
    }
    let malleated = format!("{}{}\n", &note[..start], BASE64.encode(blob));
    assert!(matches!(
        parse_and_verify(&malleated, &[verifier]),
        Err(CheckpointError::BadSignature { .. })
    ));
}
