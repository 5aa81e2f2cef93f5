//! A file of signed notes kept one after another (each followed by a blank
//! line), and the two key statements such a file carries beside the log's
//! checkpoints: the *introduction* of the log's first key and the *handover*
//! from one key to the next.
//!
//! The file is append-only evidence: every checkpoint the log signs is
//! appended, so deleting the database's checkpoint rows does not erase what
//! was signed. The key statements make the file self-contained: a verifier
//! reads the first key from the introduction and follows each handover,
//! which the old key signs (and the new key too, proving it is held), so a
//! key that was swapped in without the old key's consent is refused.
//!
//! Bodies:
//!
//! ```text
//! <origin> key                 <origin> key handover
//! <vkey>                       <old vkey>
//!                              <new vkey>
//!                              <log size at the handover>
//! ```
//!
//! Neither parses as a checkpoint (its second line is not a size), so a
//! statement can never be mistaken for a tree head by another reader.
//! Parsing is strict: anything but a well-formed sequence of notes is an
//! error naming the entry and line.

use crate::checkpoint::CheckpointError;
use crate::note::{VerifierKey, open_note, sign_note};
use ed25519_dalek::SigningKey;

/// The first line of the introduction of `origin`'s first key.
pub fn introduction_line(origin: &str) -> String {
    format!("{origin} key")
}

/// The first line of a key handover of `origin`.
pub fn handover_line(origin: &str) -> String {
    format!("{origin} key handover")
}

/// Why a file of notes could not be split into notes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {entry} (line {line}): {what}")]
pub struct NoteFileError {
    /// 1-based number of the entry.
    pub entry: usize,
    /// 1-based line where the entry starts.
    pub line: usize,
    pub what: &'static str,
}

/// Splits a file of `note + "\n"` entries into its notes (each ending in
/// the newline of its last signature line). Refuses an empty body, a
/// missing signature block, a blank line inside one and a file that does
/// not end exactly after an entry (a torn append included).
pub fn split_notes(text: &str) -> Result<Vec<&str>, NoteFileError> {
    let mut notes = Vec::new();
    let mut rest = text;
    let mut line = 1usize;
    while !rest.is_empty() {
        let error = |what| NoteFileError {
            entry: notes.len() + 1,
            line,
            what,
        };
        if rest.starts_with('\n') {
            return Err(error("blank line where an entry should start"));
        }
        let body_end = rest
            .find("\n\n")
            .ok_or_else(|| error("no blank line before the signatures"))?;
        let signatures_start = body_end + 2;
        let signatures = &rest[signatures_start..];
        if !signatures.starts_with("\u{2014} ") {
            return Err(error("no signature line after the body"));
        }
        let signatures_len = signatures
            .find("\n\n")
            .ok_or_else(|| error("not terminated by a blank line (torn write?)"))?;
        let note_end = signatures_start + signatures_len + 1;
        let note = &rest[..note_end];
        if rest[signatures_start..note_end]
            .lines()
            .any(|l| !l.starts_with("\u{2014} "))
        {
            return Err(error("a signature line does not start with an em dash"));
        }
        line += note.matches('\n').count() + 1;
        notes.push(note);
        rest = &rest[note_end + 1..];
    }
    Ok(notes)
}

/// The first line of a note's text, unverified: to decide which keys to
/// verify it with.
pub fn first_line(note: &str) -> &str {
    note.split('\n').next().unwrap_or_default()
}

/// The introduction of `key` as `origin`'s first key, signed by itself.
pub fn sign_introduction(
    origin: &str,
    key: &SigningKey,
    key_name: &str,
) -> Result<String, CheckpointError> {
    let verifier = VerifierKey::from_signing_key(key_name, key)?;
    let body = format!("{}\n{}\n", introduction_line(origin), verifier.to_vkey());
    sign_note(&body, key, key_name)
}

/// The key an introduction names, once its own signature verifies.
pub fn open_introduction(origin: &str, note: &str) -> Result<VerifierKey, CheckpointError> {
    let (head, _) = note
        .split_once("\n\n")
        .ok_or(CheckpointError::MissingSignatures)?;
    let mut lines = head.split('\n');
    if lines.next() != Some(introduction_line(origin).as_str()) {
        return Err(CheckpointError::MalformedBody("not a key introduction"));
    }
    let key = VerifierKey::parse(lines.next().unwrap_or_default())?;
    if lines.next().is_some() {
        return Err(CheckpointError::MalformedBody(
            "extra line in a key introduction",
        ));
    }
    open_note(note, std::slice::from_ref(&key))?;
    Ok(key)
}

