//! Loading an agent: its signature is checked against the trust store, and
//! a signed agent is used from exactly the bytes that were verified, read
//! once (ISSUE 16 item 12, the check-then-load window). Every session —
//! `run`, `chat`, a served worker, a child agent — loads its agent here,
//! through [`crate::SessionFactory`]; the front ends only print.

use crate::agent::KernelError;
use crate::factory::OpenError;
use crate::home::{DEFAULT_SYSTEM_PROMPT, Home, LoadedAgent};
use crate::providers::{LocalModelFile, ModelFiles};
use bulwark_llm::ScriptDriver;
use bulwark_trust::{
    AgentPath, Pins, TrustError, TrustStore, VerifiedAgent, VersionFloors, verify_bundle,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Why a signature problem stops a run.
pub const REQUIRE_SIGNED_POLICY: &str = "config.toml sets [trust] require_signed = true, so only agents signed by a key in the trust store may run";

/// Whether an agent's signature checks out.
#[derive(Debug, Clone)]
pub enum SignatureStatus {
    /// No `agent.sig`.
    Unsigned,
    /// Every file is what a key in the trust store signed, and its version
    /// is not older than one this home has run.
    Valid {
        signer: String,
        key_id: u32,
        /// The signed version (0: a signature made before versions).
        version: u64,
        /// The files as read once and verified: a run uses these bytes,
        /// never the files on disk again.
        agent: Arc<VerifiedAgent>,
    },
    /// Signed, but the signature does not hold here; `reason` says what
    /// differs or who signed, and what to do.
    Invalid { reason: String },
}

/// A signature status, or a valid signature of a version older than one
/// this home has run (which a run under `require_signed` refuses and
/// audits).
#[derive(Debug, Clone)]
pub enum SignatureCheck {
    Status(SignatureStatus),
    Rollback { reason: String },
}

impl SignatureCheck {
    /// The status, a rollback counting as an invalid signature.
    pub fn status(self) -> SignatureStatus {
        match self {
            SignatureCheck::Status(status) => status,
            SignatureCheck::Rollback { reason } => SignatureStatus::Invalid { reason },
        }
    }
}

/// Checks `agent`'s files against the trust store of `home`. An agent
/// that does not exist, or a bad name, is an [`OpenError::Usage`].
pub fn check_signature(home: &Home, agent: &str) -> Result<SignatureCheck, OpenError> {
    let dir = home.agent_dir(agent).map_err(OpenError::from)?;
    let invalid = |reason: String| Ok(SignatureCheck::Status(SignatureStatus::Invalid { reason }));
    let store = match TrustStore::load_from_home(home.root()) {
        Ok(store) => store,
        Err(err) => return invalid(format!("the trust store cannot be read: {err}")),
    };
    match verify_bundle(&dir, agent, &store) {
        Ok(verified) => {
            match VersionFloors::load(store.dir())
                .and_then(|floors| floors.check(agent, &verified.signers, verified.version))
            {
                Ok(()) => Ok(SignatureCheck::Status(SignatureStatus::Valid {
                    signer: verified.signer.clone(),
                    key_id: verified.key_id,
                    version: verified.version,
                    agent: Arc::new(verified),
                })),
                Err(err @ TrustError::Rollback { .. }) => Ok(SignatureCheck::Rollback {
                    reason: err.to_string(),
                }),
                Err(err) => invalid(err.to_string()),
            }
        }
        Err(TrustError::Unsigned { .. }) => Ok(SignatureCheck::Status(SignatureStatus::Unsigned)),
        Err(TrustError::NotADirectory { .. } | TrustError::MissingManifest { .. }) => {
            Err(OpenError::Usage(format!(
                "no agent `{agent}`: {} does not exist (see `bulwark agents list`)",
                home.agents_dir().join(agent).join("agent.toml").display()
            )))
        }
        Err(err) => invalid(with_hint(&err, agent)),
    }
}

/// The status `require_signed` lets run: with it, anything but a valid
/// signature is refused, saying why and how to fix it.
pub fn require_signature(
    status: SignatureStatus,
    agent: &str,
    require_signed: bool,
) -> Result<SignatureStatus, OpenError> {
    if !require_signed {
        return Ok(status);
    }
    match status {
        SignatureStatus::Valid { .. } => Ok(status),
        SignatureStatus::Unsigned => Err(OpenError::Refused(format!(
            "agent `{agent}` is not signed and {REQUIRE_SIGNED_POLICY}. Review it, then sign it with `bulwark sign {agent}` (create a key with `bulwark keys gen NAME` and trust it with `bulwark keys trust keys/NAME.pub`)"
        ))),
        SignatureStatus::Invalid { reason } => Err(OpenError::Refused(format!(
            "{reason}. {REQUIRE_SIGNED_POLICY}"
        ))),
    }
}

/// The error, followed by what the operator should do about it.
fn with_hint(err: &TrustError, agent: &str) -> String {
    let hint = match err {
        TrustError::Unsigned { .. } => format!("Sign it with `bulwark sign {agent}`"),
        TrustError::UntrustedSigner {
            trusted_with_same_name,
            ..
        } if !trusted_with_same_name.is_empty() => {
            "Do not trust this key unless the owner of the trusted key confirms they replaced it; re-sign the agent with the trusted key instead".into()
        }
        TrustError::UntrustedSigner { .. } => {
            "If you trust this signer, get their public key (keys/NAME.pub where they signed) and run `bulwark keys trust VKEY-OR-FILE`; otherwise review the agent and sign it with your own key".into()
        }
        TrustError::BadSignature { .. } => format!(
            "Treat the agent as tampered with; after reviewing every file, sign it again with `bulwark sign {agent}`"
        ),
        TrustError::ContentMismatch { .. } => format!(
            "Review the changes; if they are approved, sign again with `bulwark sign {agent}`"
        ),
        TrustError::MalformedSignature { .. } => format!(
            "After reviewing the agent, sign it again with `bulwark sign {agent}`"
        ),
        _ => return err.to_string(),
    };
    format!("{err}. {hint}")
}

/// An agent as a session runs it: loaded from the verified bytes when its
/// signature holds, else from the disk (when the policy allows).
pub(crate) struct AgentFiles {
    pub(crate) loaded: LoadedAgent,
    pub(crate) signature: SignatureStatus,
    /// The bytes verified (`None`: unsigned or tolerated invalid).
    pub(crate) verified: Option<Arc<VerifiedAgent>>,
}

/// Checks `agent`'s signature, then loads it: from the verified bytes when
/// it holds (nothing of the agent is read from the disk again), else from
/// the disk. `warn` hears about a tolerated invalid signature.
///
/// A rollback under `require_signed` is [`OpenError::Rollback`], for the
/// caller to audit.
pub(crate) fn load_agent(
    home: &Home,
    agent: &str,
    require_signed: bool,
    warn: &dyn Fn(&str),
) -> Result<AgentFiles, OpenError> {
    let signature = match check_signature(home, agent)? {
        SignatureCheck::Rollback { reason } if require_signed => {
            return Err(OpenError::Rollback {
                reason: format!("{reason}. {REQUIRE_SIGNED_POLICY}"),
            });
        }
        SignatureCheck::Rollback { reason } => SignatureStatus::Invalid { reason },
        SignatureCheck::Status(status) => require_signature(status, agent, require_signed)?,
    };
    after_check_hook(agent);
    let verified = match &signature {
        SignatureStatus::Valid { agent, .. } => Some(agent.clone()),
        SignatureStatus::Invalid { reason } => {
            warn(&format!(
                "the signature of agent `{agent}` does not hold: {reason}"
            ));
            None
        }
        SignatureStatus::Unsigned => None,
    };
    let loaded = match &verified {
        Some(verified) => loaded_from_bundle(agent, verified)?,
        None => home.load_agent(agent)?,
    };
    Ok(AgentFiles {
        loaded,
        signature,
        verified,
    })
}

/// The agent as `Home::load_agent` would load it, from the verified
/// bytes: nothing is read from the disk.
pub(crate) fn loaded_from_bundle(
    name: &str,
    verified: &VerifiedAgent,
) -> Result<LoadedAgent, OpenError> {
    let bundle = &verified.bundle;
    let digest = |path: &str| {
        bundle
            .listing()
            .files
            .iter()
            .find(|f| f.path == path)
            .map(|f| f.sha256)
    };
    let text = |path: &str| -> Result<Option<(String, [u8; 32])>, OpenError> {
        let (Some(bytes), Some(sha)) = (bundle.get(path), digest(path)) else {
            return Ok(None);
        };
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
            OpenError::Usage(format!(
                "cannot read {}: it is not UTF-8 text",
                bundle.dir().join(path).display()
            ))
        })?;
        Ok(Some((text, sha)))
    };
    let manifest_path = bundle.dir().join(bulwark_trust::MANIFEST_FILE);
    let (src, manifest_sha) = text(bulwark_trust::MANIFEST_FILE)?.ok_or_else(|| {
        OpenError::Usage(format!(
            "no agent `{name}`: {} does not exist",
            manifest_path.display()
        ))
    })?;
    let manifest = bulwark_policy::parse_manifest(&src, &manifest_path.display().to_string())
        .map_err(|e| OpenError::Usage(e.to_string()))?;
    if manifest.agent.name != name {
        return Err(OpenError::Usage(format!(
            "{}: [agent] name is `{}` but the directory is `{name}`; they must match",
            manifest_path.display(),
            manifest.agent.name
        )));
    }
    let mut sources = vec![(bulwark_trust::MANIFEST_FILE.to_string(), manifest_sha)];
    let system_prompt = match text("SYSTEM.md")? {
        Some((text, sha)) => {
            sources.push(("SYSTEM.md".to_string(), sha));
            text
        }
        None => DEFAULT_SYSTEM_PROMPT.to_string(),
    };
    Ok(LoadedAgent {
        manifest,
        system_prompt,
        dir: bundle.dir().to_owned(),
        sources,
    })
}

