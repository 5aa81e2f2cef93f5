//! The oracle for the advisory injection scanner
//! (`bulwark_policy::injection::scan`): it reads hostile text from pages and
//! tools, so on any input it must not panic, must report offsets that are
//! char boundaries inside the text, at most one finding per kind per region
//! and no more than its cap, the same answer twice, and must keep what it
//! found when benign text is appended.

use bulwark_policy::injection::{ContentKind, Finding, MAX_FINDINGS, REGION, scan};

/// Text appended for the monotonicity check: a new line of plain prose.
const BENIGN_TAIL: &str = "\nThe weather in Rome is mild in May.";

/// The first byte picks the content kind (its low bit: HTML when set); the
/// rest is the text, UTF-8 with invalid sequences replaced.
pub fn scan_text(data: &[u8]) {
    let (kind, payload) = match data.split_first() {
        Some((&k, rest)) if k & 1 == 1 => (ContentKind::Html, rest),
        Some((_, rest)) => (ContentKind::Text, rest),
        None => (ContentKind::Text, data),
    };
    let text = String::from_utf8_lossy(payload);
    let findings = scan(&text, kind);
    well_formed(&text, &findings);
    assert_eq!(
        findings,
        scan(&text, kind),
        "the scanner is not deterministic"
    );

    let longer = format!("{text}{BENIGN_TAIL}");
    let after = scan(&longer, kind);
    well_formed(&longer, &after);
    for f in &findings {
        assert!(
            after.iter().any(|g| g.kind == f.kind
                && g.offset / REGION == f.offset / REGION
                && g.offset <= f.offset),
            "{f:?} lost when benign text was appended: {findings:?} -> {after:?}"
        );
    }
}

fn well_formed(text: &str, findings: &[Finding]) {
    assert!(
        findings.len() <= MAX_FINDINGS,
        "{} findings",
        findings.len()
    );
    for (i, f) in findings.iter().enumerate() {
        assert!(f.offset < text.len(), "offset {} past the end", f.offset);
        assert!(
            text.is_char_boundary(f.offset),
            "offset {} splits a char",
            f.offset
        );
        assert!(
            !findings[i + 1..]
                .iter()
                .any(|g| g.kind == f.kind && g.offset / REGION == f.offset / REGION),
            "two {:?} findings in one region",
            f.kind
        );
    }
}
