//! `bulwark eval`: how well an agent on a given model does small, checked
//! tasks about a workspace, measured the way a user runs it.
//!
//! The task file format is documented in [`tasks`]; the shipped set is
//! `eval/offline.toml` (built in). Each model gets one fresh home
//! ([`run`]); each task is a `bulwark run` subprocess whose answer, tool
//! calls and door decisions are read back from that home ([`outcome`]) and
//! checked ([`check`]); [`report`] prints the table and writes the JSON.

mod check;
mod outcome;
mod report;
mod run;
mod tasks;

use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use bulwark_kernel::Home;
use report::{ModelReport, Report, TaskResult};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The shipped task set: what `bulwark eval` runs without `--tasks`.
pub const SHIPPED_TASKS: &str = include_str!("../../eval/offline.toml");
const SHIPPED_ORIGIN: &str = "(built-in) crates/bulwark-cli/eval/offline.toml";

#[derive(clap::Args)]
pub struct EvalArgs {
    /// A task file (TOML; see the format in the README). Default: the
    /// built-in offline set.
    #[arg(long, value_name = "FILE")]
    pub tasks: Option<PathBuf>,
    /// A model to evaluate (repeatable): `local:NAME` from the catalogue,
    /// `local:/path/model.gguf`, `script:/path/{task}.jsonl`, any
    /// `provider:model`. Default: every catalogued model installed in the
    /// home, else the default one.
    #[arg(long = "model", value_name = "MODEL")]
    pub models: Vec<String>,
    /// Only tasks whose id matches (repeatable; globs like `csv-*`).
    #[arg(long = "only", value_name = "ID|GLOB")]
    pub only: Vec<String>,
    /// The bulwark binary whose `run` is evaluated (default: this one).
    #[arg(long, value_name = "PATH")]
    pub bulwark: Option<PathBuf>,
    /// Seconds one task may take; a task over it is killed and fails.
    #[arg(long, default_value_t = 180, value_name = "SECONDS")]
    pub timeout: u64,
    /// Write every result (answers, calls, failures, timings) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit 1 if a model's success rate is below this percentage.
    #[arg(long, value_name = "PCT")]
    pub min_success: Option<f64>,
    /// Keep each model's eval home (agents, workspaces, audit) and print it.
    #[arg(long)]
    pub keep: bool,
    /// Print the tasks (id, category, question) and exit.
    #[arg(long)]
    pub list: bool,
}

