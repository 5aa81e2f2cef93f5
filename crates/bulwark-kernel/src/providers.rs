//! Turns `provider:model` into a driver.
//!
//! Built-in provider names: `anthropic`, `openai`, `ollama` (OpenAI-compatible
//! on the local machine) and `script` (replays a JSONL file; for tests and
//! demos, never chosen silently). `config.toml` `[providers.<name>]` adds
//! more (vLLM, llama.cpp server, LM Studio, hosted OpenAI-compatible services)
//! or overrides a built-in's URL and key variable.

use crate::agent::KernelError;
use bulwark_llm::{AnthropicDriver, LlmDriver, OpenAiDriver, ProviderConfig, ScriptDriver};
use bulwark_policy::{GlobalConfig, ProviderKind, parse_model_ref};
use std::path::Path;
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

/// Resolves `model` (e.g. `anthropic:claude-sonnet-4-5`, `script:demo.jsonl`).
/// Script paths are relative to the agent directory.
pub fn resolve_model(
    model: &str,
    global: &GlobalConfig,
    agent_dir: &Path,
) -> Result<ResolvedModel, KernelError> {
    let model_ref = parse_model_ref(model).map_err(KernelError::Setup)?;
    if model_ref.provider == "script" {
        let path = agent_dir.join(&model_ref.model);
        let driver = ScriptDriver::from_file(&path)?;
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
            _ if ep.kind == ProviderKind::Anthropic || model_ref.provider == "openai" => {
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
