//! The on-disk cache of the fixed prompt prefix's KV state (warm starts).
//!
//! Every run of an agent renders the same system turn (system prompt and
//! tool schemas) first; prefilling it costs seconds on a small CPU. The
//! engine saves the KV state llama.cpp holds after that turn and a new
//! process loads it back instead of decoding it again.
//!
//! An entry is two files named by its key (64 hex digits):
//! - `<key>.state`: llama.cpp's sequence-state file (`llama_state_seq_save_file`);
//! - `<key>.json`: a [`Sidecar`] saying what the state is: format, model
//!   identity, token count, the prefix's hash and the state file's SHA-256.
//!
//! The key is SHA-256 over the format version, the model identity, the
//! context parameters that shape the state and the prefix tokens, so an
//! entry is only ever looked up for the very model and prompt it came from.
//! Nothing read from the directory is trusted: the sidecar must match what
//! this process expects field by field, the state's bytes must hash to the
//! sidecar's value, and only those verified bytes (copied to a private
//! temporary file, so the entry cannot change between the check and the
//! load) reach llama.cpp; the engine then compares the tokens llama.cpp
//! reads back with the prefix. Any mismatch deletes the entry and the
//! engine prefills normally and writes a fresh one.
//!
//! What the hashes prove is integrity against corruption, truncation,
//! mix-ups and a different model, not authenticity: whoever can write the
//! directory (it is created owner-only) can write a consistent entry.

use std::fs::{self, File};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Bumped whenever the files' meaning changes; part of the key and of the
/// sidecar, so entries of another version are misses or refused.
pub(crate) const FORMAT: u32 = 1;

/// The directory's size bound: the oldest entries go beyond it. A
/// Qwen2.5-0.5B prefix of ~350 tokens is ~4 MiB, a 1.5B one ~10 MiB.
pub const MAX_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// The largest state file read (a full 4096-token context of the 1.5B
/// model is ~115 MiB); a larger one is refused unread.
const MAX_STATE_BYTES: u64 = 192 * 1024 * 1024;

/// A sidecar is a few hundred bytes; more is not ours.
const MAX_SIDECAR_BYTES: u64 = 16 * 1024;

/// Temporary files (being written, or verified copies being loaded) older
/// than this are left-overs of a crashed process and are removed.
const STALE_TEMP_SECS: u64 = 600;

/// Why a cache entry was refused (and rebuilt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebuildReason {
    /// The sidecar is unreadable, too large or not the expected JSON.
    Sidecar,
    /// Another format version.
    Format,
    /// Saved by another model (or another build of it).
    Model,
    /// The sidecar names another key, another prefix or token count: an
    /// entry copied or renamed.
    Prefix,
    /// The state file is missing, of the wrong size or hashes to another
    /// value than the sidecar says (corrupt, truncated, swapped).
    StateHash,
    /// llama.cpp refused the verified state.
    StateLoad,
    /// llama.cpp read back other tokens than the prefix.
    Tokens,
}

/// What the prefix cache did for one turn ([`super::TurnStats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PrefixCacheOutcome {
    /// No cache directory is configured (or it is unusable).
    #[default]
    Disabled,
    /// The KV cache in memory already held tokens (a later turn of the
    /// conversation): the disk was not consulted.
    InMemory,
    /// The prefix's state was loaded from disk.
    Hit,
    /// No entry: the prefix was prefilled and an entry written.
    Miss,
    /// An entry was refused for this reason, deleted, and rebuilt.
    Rebuilt(RebuildReason),
}

/// What an entry's sidecar says. Every field must equal what the reader
/// expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Sidecar {
    pub format: u32,
    pub key: String,
    /// [`model_identity`] of the model that saved the state.
    pub model: String,
    pub tokens: usize,
    /// SHA-256 of the prefix tokens (little-endian `i32`s).
    pub prefix_sha256: String,
    pub state_len: u64,
    pub state_sha256: String,
}

/// What a lookup found.
#[derive(Debug)]
pub(crate) enum Lookup {
    Miss,
    /// Verified bytes, in a private temporary file for llama.cpp to load.
    Verified(tempfile::TempPath),
    /// A bad entry (already deleted).
    Refused(RebuildReason),
}

/// Why an entry could not be written (never fails a turn: logged).
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("llama.cpp could not save the state: {0}")]
    Save(String),
    #[error("the state file is {0} bytes, over the limit")]
    TooLarge(u64),
}

/// One directory of entries for one model and one set of context
/// parameters.
#[derive(Debug)]
pub(crate) struct PrefixCache {
    dir: PathBuf,
    model: String,
    context: String,
    max_bytes: u64,
}

