//! Lexical validation of workspace-relative paths.
//!
//! This is the *first* line only: it rejects obviously hostile input early,
//! with a clear message, before any system call. The directory handle in
//! [`crate::Workspace`] is what actually keeps operations beneath the root.

use crate::workspace::FsError;

/// Longest path string accepted. Longer inputs are almost certainly an attack
/// or a mistake, and `PATH_MAX` on Linux is 4096 anyway.
const MAX_PATH_LEN: usize = 4096;

/// A path that passed lexical validation: only normal components, no `.`,
/// no empty components, no `..`.
#[derive(Debug, Clone)]
pub(crate) struct RelPath {
    components: Vec<String>,
}

impl RelPath {
    /// Validate `path` as a workspace-relative path.
    ///
    /// Refused (as [`FsError::Escape`]) before touching the filesystem:
    /// absolute paths, any `..` component, NUL and other control characters
    /// (which break logs and terminals), and backslashes (which mean a
    /// separator on other platforms and only confuse reviewers here).
    /// `""` and `"."` denote the root itself; `.` and empty components are
    /// dropped, so `a//./b` is `a/b`.
    pub(crate) fn parse(path: &str) -> Result<RelPath, FsError> {
        let escape = |detail: &str| FsError::Escape {
            path: path.to_string(),
            detail: detail.to_string(),
        };
        if path.len() > MAX_PATH_LEN {
            return Err(escape("path is longer than 4096 bytes"));
        }
        if path.starts_with('/') {
            return Err(escape(
                "absolute paths are not allowed; use a path relative to the workspace root",
            ));
        }
        if path.chars().any(char::is_control) {
            return Err(escape("path contains a NUL or other control character"));
        }
        if path.contains('\\') {
            return Err(escape(
                "path contains a backslash; use '/' as the separator",
            ));
        }
        let mut components = Vec::new();
        for part in path.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    return Err(escape(
                        "'..' components are not allowed; name the file from the workspace root",
                    ));
                }
                other => components.push(other.to_string()),
            }
        }
        Ok(RelPath { components })
    }

    /// True for the workspace root itself (`""` or `"."`).
    pub(crate) fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The validated components, in order.
    pub(crate) fn components(&self) -> &[String] {
        &self.components
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_hostile_shapes() {
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/..",
            "..",
            "a\0b",
            "a\nb",
            "a\\..\\b",
            "a\u{7f}",
            "a\u{85}b",
        ] {
            assert!(
                matches!(RelPath::parse(bad), Err(FsError::Escape { .. })),
                "{bad:?} must be refused"
            );
        }
        assert!(RelPath::parse(&"a/".repeat(3000)).is_err());
    }

    #[test]
    fn normalizes_benign_shapes() {
        assert!(RelPath::parse("").map(|p| p.is_root()).unwrap_or(false));
        assert!(RelPath::parse(".").map(|p| p.is_root()).unwrap_or(false));
        let p = RelPath::parse("./a//b/./c.txt").map(|p| p.components().join("/"));
        assert_eq!(p.ok().as_deref(), Some("a/b/c.txt"));
        let p = RelPath::parse("a..b/..c").map(|p| p.components().join("/"));
        assert_eq!(p.ok().as_deref(), Some("a..b/..c"));
    }
}
