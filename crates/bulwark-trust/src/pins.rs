//! Files outside the agent directory that a signed agent may use.
//!
//! A signature covers the files under the agent directory. A manifest path
//! that leaves it (`script:../../x.jsonl`, `local:/models/x.gguf`) names a
//! file the signature does not cover, which anyone able to write that file
//! could change. Such a file is accepted only when the agent *pins* it: the
//! agent's `pins.sha256` — a file of the agent, so signed with it — lists
//! its SHA-256 in `sha256sum` format:
//!
//! ```text
//! # <sha256-hex>  <path, relative to the agent directory or absolute>
//! 3b4c...e1f0  ../../shared/replies.jsonl
//! 9a0d...77c2  /models/mine.gguf
//! ```
//!
//! A pinned file is read once, through one descriptor, and its bytes (or
//! the descriptor) are what is used: it is hashed as it is used, not
//! before.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::bundle::AgentBundle;
use crate::error::TrustError;
use crate::listing::read_bounded;

/// The file of an agent that pins files outside its directory.
pub const PINS_FILE: &str = "pins.sha256";

/// Where a path named by an agent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentPath {
    /// Inside the agent directory: its `/`-separated relative path, which
    /// must be a file of the bundle.
    Inside(String),
    /// Outside it, lexically normalized (absolute when the agent directory
    /// is).
    Outside(PathBuf),
}

/// `.` and `..` resolved without the file system. Inside a verified
/// bundle there are no links (the walk refuses them), so for a path inside
/// the agent directory this is where the kernel would arrive too; a path
/// that leaves it is either refused or pinned by content, which no link
/// can change.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                let last = out.components().next_back();
                match last {
                    Some(Component::Normal(_)) => {
                        out.pop();
                    }
                    Some(Component::RootDir | Component::Prefix(_)) => {}
                    _ => out.push(".."),
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Where `path` (as the model reference resolves it: the agent directory
/// joined with what the manifest wrote) is, relative to `agent_dir`.
pub fn locate(agent_dir: &Path, path: &Path) -> AgentPath {
    let base = normalize(agent_dir);
    let full = normalize(&agent_dir.join(path));
    if let Ok(rest) = full.strip_prefix(&base) {
        let parts: Option<Vec<&str>> = rest
            .components()
            .map(|c| match c {
                Component::Normal(name) => name.to_str(),
                _ => None,
            })
            .collect();
        if let Some(parts) = parts.filter(|p| !p.is_empty()) {
            return AgentPath::Inside(parts.join("/"));
        }
    }
    AgentPath::Outside(full)
}

/// The pins of a bundle: normalized outside path -> SHA-256.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pins {
    pins: BTreeMap<PathBuf, [u8; 32]>,
}

impl Pins {
    /// The bundle's [`PINS_FILE`] (none: no pins). Strict: a line that is
    /// not `<64 hex>  <path>` or `<64 hex> *<path>`, a path pinned twice,
    /// or a pin of a path inside the agent directory is an error.
    pub fn of(bundle: &AgentBundle) -> Result<Self, TrustError> {
        let Some(bytes) = bundle.get(PINS_FILE) else {
            return Ok(Self::default());
        };
        let file = bundle.dir().join(PINS_FILE);
        let bad = |line: usize, reason: &str| TrustError::MalformedPins {
            path: file.clone(),
            line,
            reason: reason.to_owned(),
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad(0, "it is not UTF-8 text"))?;
        let mut pins = BTreeMap::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let (hash, rest) = line
                .split_once(' ')
                .ok_or_else(|| bad(number, "not `<sha256>  <path>`"))?;
            let path = rest
                .strip_prefix(' ')
                .or_else(|| rest.strip_prefix('*'))
                .filter(|p| !p.is_empty())
                .ok_or_else(|| bad(number, "not `<sha256>  <path>` (two spaces)"))?;
            let mut sha256 = [0u8; 32];
            if hash.len() != 64 || hex::decode_to_slice(hash, &mut sha256).is_err() {
                return Err(bad(number, "the digest is not 64 hex digits"));
            }
            let outside = match locate(bundle.dir(), Path::new(path)) {
                AgentPath::Outside(outside) => outside,
                AgentPath::Inside(_) => {
                    return Err(bad(
                        number,
                        "the path is inside the agent directory, which the signature covers already; remove the line",
                    ));
                }
            };
            if pins
                .insert(outside, sha256)
                .is_some_and(|old| old != sha256)
            {
                return Err(bad(number, "the path is pinned twice, differently"));
            }
        }
        Ok(Self { pins })
    }

    /// The pinned SHA-256 of the normalized outside path.
    pub fn get(&self, outside: &Path) -> Option<&[u8; 32]> {
        self.pins.get(outside)
    }

    pub fn is_empty(&self) -> bool {
        self.pins.is_empty()
    }
}

