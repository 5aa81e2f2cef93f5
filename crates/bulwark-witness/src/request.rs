//! The `add-checkpoint` wire format (c2sp.org/tlog-witness).
//!
//! Request body:
//!
//! ```text
//! old <size>
//! <base64 consistency proof hash>    (0 to 63 lines)
//!
//! <signed checkpoint note>
//! ```
//!
//! Responses: 200 with cosignature lines, 409 with the witness's size as
//! `text/x.tlog.size`, or an error status. Parsing is strict and bounded:
//! anything a different reader could split otherwise is refused, so the
//! witness and the log can never disagree about what was submitted.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bulwark_audit::Hash;

/// The most consistency proof lines a client may send (spec: 63).
pub const MAX_PROOF_LINES: usize = 63;

/// Largest request body accepted, bytes. A checkpoint with the 100
/// signatures a note may carry and a full proof is under 16 KiB.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Largest response body a client reads, bytes.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// The content type of a 409 answer's body.
pub const SIZE_CONTENT_TYPE: &str = "text/x.tlog.size";

/// A parsed `add-checkpoint` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddCheckpoint {
    /// The size of the checkpoint the proof starts from.
    pub old_size: u64,
    /// RFC 6962 consistency proof from `old_size` to the checkpoint.
    pub proof: Vec<Hash>,
    /// The signed checkpoint note, as sent (signatures not yet checked).
    pub checkpoint: String,
}

/// Why a request body is not a well-formed `add-checkpoint` request
/// (answered with 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("the request body is larger than {MAX_REQUEST_BYTES} bytes")]
    TooLarge,
    #[error("the request body is not UTF-8")]
    NotUtf8,
    #[error("the first line is not `old <size>` in canonical decimal")]
    BadOldSize,
    #[error("proof line {0} is not the standard base64 of a 32-byte hash")]
    BadProofLine(usize),
    #[error("more than {MAX_PROOF_LINES} consistency proof lines")]
    TooManyProofLines,
    #[error("no blank line between the proof and the checkpoint")]
    MissingBlankLine,
    #[error("the checkpoint is empty")]
    EmptyCheckpoint,
    #[error("the body contains a control character other than newline")]
    ControlCharacter,
}

impl AddCheckpoint {
    /// The request body.
    pub fn encode(&self) -> String {
        let mut out = format!("old {}\n", self.old_size);
        for hash in &self.proof {
            out.push_str(&BASE64.encode(hash));
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&self.checkpoint);
        out
    }

    /// Parses a request body, refusing anything not exactly of the form.
    pub fn parse(body: &[u8]) -> Result<Self, RequestError> {
        if body.len() > MAX_REQUEST_BYTES {
            return Err(RequestError::TooLarge);
        }
        let text = std::str::from_utf8(body).map_err(|_| RequestError::NotUtf8)?;
        if text.chars().any(|c| c < ' ' && c != '\n') {
            return Err(RequestError::ControlCharacter);
        }
        let (first, mut rest) = text.split_once('\n').ok_or(RequestError::BadOldSize)?;
        let old_size = first
            .strip_prefix("old ")
            .and_then(parse_decimal)
            .ok_or(RequestError::BadOldSize)?;
        let mut proof = Vec::new();
        loop {
            let (line, after) = rest
                .split_once('\n')
                .ok_or(RequestError::MissingBlankLine)?;
            rest = after;
            if line.is_empty() {
                break;
            }
            if proof.len() == MAX_PROOF_LINES {
                return Err(RequestError::TooManyProofLines);
            }
            let number = proof.len() + 1;
            let bytes = BASE64
                .decode(line)
                .map_err(|_| RequestError::BadProofLine(number))?;
            proof.push(
                Hash::try_from(bytes.as_slice()).map_err(|_| RequestError::BadProofLine(number))?,
            );
        }
        if rest.is_empty() {
            return Err(RequestError::EmptyCheckpoint);
        }
        Ok(Self {
            old_size,
            proof,
            checkpoint: rest.to_owned(),
        })
    }
}

/// ASCII decimal without sign or leading zeros (`0` alone for zero), so each
/// size has exactly one form.
pub fn parse_decimal(text: &str) -> Option<u64> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    if !canonical {
        return None;
    }
    text.parse().ok()
}

/// The body of a 409 answer: the size, then a newline.
pub fn encode_size(size: u64) -> String {
    format!("{size}\n")
}

/// Parses the body of a 409 answer.
pub fn parse_size(body: &[u8]) -> Option<u64> {
    std::str::from_utf8(body)
        .ok()?
        .strip_suffix('\n')
        .and_then(parse_decimal)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTE: &str = "o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— o AAAA\n";

    #[test]
    fn a_request_round_trips() {
        let request = AddCheckpoint {
            old_size: 20,
            proof: vec![[1; 32], [2; 32]],
            checkpoint: NOTE.to_owned(),
        };
        assert_eq!(
            AddCheckpoint::parse(request.encode().as_bytes()),
            Ok(request)
        );
    }

    #[test]
    fn malformed_requests_are_refused() {
        let hash = BASE64.encode([1u8; 32]);
        let cases: Vec<(String, RequestError)> = vec![
            (format!("old 01\n\n{NOTE}"), RequestError::BadOldSize),
            (format!("old -1\n\n{NOTE}"), RequestError::BadOldSize),
            (format!("old  1\n\n{NOTE}"), RequestError::BadOldSize),
            (format!("Old 1\n\n{NOTE}"), RequestError::BadOldSize),
            ("old 1".to_owned(), RequestError::BadOldSize),
            (
                format!("old 99999999999999999999\n\n{NOTE}"),
                RequestError::BadOldSize,
            ),
            (
                format!("old 1\nzz\n\n{NOTE}"),
                RequestError::BadProofLine(1),
            ),
            (
                format!("old 1\n{hash}\nAAAA\n\n{NOTE}"),
                RequestError::BadProofLine(2),
            ),
            (format!("old 1\n{hash}\n\n"), RequestError::EmptyCheckpoint),
            (format!("old 1\n{hash}"), RequestError::MissingBlankLine),
            (format!("old 1\r\n\n{NOTE}"), RequestError::ControlCharacter),
            (
                format!("old 1\n{}\n{NOTE}", format!("{hash}\n").repeat(64)),
                RequestError::TooManyProofLines,
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(
                AddCheckpoint::parse(body.as_bytes()),
                Err(expected),
                "{body:?}"
            );
        }
        assert_eq!(
            AddCheckpoint::parse(&vec![b'a'; MAX_REQUEST_BYTES + 1]),
            Err(RequestError::TooLarge)
        );
        assert_eq!(
            AddCheckpoint::parse(b"old 1\n\n\xff"),
            Err(RequestError::NotUtf8)
        );
    }

    #[test]
    fn sixty_three_proof_lines_are_allowed() {
        let request = AddCheckpoint {
            old_size: 1,
            proof: vec![[7; 32]; MAX_PROOF_LINES],
            checkpoint: NOTE.to_owned(),
        };
        assert_eq!(
            AddCheckpoint::parse(request.encode().as_bytes()),
            Ok(request)
        );
    }

    #[test]
    fn sizes_parse_canonically() {
        assert_eq!(parse_size(b"42\n"), Some(42));
        assert_eq!(parse_size(b"0\n"), Some(0));
        for bad in [&b"42"[..], b"042\n", b"\n", b"4 2\n", b"+4\n"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
        assert_eq!(parse_size(encode_size(u64::MAX).as_bytes()), Some(u64::MAX));
    }
}
