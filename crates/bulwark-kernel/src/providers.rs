//! Turns `provider:model` into a driver.
//!
//! Built-in provider names: `anthropic`, `openai`, `ollama` (OpenAI-compatible
//! on the local machine), `local` (a GGUF model run in-process; needs the
//! `local` cargo feature) and `script` (replays a JSONL file; for tests and
//! demos, never chosen silently). `config.toml` `[providers.<name>]` adds
//! more (vLLM, llama.cpp server, LM Studio, hosted OpenAI-compatible services)
//! or overrides a built-in's URL and key variable.

use crate::agent::KernelError;
use bulwark_llm::{AnthropicDriver, LlmDriver, OpenAiDriver, ProviderConfig, ScriptDriver};
use bulwark_models::Catalogue;
use bulwark_policy::{GlobalConfig, ProviderKind, parse_model_ref};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A resolved model endpoint.
pub struct ResolvedModel {
    pub provider: String,
    pub model: String,
    pub driver: Arc<dyn LlmDriver>,
    /// Where requests go (for `preflight`); empty for `script`.
    pub endpoint: String,
    /// The environment variable the key came from, if any.
    pub key_env: Option<String>,
}

struct Endpoint {
    kind: ProviderKind,
    base_url: String,
    key_env: Option<String>,
}

fn endpoint(provider: &str, global: &GlobalConfig) -> Result<Endpoint, KernelError> {
    if let Some(cfg) = global.providers.get(provider) {
        return Ok(Endpoint {
            kind: cfg.kind,
            base_url: cfg.base_url.clone(),
            key_env: cfg.api_key_env.clone(),
        });
    }
    match provider {
        "anthropic" => Ok(Endpoint {
            kind: ProviderKind::Anthropic,
            base_url: "https://api.anthropic.com".into(),
            key_env: Some("ANTHROPIC_API_KEY".into()),
        }),
        "openai" => Ok(Endpoint {
            kind: ProviderKind::Openai,
            base_url: "https://api.openai.com/v1".into(),
            key_env: Some("OPENAI_API_KEY".into()),
        }),
        "ollama" => Ok(Endpoint {
            kind: ProviderKind::Openai,
            base_url: "http://127.0.0.1:11434/v1".into(),
            key_env: None,
        }),
        other => {
            let mut known: Vec<String> = vec![
                "anthropic".into(),
                "openai".into(),
                "ollama".into(),
                "local".into(),
                "script".into(),
            ];
            known.extend(global.providers.keys().cloned());
            Err(KernelError::Setup(format!(
                "unknown provider `{other}`; known: {}. Add [providers.{other}] with kind and base_url to config.toml",
                known.join(", ")
            )))
        }
    }
}

/// The variable holding `provider`'s key (`None`: its endpoint takes
/// none, or the provider is unknown). A served worker is given the keys of
/// the providers its one agent may use and no others.
pub fn provider_key_env(provider: &str, global: &GlobalConfig) -> Option<String> {
    endpoint(provider, global).ok().and_then(|ep| ep.key_env)
}

/// Whether a request to this endpoint is pointless without its key: the
/// hosted APIs always need one; a local or self-hosted server may not.
fn key_required(ep: &Endpoint, provider: &str) -> bool {
    ep.kind == ProviderKind::Anthropic || provider == "openai"
}

/// How the files a model reference names (`script:<path>`, `local:<path>`)
/// are read. [`resolve_model`] reads them from disk; a caller that has
/// verified an agent's files passes its own, so that the model is built
/// from the bytes that were verified and the file is never opened again.
pub trait ModelFiles {
    /// The script at `path` (the agent directory joined with the
    /// reference's path, not normalized).
    fn script(&self, path: &Path) -> Result<ScriptDriver, KernelError>;
    /// The `local:` model file at `path` (as for [`script`](Self::script)),
    /// opened for loading.
    fn local(&self, path: &Path) -> Result<LocalModelFile, KernelError>;
}

