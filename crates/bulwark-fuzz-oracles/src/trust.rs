//! Oracles for agent signatures: the listing an `agent.sig` signs and the
//! signature file around it.

use std::path::Path;

use bulwark_audit::note::sign_note;
use bulwark_audit::note_text;
use bulwark_trust::{AgentListing, FileEntry, open_signed_listing, sha256};

use crate::{Keys, SIGNER_NAME, apply_edits, edits_and_payload};

/// Where the oracles say the signature file is (named in errors only).
const SIGNATURE_PATH: &str = "agents/a/agent.sig";

/// A listing is read strictly: what parses is exactly the text `text()`
/// writes for it, and that text parses back to the same listing.
pub fn listing(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(listing) = AgentListing::parse(text) {
        assert_eq!(listing.text(), text, "a listing re-encodes differently");
        assert_eq!(AgentListing::parse(&listing.text()).as_ref(), Ok(&listing));
    }
}

/// Any bytes as an `agent.sig`: nothing opens under a key that signed
/// nothing; what opens under the signing keys is the note's own text, in
/// canonical form, with a signer among the trusted keys.
pub fn signature_file(data: &[u8]) {
    listing(data);
    let Ok(note) = std::str::from_utf8(data) else {
        return;
    };
    let keys = Keys::new();
    let path = Path::new(SIGNATURE_PATH);
    let never = Keys::verifier(SIGNER_NAME, &keys.never);
    assert!(
        open_signed_listing(note, "a", &[never], path).is_err(),
        "an agent signature verified under a key that never signed"
    );
    let trusted = [
        Keys::verifier(SIGNER_NAME, &keys.log),
        Keys::verifier(SIGNER_NAME, &keys.other),
    ];
    if let Ok(signed) = open_signed_listing(note, "a", &trusted, path) {
        assert_eq!(note_text(note), Some(signed.text.as_str()));
        assert_eq!(
            signed.listing.text(),
            signed.text,
            "signed listing not canonical"
        );
        assert!(
            signed
                .signers
                .iter()
                .any(|k| k.name() == signed.signer.name && k.key_id() == signed.signer.key_id),
            "the reported signer is not among the keys that verified"
        );
    }
}

/// The listing `payload` describes: agent `a`, version from its first
/// byte, one file per 8-byte chunk.
fn listing_from(payload: &[u8]) -> AgentListing {
    let (version, files) = payload.split_first().map_or((1, payload), |(v, rest)| {
        (u64::from(*v).saturating_add(1), rest)
    });
    AgentListing {
        agent: "a".into(),
        version,
        files: files
            .chunks(8)
            .enumerate()
            .map(|(i, chunk)| FileEntry {
                path: format!("skills/f{i:04}.md"),
                sha256: sha256(chunk),
                size: chunk.len() as u64,
            })
            .collect(),
    }
}

/// An agent signature as `bulwark sign` writes it, then damaged by the
/// edits `data` starts with (see [`edits_and_payload`]). It opens only
/// under the key that signed it, only to the listing that was signed, and
/// always when undamaged.
pub fn signature_edits(data: &[u8]) {
    let (edits, payload) = edits_and_payload(data);
    let listing = listing_from(payload);
    let text = listing.text();
    let keys = Keys::new();
    let Ok(signed) = sign_note(&text, &keys.log, SIGNER_NAME) else {
        panic!("sign_note refused a listing: {text:?}");
    };
    let damaged = apply_edits(signed.as_bytes(), &edits);
    let Ok(note) = std::str::from_utf8(&damaged) else {
        return;
    };
    let path = Path::new(SIGNATURE_PATH);
    let trusted = [Keys::verifier(SIGNER_NAME, &keys.log)];
    match open_signed_listing(note, "a", &trusted, path) {
        Ok(opened) => {
            assert_eq!(
                opened.listing, listing,
                "a damaged signature opened to another listing"
            );
            assert_eq!(opened.text, text);
        }
        Err(e) => assert_ne!(note, signed, "an undamaged signature did not open: {e}"),
    }
    let other = [Keys::verifier(SIGNER_NAME, &keys.other)];
    assert!(
        open_signed_listing(note, "a", &other, path).is_err(),
        "an agent signature verified under a key that did not sign it"
    );
}
