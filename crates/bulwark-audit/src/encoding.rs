//! The canonical binary encoding of an audit record: the bytes a Merkle leaf
//! commits to.
//!
//! Every field is length-delimited or fixed-width and written in one fixed
//! order, so two different records can never encode to the same bytes (a
//! separator-joined string would let `("ab", "c")` and `("a", "bc")`
//! collide), and the leading version byte lets the format change later
//! without old leaves becoming ambiguous. Decoding is strict: every input
//! decodes to at most one record, and that record re-encodes to exactly the
//! input, so a stored leaf can be checked by decoding or by re-encoding.
//!
//! Layout (version 1), all integers big-endian:
//!
//! ```text
//! u8  version = 1
//! u64 seq
//! u64 time_ms            (the i64's two's-complement bits)
//! str session, agent, user, action, decision, tool, operation,
//!     args_digest, reason, detail
//! u64 duration_us
//! ```
//!
//! where `str` is a u32 byte length followed by that many bytes of UTF-8 and
//! `decision` is [`Decision::as_str`].

use crate::{Action, AuditRecord, Decision, Reason, StoredRecord};

/// The version byte written first by [`AuditRecord::canonical_bytes`].
pub const CANONICAL_VERSION: u8 = 1;

/// Longest string field the encoding can represent (its length is a u32).
pub const MAX_FIELD_LEN: usize = u32::MAX as usize;

/// Why a record cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A string field is longer than [`MAX_FIELD_LEN`] bytes. Refusing is the
    /// only option that keeps the encoding injective: truncating would make
    /// the log commit to something other than the record.
    #[error(
        "field `{field}` is {len} bytes; the canonical encoding allows at most {MAX_FIELD_LEN}"
    )]
    FieldTooLong { field: &'static str, len: usize },
}

/// Why bytes are not the canonical encoding of a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// No bytes at all.
    #[error("empty input")]
    Empty,
    /// The version byte is not one this code understands.
    #[error("unsupported encoding version {0}")]
    UnsupportedVersion(u8),
    /// The input ends inside this field.
    #[error("input ends inside field `{field}`")]
    Truncated { field: &'static str },
    /// Bytes remain after the last field.
    #[error("{count} unexpected bytes after the last field")]
    TrailingBytes { count: usize },
    /// A string field is not valid UTF-8.
    #[error("field `{field}` is not valid UTF-8")]
    InvalidUtf8 { field: &'static str },
    /// The decision is not one of the known decision strings.
    #[error("unknown decision {0:?}")]
    UnknownDecision(String),
}

/// A record's fields borrowed from wherever they live (an [`AuditRecord`], a
/// database row), so that a writer or verifier can encode and hash millions
/// of records without building an owned record, and its eleven heap
/// allocations, for each. [`AuditRecord::canonical_bytes`] and
/// [`AuditRecord::leaf_hash`] go through this type too, so there is exactly
/// one implementation of the encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub time_ms: i64,
    pub session: &'a str,
    pub agent: &'a str,
    pub user: &'a str,
    pub action: &'a str,
    pub tool: &'a str,
    pub operation: &'a str,
    pub args_digest: &'a str,
    pub decision: Decision,
    pub reason: &'a str,
    pub detail: &'a str,
    pub duration_us: u64,
}

impl<'a> RecordRef<'a> {
    /// The string fields in encoding order, with their names for errors.
    fn string_fields(&self) -> [(&'static str, &'a str); 10] {
        [
            ("session", self.session),
            ("agent", self.agent),
            ("user", self.user),
            ("action", self.action),
            ("decision", self.decision.as_str()),
            ("tool", self.tool),
            ("operation", self.operation),
            ("args_digest", self.args_digest),
            ("reason", self.reason),
            ("detail", self.detail),
        ]
    }

    /// Feeds the canonical encoding as entry `seq` to `write`, piece by
    /// piece. Every length is checked before the first byte is written, so a
    /// record that cannot be encoded writes nothing.
    fn write_canonical(&self, seq: u64, mut write: impl FnMut(&[u8])) -> Result<(), EncodeError> {
        let strings = self.string_fields();
        let mut lens = [0u32; 10];
        for (len, (field, value)) in lens.iter_mut().zip(strings) {
            *len = u32::try_from(value.len()).map_err(|_| EncodeError::FieldTooLong {
                field,
                len: value.len(),
            })?;
        }
        write(&[CANONICAL_VERSION]);
        write(&seq.to_be_bytes());
        write(&self.time_ms.to_be_bytes());
        for (len, (_, value)) in lens.iter().zip(strings) {
            write(&len.to_be_bytes());
            write(value.as_bytes());
        }
        write(&self.duration_us.to_be_bytes());
        Ok(())
    }

