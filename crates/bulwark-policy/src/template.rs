//! Credential value templates: literal text plus `${KEY}` placeholders, as
//! in `"Bearer ${GITHUB_TOKEN}"`.
//!
//! This module only parses and renders; it never sees where secrets live.
//! The caller supplies a lookup and owns (and zeroizes) what it returns and
//! the rendered string.

use std::fmt;

/// The longest key name accepted: `[A-Z_][A-Z0-9_]{0,127}`.
pub const MAX_KEY_NAME_LEN: usize = 128;

/// Is `name` a secret key name: `[A-Z_][A-Z0-9_]{0,127}` (an uppercase
/// environment-variable name)? Used for grant keys, template placeholders
/// and `[secrets] env`.
pub fn is_key_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_KEY_NAME_LEN
        && (b[0].is_ascii_uppercase() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
}

/// One piece of a [`Template`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TemplatePart {
    /// Text copied as is; never contains a control character.
    Literal(String),
    /// A `${NAME}` placeholder; the name satisfies [`is_key_name`].
    Key(String),
}

/// A parsed value template. Adjacent literal text is one part, so parsing
/// is canonical: `Template::parse(&t.to_string()) == Ok(t)`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Template {
    parts: Vec<TemplatePart>,
}

/// Why a template was refused. Positions are 1-based character positions
/// in the template text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error(
        "the \"${{\" at character {at} is never closed: write placeholders as ${{KEY_NAME}}, or remove the \"${{\""
    )]
    Unterminated { at: usize },
    #[error("\"${{}}\" at character {at} names no key: write ${{KEY_NAME}}")]
    EmptyPlaceholder { at: usize },
    #[error(
        "placeholder ${{{name}}} at character {at} is not a key name: use [A-Z_][A-Z0-9_]*, uppercase like an environment variable, at most 128 characters"
    )]
    BadKeyName { at: usize, name: String },
    #[error(
        "control character {ch:?} at character {at}: remove it (a CR or LF would let a value forge extra headers)"
    )]
    ControlChar { at: usize, ch: char },
}

/// 1-based character position of byte offset `byte` in `s`.
fn char_pos(s: &str, byte: usize) -> usize {
    s.char_indices().take_while(|(i, _)| *i < byte).count() + 1
}

impl Template {
    /// Parse `text`: every `${` opens a placeholder that must close with
    /// `}` around a key name; everything else is literal and must hold no
    /// control character. A lone `$` or `{` is literal. There is no escape
    /// for a literal `${`.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut pos = 0;
        while pos < text.len() {
            let rest = &text[pos..];
            let lit_len = rest.find("${").unwrap_or(rest.len());
            let literal = &rest[..lit_len];
            if let Some((i, ch)) = literal.char_indices().find(|(_, c)| c.is_control()) {
                return Err(TemplateError::ControlChar {
                    at: char_pos(text, pos + i),
                    ch,
                });
            }
            if !literal.is_empty() {
                parts.push(TemplatePart::Literal(literal.to_string()));
            }
            pos += lit_len;
            if pos >= text.len() {
                break;
            }
            // At "${".
            let open = pos;
            let body = &text[open + 2..];
            let Some(close) = body.find('}') else {
                return Err(TemplateError::Unterminated {
                    at: char_pos(text, open),
                });
            };
            let name = &body[..close];
            if name.is_empty() {
                return Err(TemplateError::EmptyPlaceholder {
                    at: char_pos(text, open),
                });
            }
            if !is_key_name(name) {
                return Err(TemplateError::BadKeyName {
                    at: char_pos(text, open),
                    name: name.to_string(),
                });
            }
            parts.push(TemplatePart::Key(name.to_string()));
            pos = open + 2 + close + 1;
        }
        Ok(Template { parts })
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[TemplatePart] {
        &self.parts
    }

    /// The placeholder names, in order of appearance (repeats included).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            TemplatePart::Key(k) => Some(k.as_str()),
            TemplatePart::Literal(_) => None,
        })
    }

    /// Whether the template has at least one placeholder.
    pub fn has_keys(&self) -> bool {
        self.keys().next().is_some()
    }

    /// Render with `lookup` giving each key's value; `None` if any key is
    /// missing. Every value is looked up before the output is allocated at
    /// its exact final size, so the result is never reallocated (no partial
    /// copies of a secret are left in freed memory by this function).
    ///
    /// Values are inserted verbatim: the caller must refuse values that are
    /// unfit for their destination (e.g. CR/LF in a header value).
    pub fn render<S: AsRef<str>>(
        &self,
        mut lookup: impl FnMut(&str) -> Option<S>,
    ) -> Option<String> {
        let mut values = Vec::new();
        let mut len = 0usize;
        for part in &self.parts {
            match part {
                TemplatePart::Literal(l) => len = len.checked_add(l.len())?,
                TemplatePart::Key(k) => {
                    let v = lookup(k)?;
                    len = len.checked_add(v.as_ref().len())?;
                    values.push(v);
                }
            }
        }
        let mut out = String::with_capacity(len);
        let mut values = values.iter();
        for part in &self.parts {
            match part {
                TemplatePart::Literal(l) => out.push_str(l),
                TemplatePart::Key(_) => out.push_str(values.next()?.as_ref()),
            }
        }
        Some(out)
    }
}

