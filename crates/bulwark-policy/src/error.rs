//! Located configuration errors, and the machinery to locate them.
//!
//! A malformed manifest or config fails closed, so the error is the only
//! thing the operator sees: it must say which file, line, column and field,
//! and what would have been accepted. Syntax and schema errors come from
//! `toml` with a byte span; semantic errors (a bad pattern inside a
//! capability) are located by looking the field's key path up in a spanned
//! parse of the same source.

use std::fmt;

use serde_spanned::Spanned;
use toml::de::DeValue;

use crate::capability::CAPABILITY_KINDS;

/// A configuration file could not be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}:{line}:{col}: {message}")]
pub struct ConfigError {
    /// The file (or other origin) the text came from.
    pub origin: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// Dotted key path of the offending field, when known (`agent.max_turns`,
    /// `capabilities[2].path`).
    pub field: Option<String>,
    /// What is wrong and what would be accepted; names the field.
    pub message: String,
}

/// One step of a key path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seg<'a> {
    Key(&'a str),
    Idx(usize),
}

/// Render a key path as `a.b[2].c`.
pub(crate) struct KeyPath<'a, 'b>(pub &'b [Seg<'a>]);

impl fmt::Display for KeyPath<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Idx(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// Convert a byte offset into 1-based (line, column-in-characters).
pub(crate) fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(src.len());
    while !src.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

/// A source text with a spanned parse tree, to build located errors.
pub(crate) struct Located<'a> {
    src: &'a str,
    origin: &'a str,
    doc: Option<Spanned<DeValue<'a>>>,
}

impl<'a> Located<'a> {
    pub(crate) fn new(src: &'a str, origin: &'a str) -> Self {
        let doc = toml::de::DeTable::parse(src)
            .ok()
            .map(|t| Spanned::new(t.span(), DeValue::Table(t.into_inner())));
        Located { src, origin, doc }
    }

    fn error_at(&self, offset: usize, field: Option<String>, message: String) -> ConfigError {
        let (line, col) = line_col(self.src, offset);
        ConfigError {
            origin: self.origin.to_string(),
            line,
            col,
            field,
            message,
        }
    }

    /// Span of the value at `path`, or of the deepest existing ancestor.
    fn span_of(&self, path: &[Seg<'_>]) -> Option<std::ops::Range<usize>> {
        let mut cur = self.doc.as_ref()?;
        let mut best = None;
        for seg in path {
            let next = match (seg, cur.get_ref()) {
                (Seg::Key(k), DeValue::Table(t)) => t
                    .iter()
                    .find(|(key, _)| key.get_ref() == k)
                    .map(|(key, v)| {
                        // Point at the key: that is the line the author looks for.
                        best = Some(key.span());
                        v
                    }),
                (Seg::Idx(i), DeValue::Array(a)) => a.get(*i).inspect(|v| best = Some(v.span())),
                _ => None,
            };
            match next {
                Some(v) => cur = v,
                None => break,
            }
        }
        best
    }

    /// A semantic error about the field at `path`.
    pub(crate) fn at(&self, path: &[Seg<'_>], message: impl fmt::Display) -> ConfigError {
        let field = KeyPath(path).to_string();
        let offset = self.span_of(path).map_or(0, |s| s.start);
        self.error_at(offset, Some(field.clone()), format!("{field}: {message}"))
    }

    /// The key path of the innermost key or value whose span contains
    /// `offset`. The whole tree is searched, because a `[table]` header's
    /// span does not contain the table's body.
    fn path_at(&self, offset: usize) -> Option<String> {
        fn walk(
            v: &DeValue<'_>,
            offset: usize,
            path: &mut Vec<String>,
            best: &mut Option<Vec<String>>,
        ) {
            let mut visit = |seg: String,
                             span: std::ops::Range<usize>,
                             child: &DeValue<'_>,
                             path: &mut Vec<String>| {
                path.push(seg);
                if span.contains(&offset) && best.as_ref().is_none_or(|b| b.len() <= path.len()) {
                    *best = Some(path.clone());
                }
                walk(child, offset, path, best);
                path.pop();
            };
            match v {
                DeValue::Table(t) => {
                    for (k, v) in t.iter() {
                        let span = if k.span().contains(&offset) {
                            k.span()
                        } else {
                            v.span()
                        };
                        visit(format!(".{}", k.get_ref()), span, v.get_ref(), path);
                    }
                }
                DeValue::Array(a) => {
                    for (i, v) in a.iter().enumerate() {
                        visit(format!("[{i}]"), v.span(), v.get_ref(), path);
                    }
                }
                _ => {}
            }
        }
        let doc = self.doc.as_ref()?;
        let mut best = None;
        walk(doc.get_ref(), offset, &mut Vec::new(), &mut best);
        best.map(|segs| segs.concat().trim_start_matches('.').to_string())
    }

    /// Convert a `toml` syntax or schema error, adding the field path and a
    /// hint where serde's own wording would not teach enough.
    pub(crate) fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let offset = e.span().map_or(0, |s| s.start);
        let mut raw = e.message().trim_end().to_string();
        if raw == "duplicate key"
            && let Some(key) = e.span().and_then(|s| self.src.get(s))
        {
            raw = format!(
                "duplicate key `{}`: each key may appear once per table",
                key.trim()
            );
        }
        let field = e.span().and_then(|s| self.path_at(s.start));
        let mut message = match &field {
            Some(f) => format!("{f}: {raw}"),
            None => raw.clone(),
        };
        if raw.contains("unknown variant `env_read`") {
            message = format!(
                "{}capability kind `env_read` no longer exists: no tool reads the operator's environment (commands run with an empty one, and secrets reach tools only through [credentials] grants), so it granted nothing; remove this capability",
                field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default()
            );
            return self.error_at(offset, field, message);
        }
        if raw.contains("unknown variant") && raw.contains("file_read") {
            message.push_str(&format!(
                " (capability `kind` must be one of: {})",
                CAPABILITY_KINDS.join(", ")
            ));
        }
        if raw.contains("missing field `kind`") {
            message.push_str(&format!(
                " (every capability needs kind = one of: {})",
                CAPABILITY_KINDS.join(", ")
            ));
        }
        self.error_at(offset, field, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_is_one_based_and_counts_chars() {
        let s = "ab\ncdé\nx";
        assert_eq!(line_col(s, 0), (1, 1));
        assert_eq!(line_col(s, 3), (2, 1));
        assert_eq!(line_col(s, 7), (2, 4));
        assert_eq!(line_col(s, 8), (3, 1));
        assert_eq!(line_col(s, 6), (2, 3)); // inside 'é': snapped back
        assert_eq!(line_col(s, 999), (3, 2));
    }
}
