//! The log's side of witnessing: send each new checkpoint to the witnesses
//! of `[audit] witnesses`, keep their verified cosignatures, report who
//! cosigned the latest checkpoint, and refuse to start agents when fewer
//! than `[audit] require_witnesses` did.
//!
//! Callers (wired by `checkpoints.rs`, `cmd_audit.rs` and the agent start
//! path): [`witness_checkpoint`] / [`witness_checkpoint_blocking`] after a
//! checkpoint is signed, [`cosigners_of_latest`] for `audit verify`,
//! [`require_witnesses`] before an agent starts.

use crate::Failure;
use anyhow::{Context, anyhow};
use bulwark_audit::{Checkpoint, Cosignature, CosignerKey, Hash};
use bulwark_policy::AuditSection;
use bulwark_store::{NewCosignature, SqliteAuditSink};
use bulwark_witness::WitnessClient;

/// What one witness did with a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitnessOutcome {
    /// The witness's URL, as configured.
    pub url: String,
    /// The witness's key name.
    pub name: String,
    /// The cosignature's timestamp, or why there is none.
    pub result: Result<u64, String>,
}

/// What the witnesses did with one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitnessReport {
    /// The checkpoint's size.
    pub size: u64,
    /// One entry per configured witness, in configuration order.
    pub outcomes: Vec<WitnessOutcome>,
}

impl WitnessReport {
    /// How many witnesses cosigned.
    #[cfg(test)]
    pub fn cosigned(&self) -> usize {
        self.outcomes.iter().filter(|o| o.result.is_ok()).count()
    }

    /// One warning line per witness that did not cosign.
    pub fn failures(&self) -> impl Iterator<Item = String> + '_ {
        self.outcomes.iter().filter_map(|o| {
            o.result
                .as_ref()
                .err()
                .map(|e| format!("witness {} ({}) did not cosign: {e}", o.name, o.url))
        })
    }
}

/// A configured witness, its key parsed (config validation already
/// checked it parses; this is the typed copy).
struct Configured {
    url: String,
    vkey: String,
    key: CosignerKey,
}

fn configured(config: &AuditSection) -> anyhow::Result<Vec<Configured>> {
    config
        .witnesses
        .iter()
        .map(|w| {
            Ok(Configured {
                url: w.url.trim().to_owned(),
                vkey: w.key.clone(),
                key: CosignerKey::parse(&w.key)
                    .map_err(|e| anyhow!("[audit] witnesses: key {:?}: {e}", w.key))?,
            })
        })
        .collect()
}

/// Sends the signed checkpoint `note` (as the log's `checkpoint*` returned
/// it, already stored) to every configured witness at once, each with the
/// consistency proof from the size that witness last cosigned (known from
/// the stored cosignatures; the client retries once from the witness's own
/// size on 409), and stores each cosignature that verifies under that
/// witness's configured key. One witness failing does not stop the others:
/// its failure is in the report. `Err` only when the note is not a
/// checkpoint of this log or the witness keys do not parse.
pub async fn witness_checkpoint(
    config: &AuditSection,
    sink: &SqliteAuditSink,
    note: &str,
) -> anyhow::Result<WitnessReport> {
    let witnesses = configured(config)?;
    let body = bulwark_audit::note_text(note).context("the checkpoint note has no signature")?;
    let checkpoint = Checkpoint::parse_body(body).context("the checkpoint note is malformed")?;
    if witnesses.is_empty() {
        return Ok(WitnessReport {
            size: checkpoint.size,
            outcomes: Vec::new(),
        });
    }
    let client = WitnessClient::new().context("cannot build the witness HTTP client")?;
    let size = checkpoint.size;
    let proof = |old: u64| -> Result<Vec<Hash>, String> {
        sink.consistency_proof_between(old, size)
            .map_err(|e| e.to_string())
    };
    let submissions = witnesses.iter().map(|w| {
        let (client, proof) = (&client, &proof);
        async move {
            let old = match sink.latest_cosigned_size(&w.vkey) {
                Ok(old) => old.unwrap_or(0),
                Err(e) => return Err(format!("cannot read its last cosigned size: {e}")),
            };
            let cosigned = client
                .add_checkpoint(&w.url, &w.key, note, old, proof)
                .await
                .map_err(|e| e.to_string())?;
            let line = cosigned.cosignature.to_line();
            sink.add_cosignature(&NewCosignature {
                size,
                root: checkpoint.root,
                witness: &w.vkey,
                line: &line,
                timestamp: cosigned.cosignature.timestamp,
            })
            .map_err(|e| format!("its cosignature verified but was not stored: {e}"))?;
            Ok(cosigned.cosignature.timestamp)
        }
    });
    let results = futures_util::future::join_all(submissions).await;
    Ok(WitnessReport {
        size,
        outcomes: witnesses
            .iter()
            .zip(results)
            .map(|(w, result)| WitnessOutcome {
                url: w.url.clone(),
                name: w.key.name().to_owned(),
                result,
            })
            .collect(),
    })
}

