//! The global config (`$BULWARK_HOME/config.toml`). Every field is optional;
//! an absent filter or ceiling means "no restriction at this layer", because
//! this layer only ever narrows what a manifest grants.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::capability::Capability;
use crate::credentials::{self, SecretsSection};
use crate::credits::{self, CreditsSection};
use crate::egress::{self, EgressSection};
use crate::error::{ConfigError, Located, Seg};
use crate::loop_guard::LoopGuardConfig;
use crate::manifest::{ToolFilter, parse_model_ref};
use crate::validate;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalConfig {
    /// `allow` absent = no restriction at this layer.
    #[serde(default)]
    pub tools: ToolFilter,
    /// A ceiling: every agent capability must lie within one of these.
    /// Absent = no ceiling.
    #[serde(default)]
    pub capabilities: Option<Vec<Capability>>,
    /// Extra narrowing for remote (server) sessions only.
    #[serde(default)]
    pub remote: RemoteSection,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// `provider:model` for agents that name none.
    #[serde(default)]
    pub default_model: Option<String>,
    #[serde(default)]
    pub loop_guard: LoopGuardConfig,
    /// Operator overrides for internal services (exact `host:port`).
    #[serde(default)]
    pub egress: EgressSection,
    /// Environment variables the runtime treats as secrets.
    #[serde(default)]
    pub secrets: SecretsSection,
    /// How child processes are confined.
    #[serde(default)]
    pub sandbox: GlobalSandbox,
    /// Which signed agents may run.
    #[serde(default)]
    pub trust: TrustSection,
    /// When the audit log signs checkpoints.
    #[serde(default)]
    pub audit: AuditSection,
    /// The price list of credit metering. Absent = metering is off: model
    /// calls and tools cost nothing and the ledger holds nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credits: Option<CreditsSection>,
    /// MCP servers the operator defines for manifests to name.
    #[serde(default)]
    pub mcp: crate::mcp::McpSection,
}

/// `[trust]` of config.toml.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustSection {
    /// Refuse agents without a valid signature by a key in the trust store.
    /// Off by default so a fresh install runs its own unsigned agents; an
    /// operator who distributes agents turns it on.
    #[serde(default)]
    pub require_signed: bool,
}

/// `[audit]` of config.toml.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSection {
    /// Seconds between periodic signed checkpoints while agents run
    /// (default 300). A checkpoint is also signed at every exit.
    #[serde(default)]
    pub checkpoint_interval_secs: Option<u64>,
    /// Also sign a checkpoint once this many records were appended since
    /// the last one (default 10000).
    #[serde(default)]
    pub checkpoint_every_records: Option<u64>,
    /// Also keep each tool call's arguments (canonical JSON, secrets
    /// redacted, at most 64 KiB) in an `arguments` record. Off by default:
    /// the log then holds only their SHA-256, and the transcript the values.
    #[serde(default)]
    pub record_arguments: bool,
    /// The origin line of this log's checkpoints: the log's name for
    /// witnesses, which keep one state per origin. Default
    /// [`DEFAULT_ORIGIN`](Self::DEFAULT_ORIGIN), as before the field
    /// existed; logs that share a witness need distinct origins.
    #[serde(default)]
    pub origin: Option<String>,
    /// Witnesses each new checkpoint is sent to (c2sp.org/tlog-witness),
    /// with the key their cosignatures must verify under.
    #[serde(default)]
    pub witnesses: Vec<WitnessEntry>,
    /// Agents refuse to start unless at least this many of `witnesses`
    /// cosigned the log's latest checkpoint (default 0: no requirement).
    #[serde(default)]
    pub require_witnesses: Option<usize>,
}

/// One `[[audit.witnesses]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WitnessEntry {
    /// The witness's submission prefix; `/add-checkpoint` is appended.
    pub url: String,
    /// The witness's cosigner vkey, as `bulwark witness key` prints it.
    pub key: String,
}

impl AuditSection {
    pub const DEFAULT_INTERVAL_SECS: u64 = 300;
    pub const DEFAULT_EVERY_RECORDS: u64 = 10_000;
    /// The origin of a log whose config names none.
    pub const DEFAULT_ORIGIN: &'static str = "bulwark.local/audit";
    /// Longest origin line accepted.
    pub const MAX_ORIGIN_LEN: usize = 256;

    /// This log's checkpoint origin.
    pub fn origin(&self) -> &str {
        self.origin.as_deref().unwrap_or(Self::DEFAULT_ORIGIN)
    }

    /// How many witnesses must have cosigned the latest checkpoint.
    pub fn required_witnesses(&self) -> usize {
        self.require_witnesses.unwrap_or(0)
    }

    pub fn interval_secs(&self) -> u64 {
        self.checkpoint_interval_secs
            .unwrap_or(Self::DEFAULT_INTERVAL_SECS)
    }

    pub fn every_records(&self) -> u64 {
        self.checkpoint_every_records
            .unwrap_or(Self::DEFAULT_EVERY_RECORDS)
    }
}

/// `[sandbox]` of config.toml.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalSandbox {
    /// `strict` (default): a command does not run when a confinement layer
    /// is unavailable on this machine. `permissive`: it runs, with a warning
    /// on stderr and an audit record naming what is missing.
    #[serde(default)]
    pub enforcement: SandboxEnforcement,
    /// Wall-clock limit of one command, seconds (default 60).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Address-space limit of each process, MiB (default 4096).
    #[serde(default)]
    pub memory_mib: Option<u64>,
    /// Processes (and threads) one command may have at once (default 256).
    #[serde(default)]
    pub max_processes: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxEnforcement {
    #[default]
    Strict,
    Permissive,
}