    /// Length in bytes of the canonical encoding (whether or not it can be
    /// encoded).
    pub fn encoded_len(&self) -> usize {
        let text: usize = self.string_fields().iter().map(|(_, s)| s.len()).sum();
        1 + 3 * 8 + 10 * 4 + text
    }

    /// Appends the canonical encoding as entry `seq` to `out`; on error `out`
    /// is left as it was.
    pub fn encode_into(&self, seq: u64, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.reserve(self.encoded_len());
        self.write_canonical(seq, |bytes| out.extend_from_slice(bytes))
    }

    /// `leaf_hash(canonical encoding as entry seq)`, streamed into the hash
    /// without materialising the encoding.
    pub fn leaf_hash(&self, seq: u64) -> Result<crate::Hash, EncodeError> {
        let mut hasher = crate::merkle::LeafHasher::new();
        self.write_canonical(seq, |bytes| hasher.update(bytes))?;
        Ok(hasher.finalize())
    }
}

impl AuditRecord {
    /// This record's fields, borrowed.
    pub fn fields(&self) -> RecordRef<'_> {
        RecordRef {
            time_ms: self.time_ms,
            session: &self.session,
            agent: &self.agent,
            user: &self.user,
            action: self.action.as_str(),
            tool: &self.tool,
            operation: &self.operation,
            args_digest: &self.args_digest,
            decision: self.decision,
            reason: self.reason.as_str(),
            detail: &self.detail,
            duration_us: self.duration_us,
        }
    }

    /// The canonical encoding of this record as entry `seq` of the log.
    ///
    /// `seq` is part of the encoding so a record cannot be replayed at
    /// another position without its leaf hash changing.
    pub fn canonical_bytes(&self, seq: u64) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.fields().encode_into(seq, &mut out)?;
        Ok(out)
    }

    /// The Merkle leaf hash of this record as entry `seq`:
    /// `leaf_hash(canonical_bytes(seq))`, computed without allocating.
    pub fn leaf_hash(&self, seq: u64) -> Result<crate::Hash, EncodeError> {
        self.fields().leaf_hash(seq)
    }

    /// Decodes [`canonical_bytes`](Self::canonical_bytes) output back into the
    /// record and its sequence number. Rejects anything that is not exactly
    /// one canonical encoding.
    pub fn decode(bytes: &[u8]) -> Result<StoredRecord, DecodeError> {
        let (&version, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
        if version != CANONICAL_VERSION {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        let mut reader = Reader { rest };
        let seq = reader.u64("seq")?;
        let time_ms = i64::from_be_bytes(reader.array("time_ms")?);
        let session = reader.string("session")?;
        let agent = reader.string("agent")?;
        let user = reader.string("user")?;
        let action = reader.string("action")?;
        let decision_text = reader.string("decision")?;
        let decision =
            decision_from_str(&decision_text).ok_or(DecodeError::UnknownDecision(decision_text))?;
        let tool = reader.string("tool")?;
        let operation = reader.string("operation")?;
        let args_digest = reader.string("args_digest")?;
        let reason = reader.string("reason")?;
        let detail = reader.string("detail")?;
        let duration_us = reader.u64("duration_us")?;
        if !reader.rest.is_empty() {
            return Err(DecodeError::TrailingBytes {
                count: reader.rest.len(),
            });
        }
        Ok(StoredRecord {
            seq,
            record: AuditRecord {
                time_ms,
                session,
                agent,
                user,
                action: Action::parse(action),
                tool,
                operation,
                args_digest,
                decision,
                reason: Reason::parse(reason),
                detail,
                duration_us,
            },
        })
    }
}

impl StoredRecord {
    /// The canonical encoding of this record at its own sequence number.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, EncodeError> {
        self.record.canonical_bytes(self.seq)
    }
}

/// The inverse of [`Decision::as_str`]; exact match only, so each decision
/// has one encoding.
fn decision_from_str(text: &str) -> Option<Decision> {
    [
        Decision::Allowed,
        Decision::Denied,
        Decision::Approved,
        Decision::Failed,
        Decision::Warned,
    ]
    .into_iter()
    .find(|d| d.as_str() == text)
}

