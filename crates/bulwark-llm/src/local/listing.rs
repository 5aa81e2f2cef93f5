//! The note after a directory listing: the entries' names alone, one per
//! line. No count: shown "3 files" in the note, the 1.5B model answered
//! "list the design folder" with "3 files".
//!
//! Why: the kernel lists `File<TAB>490<TAB>2025-05.md`, and asked to list
//! the inspection notes, the 1.5B model answered "490, 419, 305", the
//! sizes. The names are file-system content, so they stay inside the
//! kernel's boundary tags, copied from the result; outside stand only
//! the program's words and the counts.

use super::compare::boundary_tags;
use super::shape::unwrapped_lines;

/// At most this many names in a note; a longer listing is left as it is.
const MAX_NAMES: usize = 40;

/// The note for a listing's result as wrapped; None when it is not a
/// listing of `kind<TAB>size<TAB>name` lines.
pub(crate) fn listing_note(wrapped: &str) -> Option<String> {
    let (open, close) = boundary_tags(wrapped)?;
    let mut names: Vec<&str> = Vec::new();
    for line in unwrapped_lines(wrapped) {
        let mut fields = line.splitn(3, '\t');
        let (Some(kind), Some(size), Some(name)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !size.chars().all(|c| c.is_ascii_digit()) || size.is_empty() || name.is_empty() {
            continue;
        }
        if !matches!(kind, "File" | "Dir" | "Symlink" | "Other") {
            continue;
        }
        names.push(name);
    }
    if names.is_empty() || names.len() > MAX_NAMES {
        return None;
    }
    Some(format!(
        "(Listed by the program: the names alone, one per line:)\n{open}\n{}\n{close}",
        names.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::test_wrap::{CLOSE, OPEN, wrap};

    #[test]
    fn a_listing_is_noted_by_its_names_inside_the_tags() {
        let listed = wrap("File\t490\t2025-05.md\nFile\t419\t2025-06.md\nDir\t0\told\n");
        assert_eq!(
            listing_note(&listed).as_deref(),
            Some(
                format!("(Listed by the program: the names alone, one per line:)\n{OPEN}\n2025-05.md\n2025-06.md\nold\n{CLOSE}")
                    .as_str()
            )
        );
        // Not a listing: no note.
        assert_eq!(listing_note(&wrap("(empty directory)")), None);
        assert_eq!(listing_note(&wrap("name,size\na,1")), None);
        assert_eq!(listing_note("File\t1\ta.txt"), None, "no tags");
    }

    proptest::proptest! {
        #[test]
        fn names_only_appear_inside_the_tags(name in "[^\t\n\r]{1,30}") {
            let note = listing_note(&wrap(&format!("File\t12\t{name}\n"))).unwrap_or_default();
            let expected = format!(
                "(Listed by the program: the names alone, one per line:)\n{OPEN}\n{name}\n{CLOSE}"
            );
            proptest::prop_assert_eq!(note, expected);
        }
    }
}
