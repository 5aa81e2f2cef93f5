//! The canonical listing of an agent directory: the text that is signed.
//!
//! ```text
//! bulwark-agent/v2
//! agent <name>
//! version <n>
//! file <sha256-hex> <size> <relative/path>
//! ...
//! ```
//!
//! `version` (v2, n >= 1) is the signer's release counter: a home refuses
//! to run a version of an agent lower than the highest it has run for the
//! same signer (see [`crate::versions`]). Listings of the first format,
//! `bulwark-agent/v1`, have no `version` line; they still verify and count
//! as version 0, so they are refused once a versioned one has run.
//!
//! Every regular file under the directory is listed (not only the manifest,
//! the system prompt and skills), so no file that can change an agent's
//! behaviour escapes the signature. The one exception is the signature file
//! itself. Paths use `/`, are sorted bytewise and come last on their line;
//! names with control characters (newlines included) are refused, so a
//! listing has exactly one reading. Anything the listing could not
//! describe faithfully — symbolic links, devices, non-UTF-8 names — is
//! refused rather than skipped.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Difference, TrustError};

/// The first line of a listing without a version (version 0); still read.
pub const FORMAT_LINE: &str = "bulwark-agent/v1";
/// The first line of a versioned listing, the one `sign` writes.
pub const FORMAT_LINE_V2: &str = "bulwark-agent/v2";
/// The signature file at the top of an agent directory, not covered by
/// the listing (it holds the listing's signature).
pub const SIGNATURE_FILE: &str = "agent.sig";
/// The manifest every agent directory must hold.
pub const MANIFEST_FILE: &str = "agent.toml";
/// Most files an agent directory may hold.
pub const MAX_FILES: usize = 10_000;
/// Most directories an agent directory may hold (bounds the walk).
pub const MAX_DIRS: usize = 10_000;
/// Largest file an agent directory may hold, in bytes.
pub const MAX_FILE_SIZE: u64 = 16 * 1024 * 1024;

/// One file of an agent directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Relative to the agent directory, `/`-separated.
    pub path: String,
    /// SHA-256 of the contents.
    pub sha256: [u8; 32],
    /// Length of the contents in bytes.
    pub size: u64,
}

/// What a signature covers: the agent's name and every file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentListing {
    pub agent: String,
    /// The signed version: 0 for a `bulwark-agent/v1` listing (none),
    /// otherwise at least 1.
    pub version: u64,
    /// Sorted bytewise by path, no duplicates.
    pub files: Vec<FileEntry>,
}

/// Whether `name` may appear on the listing's `agent` line.
pub(crate) fn valid_agent_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Digits only, without a leading zero (except `0` itself).
fn canonical_decimal(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (n == "0" || !n.starts_with('0'))
}