/// A pinned file opened and hashed through one descriptor.
#[derive(Debug)]
pub struct PinnedFile {
    file: File,
    path: PathBuf,
    size: u64,
}

impl PinnedFile {
    /// A path that opens this very file (the descriptor it was hashed
    /// through), for loaders that take a path; valid while `self` lives.
    pub fn fd_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its length in bytes, as hashed.
    pub fn size(&self) -> u64 {
        self.size
    }
}

fn open_regular(path: &Path) -> Result<File, TrustError> {
    let flags = rustix::fs::OFlags::NONBLOCK;
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags.bits() as i32)
            .open(path)
            .map_err(|e| TrustError::io("read", path, e))?
    };
    let meta = file
        .metadata()
        .map_err(|e| TrustError::io("read", path, e))?;
    if !meta.is_file() {
        return Err(TrustError::NotRegularFile {
            path: path.to_owned(),
        });
    }
    Ok(file)
}

fn check_pin(path: &Path, expected: &[u8; 32], actual: [u8; 32]) -> Result<(), TrustError> {
    if bulwark_audit::constant_time_eq(expected, &actual) {
        Ok(())
    } else {
        Err(TrustError::PinMismatch {
            path: path.to_owned(),
            pinned: hex::encode(expected),
            actual: hex::encode(actual),
        })
    }
}

/// The contents of the pinned file at `path`, read once (at most `limit`
/// bytes) and checked against `expected`.
pub fn read_pinned(path: &Path, expected: &[u8; 32], limit: u64) -> Result<Vec<u8>, TrustError> {
    let bytes = read_bounded(open_regular(path)?, path, limit)?;
    check_pin(path, expected, Sha256::digest(&bytes).into())?;
    Ok(bytes)
}

/// The pinned file at `path`, opened and hashed (streaming, any size)
/// through one descriptor, which is kept open for loading it.
///
/// What remains: a loader that maps the file sees later in-place writes to
/// the same inode by whoever can write it (a replacement by rename is not
/// seen). Keep pinned model files where only their owner can write.
pub fn open_pinned(path: &Path, expected: &[u8; 32]) -> Result<PinnedFile, TrustError> {
    let mut file = open_regular(path)?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut buf = vec![0u8; 1024 * 1024];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(TrustError::io("read", path, e)),
        };
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    check_pin(path, expected, hasher.finalize().into())?;
    Ok(PinnedFile {
        file,
        path: path.to_owned(),
        size,
    })
}

/// `bytes` (a file of a verified bundle) in an anonymous memory file, for
/// loaders that take a path: nothing on disk can change what they load.
pub fn memory_file(name: &str, bytes: &[u8]) -> Result<PinnedFile, TrustError> {
    use std::io::Write;
    let path = PathBuf::from(name);
    let fd = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(|e| TrustError::io("create a memory file for", &path, e.into()))?;
    let mut file = File::from(fd);
    file.write_all(bytes)
        .map_err(|e| TrustError::io("write a memory file for", &path, e))?;
    Ok(PinnedFile {
        file,
        path,
        size: bytes.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_normalizes_and_stays_beneath() {
        let dir = Path::new("/h/agents/a");
        let inside = |p: &str| locate(dir, Path::new(p));
        assert_eq!(inside("s.jsonl"), AgentPath::Inside("s.jsonl".into()));
        assert_eq!(
            inside("./x/../s.jsonl"),
            AgentPath::Inside("s.jsonl".into())
        );
        assert_eq!(
            inside("/h/agents/a/d/s.jsonl"),
            AgentPath::Inside("d/s.jsonl".into())
        );
        for (p, out) in [
            ("../../x.jsonl", "/h/x.jsonl"),
            ("../a2/s.jsonl", "/h/agents/a2/s.jsonl"),
            ("d/../../a/../b", "/h/agents/b"),
            ("/models/m.gguf", "/models/m.gguf"),
            ("/../../etc/passwd", "/etc/passwd"),
            (".", "/h/agents/a"),
        ] {
            assert_eq!(inside(p), AgentPath::Outside(PathBuf::from(out)), "{p}");
        }
        // A relative home keeps leading `..`.
        assert_eq!(
            locate(Path::new("h/a"), Path::new("../../../x")),
            AgentPath::Outside(PathBuf::from("../x"))
        );
    }
}
