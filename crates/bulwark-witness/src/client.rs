//! The log's side: submit a signed checkpoint with a consistency proof to a
//! witness and get back its cosignature, verified before it is accepted.

use crate::request::{AddCheckpoint, MAX_RESPONSE_BYTES, SIZE_CONTENT_TYPE, parse_size};
use bulwark_audit::{Checkpoint, Cosignature, CosignerKey, Hash};
use std::time::Duration;

/// Why no cosignature came back.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the checkpoint to submit is malformed: {0}")]
    Checkpoint(String),
    #[error("witness URL {0:?} is not an http(s) URL")]
    BadUrl(String),
    #[error("cannot reach the witness at {url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the witness at {url} answered {status}: {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    /// 409 twice, or a witness that has seen a larger tree than this
    /// checkpoint (this log was rolled back, or forked, in its view).
    #[error(
        "the witness at {url} is at size {witness_size}, which this checkpoint (size {size}) cannot extend: {hint}"
    )]
    Conflict {
        url: String,
        witness_size: u64,
        size: u64,
        hint: &'static str,
    },
    #[error("no consistency proof from size {old_size}: {message}")]
    Proof { old_size: u64, message: String },
    #[error("the witness at {url} sent no cosignature by {witness}")]
    NoCosignature { url: String, witness: String },
    #[error("the cosignature from {url} does not verify under {witness}: {message}")]
    BadCosignature {
        url: String,
        witness: String,
        message: String,
    },
}

/// A verified cosignature and the old size it was obtained from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosigned {
    pub cosignature: Cosignature,
    /// The checkpoint's size.
    pub size: u64,
    /// The old size of the request that succeeded (the witness's previous
    /// size for this log).
    pub old_size: u64,
}

/// An HTTP client for witnesses (rustls, short timeouts, no redirects: a
/// witness URL is configured exactly).
#[derive(Debug, Clone)]
pub struct WitnessClient {
    http: reqwest::Client,
}

/// Connection and whole-request timeouts.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const TIMEOUT: Duration = Duration::from_secs(15);

impl WitnessClient {
    pub fn new() -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self { http })
    }

    /// Submits `note` (a checkpoint this log signed) to the witness at
    /// `url` (its submission prefix; `/add-checkpoint` is appended), starting
    /// from `old_size`, the size the witness last cosigned as far as the
    /// caller knows (0 if unknown). `proof(old)` returns the consistency
    /// proof from `old` to the checkpoint; it is asked again, once, when the
    /// witness answers 409 with another size. The returned cosignature has
    /// been verified under `witness` over this checkpoint.
    pub async fn add_checkpoint(
        &self,
        url: &str,
        witness: &CosignerKey,
        note: &str,
        old_size: u64,
        proof: &(dyn Fn(u64) -> Result<Vec<Hash>, String> + Sync),
    ) -> Result<Cosigned, ClientError> {
        let body = bulwark_audit::note_text(note)
            .ok_or_else(|| ClientError::Checkpoint("no signature block".into()))?;
        let checkpoint =
            Checkpoint::parse_body(body).map_err(|e| ClientError::Checkpoint(e.to_string()))?;
        let endpoint = endpoint(url)?;
        let mut old = old_size.min(checkpoint.size);
        for attempt in 0..2 {
            let hashes = if old == 0 || old == checkpoint.size {
                Vec::new()
            } else {
                proof(old).map_err(|message| ClientError::Proof {
                    old_size: old,
                    message,
                })?
            };
            let request = AddCheckpoint {
                old_size: old,
                proof: hashes,
                checkpoint: note.to_owned(),
            };
            let (status, content_type, answer) = self.post(&endpoint, request.encode()).await?;
            match status {
                200 => {
                    return verified(&endpoint, witness, body, &answer).map(|cosignature| {
                        Cosigned {
                            cosignature,
                            size: checkpoint.size,
                            old_size: old,
                        }
                    });
                }
                409 => {
                    let witness_size = (content_type.as_deref() == Some(SIZE_CONTENT_TYPE))
                        .then(|| parse_size(&answer))
                        .flatten()
                        .ok_or_else(|| ClientError::Refused {
                            url: endpoint.clone(),
                            status,
                            message: "409 without a text/x.tlog.size body".into(),
                        })?;
                    let conflict = |hint| ClientError::Conflict {
                        url: endpoint.clone(),
                        witness_size,
                        size: checkpoint.size,
                        hint,
                    };
                    if witness_size > checkpoint.size {
                        return Err(conflict(
                            "it cosigned a larger tree of this origin: this log was rolled back, or another log uses the same origin",
                        ));
                    }
                    if attempt == 1 || witness_size == old {
                        return Err(conflict(
                            "it holds another tree of that size (a fork), or another log uses the same origin",
                        ));
                    }
                    old = witness_size;
                }
                _ => {
                    return Err(ClientError::Refused {
                        url: endpoint,
                        status,
                        message: message_of(&answer),
                    });
                }
            }
        }
        Err(ClientError::Refused {
            url: endpoint,
            status: 409,
            message: "conflict after retry".into(),
        })
    }

    async fn post(
        &self,
        url: &str,
        body: String,
    ) -> Result<(u16, Option<String>, Vec<u8>), ClientError> {
        let transport = |source| ClientError::Transport {
            url: url.to_owned(),
            source,
        };
        let mut response = self
            .http
            .post(url)
            .body(body)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut answer = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if answer.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(ClientError::Refused {
                    url: url.to_owned(),
                    status,
                    message: format!("answer larger than {MAX_RESPONSE_BYTES} bytes"),
                });
            }
            answer.extend_from_slice(&chunk);
        }
        Ok((status, content_type, answer))
    }
}

/// `<prefix>/add-checkpoint`, for an http(s) prefix.
fn endpoint(url: &str) -> Result<String, ClientError> {
    let prefix = url.trim_end_matches('/');
    if !(prefix.starts_with("http://") || prefix.starts_with("https://")) {
        return Err(ClientError::BadUrl(url.to_owned()));
    }
    Ok(format!("{prefix}/add-checkpoint"))
}

/// The cosignature by `witness` among the answer's lines, verified over
/// `body`. Lines by other keys are ignored, as the spec says; a line that
/// claims the witness's name and key ID but does not verify is an error.
fn verified(
    url: &str,
    witness: &CosignerKey,
    body: &str,
    answer: &[u8],
) -> Result<Cosignature, ClientError> {
    let bad = |message: String| ClientError::BadCosignature {
        url: url.to_owned(),
        witness: witness.name().to_owned(),
        message,
    };
    let text = std::str::from_utf8(answer).map_err(|_| bad("the answer is not UTF-8".into()))?;
    let lines = text
        .strip_suffix('\n')
        .ok_or_else(|| bad("the answer does not end in a newline".into()))?;
    for line in lines.split('\n').take(bulwark_audit::note::MAX_SIGNATURES) {
        let Ok(cosignature) = Cosignature::parse_line(line) else {
            continue;
        };
        if cosignature.name != witness.name() || cosignature.key_id != witness.key_id() {
            continue;
        }
        cosignature
            .verify(body, witness)
            .map_err(|e| bad(e.to_string()))?;
        return Ok(cosignature);
    }
    Err(ClientError::NoCosignature {
        url: url.to_owned(),
        witness: witness.name().to_owned(),
    })
}

/// The first line of an error answer, bounded, for messages.
fn message_of(answer: &[u8]) -> String {
    let text = String::from_utf8_lossy(answer);
    let line = text.lines().next().unwrap_or_default();
    line.chars().filter(|c| !c.is_control()).take(200).collect()
}