/// A `local:` model file ready to load: the path to load it by (for a
/// verified file, `/proc/self/fd/N` of the descriptor it was hashed
/// through), and whatever must stay alive until the load is done.
pub struct LocalModelFile {
    pub path: PathBuf,
    pub keep_open: Option<Box<dyn std::any::Any + Send>>,
}

/// [`ModelFiles`] straight from the disk, unverified.
struct DiskFiles;

impl ModelFiles for DiskFiles {
    fn script(&self, path: &Path) -> Result<ScriptDriver, KernelError> {
        Ok(ScriptDriver::from_file(path)?)
    }

    fn local(&self, path: &Path) -> Result<LocalModelFile, KernelError> {
        Ok(LocalModelFile {
            path: path.to_owned(),
            keep_open: None,
        })
    }
}

/// Resolves `model` (e.g. `anthropic:claude-sonnet-4-5`, `script:demo.jsonl`,
/// `local:qwen2.5-coder-0.5b`). Script paths and relative `local:` paths
/// are relative to the agent directory.
pub fn resolve_model(
    model: &str,
    global: &GlobalConfig,
    agent_dir: &Path,
) -> Result<ResolvedModel, KernelError> {
    resolve_model_with(model, global, agent_dir, &DiskFiles, None)
}

/// [`resolve_model`] for a session: a `local:` model keeps the KV state
/// of its system turn in `kv_cache` (see [`crate::Home::kv_cache_dir`]).
pub fn resolve_model_cached(
    model: &str,
    global: &GlobalConfig,
    agent_dir: &Path,
    kv_cache: Option<&Path>,
) -> Result<ResolvedModel, KernelError> {
    resolve_model_with(model, global, agent_dir, &DiskFiles, kv_cache)
}

/// [`resolve_model`], reading the files a `script:` or `local:` path names
/// through `files`; a `local:` model caches its system turn's KV state in
/// `kv_cache` when given.
pub fn resolve_model_with(
    model: &str,
    global: &GlobalConfig,
    agent_dir: &Path,
    files: &dyn ModelFiles,
    kv_cache: Option<&Path>,
) -> Result<ResolvedModel, KernelError> {
    let model_ref = parse_model_ref(model).map_err(KernelError::Setup)?;
    if model_ref.provider == "local" && !global.providers.contains_key("local") {
        return resolve_local(
            &model_ref.model,
            &model_catalogue()?,
            &models_dir(agent_dir)?,
            agent_dir,
            files,
            kv_cache,
        );
    }
    if model_ref.provider == "script" {
        let path = agent_dir.join(&model_ref.model);
        let driver = files.script(&path)?;
        return Ok(ResolvedModel {
            provider: "script".into(),
            model: model_ref.model,
            driver: Arc::new(driver),
            endpoint: path.display().to_string(),
            key_env: None,
        });
    }
    let ep = endpoint(&model_ref.provider, global)?;
    let api_key = match &ep.key_env {
        Some(var) => match crate::environment().get(var) {
            Some(value) => Some(value.clone()),
            _ if key_required(&ep, &model_ref.provider) => {
                return Err(KernelError::Setup(format!(
                    "provider `{}` needs an API key: set {var} (or choose another model with --model, e.g. `ollama:<name>` or `script:<file>`)",
                    model_ref.provider
                )));
            }
            _ => None,
        },
        None => None,
    };
    let mut config = ProviderConfig::new(ep.base_url.clone());
    config.api_key = api_key;
    let driver: Arc<dyn LlmDriver> = match ep.kind {
        ProviderKind::Anthropic => Arc::new(AnthropicDriver::new(config)?),
        ProviderKind::Openai => Arc::new(OpenAiDriver::new(config)?),
    };
    Ok(ResolvedModel {
        provider: model_ref.provider,
        model: model_ref.model,
        driver,
        endpoint: ep.base_url,
        key_env: ep.key_env,
    })
}

