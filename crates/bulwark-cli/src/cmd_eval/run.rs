//! Running tasks as a user would: one fresh home per model (so anything a
//! build keeps in `$BULWARK_HOME`, such as a prompt cache, works across the
//! tasks as it would across a user's runs), one agent per task derived from
//! the home's own `offline` agent, and each task a `bulwark run` subprocess
//! of the binary under test, killed at its timeout.

use super::outcome::{self, Outcome};
use super::tasks::{Grants, Task, Workspace};
use anyhow::{Context, anyhow, bail};
use bulwark_store::{AuditQuery, Store};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What the placeholder `{task}` in a `--model` value becomes: the task's
/// id (so a scripted model can have one script per task).
pub const TASK_PLACEHOLDER: &str = "{task}";

/// The most audit records read for one task's session.
const MAX_RECORDS: usize = 100_000;
/// How much of a run's stderr is kept for its failure reason.
const STDERR_TAIL_BYTES: usize = 2048;

/// A model to evaluate, and how it is made available in the eval home.
#[derive(Debug, Clone)]
pub struct ModelChoice {
    /// What `run --model` gets (`{task}` still in it).
    pub spec: String,
    /// A catalogued model's installed file, linked into the eval home's
    /// `models/` under the same name so `local:NAME` finds it.
    pub link: Option<PathBuf>,
}

/// The models to evaluate: each `--model` (a catalogue name is looked up
/// in `source_models`, a relative path made absolute), or every catalogued
/// model installed in `source_models`, or else the default one.
pub fn choose_models(
    requested: &[String],
    source_models: &Path,
) -> anyhow::Result<Vec<ModelChoice>> {
    let catalogue = bulwark_kernel::model_catalogue()?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let installed = |name: &str| -> anyhow::Result<ModelChoice> {
        let entry = catalogue
            .get(name)
            .ok_or_else(|| anyhow!("`{name}` is not in the model catalogue"))?;
        let (path, status) = bulwark_models::status(entry, source_models);
        if status == bulwark_models::Status::Missing {
            bail!(
                "local:{name} is not installed ({} is missing): run `bulwark model fetch {name}`, \
                 or point --home at the home that has it",
                path.display()
            );
        }
        Ok(ModelChoice {
            spec: format!("local:{name}"),
            link: Some(path),
        })
    };
    if requested.is_empty() {
        let found: Vec<ModelChoice> = catalogue
            .models()
            .iter()
            .filter(|e| {
                bulwark_models::status(e, source_models).1 != bulwark_models::Status::Missing
            })
            .map(|e| installed(&e.name))
            .collect::<Result<_, _>>()?;
        if found.is_empty() {
            return Ok(vec![installed(bulwark_models::DEFAULT_MODEL)?]);
        }
        return Ok(found);
    }
    requested
        .iter()
        .map(|spec| {
            let (provider, rest) = spec.split_once(':').ok_or_else(|| {
                anyhow!(
                    "--model {spec:?}: use provider:model, e.g. local:{}",
                    bulwark_models::DEFAULT_MODEL
                )
            })?;
            if provider == "local" && catalogue.get(rest).is_some() {
                return installed(rest);
            }
            // Files are relative to the agent directory for `run`; here
            // they are relative to where eval was started.
            let file_ref = provider == "script"
                || (provider == "local" && (rest.contains('/') || rest.ends_with(".gguf")));
            let spec = if file_ref && !Path::new(rest).is_absolute() {
                format!("{provider}:{}", cwd.join(rest).display())
            } else {
                spec.clone()
            };
            Ok(ModelChoice { spec, link: None })
        })
        .collect()
}

/// A home prepared for one model's tasks.
pub struct EvalHome {
    pub root: PathBuf,
    bin: PathBuf,
    model: String,
    timeout: Duration,
}

