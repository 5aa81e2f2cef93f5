//! Property tests of the canonical record encoding: it round-trips, it is
//! injective (including when bytes move between adjacent fields), and the
//! decoder accepts only exact canonical encodings.

use bulwark_audit::{Action, AuditRecord, Decision, DecodeError, Reason};
use proptest::prelude::*;

/// The free-text fields in encoding order (decision excluded: it is an enum).
const TEXT_FIELDS: usize = 9;

fn decision() -> impl Strategy<Value = Decision> {
    prop_oneof![
        Just(Decision::Allowed),
        Just(Decision::Denied),
        Just(Decision::Approved),
        Just(Decision::Failed),
        Just(Decision::Warned),
    ]
}

/// Short strings from a small alphabet (so that different fields often hold
/// the same or overlapping text) mixed with arbitrary Unicode.
/// Known action and reason words too, so typed variants and `Other` text
/// are both exercised in the action and reason fields.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ab\u{e9}\0]{0,4}",
        any::<String>(),
        prop::sample::select(Action::KNOWN).prop_map(|a| a.to_string()),
        prop::sample::select(Reason::KNOWN).prop_map(|r| r.to_string()),
    ]
}

fn record() -> impl Strategy<Value = AuditRecord> {
    (
        any::<i64>(),
        prop::collection::vec(text(), TEXT_FIELDS),
        decision(),
        any::<u64>(),
    )
        .prop_map(|(time_ms, texts, decision, duration_us)| {
            with_texts(
                AuditRecord {
                    time_ms,
                    session: String::new(),
                    agent: String::new(),
                    user: String::new(),
                    action: Action::ToolCall,
                    tool: String::new(),
                    operation: String::new(),
                    args_digest: String::new(),
                    decision,
                    reason: Reason::Ok,
                    detail: String::new(),
                    duration_us,
                },
                texts,
            )
        })
}