/// Whether `path` is a relative path the walk could have produced.
fn valid_relative_path(path: &str) -> bool {
    !path.is_empty()
        && !path.chars().any(char::is_control)
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

impl AgentListing {
    /// Walks `dir` and digests every regular file except the top-level
    /// [`SIGNATURE_FILE`]. `agent` is the name the listing binds the files
    /// to, so a signature cannot be moved to another agent.
    pub fn compute(dir: &Path, agent: &str) -> Result<Self, TrustError> {
        Ok(crate::bundle::AgentBundle::read(dir, agent)?.into_listing())
    }

    /// The listing of files already read (`path -> bytes`); `version` 0.
    pub(crate) fn from_files<'a>(
        agent: &str,
        files: impl Iterator<Item = (&'a String, &'a Vec<u8>)>,
    ) -> Self {
        let mut entries: Vec<FileEntry> = files
            .map(|(path, bytes)| FileEntry {
                path: path.clone(),
                sha256: Sha256::digest(bytes).into(),
                size: bytes.len() as u64,
            })
            .collect();
        entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        AgentListing {
            agent: agent.to_owned(),
            version: 0,
            files: entries,
        }
    }

    /// The canonical text: format line, agent line, one line per file.
    pub fn text(&self) -> String {
        let mut out = String::with_capacity(64 + self.files.len() * 100);
        out.push_str(if self.version == 0 {
            FORMAT_LINE
        } else {
            FORMAT_LINE_V2
        });
        out.push('\n');
        // Writing into a String cannot fail.
        let _ = writeln!(out, "agent {}", self.agent);
        if self.version != 0 {
            let _ = writeln!(out, "version {}", self.version);
        }
        for file in &self.files {
            let _ = writeln!(
                out,
                "file {} {} {}",
                hex::encode(file.sha256),
                file.size,
                file.path
            );
        }
        out
    }

    /// Reads a listing back, strictly: anything [`text`](Self::text) could
    /// not have written is refused with the reason.
    pub fn parse(text: &str) -> Result<Self, String> {
        let body = text
            .strip_suffix('\n')
            .ok_or("the listing does not end in a newline")?;
        let mut lines = body.split('\n');
        let versioned = match lines.next() {
            Some(FORMAT_LINE) => false,
            Some(FORMAT_LINE_V2) => true,
            Some(line) if line.starts_with("bulwark-agent/") => {
                return Err(format!(
                    "unsupported listing format `{line}` (this bulwark reads {FORMAT_LINE} and {FORMAT_LINE_V2})"
                ));
            }
            _ => {
                return Err(format!(
                    "the listing does not start with `{FORMAT_LINE_V2}`"
                ));
            }
        };
        let agent = lines
            .next()
            .and_then(|l| l.strip_prefix("agent "))
            .filter(|name| valid_agent_name(name))
            .ok_or("the second line is not `agent <name>`")?;
        let version = if versioned {
            lines
                .next()
                .and_then(|l| l.strip_prefix("version "))
                .filter(|n| canonical_decimal(n) && *n != "0")
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or("the third line is not `version <n>` with n >= 1")?
        } else {
            0
        };
        let first_file_line = if versioned { 4 } else { 3 };
        let mut files: Vec<FileEntry> = Vec::new();
        for (index, line) in lines.enumerate() {
            let number = index + first_file_line;
            let bad = |what: &str| format!("line {number}: {what}");
            let rest = line
                .strip_prefix("file ")
                .ok_or_else(|| bad("not a `file` line"))?;
            let mut parts = rest.splitn(3, ' ');
            let (Some(hash), Some(size), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(bad("not `file <sha256> <size> <path>`"));
            };
            let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
            if hash.len() != 64 || !hash.bytes().all(lower_hex) {
                return Err(bad("the digest is not 64 lowercase hex digits"));
            }
            let mut sha256 = [0u8; 32];
            hex::decode_to_slice(hash, &mut sha256).map_err(|_| bad("the digest is not hex"))?;
            let canonical_size = canonical_decimal(size);
            let size: u64 = match size.parse() {
                Ok(n) if canonical_size => n,
                _ => return Err(bad("the size is not a decimal number")),
            };
            if !valid_relative_path(path) {
                return Err(bad("the path is not a relative path"));
            }
            if let Some(previous) = files.last()
                && previous.path.as_bytes() >= path.as_bytes()
            {
                return Err(bad("paths are not sorted or repeat"));
            }
            if files.len() >= MAX_FILES {
                return Err(format!("more than {MAX_FILES} files"));
            }
            files.push(FileEntry {
                path: path.to_owned(),
                sha256,
                size,
            });
        }
        Ok(AgentListing {
            agent: agent.to_owned(),
            version,
            files,
        })
    }

    /// How `actual` differs from `signed`: the agent name first, then files
    /// in path order. Empty when they are equal.
    pub fn differences(signed: &Self, actual: &Self) -> Vec<Difference> {
        let mut out = Vec::new();
        if signed.agent != actual.agent {
            out.push(Difference::AgentName {
                signed: signed.agent.clone(),
                actual: actual.agent.clone(),
            });
        }
        let (mut s, mut a) = (
            signed.files.iter().peekable(),
            actual.files.iter().peekable(),
        );
        loop {
            match (s.peek(), a.peek()) {
                (None, None) => break,
                (Some(old), None) => {
                    out.push(Difference::Removed(old.path.clone()));
                    s.next();
                }
                (None, Some(new)) => {
                    out.push(Difference::Added(new.path.clone()));
                    a.next();
                }
                (Some(old), Some(new)) => match old.path.as_bytes().cmp(new.path.as_bytes()) {
                    std::cmp::Ordering::Less => {
                        out.push(Difference::Removed(old.path.clone()));
                        s.next();
                    }
                    std::cmp::Ordering::Greater => {
                        out.push(Difference::Added(new.path.clone()));
                        a.next();
                    }
                    std::cmp::Ordering::Equal => {
                        if old.sha256 != new.sha256 || old.size != new.size {
                            out.push(Difference::Changed(new.path.clone()));
                        }
                        s.next();
                        a.next();
                    }
                },
            }
        }
        out
    }
}