/// Whether `model` could be used by an agent in `agent_dir` now, found
/// without building a driver or loading weights (for `bulwark status`,
/// which must stay fast and change nothing). `Ok` says what was found;
/// `Err` says what is wrong and the command that fixes it.
pub fn check_model(model: &str, global: &GlobalConfig, agent_dir: &Path) -> Result<String, String> {
    let model_ref = parse_model_ref(model)?;
    if model_ref.provider == "local" && !global.providers.contains_key("local") {
        if !cfg!(feature = "local") {
            return Err(format!(
                "{model}: this build has no local model support (rebuild with the `local` feature)"
            ));
        }
        let catalogue = model_catalogue().map_err(|e| e.to_string())?;
        let spec = &model_ref.model;
        let Some(entry) = catalogue.get(spec) else {
            let models = models_dir(agent_dir).map_err(|e| e.to_string())?;
            return local_model_path(spec, &catalogue, &models, agent_dir)
                .map(|p| format!("{model}: {} (not pinned by the catalogue)", p.display()))
                .map_err(|e| e.to_string());
        };
        let dir = models_dir(agent_dir).map_err(|e| e.to_string())?;
        return match bulwark_models::status(entry, &dir) {
            (_, bulwark_models::Status::Verified) => {
                Ok(format!("{model}: installed, hash verified"))
            }
            (path, bulwark_models::Status::Unverified) => Ok(format!(
                "{model}: installed at {}, hash not checked yet (`bulwark model path {spec}` checks it)",
                path.display()
            )),
            (path, bulwark_models::Status::Wrong) => Err(format!(
                "{model}: {} is damaged (wrong size or not a file): run `bulwark model fetch {spec}`",
                path.display()
            )),
            (_, bulwark_models::Status::Missing) => Err(format!(
                "{model}: not installed: run `bulwark model fetch {spec}`"
            )),
        };
    }
    if model_ref.provider == "script" {
        let path = agent_dir.join(&model_ref.model);
        return if path.is_file() {
            Ok(format!("{model}: scripted replies"))
        } else {
            Err(format!(
                "{model}: {} does not exist (script paths are relative to the agent directory)",
                path.display()
            ))
        };
    }
    let ep = endpoint(&model_ref.provider, global).map_err(|e| e.to_string())?;
    match &ep.key_env {
        Some(var) if crate::environment().is_set(var) => {
            Ok(format!("{model}: {} (key from {var})", ep.base_url))
        }
        Some(var) if key_required(&ep, &model_ref.provider) => Err(format!(
            "{model}: needs an API key: set {var} in the environment (or give the run another model, e.g. --model local:{})",
            bulwark_models::DEFAULT_MODEL
        )),
        Some(var) => Ok(format!(
            "{model}: {} ({var} not set; sent without a key)",
            ep.base_url
        )),
        None => Ok(format!("{model}: {}", ep.base_url)),
    }
}

/// The model for an agent whose manifest names none: `config.toml`'s
/// `default_model`, else the bundled local model when no provider key is
/// configured (a fresh install works offline, with no account anywhere),
/// else `None`: with a key but no default, which of that provider's models
/// to use is the user's choice, not ours.
pub fn default_model(global: &GlobalConfig) -> Option<String> {
    if let Some(model) = &global.default_model {
        return Some(model.clone());
    }
    let env = crate::environment();
    let keyed = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
        .into_iter()
        .chain(
            global
                .providers
                .values()
                .filter_map(|p| p.api_key_env.as_deref()),
        )
        .any(|var| env.is_set(var));
    (!keyed).then(|| format!("local:{}", bulwark_models::DEFAULT_MODEL))
}

/// The variable naming a TOML file of extra `[[model]]` pins (models the
/// operator trusts by hash); built-in names and files cannot be redefined.
pub const MODEL_CATALOGUE_VAR: &str = "BULWARK_MODEL_CATALOGUE";