fn texts(r: &AuditRecord) -> Vec<String> {
    [
        r.session.as_str(),
        &r.agent,
        &r.user,
        r.action.as_str(),
        &r.tool,
        &r.operation,
        &r.args_digest,
        r.reason.as_str(),
        &r.detail,
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

fn with_texts(mut r: AuditRecord, t: Vec<String>) -> AuditRecord {
    let [
        session,
        agent,
        user,
        action,
        tool,
        operation,
        args_digest,
        reason,
        detail,
    ]: [String; TEXT_FIELDS] = t.try_into().unwrap();
    (r.session, r.agent, r.user, r.tool) = (session, agent, user, tool);
    (r.action, r.reason) = (Action::from(action), Reason::from(reason));
    (r.operation, r.args_digest, r.detail) = (operation, args_digest, detail);
    r
}

proptest! {
    #[test]
    fn round_trips(record in record(), seq: u64) {
        let bytes = record.canonical_bytes(seq).unwrap();
        let decoded = AuditRecord::decode(&bytes).unwrap();
        prop_assert_eq!(decoded.seq, seq);
        prop_assert_eq!(&decoded.record, &record);
        prop_assert_eq!(decoded.canonical_bytes().unwrap(), bytes);
    }

    /// The streamed leaf hash, the appending encoder and the owned encoding
    /// are one encoding.
    #[test]
    fn borrowed_paths_agree_with_the_owned_encoding(record in record(), seq: u64) {
        let bytes = record.canonical_bytes(seq).unwrap();
        let fields = record.fields();
        prop_assert_eq!(fields.encoded_len(), bytes.len());
        let mut appended = b"prefix".to_vec();
        fields.encode_into(seq, &mut appended).unwrap();
        prop_assert_eq!(&appended[6..], &bytes[..]);
        prop_assert_eq!(record.leaf_hash(seq).unwrap(), bulwark_audit::leaf_hash(&bytes));
    }

    #[test]
    fn distinct_records_have_distinct_encodings(a in record(), b in record(), seq_a: u64, seq_b: u64) {
        let same = a == b && seq_a == seq_b;
        prop_assert_eq!(
            a.canonical_bytes(seq_a).unwrap() == b.canonical_bytes(seq_b).unwrap(),
            same
        );
    }

    /// Moving the boundary between two adjacent text fields (the classic
    /// collision of concatenated encodings) changes the encoding.
    #[test]
    fn moving_bytes_between_adjacent_fields_changes_the_encoding(
        record in record(),
        field in 0..TEXT_FIELDS - 1,
        moved in 1usize..4,
        seq: u64,
    ) {
        let mut t = texts(&record);
        let chars: Vec<char> = t[field].chars().collect();
        let keep = chars.len().saturating_sub(moved);
        let tail: String = chars[keep..].iter().collect();
        prop_assume!(!tail.is_empty());
        t[field] = chars[..keep].iter().collect();
        t[field + 1] = format!("{tail}{}", t[field + 1]);
        let shifted = with_texts(record.clone(), t);
        prop_assert_ne!(
            record.canonical_bytes(seq).unwrap(),
            shifted.canonical_bytes(seq).unwrap()
        );
    }

    /// Changing any one field changes the encoding.
    #[test]
    fn changing_one_field_changes_the_encoding(
        record in record(),
        field in 0..TEXT_FIELDS + 4,
        replacement in text(),
        seq: u64,
    ) {
        let mut other = record.clone();
        let mut other_seq = seq;
        match field {
            f if f < TEXT_FIELDS => {
                let mut t = texts(&record);
                prop_assume!(t[f] != replacement);
                t[f] = replacement;
                other = with_texts(other, t);
            }
            9 => other.time_ms = record.time_ms.wrapping_add(1),
            10 => other.duration_us = record.duration_us.wrapping_add(1),
            11 => other_seq = seq.wrapping_add(1),
            _ => {
                other.decision = if record.decision == Decision::Allowed {
                    Decision::Denied
                } else {
                    Decision::Allowed
                };
            }
        }
        prop_assert_ne!(record.canonical_bytes(seq).unwrap(), other.canonical_bytes(other_seq).unwrap());
    }

    /// Arbitrary bytes either fail to decode or are exactly the encoding of
    /// what they decode to; decoding never panics.
    #[test]
    fn decoder_accepts_only_canonical_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(decoded) = AuditRecord::decode(&bytes) {
            prop_assert_eq!(decoded.canonical_bytes().unwrap(), bytes);
        }
    }

    /// Corrupting a valid encoding (truncating, extending or flipping a byte)
    /// never decodes to the same record.
    #[test]
    fn corrupted_encodings_are_rejected_or_differ(
        record in record(),
        seq: u64,
        position: prop::sample::Index,
        mask in 1u8..=255,
        cut: prop::sample::Index,
    ) {
        let bytes = record.canonical_bytes(seq).unwrap();
        let mut flipped = bytes.clone();
        let at = position.index(bytes.len());
        flipped[at] ^= mask;
        if let Ok(decoded) = AuditRecord::decode(&flipped) {
            prop_assert!(decoded.record != record || decoded.seq != seq);
        }
        let truncated = &bytes[..cut.index(bytes.len())];
        prop_assert!(AuditRecord::decode(truncated).is_err());
        let mut extended = bytes.clone();
        extended.push(mask);
        prop_assert_eq!(AuditRecord::decode(&extended), Err(DecodeError::TrailingBytes { count: 1 }));
    }
}

/// A checkpoint file (`note_file`) of `n` signed checkpoints.
fn note_file_of(n: u64) -> (Vec<String>, String) {
    let key = bulwark_audit::SigningKey::from_bytes(&[9; 32]);
    let notes: Vec<String> = (0..n)
        .map(|i| {
            let cp = bulwark_audit::Checkpoint::new("o.example/log", i, [i as u8; 32]);
            bulwark_audit::sign(&cp, &key, "o.example/log").unwrap()
        })
        .collect();
    let file = notes.iter().map(|n| format!("{n}\n")).collect();
    (notes, file)
}

proptest! {
    /// Untrusted file text never panics the splitter, and whatever it
    /// accepts re-assembles to exactly the text it was given.
    #[test]
    fn split_notes_never_panics_and_accepts_only_whole_entries(text in "[a-z\n\u{2014} =/+]{0,200}") {
        if let Ok(notes) = bulwark_audit::note_file::split_notes(&text) {
            let joined: String = notes.iter().map(|n| format!("{n}\n")).collect();
            prop_assert_eq!(joined, text);
        }
    }

    /// A file of whole entries splits back into its notes; cutting it
    /// anywhere but at an entry boundary (a torn append) is refused.
    #[test]
    fn split_notes_round_trips_and_refuses_torn_files(n in 1u64..5, cut in 0usize..2000) {
        let (notes, file) = note_file_of(n);
        let split = bulwark_audit::note_file::split_notes(&file).unwrap();
        prop_assert_eq!(split, notes.iter().map(String::as_str).collect::<Vec<_>>());
        let cut = cut % file.len();
        if file.is_char_boundary(cut) {
            let boundaries: Vec<usize> = notes
                .iter()
                .scan(0, |end, n| { *end += n.len() + 1; Some(*end) })
                .collect();
            let torn = bulwark_audit::note_file::split_notes(&file[..cut]);
            prop_assert_eq!(torn.is_ok(), cut == 0 || boundaries.contains(&cut));
        }
    }
}