impl PrefixCache {
    /// Creates `dir` owner-only if missing. `None` (with a warning) when it
    /// cannot be created or others may write it: entries there could be
    /// anyone's.
    pub(crate) fn open(dir: &Path, model: String, context: String) -> Option<Self> {
        if let Err(e) = create_private_dir(dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "local prefix cache disabled: cannot create its directory");
            return None;
        }
        match fs::symlink_metadata(dir) {
            Ok(meta) if meta.is_dir() && !writable_by_others(&meta) => {}
            Ok(_) => {
                tracing::warn!(dir = %dir.display(), "local prefix cache disabled: not a directory only its owner may write (chmod 700 it)");
                return None;
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "local prefix cache disabled");
                return None;
            }
        }
        Some(Self {
            dir: dir.to_path_buf(),
            model,
            context,
            max_bytes: MAX_CACHE_BYTES,
        })
    }

    /// The entry's name for these prefix tokens.
    pub(crate) fn key(&self, tokens: &[i32]) -> String {
        let mut h = Sha256::new();
        h.update(b"bulwark-kv-prefix\0");
        h.update(FORMAT.to_le_bytes());
        for part in [&self.model, &self.context] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        h.update(token_hash(tokens).as_bytes());
        hex::encode(h.finalize())
    }

    fn state_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.state"))
    }

    fn sidecar_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The sidecar this reader expects for `tokens`, but for the state's
    /// length and hash.
    fn expected(&self, key: &str, tokens: &[i32]) -> Sidecar {
        Sidecar {
            format: FORMAT,
            key: key.to_owned(),
            model: self.model.clone(),
            tokens: tokens.len(),
            prefix_sha256: token_hash(tokens),
            state_len: 0,
            state_sha256: String::new(),
        }
    }

    /// Finds and verifies the entry for `tokens`. A bad one is deleted.
    pub(crate) fn lookup(&self, key: &str, tokens: &[i32]) -> Lookup {
        let sidecar = match read_bounded(&self.sidecar_path(key), MAX_SIDECAR_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Lookup::Miss,
            Err(_) => return self.refuse(key, RebuildReason::Sidecar),
        };
        let result = serde_json::from_slice::<Sidecar>(&sidecar)
            .map_err(|_| RebuildReason::Sidecar)
            .and_then(|found| verify_sidecar(&found, &self.expected(key, tokens)).map(|()| found))
            .and_then(|found| self.verified_copy(key, &found));
        match result {
            Ok(path) => {
                // Recently used entries are the last evicted.
                let _ = File::options()
                    .append(true)
                    .open(self.state_path(key))
                    .and_then(|f| f.set_modified(SystemTime::now()));
                Lookup::Verified(path)
            }
            Err(reason) => self.refuse(key, reason),
        }
    }

    /// The state file's bytes, checked against `sidecar`, in a new private
    /// file: what llama.cpp loads can no longer change.
    fn verified_copy(
        &self,
        key: &str,
        sidecar: &Sidecar,
    ) -> Result<tempfile::TempPath, RebuildReason> {
        if sidecar.state_len > MAX_STATE_BYTES {
            return Err(RebuildReason::StateHash);
        }
        let bytes = match read_bounded(&self.state_path(key), sidecar.state_len) {
            Ok(Some(bytes)) => bytes,
            _ => return Err(RebuildReason::StateHash),
        };
        if bytes.len() as u64 != sidecar.state_len || sha256_hex(&bytes) != sidecar.state_sha256 {
            return Err(RebuildReason::StateHash);
        }
        let write = || -> std::io::Result<tempfile::TempPath> {
            let mut file = self.temp_file()?;
            file.write_all(&bytes)?;
            file.flush()?;
            Ok(file.into_temp_path())
        };
        write().map_err(|e| {
            tracing::warn!(error = %e, "local prefix cache: cannot stage a verified state");
            RebuildReason::StateLoad
        })
    }

    fn refuse(&self, key: &str, reason: RebuildReason) -> Lookup {
        tracing::warn!(
            ?reason,
            key,
            "local prefix cache: entry refused; it is deleted and rebuilt"
        );
        self.remove(key);
        Lookup::Refused(reason)
    }

    /// Deletes an entry (both files; missing ones are fine).
    pub(crate) fn remove(&self, key: &str) {
        let _ = fs::remove_file(self.sidecar_path(key));
        let _ = fs::remove_file(self.state_path(key));
    }

    fn temp_file(&self) -> std::io::Result<tempfile::NamedTempFile> {
        tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)
    }

    /// Writes the entry for `tokens`: `save` writes llama.cpp's state to
    /// the path it is given; both files are renamed into place, the sidecar
    /// last. Then the directory is brought back under its size bound.
    pub(crate) fn store(
        &self,
        key: &str,
        tokens: &[i32],
        save: impl FnOnce(&Path) -> Result<(), String>,
    ) -> Result<(), StoreError> {
        let state = self.temp_file()?.into_temp_path();
        save(&state).map_err(StoreError::Save)?;
        let len = fs::metadata(&state)?.len();
        if len > MAX_STATE_BYTES || len > self.max_bytes {
            return Err(StoreError::TooLarge(len));
        }
        let bytes = read_bounded(&state, len)?.unwrap_or_default();
        let sidecar = Sidecar {
            state_len: bytes.len() as u64,
            state_sha256: sha256_hex(&bytes),
            ..self.expected(key, tokens)
        };
        let json = serde_json::to_vec_pretty(&sidecar)
            .map_err(|e| StoreError::Io(std::io::Error::other(e)))?;
        let mut side = self.temp_file()?;
        side.write_all(&json)?;
        side.flush()?;
        state
            .persist(self.state_path(key))
            .map_err(|e| StoreError::Io(e.error))?;
        side.into_temp_path()
            .persist(self.sidecar_path(key))
            .map_err(|e| StoreError::Io(e.error))?;
        self.evict(key);
        Ok(())
    }

    /// Removes the least recently used entries until the directory is
    /// within its bound (never `keep`, just written), and temporary files
    /// a crashed process left behind.
    fn evict(&self, keep: &str) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut keys: std::collections::BTreeMap<String, (u64, SystemTime)> = Default::default();
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            match entry_key(&name) {
                Some(key) => {
                    let slot = keys
                        .entry(key.to_owned())
                        .or_insert((0, SystemTime::UNIX_EPOCH));
                    slot.0 += meta.len();
                    slot.1 = slot.1.max(modified);
                }
                None if name.starts_with(".tmp-") => {
                    let stale = now
                        .duration_since(modified)
                        .is_ok_and(|age| age.as_secs() > STALE_TEMP_SECS);
                    if stale {
                        let _ = fs::remove_file(entry.path());
                    }
                }
                None => {}
            }
        }
        let mut total: u64 = keys.values().map(|(len, _)| len).sum();
        let mut oldest: Vec<_> = keys.into_iter().filter(|(k, _)| k != keep).collect();
        oldest.sort_by_key(|(_, (_, modified))| *modified);
        for (key, (len, _)) in oldest {
            if total <= self.max_bytes {
                break;
            }
            tracing::debug!(key, bytes = len, "local prefix cache: evicted");
            self.remove(&key);
            total = total.saturating_sub(len);
        }
    }
}