/// [`witness_checkpoint`] from synchronous code (a checkpoint signed on a
/// blocking thread, or at exit): runs it on a thread of its own with its
/// own small runtime, so it works inside or outside a tokio runtime.
pub fn witness_checkpoint_blocking(
    config: &AuditSection,
    sink: &SqliteAuditSink,
    note: &str,
) -> anyhow::Result<WitnessReport> {
    if config.witnesses.is_empty() {
        return witness_report_without_witnesses(note);
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("bulwark-witnessing".into())
            .spawn_scoped(scope, || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the witnessing runtime")?;
                runtime.block_on(witness_checkpoint(config, sink, note))
            })
            .context("cannot start the witnessing thread")?
            .join()
            .map_err(|_| anyhow!("the witnessing thread panicked"))?
    })
}

fn witness_report_without_witnesses(note: &str) -> anyhow::Result<WitnessReport> {
    let body = bulwark_audit::note_text(note).context("the checkpoint note has no signature")?;
    Ok(WitnessReport {
        size: Checkpoint::parse_body(body)?.size,
        outcomes: Vec::new(),
    })
}

/// A witness whose cosignature of the latest checkpoint verifies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosigner {
    pub url: String,
    pub name: String,
    /// When it cosigned, seconds since the Unix epoch.
    pub timestamp: u64,
}

/// Who cosigned the log's latest stored checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosigners {
    /// The latest checkpoint's size.
    pub size: u64,
    /// Configured witnesses whose stored cosignature verifies.
    pub cosigned: Vec<Cosigner>,
    /// Configured witnesses without a (valid) cosignature of it, with why.
    pub missing: Vec<(String, String)>,
}

impl Cosigners {
    /// Lines for `audit verify`.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "witnesses: {} of {} cosigned the latest checkpoint (size {})",
            self.cosigned.len(),
            self.cosigned.len() + self.missing.len(),
            self.size
        )];
        for c in &self.cosigned {
            lines.push(format!(
                "  cosigned: {} ({}) at {}",
                c.name, c.url, c.timestamp
            ));
        }
        for (who, why) in &self.missing {
            lines.push(format!("  missing:  {who}: {why}"));
        }
        lines
    }
}

/// The configured witnesses that cosigned the latest stored checkpoint:
/// each stored cosignature is verified again, under the configured key,
/// over that checkpoint's text (a row is only as good as the file it is
/// in). `None` when no checkpoint is stored.
pub fn cosigners_of_latest(
    config: &AuditSection,
    sink: &SqliteAuditSink,
) -> anyhow::Result<Option<Cosigners>> {
    let witnesses = configured(config)?;
    let Some((latest, stored)) = sink.latest_checkpoint_cosignatures()? else {
        return Ok(None);
    };
    let body = bulwark_audit::note_text(&latest.note)
        .context("the latest stored checkpoint has no signature")?;
    let parsed =
        Checkpoint::parse_body(body).context("the latest stored checkpoint is malformed")?;
    if parsed.size != latest.size || parsed.root != latest.root {
        return Err(anyhow!(
            "the latest stored checkpoint's note names another size or root than its row"
        ));
    }
    let mut cosigners = Cosigners {
        size: latest.size,
        cosigned: Vec::new(),
        missing: Vec::new(),
    };
    for w in &witnesses {
        let who = format!("{} ({})", w.key.name(), w.url);
        let Some(row) = stored.iter().find(|c| c.witness == w.vkey) else {
            cosigners
                .missing
                .push((who, "no cosignature stored".to_owned()));
            continue;
        };
        let checked = Cosignature::parse_line(&row.line)
            .and_then(|c| c.verify(body, &w.key).map(|()| c.timestamp));
        match checked {
            Ok(timestamp) => cosigners.cosigned.push(Cosigner {
                url: w.url.clone(),
                name: w.key.name().to_owned(),
                timestamp,
            }),
            Err(e) => cosigners
                .missing
                .push((who, format!("the stored cosignature does not verify: {e}"))),
        }
    }
    Ok(Some(cosigners))
}

/// The agent start check of `[audit] require_witnesses = N`: at least N
/// configured witnesses cosigned the log's latest checkpoint.
pub fn require_witnesses(config: &AuditSection, sink: &SqliteAuditSink) -> Result<(), Failure> {
    let required = config.required_witnesses();
    if required == 0 {
        return Ok(());
    }
    let Some(cosigners) = cosigners_of_latest(config, sink)? else {
        return Err(anyhow!(
            "[audit] require_witnesses = {required}, but the audit log has no checkpoint yet: sign one with `bulwark audit checkpoint` while the witnesses are reachable"
        )
        .into());
    };
    if cosigners.cosigned.len() >= required {
        return Ok(());
    }
    let missing = cosigners
        .missing
        .iter()
        .map(|(who, why)| format!("{who}: {why}"))
        .collect::<Vec<_>>()
        .join("; ");
    Err(anyhow!(
        "[audit] require_witnesses = {required}, but only {} witness(es) cosigned the latest audit checkpoint (size {}); missing: {missing}. Agents will not start until enough witnesses cosign: make them reachable and run `bulwark audit checkpoint`",
        cosigners.cosigned.len(),
        cosigners.size
    )
    .into())
}

#[cfg(test)]
#[path = "witnessing_tests.rs"]
mod tests;