impl EvalHome {
    /// `bulwark init` by the binary under test (its templates, its
    /// config), audit records with arguments, and the model in `models/`.
    pub async fn prepare(
        bin: &Path,
        root: &Path,
        model: &ModelChoice,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let out = tokio::process::Command::new(bin)
            .envs(passed_through())
            .arg("--home")
            .arg(root)
            .arg("init")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .with_context(|| format!("cannot start {}", bin.display()))?;
        if !out.status.success() {
            bail!(
                "`{} --home {} init` failed: {}",
                bin.display(),
                root.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        record_arguments(&root.join("config.toml"))?;
        if let Some(file) = &model.link {
            link_model(file, &root.join("models"))?;
        }
        Ok(Self {
            root: root.to_owned(),
            bin: bin.to_owned(),
            model: model.spec.clone(),
            timeout,
        })
    }

    /// Sets up the task's agent and workspace, runs it, reads what it did.
    pub async fn run(&self, task: &Task, fixture: &Workspace) -> anyhow::Result<Outcome> {
        let agent = profile_agent(task.grants.as_ref());
        let workspace = self.setup(task, &agent, fixture)?;
        let model = self.model.replace(TASK_PLACEHOLDER, &task.id);
        let child = tokio::process::Command::new(&self.bin)
            .envs(passed_through())
            .arg("--home")
            .arg(&self.root)
            .args(["run", &agent, &task.question, "--model", &model])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", self.bin.display()))?;
        let started = Instant::now();
        let waited = tokio::time::timeout(self.timeout, child.wait_with_output()).await;
        let seconds = started.elapsed().as_secs_f64();
        let mut result = Outcome {
            seconds,
            ..Outcome::default()
        };
        match waited {
            // Dropping the future dropped the child: kill_on_drop killed it.
            Err(_) => result.timed_out = true,
            Ok(output) => {
                let output = output.context("waiting for the run")?;
                result.exit_code = output.status.code();
                result.stderr_tail = tail(&String::from_utf8_lossy(&output.stderr));
            }
        }
        self.read_session(&agent, &mut result)?;
        result.files = outcome::snapshot(&workspace);
        // The next task of this agent starts from its own fixture; this
        // one's workspace stays inspectable (`--keep`) under tasks/<id>/.
        let done = self.root.join("tasks").join(&task.id);
        std::fs::create_dir_all(&done)
            .and_then(|()| std::fs::rename(&workspace, done.join("workspace")))
            .with_context(|| format!("cannot move the workspace of task {}", task.id))?;
        Ok(result)
    }

    /// `agents/<agent>/` from `agents/offline/` with the task's grants; the
    /// fixture in the agent's (emptied) workspace and the task's `outside`
    /// files beside it. Tasks with the same grants share one agent, as a
    /// user's questions to one agent do, so what a build keeps per agent
    /// between runs (the local model's prompt cache) is measured warm after
    /// the first task of each agent, not cold every time.
    fn setup(&self, task: &Task, agent: &str, fixture: &Workspace) -> anyhow::Result<PathBuf> {
        let template = self.root.join("agents/offline");
        let manifest_path = template.join("agent.toml");
        let text = std::fs::read_to_string(&manifest_path).with_context(|| {
            format!(
                "cannot read {} (written by `bulwark init` of the binary under test)",
                manifest_path.display()
            )
        })?;
        let manifest = derive_manifest(&text, agent, task.grants.as_ref())
            .with_context(|| format!("deriving the agent of task {}", task.id))?;
        let agent_dir = self.root.join("agents").join(agent);
        std::fs::create_dir_all(&agent_dir)
            .with_context(|| format!("cannot create {}", agent_dir.display()))?;
        write(&agent_dir.join("agent.toml"), &manifest)?;
        let system = template.join("SYSTEM.md");
        if system.is_file() {
            std::fs::copy(&system, agent_dir.join("SYSTEM.md"))
                .with_context(|| format!("cannot copy {}", system.display()))?;
        }
        let user_dir = self.root.join("users/local/agents").join(agent);
        clear_agent_data(&user_dir)?;
        let workspace = user_dir.join("workspace");
        std::fs::create_dir_all(&workspace)
            .with_context(|| format!("cannot create {}", workspace.display()))?;
        for (rel, content) in &fixture.files {
            write(&workspace.join(rel), content)?;
        }
        for (name, content) in &task.outside {
            write(&user_dir.join(name), content)?;
        }
        Ok(workspace)
    }

    /// The answer and the calls of the agent's one session.
    fn read_session(&self, agent: &str, into: &mut Outcome) -> anyhow::Result<()> {
        let db = self.root.join("bulwark.db");
        if !db.is_file() {
            return Ok(());
        }
        let store = Store::open(&db).with_context(|| format!("cannot open {}", db.display()))?;
        let Some(session) = store.sessions_of(None, Some(agent), 1)?.into_iter().next() else {
            return Ok(());
        };
        let messages = store.messages(&session.id)?;
        into.answer = outcome::final_answer(messages.iter().map(|m| m.content_json.as_str()));
        let records = store.audit_sink().query(&AuditQuery {
            session: Some(session.id.clone()),
            since_seq: None,
            limit: MAX_RECORDS,
        })?;
        into.calls = outcome::calls(&records);
        into.session = Some(session.id);
        Ok(())
    }
}

/// The agent a task runs as: `eval-offline` for the shipped offline
/// agent's grants, else `eval-` and a digest of the grants (stable across
/// runs and builds, so the same grants are always the same agent).
pub fn profile_agent(grants: Option<&Grants>) -> String {
    use sha2::{Digest, Sha256};
    match grants {
        None => "eval-offline".to_owned(),
        Some(g) => {
            let text = format!("{:?}|{:?}|{:?}", g.read, g.write, g.operations);
            let digest = Sha256::digest(text.as_bytes());
            format!("eval-{}", hex::encode(&digest[..5]))
        }
    }
}

/// Everything an earlier task left in an agent's data directory (its
/// workspace, `outside` files, agent memory), but the local model's
/// cache, which a user's later question would find too.
fn clear_agent_data(user_dir: &Path) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(user_dir) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", user_dir.display()))?;
        if entry.file_name() == "cache" {
            continue;
        }
        let path = entry.path();
        let kind = entry
            .file_type()
            .with_context(|| format!("cannot inspect {}", path.display()))?;
        let removed = if kind.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.with_context(|| format!("cannot remove {}", path.display()))?;
    }
    Ok(())
}