/// The models `local:<name>` and `bulwark model` know: the built-in pins,
/// plus `$BULWARK_MODEL_CATALOGUE`'s when it is set.
pub fn model_catalogue() -> Result<Catalogue, KernelError> {
    match crate::environment().get(MODEL_CATALOGUE_VAR) {
        Some(path) => {
            use secrecy::ExposeSecret;
            Catalogue::with_extra(Path::new(path.expose_secret()))
                .map_err(|e| KernelError::Setup(format!("{e} (set by {MODEL_CATALOGUE_VAR})")))
        }
        None => Ok(Catalogue::builtin()),
    }
}

/// `$BULWARK_HOME/models`. Agent directories are `<home>/agents/<name>`
/// ([`crate::Home::agent_dir`]), so the home is found from `agent_dir`;
/// any other layout falls back to the environment's home.
fn models_dir(agent_dir: &Path) -> Result<PathBuf, KernelError> {
    let parent = agent_dir.parent();
    if let Some(home) = parent
        .filter(|p| p.file_name().is_some_and(|n| n == "agents"))
        .and_then(Path::parent)
    {
        return Ok(home.join("models"));
    }
    Ok(crate::Home::from_env()?.root().join("models"))
}

/// Where `local:<spec>` is on disk: a catalogue name is
/// `<models_dir>/<file>`; anything with a `/` or ending in `.gguf` is a
/// path (relative ones against the agent directory, like `script:`).
fn local_model_path(
    spec: &str,
    catalogue: &Catalogue,
    models_dir: &Path,
    agent_dir: &Path,
) -> Result<PathBuf, KernelError> {
    if let Some(entry) = catalogue.get(spec) {
        let path = models_dir.join(&entry.file);
        if !path.is_file() {
            return Err(KernelError::Setup(format!(
                "local model `{spec}` is not installed ({} is missing): run `bulwark model fetch {spec}`",
                path.display()
            )));
        }
        return Ok(path);
    }
    if spec.contains('/') || spec.ends_with(".gguf") {
        let path = agent_dir.join(spec);
        if !path.is_file() {
            return Err(KernelError::Setup(format!(
                "local model file {} does not exist (relative paths are relative to the agent directory)",
                path.display()
            )));
        }
        return Ok(path);
    }
    let known: Vec<&str> = catalogue.models().iter().map(|e| e.name.as_str()).collect();
    Err(KernelError::Setup(format!(
        "unknown local model `{spec}`; known: {} (or give a path to a .gguf file, e.g. `local:./model.gguf`)",
        known.join(", ")
    )))
}

/// `BULWARK_LOCAL_WORKSPACE_LISTING=1` lists the workspace's files before
/// the user's message for the local model: an experiment for `bulwark
/// eval` (read from the environment captured at start, which `eval` passes
/// on to the runs it starts), not a setting.
pub const WORKSPACE_LISTING_VAR: &str = "BULWARK_LOCAL_WORKSPACE_LISTING";