/// Every regular file under `root` with its relative path and the metadata
/// seen during the walk (not following links). Iterative, so a deep tree
/// cannot exhaust the stack.
pub(crate) fn walk(root: &Path) -> Result<Vec<(PathBuf, String, std::fs::Metadata)>, TrustError> {
    let mut files = Vec::new();
    let mut pending: Vec<(PathBuf, String)> = vec![(root.to_owned(), String::new())];
    let mut dirs = 0usize;
    while let Some((dir, prefix)) = pending.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| TrustError::io("read directory", &dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| TrustError::io("read directory", &dir, e))?;
            let path = entry.path();
            let os_name = entry.file_name();
            let Some(name) = os_name.to_str() else {
                return Err(TrustError::NonUtf8Name { path });
            };
            if name.chars().any(char::is_control) {
                return Err(TrustError::ControlCharacterInName { path });
            }
            let relative = if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}/{name}")
            };
            // `DirEntry::metadata` does not follow symbolic links.
            let meta = entry
                .metadata()
                .map_err(|e| TrustError::io("read", &path, e))?;
            let kind = meta.file_type();
            if kind.is_symlink() {
                return Err(TrustError::Symlink { path });
            } else if kind.is_dir() {
                dirs += 1;
                if dirs > MAX_DIRS {
                    return Err(TrustError::TooManyFiles {
                        dir: root.to_owned(),
                        limit: MAX_DIRS,
                    });
                }
                pending.push((path, relative));
            } else if kind.is_file() {
                if relative == SIGNATURE_FILE {
                    continue;
                }
                if files.len() >= MAX_FILES {
                    return Err(TrustError::TooManyFiles {
                        dir: root.to_owned(),
                        limit: MAX_FILES,
                    });
                }
                files.push((path, relative, meta));
            } else {
                return Err(TrustError::NotRegularFile { path });
            }
        }
    }
    Ok(files)
}

/// The contents of one file of the walk. It is opened without following
/// links and without blocking (a FIFO swapped in cannot stall the walk),
/// must still be the file the walk saw, and is read once: these bytes are
/// both what is digested and what the caller goes on to use.
pub(crate) fn read_walked_file(
    path: &Path,
    seen: &std::fs::Metadata,
) -> Result<Vec<u8>, TrustError> {
    if seen.len() > MAX_FILE_SIZE {
        return Err(TrustError::FileTooLarge {
            path: path.to_owned(),
            limit: MAX_FILE_SIZE,
        });
    }
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == rustix::io::Errno::LOOP.raw_os_error() => TrustError::Symlink {
                path: path.to_owned(),
            },
            _ => TrustError::io("read", path, e),
        })?;
    let opened = file
        .metadata()
        .map_err(|e| TrustError::io("read", path, e))?;
    if !opened.is_file() || opened.dev() != seen.dev() || opened.ino() != seen.ino() {
        return Err(TrustError::ChangedDuringRead {
            path: path.to_owned(),
        });
    }
    read_bounded(file, path, MAX_FILE_SIZE)
}

/// All of `file`, refusing more than `limit` bytes.
pub(crate) fn read_bounded(file: File, path: &Path, limit: u64) -> Result<Vec<u8>, TrustError> {
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| TrustError::io("read", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(TrustError::FileTooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, byte: u8) -> FileEntry {
        FileEntry {
            path: path.into(),
            sha256: [byte; 32],
            size: u64::from(byte),
        }
    }

    #[test]
    fn text_round_trips_and_is_strict() {
        let listing = AgentListing {
            agent: "a".into(),
            version: 0,
            files: vec![entry("agent.toml", 1), entry("skills/x y.md", 0)],
        };
        let text = listing.text();
        assert!(text.starts_with("bulwark-agent/v1\nagent a\nfile 0101"));
        assert!(text.ends_with(" 0 skills/x y.md\n"));
        assert_eq!(AgentListing::parse(&text).unwrap(), listing);
        for bad in [
            text.replace("v1", "v2"),
            text.replace(" 1 agent.toml", " 01 agent.toml"),
            text.replace("skills/x y.md", "skills/../y.md"),
            text.replace("skills/x y.md", "/abs"),
            text.replace("skills/x y.md", "agent.toml"),
            text.replace("file 0101", "file 0A01"),
            text.trim_end().to_owned(),
            format!("{text}\n"),
        ] {
            assert!(AgentListing::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn differences_name_each_file() {
        let signed = AgentListing {
            agent: "a".into(),
            version: 0,
            files: vec![entry("a", 1), entry("b", 2), entry("c", 3)],
        };
        let actual = AgentListing {
            agent: "b".into(),
            version: 0,
            files: vec![entry("b", 9), entry("c", 3), entry("d", 4)],
        };
        let diffs: Vec<String> = AgentListing::differences(&signed, &actual)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            diffs,
            [
                "agent name differs: the signature is for agent `a`, not `b`",
                "file removed: a",
                "file changed: b",
                "file added: d"
            ]
        );
    }
}