/// A callback for warnings the operator should see (the terminal prints
/// them; a child's go to the log).
pub type Warn = Arc<dyn Fn(&str) + Send + Sync>;

/// The model's files from a verified agent: a path inside the agent
/// directory is served from the verified bytes; one outside is used only
/// when `pins.sha256` pins it (read once and checked), or, without
/// `require_signed`, read from disk with a warning.
pub(crate) struct VerifiedFiles {
    agent: Arc<VerifiedAgent>,
    pins: Pins,
    require_signed: bool,
    /// Where the model reference came from (for errors).
    field: String,
    /// The model reference.
    value: String,
    /// Each file used and the SHA-256 of the bytes used, for the record.
    used: Mutex<Vec<(String, [u8; 32])>>,
    /// Set when a path was refused under `require_signed`, or a pinned
    /// file could not be used (a refusal, not a setup error).
    refused: AtomicBool,
    /// Whether the unverified-file warning was given.
    warned: AtomicBool,
    warn: Warn,
}

/// Where a model file is: a file of the agent, or a pinned outside one.
enum Place {
    Inside(String),
    Pinned(PathBuf, [u8; 32]),
}

fn trust_setup(err: TrustError) -> KernelError {
    KernelError::Setup(err.to_string())
}

impl VerifiedFiles {
    /// The files of `agent`, for the model reference `value` taken from
    /// `field` (`--model`, `agent.toml [agent] model`, ...). Fails when the
    /// agent's `pins.sha256` is malformed.
    pub(crate) fn new(
        agent: Arc<VerifiedAgent>,
        require_signed: bool,
        field: impl Into<String>,
        value: impl Into<String>,
        warn: Warn,
    ) -> Result<Self, TrustError> {
        Ok(Self {
            pins: Pins::of(&agent.bundle)?,
            agent,
            require_signed,
            field: field.into(),
            value: value.into(),
            used: Mutex::new(Vec::new()),
            refused: AtomicBool::new(false),
            warned: AtomicBool::new(false),
            warn,
        })
    }