fn resolve_local(
    spec: &str,
    catalogue: &Catalogue,
    models_dir: &Path,
    agent_dir: &Path,
    files: &dyn ModelFiles,
    kv_cache: Option<&Path>,
) -> Result<ResolvedModel, KernelError> {
    #[cfg(not(feature = "local"))]
    {
        let _ = (spec, catalogue, models_dir, agent_dir, files, kv_cache);
        Err(KernelError::Setup(
            "this build has no local model support; rebuild with --features local".into(),
        ))
    }
    #[cfg(feature = "local")]
    {
        let path = local_model_path(spec, catalogue, models_dir, agent_dir)?;
        // A catalogue name is the catalogue's file (pinned by its hash when
        // fetched); a path is the manifest's, and is opened through `files`.
        let file = if catalogue.get(spec).is_some() {
            DiskFiles.local(&path)?
        } else {
            files.local(&path)?
        };
        // Warm starts: the system turn's KV state, per model and prompt,
        // in the session's own cache directory (created owner-only by the
        // driver).
        let options = bulwark_llm::LocalOptions {
            prefix_cache: kv_cache.map(Path::to_path_buf),
            // An experiment the eval measures; see WORKSPACE_LISTING_VAR.
            workspace_listing: crate::environment()
                .get(WORKSPACE_LISTING_VAR)
                .is_some_and(|v| secrecy::ExposeSecret::expose_secret(v) == "1"),
            ..bulwark_llm::LocalOptions::default()
        };
        let driver = bulwark_llm::LocalDriver::load(&file.path, options)
            .map_err(|e| KernelError::Setup(format!("local model `{spec}`: {e}")))?;
        drop(file);
        Ok(ResolvedModel {
            provider: "local".into(),
            model: spec.to_owned(),
            driver: Arc::new(driver),
            endpoint: path.display().to_string(),
            key_env: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_home(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("bulwark-providers-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("agents/helper")).unwrap();
        dir
    }

    #[test]
    fn models_live_beside_the_agents() {
        let home = temp_home("dir");
        assert_eq!(
            models_dir(&home.join("agents/helper")).unwrap(),
            home.join("models")
        );
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn local_names_and_paths() {
        let home = temp_home("paths");
        let agent = home.join("agents/helper");
        let models = home.join("models");
        let cat = Catalogue::builtin();

        let err = local_model_path("qwen2.5-coder-0.5b", &cat, &models, &agent)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("run `bulwark model fetch qwen2.5-coder-0.5b`"),
            "{err}"
        );
        assert!(
            err.contains("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
            "{err}"
        );
        let err = local_model_path("qwen2.5-coder-1.5b", &cat, &models, &agent)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bulwark model fetch qwen2.5-coder-1.5b"),
            "{err}"
        );

        std::fs::create_dir_all(&models).unwrap();
        let file = models.join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
        std::fs::write(&file, b"GGUF").unwrap();
        assert_eq!(
            local_model_path("qwen2.5-coder-0.5b", &cat, &models, &agent).unwrap(),
            file
        );

        std::fs::write(agent.join("mine.gguf"), b"GGUF").unwrap();
        assert_eq!(
            local_model_path("./mine.gguf", &cat, &models, &agent).unwrap(),
            agent.join("./mine.gguf")
        );
        let absolute = file.display().to_string();
        assert_eq!(
            local_model_path(&absolute, &cat, &models, &agent).unwrap(),
            file
        );
        let err = local_model_path("./missing.gguf", &cat, &models, &agent)
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist"), "{err}");
        let err = local_model_path("llama-70b", &cat, &models, &agent)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown local model `llama-70b`"), "{err}");
        assert!(err.contains("qwen2.5-coder-0.5b"), "{err}");
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[cfg(not(feature = "local"))]
    #[test]
    fn without_the_feature_local_is_a_clear_error() {
        let home = temp_home("nofeature");
        let err = match resolve_model(
            "local:qwen2.5-coder-0.5b",
            &GlobalConfig::default(),
            &home.join("agents/helper"),
        ) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("resolved without the feature"),
        };
        assert!(err.contains("rebuild with --features local"), "{err}");
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[cfg(feature = "local")]
    #[test]
    fn a_missing_model_names_the_fetch_command() {
        let home = temp_home("missing");
        let err = match resolve_model(
            "local:qwen2.5-coder-0.5b",
            &GlobalConfig::default(),
            &home.join("agents/helper"),
        ) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("resolved a missing model"),
        };
        assert!(
            err.contains("run `bulwark model fetch qwen2.5-coder-0.5b`"),
            "{err}"
        );
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn the_default_model() {
        let mut global = GlobalConfig {
            default_model: Some("ollama:qwen2.5:7b".into()),
            ..GlobalConfig::default()
        };
        assert_eq!(default_model(&global).as_deref(), Some("ollama:qwen2.5:7b"));
        global.default_model = None;
        let env = crate::environment();
        let keyed = env.is_set("ANTHROPIC_API_KEY") || env.is_set("OPENAI_API_KEY");
        let expected = (!keyed).then(|| "local:qwen2.5-coder-1.5b".to_owned());
        assert_eq!(default_model(&global), expected);
    }
}