impl fmt::Display for Template {
    /// The template's source form (placeholders as `${NAME}`), never a value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                TemplatePart::Literal(l) => f.write_str(l)?,
                TemplatePart::Key(k) => write!(f, "${{{k}}}")?,
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for Template {
    type Err = TemplateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Template::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TemplatePart::{Key, Literal};

    fn lit(s: &str) -> TemplatePart {
        Literal(s.into())
    }
    fn key(s: &str) -> TemplatePart {
        Key(s.into())
    }

    #[test]
    fn key_names() {
        for good in ["A", "_", "GITHUB_TOKEN", "_X9", "A1_2", &"A".repeat(128)] {
            assert!(is_key_name(good), "{good}");
        }
        for bad in [
            "",
            "a",
            "Github",
            "1A",
            "A-B",
            "A B",
            "A.B",
            "É",
            &"A".repeat(129),
        ] {
            assert!(!is_key_name(bad), "{bad}");
        }
    }

    #[test]
    fn parses_parts() {
        let cases: &[(&str, Vec<TemplatePart>)] = &[
            ("", vec![]),
            ("plain", vec![lit("plain")]),
            ("${A}", vec![key("A")]),
            ("Bearer ${TOKEN}", vec![lit("Bearer "), key("TOKEN")]),
            ("${A}:${B}x", vec![key("A"), lit(":"), key("B"), lit("x")]),
            ("${A}${A}", vec![key("A"), key("A")]),
            ("$5 {x} }${A}$", vec![lit("$5 {x} }"), key("A"), lit("$")]),
            ("$${A}", vec![lit("$"), key("A")]),
            ("é${A}ü", vec![lit("é"), key("A"), lit("ü")]),
        ];
        for (src, want) in cases {
            let t = Template::parse(src).unwrap_or_else(|e| panic!("{src:?}: {e}"));
            assert_eq!(t.parts(), want.as_slice(), "{src:?}");
            assert_eq!(t.to_string(), *src);
        }
    }

    #[test]
    fn refuses_bad_templates() {
        use TemplateError::*;
        let cases: &[(&str, TemplateError)] = &[
            ("Bearer ${TOKEN", Unterminated { at: 8 }),
            ("${", Unterminated { at: 1 }),
            ("x${}", EmptyPlaceholder { at: 2 }),
            (
                "${token}",
                BadKeyName {
                    at: 1,
                    name: "token".into(),
                },
            ),
            (
                "${A B}",
                BadKeyName {
                    at: 1,
                    name: "A B".into(),
                },
            ),
            (
                "${A${B}",
                BadKeyName {
                    at: 1,
                    name: "A${B".into(),
                },
            ),
            ("a\r\nX-Evil: 1${A}", ControlChar { at: 2, ch: '\r' }),
            ("${A}\n", ControlChar { at: 5, ch: '\n' }),
            ("é\u{0}", ControlChar { at: 2, ch: '\0' }),
            (
                "\u{85}",
                ControlChar {
                    at: 1,
                    ch: '\u{85}',
                },
            ),
        ];
        for (src, want) in cases {
            assert_eq!(Template::parse(src).as_ref(), Err(want), "{src:?}");
        }
        // Messages teach the fix.
        let e = Template::parse("${x").unwrap_err().to_string();
        assert!(e.contains("${KEY_NAME}"), "{e}");
    }

    #[test]
    fn renders_in_order_and_fails_on_missing_key() {
        let t = Template::parse("Bearer ${A}/${B}/${A}").unwrap();
        assert_eq!(t.keys().collect::<Vec<_>>(), ["A", "B", "A"]);
        assert!(t.has_keys());
        let vals = [("A", "1"), ("B", "two")];
        let get = |k: &str| vals.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        assert_eq!(t.render(get).as_deref(), Some("Bearer 1/two/1"));
        assert_eq!(t.render(|k: &str| (k == "A").then_some("x")), None);
        // Owned values work too.
        assert_eq!(
            t.render(|k: &str| Some(k.to_lowercase())).as_deref(),
            Some("Bearer a/b/a")
        );
        let plain = Template::parse("no keys").unwrap();
        assert!(!plain.has_keys());
        assert_eq!(
            plain.render(|_: &str| None::<&str>).as_deref(),
            Some("no keys")
        );
    }

    #[test]
    fn render_allocates_exactly_once() {
        let t = Template::parse("Bearer ${A}").unwrap();
        let out = t.render(|_: &str| Some("0123456789")).unwrap();
        assert_eq!(out.capacity(), out.len());
    }
}