/// A cursor over the undecoded rest of the input.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let (head, tail) = self
            .rest
            .split_at_checked(n)
            .ok_or(DecodeError::Truncated { field })?;
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(N, field)?;
        <[u8; N]>::try_from(bytes).map_err(|_| DecodeError::Truncated { field })
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    fn string(&mut self, field: &'static str) -> Result<String, DecodeError> {
        let len = u32::from_be_bytes(self.array(field)?);
        let len = usize::try_from(len).map_err(|_| DecodeError::Truncated { field })?;
        let bytes = self.take(len, field)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| DecodeError::InvalidUtf8 { field })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> AuditRecord {
        AuditRecord {
            time_ms: -5,
            session: "s".into(),
            agent: "a".into(),
            user: "u".into(),
            action: Action::ToolCall,
            tool: "fs".into(),
            operation: "fs:read".into(),
            args_digest: String::new(),
            decision: Decision::Denied,
            reason: Reason::Path,
            detail: "é".into(),
            duration_us: 7,
        }
    }

    #[test]
    fn layout_is_the_documented_one() {
        let bytes = sample().canonical_bytes(0x0102).unwrap();
        assert_eq!(bytes[0], CANONICAL_VERSION);
        assert_eq!(&bytes[1..9], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&bytes[9..17], &(-5i64).to_be_bytes());
        assert_eq!(&bytes[17..22], &[0, 0, 0, 1, b's']);
        assert_eq!(&bytes[bytes.len() - 8..], &7u64.to_be_bytes());
        let decoded = AuditRecord::decode(&bytes).unwrap();
        assert_eq!((decoded.seq, decoded.record), (0x0102, sample()));
    }

    #[test]
    fn malformed_inputs_get_typed_errors() {
        let bytes = sample().canonical_bytes(1).unwrap();
        assert_eq!(AuditRecord::decode(&[]), Err(DecodeError::Empty));
        let mut other_version = bytes.clone();
        other_version[0] = 2;
        assert_eq!(
            AuditRecord::decode(&other_version),
            Err(DecodeError::UnsupportedVersion(2))
        );
        assert_eq!(
            AuditRecord::decode(&bytes[..bytes.len() - 1]),
            Err(DecodeError::Truncated {
                field: "duration_us"
            })
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            AuditRecord::decode(&longer),
            Err(DecodeError::TrailingBytes { count: 1 })
        );
        // A length prefix that claims more than is left.
        let mut overlong = bytes.clone();
        overlong[17..21].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            AuditRecord::decode(&overlong),
            Err(DecodeError::Truncated { field: "session" })
        );
        let mut bad_utf8 = bytes.clone();
        bad_utf8[21] = 0xff;
        assert_eq!(
            AuditRecord::decode(&bad_utf8),
            Err(DecodeError::InvalidUtf8 { field: "session" })
        );
    }

    #[test]
    fn unknown_decisions_are_refused() {
        let mut record = sample();
        record.reason = Reason::Other("x".into());
        let mut bytes = record.canonical_bytes(1).unwrap();
        let at = bytes.windows(6).position(|w| w == b"denied").unwrap();
        bytes[at] = b'D';
        assert_eq!(
            AuditRecord::decode(&bytes),
            Err(DecodeError::UnknownDecision("Denied".into()))
        );
    }

    /// Typing `action` and `reason` changed no byte: these are the bytes of
    /// the documented layout, computed independently of this crate (by
    /// hand from the layout above, as the encoding was before the fields
    /// were typed), for a record of known words and one of words this build
    /// does not know.
    #[test]
    fn typed_words_encode_to_the_bytes_strings_did() {
        let known = "010000000000000102fffffffffffffffb00000001730000000161000000017500000009746f6f6c5f63616c6c0000000664656e6965640000000266730000000766733a7265616400000000000000047061746800000002c3a90000000000000007";
        assert_eq!(
            hex::encode(sample().canonical_bytes(0x0102).unwrap()),
            known
        );

        let unknown = AuditRecord::at(
            1_700_000_000_000,
            crate::Identity::new("s1", "bot", "alice"),
            crate::Event::new(
                Action::parse("from_a_newer_build"),
                Decision::Allowed,
                Reason::parse("minted 5 into user:alice"),
            )
            .tool("credits")
            .operation("transfer")
            .digest("ab"),
        );
        let bytes = unknown.canonical_bytes(9).unwrap();
        assert_eq!(
            hex::encode(&bytes),
            "0100000000000000090000018bcfe5680000000002733100000003626f7400000005616c6963650000001266726f6d5f615f6e657765725f6275696c6400000007616c6c6f7765640000000763726564697473000000087472616e73666572000000026162000000186d696e746564203520696e746f20757365723a616c696365000000000000000000000000"
        );
        let decoded = AuditRecord::decode(&bytes).unwrap().record;
        assert_eq!(decoded.action, Action::Other("from_a_newer_build".into()));
        assert!(!decoded.reason.is_known());
        assert_eq!(decoded.canonical_bytes(9).unwrap(), bytes);
    }
}