/// Policy applied on top of everything else when the session is remote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSection {
    #[serde(default)]
    pub tools: ToolFilter,
    /// Remote sessions get no shell unless this is set.
    #[serde(default)]
    pub shell: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    pub base_url: String,
    /// Name of the environment variable holding the API key (read by the
    /// CLI, never by this crate).
    #[serde(default)]
    pub api_key_env: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    Anthropic,
    Openai,
}

/// Parse and validate the global config. `origin` names the file in errors.
pub fn parse_global_config(src: &str, origin: &str) -> Result<GlobalConfig, ConfigError> {
    use Seg::Key;
    let loc = Located::new(src, origin);
    let c: GlobalConfig = toml::from_str(src).map_err(|e| loc.toml_error(&e))?;
    validate::tool_filter(&loc, &[Key("tools")], &c.tools)?;
    if let Some(caps) = &c.capabilities {
        validate::capabilities(&loc, &[Key("capabilities")], caps)?;
    }
    validate::tool_filter(&loc, &[Key("remote"), Key("tools")], &c.remote.tools)?;
    for (name, p) in &c.providers {
        let base = [Key("providers"), Key(name.as_str())];
        if !crate::capability::is_domain_name(name) {
            return Err(loc.at(&base, "provider name must be lowercase [a-z0-9_-]"));
        }
        let url = p.base_url.trim();
        if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() < 9 {
            return Err(loc.at(
                &[base[0], base[1], Key("base_url")],
                format_args!("{:?} must be an http(s) URL", p.base_url),
            ));
        }
        if let Some(env) = &p.api_key_env
            && (env.is_empty() || !env.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        {
            return Err(loc.at(
                &[base[0], base[1], Key("api_key_env")],
                format_args!("{env:?} is not an environment variable name ([A-Za-z0-9_])"),
            ));
        }
    }
    if let Some(model) = &c.default_model {
        parse_model_ref(model).map_err(|e| loc.at(&[Key("default_model")], e))?;
    }
    for (field, value, max) in [
        ("timeout_secs", c.sandbox.timeout_secs, 24 * 3600),
        ("memory_mib", c.sandbox.memory_mib, 1 << 20),
        ("max_processes", c.sandbox.max_processes, 1 << 16),
    ] {
        if let Some(v) = value
            && !(1..=max).contains(&v)
        {
            return Err(loc.at(
                &[Key("sandbox"), Key(field)],
                format_args!("{v} is out of range; use 1 to {max}"),
            ));
        }
    }
    for (field, value, max) in [
        (
            "checkpoint_interval_secs",
            c.audit.checkpoint_interval_secs,
            7 * 24 * 3600,
        ),
        (
            "checkpoint_every_records",
            c.audit.checkpoint_every_records,
            1 << 40,
        ),
    ] {
        if let Some(v) = value
            && !(1..=max).contains(&v)
        {
            return Err(loc.at(
                &[Key("audit"), Key(field)],
                format_args!("{v} is out of range; use 1 to {max}"),
            ));
        }
    }
    validate_audit(&loc, &c.audit)?;
    c.loop_guard
        .validate()
        .map_err(|(field, msg)| loc.at(&[Key("loop_guard"), Key(field)], msg))?;
    egress::validate_egress(&loc, &c.egress)?;
    crate::mcp::validate_section(&loc, &c.mcp, crate::mcp::Source::Config)?;
    credentials::validate_secrets(&loc, &c.secrets)?;
    if let Some(section) = &c.credits {
        credits::validate_credits(&loc, section)?;
    }
    Ok(c)
}

/// `[audit] origin`, `witnesses` and `require_witnesses`.
fn validate_audit(loc: &Located<'_>, audit: &AuditSection) -> Result<(), ConfigError> {
    use Seg::{Idx, Key};
    if let Some(origin) = &audit.origin
        && (origin.is_empty()
            || origin.len() > AuditSection::MAX_ORIGIN_LEN
            || origin.chars().any(char::is_control)
            || origin.trim() != origin)
    {
        return Err(loc.at(
            &[Key("audit"), Key("origin")],
            format_args!(
                "{origin:?} must be one line of 1 to {} characters without surrounding spaces, e.g. \"bulwark.example.org/audit\"",
                AuditSection::MAX_ORIGIN_LEN
            ),
        ));
    }
    let mut keys = std::collections::BTreeSet::new();
    for (i, witness) in audit.witnesses.iter().enumerate() {
        let base = [Key("audit"), Key("witnesses"), Idx(i)];
        let url = witness.url.trim();
        let parsed = url::Url::parse(url);
        if !matches!(&parsed, Ok(u) if (u.scheme() == "http" || u.scheme() == "https") && u.host().is_some())
        {
            return Err(loc.at(
                &[base[0], base[1], base[2], Key("url")],
                format_args!(
                    "{:?} must be the witness's http(s) URL, e.g. \"http://10.0.0.2:7380\"",
                    witness.url
                ),
            ));
        }
        let key_at = [base[0], base[1], base[2], Key("key")];
        if let Err(e) = bulwark_audit::CosignerKey::parse(&witness.key) {
            return Err(loc.at(
                &key_at,
                format_args!(
                    "{:?} is not a witness key ({e}); copy the line `bulwark witness key` prints on the witness",
                    witness.key
                ),
            ));
        }
        if !keys.insert(witness.key.as_str()) {
            return Err(loc.at(&key_at, "the same witness key is listed twice"));
        }
    }
    if let Some(n) = audit.require_witnesses
        && n > audit.witnesses.len()
    {
        return Err(loc.at(
            &[Key("audit"), Key("require_witnesses")],
            format_args!(
                "{n} is more than the {} witnesses configured in [[audit.witnesses]]; lower it or add witnesses",
                audit.witnesses.len()
            ),
        ));
    }
    Ok(())
}
