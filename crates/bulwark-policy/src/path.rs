//! Workspace-relative paths.
//!
//! Every file demand is expressed as a [`WorkspacePath`], so the policy can
//! match it component by component and the sandbox can open it relative to a
//! directory handle. Parsing fails closed: anything that could name a place
//! outside the workspace, or that different layers might read differently
//! (backslashes, control characters), is refused rather than "fixed".

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest accepted component, in bytes (the common `NAME_MAX`).
pub const MAX_COMPONENT_BYTES: usize = 255;
/// Longest accepted path, in bytes (the common `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// Why a string is not an acceptable workspace path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path {input} is absolute; use a path relative to the workspace root")]
    Absolute { input: String },
    #[error(
        "path {input} contains a '..' component; parent references are refused even when they would stay inside the workspace"
    )]
    ParentComponent { input: String },
    #[error("path {input} contains a NUL or control character")]
    ControlCharacter { input: String },
    #[error("path {input} contains a backslash; use '/' as the separator")]
    Backslash { input: String },
    #[error("path {input} has a component of {len} bytes (limit {MAX_COMPONENT_BYTES})")]
    ComponentTooLong { input: String, len: usize },
    #[error("path {input} is {len} bytes long (limit {MAX_PATH_BYTES})")]
    TooLong { input: String, len: usize },
}

/// Quote an input for an error message: escaped (so control characters are
/// visible and cannot forge log lines) and truncated (so a 1 MiB path does
/// not become a 1 MiB message).
fn shown(input: &str) -> String {
    const LIMIT: usize = 80;
    if input.chars().count() > LIMIT {
        let head: String = input.chars().take(LIMIT).collect();
        format!("{head:?}...")
    } else {
        format!("{input:?}")
    }
}

/// A normalized path relative to the workspace root: '/'-separated, with no
/// empty, `.` or `..` components. The root is the empty path (shown as `.`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct WorkspacePath(String);

impl WorkspacePath {
    /// The workspace root.
    pub fn root() -> Self {
        WorkspacePath(String::new())
    }

    /// Parse and normalize `s`; see the module doc for what is refused.
    pub fn parse(s: &str) -> Result<WorkspacePath, PathError> {
        if s.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong {
                input: shown(s),
                len: s.len(),
            });
        }
        if s.chars().any(char::is_control) {
            return Err(PathError::ControlCharacter { input: shown(s) });
        }
        if s.contains('\\') {
            return Err(PathError::Backslash { input: shown(s) });
        }
        if s.starts_with('/') {
            return Err(PathError::Absolute { input: shown(s) });
        }
        let mut out: Vec<&str> = Vec::new();
        for comp in s.split('/') {
            match comp {
                "" | "." => {}
                ".." => return Err(PathError::ParentComponent { input: shown(s) }),
                c if c.len() > MAX_COMPONENT_BYTES => {
                    return Err(PathError::ComponentTooLong {
                        input: shown(s),
                        len: c.len(),
                    });
                }
                c => out.push(c),
            }
        }
        Ok(WorkspacePath(out.join("/")))
    }

    /// The normalized form (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The components, outermost first (none for the root).
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// Append a relative path `name` (parsed with the same rules).
    pub fn join(&self, name: &str) -> Result<WorkspacePath, PathError> {
        let tail = WorkspacePath::parse(name)?;
        let joined = match (self.is_root(), tail.is_root()) {
            (true, _) => tail.0,
            (false, true) => self.0.clone(),
            (false, false) => format!("{}/{}", self.0, tail.0),
        };
        if joined.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong {
                input: shown(&joined),
                len: joined.len(),
            });
        }
        Ok(WorkspacePath(joined))
    }

    /// The containing directory (the root's parent is the root).
    pub fn parent(&self) -> WorkspacePath {
        match self.0.rfind('/') {
            Some(i) => WorkspacePath(self.0[..i].to_string()),
            None => WorkspacePath::root(),
        }
    }
}

impl fmt::Display for WorkspacePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
            f.write_str(".")
        } else {
            f.write_str(&self.0)
        }
    }
}