/// The offline template as task `id`'s agent: its name, and when the task
/// has grants, its files operations and file capabilities replaced by them
/// (every other setting, the prompt and the model stay the template's).
pub fn derive_manifest(
    template: &str,
    id: &str,
    grants: Option<&Grants>,
) -> anyhow::Result<String> {
    use toml::{Table, Value};
    let mut doc: Table = toml::from_str(template).context("the offline template does not parse")?;
    let agent = doc
        .get_mut("agent")
        .and_then(Value::as_table_mut)
        .ok_or_else(|| anyhow!("the offline template has no [agent] table"))?;
    agent.insert("name".into(), Value::String(id.into()));
    if let Some(grants) = grants {
        let tools = doc
            .entry("tools")
            .or_insert_with(|| Value::Table(Table::new()))
            .as_table_mut()
            .ok_or_else(|| anyhow!("[tools] is not a table"))?;
        let operations = tools
            .entry("operations")
            .or_insert_with(|| Value::Table(Table::new()))
            .as_table_mut()
            .ok_or_else(|| anyhow!("[tools.operations] is not a table"))?;
        let mut files = Table::new();
        files.insert(
            "allow".into(),
            Value::Array(
                grants
                    .operations
                    .iter()
                    .cloned()
                    .map(Value::String)
                    .collect(),
            ),
        );
        operations.insert("files".into(), Value::Table(files));
        let mut capabilities: Vec<Value> = doc
            .get("capabilities")
            .and_then(Value::as_array)
            .map(|caps| {
                caps.iter()
                    .filter(|c| {
                        !matches!(
                            c.get("kind").and_then(Value::as_str),
                            Some("file_read" | "file_write")
                        )
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for (kind, globs) in [("file_read", &grants.read), ("file_write", &grants.write)] {
            for glob in globs {
                let mut cap = Table::new();
                cap.insert("kind".into(), Value::String(kind.into()));
                cap.insert("path".into(), Value::String(glob.clone()));
                capabilities.push(Value::Table(cap));
            }
        }
        doc.insert("capabilities".into(), Value::Array(capabilities));
    }
    Ok(toml::to_string(&doc)?)
}

/// The variables this process captured and scrubbed that a run needs:
/// extra model pins (`local:NAME` of an operator's catalogue).
fn passed_through() -> Vec<(&'static str, String)> {
    use secrecy::ExposeSecret;
    let env = bulwark_kernel::environment();
    [
        bulwark_kernel::MODEL_CATALOGUE_VAR,
        bulwark_kernel::WORKSPACE_LISTING_VAR,
    ]
    .into_iter()
    .filter_map(|var| env.get(var).map(|v| (var, v.expose_secret().to_owned())))
    .collect()
}

/// `[audit] record_arguments = true` in the eval home's config: the
/// `arguments` records give each call's path.
fn record_arguments(config: &Path) -> anyhow::Result<()> {
    use toml::{Table, Value};
    let text = std::fs::read_to_string(config)
        .with_context(|| format!("cannot read {}", config.display()))?;
    let mut doc: Table =
        toml::from_str(&text).with_context(|| format!("{} does not parse", config.display()))?;
    doc.entry("audit")
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| anyhow!("{}: [audit] is not a table", config.display()))?
        .insert("record_arguments".into(), Value::Boolean(true));
    write(config, &toml::to_string(&doc)?)
}

/// The installed model file, reachable under its own name in `models`: a
/// hard link when both are on one filesystem, else a symbolic link (the
/// run opens it by path; nothing is copied).
fn link_model(file: &Path, models: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(models)
        .with_context(|| format!("cannot create {}", models.display()))?;
    let name = file
        .file_name()
        .ok_or_else(|| anyhow!("{} has no file name", file.display()))?;
    let target = models.join(name);
    let source = std::fs::canonicalize(file)
        .with_context(|| format!("cannot resolve {}", file.display()))?;
    if std::fs::hard_link(&source, &target).is_ok() {
        return Ok(());
    }
    std::os::unix::fs::symlink(&source, &target)
        .with_context(|| format!("cannot link {} into {}", source.display(), models.display()))
}

fn write(path: &Path, content: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, content).with_context(|| format!("cannot write {}", path.display()))
}

/// The end of `text`, at most [`STDERR_TAIL_BYTES`], cut at a character.
fn tail(text: &str) -> String {
    let mut start = text.len().saturating_sub(STDERR_TAIL_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text.get(start..).unwrap_or("").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str = include_str!("../../templates/offline/agent.toml");

    #[test]
    fn without_grants_the_agent_is_the_template_renamed() {
        let text = derive_manifest(TEMPLATE, "t1", None).unwrap();
        let doc: toml::Table = toml::from_str(&text).unwrap();
        let original: toml::Table = toml::from_str(TEMPLATE).unwrap();
        assert_eq!(doc["agent"]["name"].as_str(), Some("t1"));
        assert_eq!(doc["tools"], original["tools"]);
        assert_eq!(doc["capabilities"], original["capabilities"]);
        assert_eq!(doc["agent"]["max_turns"], original["agent"]["max_turns"]);
        bulwark_policy::parse_manifest(&text, "agent.toml").unwrap();
    }

    #[test]
    fn grants_replace_the_file_operations_and_capabilities() {
        let grants = Grants {
            read: vec!["**".into()],
            write: vec!["out/**".into()],
            operations: vec!["read".into(), "list".into(), "write".into()],
        };
        let text = derive_manifest(TEMPLATE, "w1", Some(&grants)).unwrap();
        let manifest = bulwark_policy::parse_manifest(&text, "agent.toml").unwrap();
        assert_eq!(manifest.agent.name, "w1");
        let doc: toml::Table = toml::from_str(&text).unwrap();
        let ops = doc["tools"]["operations"]["files"]["allow"]
            .as_array()
            .unwrap();
        assert_eq!(ops.len(), 3);
        let caps = doc["capabilities"].as_array().unwrap();
        assert_eq!(caps.len(), 2);
        assert_eq!(caps[1]["kind"].as_str(), Some("file_write"));
        assert_eq!(caps[1]["path"].as_str(), Some("out/**"));
    }

    #[test]
    fn a_tail_is_cut_at_a_character() {
        let long = "é".repeat(STDERR_TAIL_BYTES);
        let t = tail(&long);
        assert!(t.len() <= STDERR_TAIL_BYTES);
        assert!(t.chars().all(|c| c == 'é'));
    }
}
