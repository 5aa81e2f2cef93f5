//! Oracles for the audit log's signed notes: checkpoints, key
//! introductions and handovers, cosignatures, verifier keys.

use bulwark_audit::cosignature::{Cosignature, cosign, note_text};
use bulwark_audit::note::{is_valid_key_name, open_note, sign_note};
use bulwark_audit::note_file::{first_line, open_handover, open_introduction, split_notes};
use bulwark_audit::{Checkpoint, CosignerKey, VerifierKey, key_id, parse_and_verify};

use crate::{Keys, LOG_NAME, WITNESS_NAME, apply_edits, edits_and_payload, note_text_from};

/// A verifier key (`<name>+<hex id>+<base64 key>`) or cosigner key. What
/// parses re-encodes to the same text and parses back to the same key; its
/// ID is the one its name and key imply; no text is both kinds of key.
pub fn verifier_key(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let verifier = VerifierKey::parse(text);
    let cosigner = CosignerKey::parse(text);
    assert!(
        !(verifier.is_ok() && cosigner.is_ok()),
        "{text:?} parsed as both a note key and a cosigner key"
    );
    if let Ok(key) = verifier {
        assert_eq!(key.to_vkey(), text, "a verifier key re-encodes differently");
        assert_eq!(VerifierKey::parse(&key.to_vkey()).as_ref(), Ok(&key));
        assert!(is_valid_key_name(key.name()));
        assert_eq!(key.key_id(), key_id(key.name(), key.verifying_key()));
    }
    if let Ok(key) = cosigner {
        assert_eq!(key.to_vkey(), text, "a cosigner key re-encodes differently");
        assert_eq!(CosignerKey::parse(&key.to_vkey()).as_ref(), Ok(&key));
        assert!(is_valid_key_name(key.name()));
    }
}

/// Any bytes read as a signed note, a checkpoint, a note file and
/// cosignature lines. Nothing verifies under a key that signed nothing;
/// what opens is the note's own text; a checkpoint or cosignature line that
/// parses re-encodes to the same text; a note file splits into notes that
/// join back into it.
pub fn checkpoint_note(data: &[u8]) {
    let Ok(note) = std::str::from_utf8(data) else {
        return;
    };
    let keys = Keys::new();
    let log = Keys::verifier(LOG_NAME, &keys.log);
    let other = Keys::verifier(LOG_NAME, &keys.other);
    let never = Keys::verifier(LOG_NAME, &keys.never);
    let never_witness = Keys::cosigner(WITNESS_NAME, &keys.never);

    assert!(open_note(note, &[]).is_err(), "a note opened with no key");
    assert!(
        open_note(note, std::slice::from_ref(&never)).is_err(),
        "a note verified under a key that never signed"
    );
    assert!(parse_and_verify(note, std::slice::from_ref(&never)).is_err());
    for known in [
        vec![log.clone()],
        vec![other.clone()],
        vec![log.clone(), other.clone()],
    ] {
        let Ok(text) = open_note(note, &known) else {
            continue;
        };
        assert_eq!(note_text(note), Some(text), "opened text is not the note's");
        assert!(text.ends_with('\n'));
        if let Ok(checkpoint) = parse_and_verify(note, &known) {
            assert_eq!(checkpoint.body().as_deref(), Ok(text));
        }
    }

    for candidate in [Some(note), note_text(note)].into_iter().flatten() {
        if let Ok(checkpoint) = Checkpoint::parse_body(candidate) {
            assert_eq!(
                checkpoint.body().as_deref(),
                Ok(candidate),
                "a checkpoint body re-encodes differently"
            );
        }
    }
    let body = note_text(note).unwrap_or(note);
    for line in note.split('\n') {
        if let Ok(cosignature) = Cosignature::parse_line(line) {
            assert_eq!(
                cosignature.to_line(),
                line,
                "a cosignature re-encodes differently"
            );
            assert!(cosignature.verify(body, &never_witness).is_err());
        }
    }

    if let Ok(notes) = split_notes(note) {
        let joined: String = notes.iter().map(|n| format!("{n}\n")).collect();
        assert_eq!(joined, note, "a note file does not split into its notes");
        for entry in notes {
            let _ = first_line(entry);
            if let Ok(key) = open_introduction(LOG_NAME, entry) {
                assert_ne!(key, never, "an introduction of a key that never signed");
            }
            if let Ok(handover) = open_handover(LOG_NAME, entry, &log) {
                assert_eq!(handover.old, log);
                assert_ne!(handover.new, log);
                assert_ne!(handover.new, never, "a handover to a key that never signed");
            }
        }
    }
}

/// A note signed by the log key and cosigned by the witness, then damaged
/// by the edits `data` starts with (see [`edits_and_payload`]; the rest is
/// the text). A signature verifies only under the key that made it and only
/// over the text it was made for: what opens after the damage is the
/// original text, and an undamaged note always opens.
pub fn signed_note_edits(data: &[u8]) {
    let (edits, payload) = edits_and_payload(data);
    let text = note_text_from(payload);
    let keys = Keys::new();
    let Ok(signed) = sign_note(&text, &keys.log, LOG_NAME) else {
        panic!("sign_note refused text made to be valid: {text:?}");
    };
    let Ok(cosignature) = cosign(&text, &keys.witness, WITNESS_NAME, 1_700_000_000) else {
        panic!("cosign refused text made to be valid: {text:?}");
    };
    let original = format!("{signed}{}\n", cosignature.to_line());
    let damaged = apply_edits(original.as_bytes(), &edits);
    let Ok(note) = std::str::from_utf8(&damaged) else {
        return;
    };
    let log = Keys::verifier(LOG_NAME, &keys.log);
    let other = Keys::verifier(LOG_NAME, &keys.other);
    let witness = Keys::cosigner(WITNESS_NAME, &keys.witness);

    match open_note(note, std::slice::from_ref(&log)) {
        Ok(opened) => assert_eq!(opened, text, "a damaged note opened to other text"),
        Err(e) => assert_ne!(note, original, "an undamaged note did not open: {e}"),
    }
    assert!(
        open_note(note, std::slice::from_ref(&other)).is_err(),
        "a note verified under a key that did not sign it"
    );
    if let Ok(checkpoint) = parse_and_verify(note, std::slice::from_ref(&log)) {
        assert_eq!(Checkpoint::parse_body(&text).as_ref(), Ok(&checkpoint));
    }
    let body = note_text(note).unwrap_or(note);
    for line in note.split('\n') {
        let Ok(parsed) = Cosignature::parse_line(line) else {
            continue;
        };
        if parsed.verify(body, &witness).is_ok() {
            assert_eq!(parsed, cosignature, "a damaged cosignature verified");
            assert_eq!(body, text, "a cosignature verified over other text");
        }
    }
}