pub const AFTER_HELP: &str = "\
Examples:
  bulwark eval                                   every installed catalogued model
  bulwark eval --model local:qwen2.5-coder-1.5b --only 'csv-*'
  bulwark eval --tasks my-tasks.toml --json results.json --min-success 90
  bulwark eval --bulwark ./target/release/bulwark --keep
  bulwark eval --list
  bulwark eval --tasks t.toml --model 'script:/tmp/s/{task}.jsonl'   ({task}: each task's id)

A task file (every key is checked; unknown keys are errors with file:line):
  [workspace.shop]
  \"prices.csv\" = \"item,price\\nwidget,4.50\\n\"
  [[task]]
  id = \"csv-price\"
  category = \"csv\"
  workspace = \"shop\"
  question = \"What is the price of the widget in prices.csv?\"
  answer = ['4\\.50']                    (regexes, case-insensitive)
  answer_not = ['5\\.\\d\\d']             (fabrications)
  calls = [{ tool = \"file_read\", path = \"prices.csv\", decision = \"allowed\" }]
  no_calls = [{ outside = true, decision = \"allowed\" }]
  grants = { write = [\"out/**\"] }        (default: the offline agent's)
  files = [{ path = \"out/a.txt\", matches = 'x' }, { path = \"b.txt\", absent = true }]

Each model gets a fresh temporary home (`bulwark init` by the binary under
test, its models linked from this home's models/). Tasks with the same
grants run as one agent made from that home's `offline` agent (so its
prompt cache is warm after the first), each with its own fresh workspace,
as `bulwark --home H run AGENT \"question\"`. Its
final answer is read from the session's transcript and its tool calls and
the door's decisions from the audit log; the checks are the task file's.
Progress goes to stderr; the table (Markdown) to stdout.

Exit status: 0 done; 1 a model below --min-success, or a run could not be
started; 2 a bad task file or option.";

/// The task file's text and how errors name it.
fn load(path: Option<&Path>) -> Result<(String, String), Failure> {
    match path {
        None => Ok((SHIPPED_TASKS.to_owned(), SHIPPED_ORIGIN.to_owned())),
        Some(path) => {
            let meta = std::fs::metadata(path)
                .with_context(|| format!("cannot read the task file {}", path.display()))
                .map_err(usage_error)?;
            if meta.len() > tasks::MAX_FILE_BYTES as u64 {
                return Err(usage_error(anyhow!(
                    "{}: {} bytes; a task file may have at most {}",
                    path.display(),
                    meta.len(),
                    tasks::MAX_FILE_BYTES
                )));
            }
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the task file {}", path.display()))
                .map_err(usage_error)?;
            Ok((text, path.display().to_string()))
        }
    }
}

/// The tasks `--only` selects (all without it); a pattern that selects
/// nothing is an error, so a typo does not pass as an empty run.
fn select<'a>(all: &'a [tasks::Task], only: &[String]) -> Result<Vec<&'a tasks::Task>, Failure> {
    if only.is_empty() {
        return Ok(all.iter().collect());
    }
    let mut globs = Vec::new();
    for pattern in only {
        let g = tasks::glob(pattern).map_err(|e| usage_error(anyhow!("--only: {e}")))?;
        if !all.iter().any(|t| g.matcher.is_match(&t.id)) {
            return Err(usage_error(anyhow!(
                "--only {pattern:?} matches no task id (see `bulwark eval --list`)"
            )));
        }
        globs.push(g);
    }
    Ok(all
        .iter()
        .filter(|t| globs.iter().any(|g| g.matcher.is_match(&t.id)))
        .collect())
}

pub async fn eval(home: &Home, args: EvalArgs) -> Result<(), Failure> {
    let (text, origin) = load(args.tasks.as_deref())?;
    let file = tasks::parse(&text, &origin).map_err(usage_error)?;
    let selected = select(&file.tasks, &args.only)?;
    if args.list {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for t in &selected {
            // A closed pipe (`| head`) ends the listing, not the process.
            if writeln!(out, "{:<32} {:<12} {}", t.id, t.category, t.question).is_err() {
                break;
            }
        }
        return Ok(());
    }
    if let Some(pct) = args.min_success
        && !(0.0..=100.0).contains(&pct)
    {
        return Err(usage_error(anyhow!(
            "--min-success {pct}: give a percentage from 0 to 100"
        )));
    }
    if args.timeout == 0 {
        return Err(usage_error(anyhow!("--timeout 0: give at least 1 second")));
    }
    let bin = match &args.bulwark {
        Some(path) => path.clone(),
        None => std::env::current_exe().context("cannot find this bulwark binary")?,
    };
    if !bin.is_file() {
        return Err(usage_error(anyhow!(
            "--bulwark {}: no such file",
            bin.display()
        )));
    }
    let models =
        run::choose_models(&args.models, &home.root().join("models")).map_err(usage_error)?;
    let timeout = Duration::from_secs(args.timeout);
    let mut reports = Vec::new();
    for model in &models {
        reports.push(eval_model(&bin, model, &file, &selected, timeout, args.keep).await?);
    }
    println!("{}", report::table(&reports));
    if let Some(path) = &args.json {
        let report = Report {
            task_file: origin,
            bulwark: bin.display().to_string(),
            timeout_s: args.timeout,
            models: reports.clone(),
        };
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("results: {}", path.display());
    }
    if let Some(min) = args.min_success {
        let below: Vec<String> = reports
            .iter()
            .filter(|r| r.summary.success_pct < min)
            .map(|r| format!("{} {:.1}%", r.model, r.summary.success_pct))
            .collect();
        if !below.is_empty() {
            return Err(anyhow!("below --min-success {min}%: {}", below.join(", ")).into());
        }
    }
    Ok(())
}

async fn eval_model(
    bin: &Path,
    model: &run::ModelChoice,
    file: &tasks::TaskFile,
    selected: &[&tasks::Task],
    timeout: Duration,
    keep: bool,
) -> Result<ModelReport, Failure> {
    let dir = tempfile::Builder::new()
        .prefix("bulwark-eval-")
        .tempdir()
        .context("cannot create a temporary home")?;
    let home = run::EvalHome::prepare(bin, dir.path(), model, timeout).await?;
    eprintln!(
        "eval: {} · {} task(s) · home {}",
        model.spec,
        selected.len(),
        dir.path().display()
    );
    let mut results = Vec::with_capacity(selected.len());
    let width = selected.iter().map(|t| t.id.len()).max().unwrap_or(0);
    for (n, task) in selected.iter().enumerate() {
        let fixture = file
            .workspaces
            .get(&task.workspace)
            .ok_or_else(|| anyhow!("task {}: no workspace {}", task.id, task.workspace))?;
        let outcome = home.run(task, fixture).await?;
        let failures = check::evaluate(task, fixture, &outcome);
        let passed = failures.is_empty();
        eprintln!(
            "[{:>3}/{}] {:<width$}  {}  {:>6.1} s",
            n + 1,
            selected.len(),
            task.id,
            if passed { "pass" } else { "FAIL" },
            outcome.seconds
        );
        for failure in &failures {
            eprintln!("          - {failure}");
        }
        results.push(TaskResult {
            id: task.id.clone(),
            category: task.category.clone(),
            passed,
            failures,
            outcome,
        });
    }
    let summary = report::summarize(&results);
    let home = if keep {
        let kept = dir.keep();
        eprintln!(
            "eval: kept the home of {} at {}",
            model.spec,
            kept.display()
        );
        Some(kept.display().to_string())
    } else {
        None
    };
    Ok(ModelReport {
        model: model.spec.clone(),
        home,
        summary,
        results,
    })
}
