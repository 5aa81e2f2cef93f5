//! A signed agent used from the bytes its signature check read and
//! verified: the top-level agent of `run`/`chat`/a worker and every child
//! agent are built here, and nothing of theirs is read from the disk again
//! (ISSUE 16 item 12, the check-then-load window).

use crate::{Failure, usage_error};
use anyhow::anyhow;
use bulwark_kernel::{DEFAULT_SYSTEM_PROMPT, KernelError, LoadedAgent, LocalModelFile, ModelFiles};
use bulwark_llm::ScriptDriver;
use bulwark_trust::{AgentPath, Pins, TrustError, VerifiedAgent};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The agent as `Home::load_agent` would load it, from the verified
/// bytes: nothing is read from the disk.
pub(crate) fn loaded_from_bundle(
    name: &str,
    verified: &VerifiedAgent,
) -> Result<LoadedAgent, Failure> {
    let bundle = &verified.bundle;
    let digest = |path: &str| {
        bundle
            .listing()
            .files
            .iter()
            .find(|f| f.path == path)
            .map(|f| f.sha256)
    };
    let text = |path: &str| -> Result<Option<(String, [u8; 32])>, Failure> {
        let (Some(bytes), Some(sha)) = (bundle.get(path), digest(path)) else {
            return Ok(None);
        };
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
            usage_error(anyhow!(
                "cannot read {}: it is not UTF-8 text",
                bundle.dir().join(path).display()
            ))
        })?;
        Ok(Some((text, sha)))
    };
    let manifest_path = bundle.dir().join(bulwark_trust::MANIFEST_FILE);
    let (src, manifest_sha) = text(bulwark_trust::MANIFEST_FILE)?.ok_or_else(|| {
        usage_error(anyhow!(
            "no agent `{name}`: {} does not exist",
            manifest_path.display()
        ))
    })?;
    let manifest = bulwark_policy::parse_manifest(&src, &manifest_path.display().to_string())
        .map_err(|e| usage_error(anyhow!("{e}")))?;
    if manifest.agent.name != name {
        return Err(usage_error(anyhow!(
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

/// The model's files from a verified agent: a path inside the agent
/// directory is served from the verified bytes; one outside is used only
/// when `pins.sha256` pins it (read once and checked), or, without
/// `require_signed`, read from disk with a warning.
///
/// `Send + Sync` (the bytes are behind an [`Arc`]), so a child agent's
/// host can keep it for as long as the child runs.
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
    /// file could not be used (exit 1).
    refused: AtomicBool,
    /// Whether the unverified-file warning was printed.
    warned: AtomicBool,
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
        })
    }

    /// Whether a file was refused (a policy refusal: exit 1, not 2).
    pub(crate) fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// The files used so far, with the SHA-256 of the bytes used.
    pub(crate) fn take_used(&self) -> Vec<(String, [u8; 32])> {
        std::mem::take(&mut *self.used.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn refuse(&self, err: TrustError) -> KernelError {
        self.refused.store(true, Ordering::Relaxed);
        KernelError::Setup(format!("{err}. {}", crate::cmd_keys::REQUIRE_SIGNED_POLICY))
    }

    /// A pinned file that cannot be used (changed, unreadable): a
    /// refusal (exit 1), with or without `require_signed`.
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
                        eprintln!("warning: {err}");
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
                    && bulwark_kernel::model_catalogue()?.get(spec).is_none()
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
pub(crate) fn after_check_hook(agent: &str) {
    #[cfg(debug_assertions)]
    {
        use secrecy::ExposeSecret;
        // The live environment is scrubbed at start-up: read the snapshot.
        let env = bulwark_kernel::environment();
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