/// Every field equal, but the state's length and hash (checked against the
/// bytes).
pub(crate) fn verify_sidecar(found: &Sidecar, expected: &Sidecar) -> Result<(), RebuildReason> {
    if found.format != expected.format {
        return Err(RebuildReason::Format);
    }
    if found.model != expected.model {
        return Err(RebuildReason::Model);
    }
    if found.key != expected.key
        || found.tokens != expected.tokens
        || found.prefix_sha256 != expected.prefix_sha256
    {
        return Err(RebuildReason::Prefix);
    }
    let is_hash = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !is_hash(&found.state_sha256) {
        return Err(RebuildReason::Sidecar);
    }
    Ok(())
}

/// The key of an entry's file name (`<64 hex>.state` / `.json`).
fn entry_key(name: &str) -> Option<&str> {
    let key = name
        .strip_suffix(".state")
        .or_else(|| name.strip_suffix(".json"))?;
    (key.len() == 64 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))).then_some(key)
}

/// SHA-256 of the tokens as little-endian `i32`s.
pub(crate) fn token_hash(tokens: &[i32]) -> String {
    let mut h = Sha256::new();
    for t in tokens {
        h.update(t.to_le_bytes());
    }
    hex::encode(h.finalize())
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The file's bytes if it exists; an error if it is larger than `limit`
/// or unreadable. Reads at most `limit + 1` bytes.
fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other("larger than expected"));
    }
    Ok(Some(bytes))
}

/// Bytes of the model file sampled for its identity: its head (GGUF header,
/// metadata and tokenizer: architecture, name, vocabulary, tensor layout)
/// and a slice of tensor data from the middle and the end.
const HEAD_BYTES: u64 = 8 * 1024 * 1024;
const SLICE_BYTES: u64 = 1024 * 1024;

/// Who the model is, cheaply: the file's length and the SHA-256 of its
/// first 8 MiB, of 1 MiB in its middle and of its last 1 MiB, together with
/// what llama.cpp reports about it (`facts`: parameter count, vocabulary,
/// layers...). A different model changes the header (architecture, name,
/// tokenizer, tensor shapes) or, for a fine-tune or another quantisation of
/// the same architecture, its length and tensor bytes; a model that differs
/// only in tensors outside the sampled slices would not be told apart (the
/// whole file is not hashed on every start: that costs seconds).
pub(crate) fn model_identity(path: &Path, facts: &str) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut h = Sha256::new();
    h.update(b"bulwark-model-identity\0");
    h.update(len.to_le_bytes());
    h.update((facts.len() as u64).to_le_bytes());
    h.update(facts.as_bytes());
    let middle = (len / 2).saturating_sub(SLICE_BYTES / 2);
    let end = len.saturating_sub(SLICE_BYTES);
    for (offset, size) in [(0, HEAD_BYTES), (middle, SLICE_BYTES), (end, SLICE_BYTES)] {
        file.seek(SeekFrom::Start(offset))?;
        let mut chunk = Vec::new();
        (&mut file).take(size).read_to_end(&mut chunk)?;
        h.update(offset.to_le_bytes());
        h.update(&chunk);
    }
    Ok(hex::encode(h.finalize()))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(unix)]
fn writable_by_others(meta: &fs::Metadata) -> bool {
    std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o022 != 0
}

#[cfg(not(unix))]
fn writable_by_others(_meta: &fs::Metadata) -> bool {
    false
}

#[cfg(test)]
mod tests;