    /// Whether a file was refused (a policy refusal, not a setup error).
    pub(crate) fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// The files used so far, with the SHA-256 of the bytes used.
    pub(crate) fn take_used(&self) -> Vec<(String, [u8; 32])> {
        std::mem::take(&mut *self.used.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn refuse(&self, err: TrustError) -> KernelError {
        self.refused.store(true, Ordering::Relaxed);
        KernelError::Setup(format!("{err}. {REQUIRE_SIGNED_POLICY}"))
    }

    /// A pinned file that cannot be used (changed, unreadable): a
    /// refusal, with or without `require_signed`.
    fn pin_failed(&self, err: TrustError) -> KernelError {
        self.refused.store(true, Ordering::Relaxed);
        trust_setup(err)
    }

    fn used(&self, name: String, sha: [u8; 32]) {
        self.used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name, sha));
    }

    /// Where `path` is, and its pin if it is outside; `Ok(None)` for an
    /// unpinned outside file tolerated without `require_signed`.
    fn place(&self, path: &Path) -> Result<Option<Place>, KernelError> {
        let bundle = &self.agent.bundle;
        match bulwark_trust::locate(bundle.dir(), path) {
            AgentPath::Inside(relative) => match bundle.get(&relative) {
                Some(_) => Ok(Some(Place::Inside(relative))),
                None => Err(self.refuse(TrustError::NotAnAgentFile {
                    field: self.field.clone(),
                    value: self.value.clone(),
                    path: bundle.dir().join(&relative),
                })),
            },
            AgentPath::Outside(outside) => match self.pins.get(&outside) {
                Some(pin) => Ok(Some(Place::Pinned(outside, *pin))),
                None => {
                    let err = TrustError::OutsideAgentDir {
                        field: self.field.clone(),
                        value: self.value.clone(),
                        path: outside,
                        dir: bundle.dir().to_owned(),
                    };
                    if self.require_signed {
                        return Err(self.refuse(err));
                    }
                    if !self.warned.swap(true, Ordering::Relaxed) {
                        (self.warn)(&err.to_string());
                    }
                    Ok(None)
                }
            },
        }
    }