impl AsRef<str> for WorkspacePath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for WorkspacePath {
    type Err = PathError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WorkspacePath::parse(s)
    }
}

impl TryFrom<String> for WorkspacePath {
    type Error = PathError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        WorkspacePath::parse(&s)
    }
}

impl From<WorkspacePath> for String {
    fn from(p: WorkspacePath) -> String {
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn normalizes_dots_and_slashes() {
        let p = WorkspacePath::parse("./a/./b//c/").unwrap();
        assert_eq!(p.as_str(), "a/b/c");
        assert_eq!(p.components().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(WorkspacePath::parse(".").unwrap().is_root());
        assert!(WorkspacePath::parse("").unwrap().is_root());
        assert_eq!(WorkspacePath::root().to_string(), ".");
        assert_eq!(WorkspacePath::root().components().count(), 0);
    }

    #[test]
    fn refuses_each_class_with_its_own_variant() {
        assert!(matches!(
            WorkspacePath::parse("/etc/passwd"),
            Err(PathError::Absolute { .. })
        ));
        assert!(matches!(
            WorkspacePath::parse("a/../b"),
            Err(PathError::ParentComponent { .. })
        ));
        assert!(matches!(
            WorkspacePath::parse(".."),
            Err(PathError::ParentComponent { .. })
        ));
        assert!(matches!(
            WorkspacePath::parse("a\0b"),
            Err(PathError::ControlCharacter { .. })
        ));
        assert!(matches!(
            WorkspacePath::parse("a\nb"),
            Err(PathError::ControlCharacter { .. })
        ));
        assert!(matches!(
            WorkspacePath::parse("a\\..\\b"),
            Err(PathError::Backslash { .. })
        ));
        let long = "x".repeat(256);
        assert!(matches!(
            WorkspacePath::parse(&long),
            Err(PathError::ComponentTooLong { len: 256, .. })
        ));
        assert!(WorkspacePath::parse(&"x".repeat(255)).is_ok());
        let total = vec!["y".repeat(100); 41].join("/");
        assert!(matches!(
            WorkspacePath::parse(&total),
            Err(PathError::TooLong { .. })
        ));
    }

    #[test]
    fn messages_name_the_input() {
        let e = WorkspacePath::parse("../secret").unwrap_err().to_string();
        assert!(e.contains("\"../secret\""), "{e}");
        let e = WorkspacePath::parse("a\u{1b}[31m").unwrap_err().to_string();
        assert!(e.contains("\\u{1b}"), "{e}");
    }

    #[test]
    fn percent_encoding_is_a_literal_name() {
        let p = WorkspacePath::parse("%2e%2e/x").unwrap();
        assert_eq!(p.components().next(), Some("%2e%2e"));
    }

    #[test]
    fn join_and_parent() {
        let p = WorkspacePath::parse("a/b").unwrap();
        assert_eq!(p.join("c/d").unwrap().as_str(), "a/b/c/d");
        assert!(p.join("../x").is_err());
        assert!(p.join("/x").is_err());
        assert_eq!(WorkspacePath::root().join("x").unwrap().as_str(), "x");
        assert_eq!(p.parent().as_str(), "a");
        assert!(p.parent().parent().is_root());
    }

    #[test]
    fn serde_goes_through_parse() {
        let p: WorkspacePath = serde_json::from_str("\"./a/b\"").unwrap();
        assert_eq!(p.as_str(), "a/b");
        assert!(serde_json::from_str::<WorkspacePath>("\"../a\"").is_err());
    }

    proptest! {
        #[test]
        fn parse_is_safe_and_idempotent(s in "[a./\\\\\\x00%é]{0,24}") {
            if let Ok(p) = WorkspacePath::parse(&s) {
                prop_assert!(!p.as_str().starts_with('/'));
                prop_assert!(p.components().all(|c| c != ".." && c != "." && !c.is_empty()));
                prop_assert_eq!(WorkspacePath::parse(p.as_str()).unwrap(), p.clone());
            }
        }
    }
}