/// The handover from `old` to `new` at log size `size`, signed by both
/// (the old key consents, the new key proves it is held).
pub fn sign_handover(
    origin: &str,
    old: &SigningKey,
    new: &SigningKey,
    key_name: &str,
    size: u64,
) -> Result<String, CheckpointError> {
    let old_vkey = VerifierKey::from_signing_key(key_name, old)?;
    let new_vkey = VerifierKey::from_signing_key(key_name, new)?;
    let body = format!(
        "{}\n{}\n{}\n{size}\n",
        handover_line(origin),
        old_vkey.to_vkey(),
        new_vkey.to_vkey()
    );
    let by_old = sign_note(&body, old, key_name)?;
    let by_new = sign_note(&body, new, key_name)?;
    // Both notes are `body \n signature-line \n`: keep the first whole and
    // add the second's signature line.
    let second = by_new
        .strip_prefix(&body)
        .and_then(|rest| rest.strip_prefix('\n'))
        .ok_or(CheckpointError::InvalidNoteText("signature block"))?;
    Ok(format!("{by_old}{second}"))
}

/// A verified handover: the key it hands over to and the log size then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handover {
    pub old: VerifierKey,
    pub new: VerifierKey,
    pub size: u64,
}

/// Opens a handover that must come from `current`: it names `current` as
/// the old key and both the old and the new key's signatures verify.
pub fn open_handover(
    origin: &str,
    note: &str,
    current: &VerifierKey,
) -> Result<Handover, CheckpointError> {
    let (head, _) = note
        .split_once("\n\n")
        .ok_or(CheckpointError::MissingSignatures)?;
    let lines: Vec<&str> = head.split('\n').collect();
    let [first, old, new, size] = lines.as_slice() else {
        return Err(CheckpointError::MalformedBody(
            "a key handover has four lines",
        ));
    };
    if *first != handover_line(origin) {
        return Err(CheckpointError::MalformedBody("not a key handover"));
    }
    let old = VerifierKey::parse(old)?;
    let new = VerifierKey::parse(new)?;
    if old != *current {
        return Err(CheckpointError::MalformedBody(
            "the handover is not from the log's current key",
        ));
    }
    if new == old {
        return Err(CheckpointError::MalformedBody(
            "the handover names the same key twice",
        ));
    }
    let canonical = !size.is_empty()
        && size.bytes().all(|b| b.is_ascii_digit())
        && (*size == "0" || !size.starts_with('0'));
    let size: u64 = if canonical { size.parse().ok() } else { None }.ok_or(
        CheckpointError::MalformedBody("handover size is not canonical decimal"),
    )?;
    open_note(note, std::slice::from_ref(&old))?;
    open_note(note, std::slice::from_ref(&new))?;
    Ok(Handover { old, new, size })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    #[test]
    fn statements_round_trip() {
        let intro = sign_introduction("o/a", &key(1), "k").unwrap();
        let first = open_introduction("o/a", &intro).unwrap();
        let hand = sign_handover("o/a", &key(1), &key(2), "k", 7).unwrap();
        let file = format!("{intro}\n{hand}\n");
        let notes = split_notes(&file).unwrap();
        assert_eq!(notes, [intro.as_str(), hand.as_str()]);
        let h = open_handover("o/a", notes[1], &first).unwrap();
        assert_eq!(h.size, 7);
        assert_eq!(h.new, VerifierKey::from_signing_key("k", &key(2)).unwrap());
    }

    #[test]
    fn a_handover_not_signed_by_the_current_key_is_refused() {
        let current = VerifierKey::from_signing_key("k", &key(1)).unwrap();
        // Signed by an intruder's own key pair, naming it as the old key.
        let forged = sign_handover("o/a", &key(3), &key(2), "k", 7).unwrap();
        assert!(open_handover("o/a", &forged, &current).is_err());
        // Naming the current key as old, but signed by another key.
        let body = format!(
            "{}\n{}\n{}\n7\n",
            handover_line("o/a"),
            current.to_vkey(),
            VerifierKey::from_signing_key("k", &key(2))
                .unwrap()
                .to_vkey()
        );
        let forged = sign_note(&body, &key(2), "k").unwrap();
        assert!(open_handover("o/a", &forged, &current).is_err());
    }

    #[test]
    fn torn_and_malformed_files_are_refused() {
        let intro = sign_introduction("o/a", &key(1), "k").unwrap();
        assert!(split_notes(&intro).is_err(), "no terminating blank line");
        assert!(split_notes(&format!("\n{intro}\n")).is_err());
        assert!(split_notes(&format!("{intro}\n\n")).is_err());
        assert!(split_notes("o/a\n\nnot a signature\n\n").is_err());
        assert_eq!(split_notes("").unwrap(), Vec::<&str>::new());
    }
}