    /// Refuses, before anything is read, a `script:`/`local:` path of
    /// `model` that leaves the agent directory unpinned (under
    /// `require_signed`) or names no file of the agent: the rule the reads
    /// apply, checked first so a build without local models gives the same
    /// answer for `local:` paths.
    pub(crate) fn check_model_paths(
        &self,
        model: &str,
        global: &bulwark_policy::GlobalConfig,
    ) -> Result<(), KernelError> {
        let Ok(model_ref) = bulwark_policy::parse_model_ref(model) else {
            return Ok(()); // resolving the model says what is wrong with it
        };
        let spec = &model_ref.model;
        let is_path = match model_ref.provider.as_str() {
            "script" => true,
            "local" if !global.providers.contains_key("local") => {
                (spec.contains('/') || spec.ends_with(".gguf"))
                    && crate::providers::model_catalogue()?.get(spec).is_none()
            }
            _ => false,
        };
        if is_path {
            self.place(&self.agent.bundle.dir().join(spec))?;
        }
        Ok(())
    }
}

impl ModelFiles for VerifiedFiles {
    fn script(&self, path: &Path) -> Result<ScriptDriver, KernelError> {
        let origin = path.display().to_string();
        let (bytes, name, sha) = match self.place(path)? {
            Some(Place::Inside(relative)) => {
                let bytes = self
                    .agent
                    .bundle
                    .get(&relative)
                    .unwrap_or_default()
                    .to_vec();
                let sha = bulwark_trust::sha256(&bytes);
                (bytes, relative, sha)
            }
            Some(Place::Pinned(outside, pin)) => {
                let bytes =
                    bulwark_trust::read_pinned(&outside, &pin, bulwark_trust::MAX_FILE_SIZE)
                        .map_err(|e| self.pin_failed(e))?;
                (bytes, outside.display().to_string(), pin)
            }
            None => {
                let bytes = std::fs::read(path).map_err(|e| {
                    KernelError::Setup(format!("script: {origin}: cannot read: {e}"))
                })?;
                let sha = bulwark_trust::sha256(&bytes);
                (bytes, format!("{origin} (unverified)"), sha)
            }
        };
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| KernelError::Setup(format!("script: {origin}: it is not UTF-8 text")))?;
        let driver = ScriptDriver::from_jsonl(text, &origin)?;
        self.used(name, sha);
        Ok(driver)
    }

    fn local(&self, path: &Path) -> Result<LocalModelFile, KernelError> {
        let file = match self.place(path)? {
            Some(Place::Inside(relative)) => {
                let bytes = self.agent.bundle.get(&relative).unwrap_or_default();
                let sha = bulwark_trust::sha256(bytes);
                let file = bulwark_trust::memory_file(&relative, bytes).map_err(trust_setup)?;
                self.used(relative, sha);
                file
            }
            Some(Place::Pinned(outside, pin)) => {
                let file =
                    bulwark_trust::open_pinned(&outside, &pin).map_err(|e| self.pin_failed(e))?;
                self.used(outside.display().to_string(), pin);
                file
            }
            None => {
                return Ok(LocalModelFile {
                    path: path.to_owned(),
                    keep_open: None,
                });
            }
        };
        Ok(LocalModelFile {
            path: file.fd_path(),
            keep_open: Some(Box::new(file)),
        })
    }
}

/// Debug builds only, for the tests of the check-then-load window: after
/// the signature check of `agent`, rename
/// `$BULWARK_TEST_AFTER_CHECK_RENAME_FROM` over
/// `$BULWARK_TEST_AFTER_CHECK_RENAME_TO`, as an attacker racing the run
/// would. With `$BULWARK_TEST_AFTER_CHECK_AGENT` set, only after the check
/// of that agent (a child's, say). Release builds have no such hook.
fn after_check_hook(agent: &str) {
    #[cfg(debug_assertions)]
    {
        use secrecy::ExposeSecret;
        // The live environment is scrubbed at start-up: read the snapshot.
        let env = crate::environment();
        if env
            .get("BULWARK_TEST_AFTER_CHECK_AGENT")
            .is_some_and(|only| only.expose_secret() != agent)
        {
            return;
        }
        if let (Some(from), Some(to)) = (
            env.get("BULWARK_TEST_AFTER_CHECK_RENAME_FROM"),
            env.get("BULWARK_TEST_AFTER_CHECK_RENAME_TO"),
        ) {
            let _ = std::fs::rename(from.expose_secret(), to.expose_secret());
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = agent;
}
