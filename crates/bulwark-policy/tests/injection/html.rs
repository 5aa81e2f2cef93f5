//! Hidden text in fetched HTML, on hand-written pages in
//! `tests/data/injection/html/` (no public labelled corpus of hidden-HTML
//! injections installs offline): every `hidden-*.html` page hides an
//! instruction and must raise a hidden-text finding; every `benign-*.html`
//! page hides only ordinary things (menus, icons, screen-reader text,
//! cookie dialogs, analytics comments) and must raise nothing.

use std::path::PathBuf;

use bulwark_policy::injection::{ContentKind, FindingKind, scan};

fn pages() -> Vec<(String, String)> {
    let dir: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests/data/injection/html"]
        .iter()
        .collect();
    let mut pages: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    pages.sort();
    pages
}

#[test]
fn hidden_instructions_are_found_and_hidden_menus_are_not() {
    let (mut hidden, mut benign) = (0, 0);
    for (name, page) in pages() {
        let findings = scan(&page, ContentKind::Html);
        if name.starts_with("hidden-") {
            hidden += 1;
            assert!(
                findings.iter().any(|f| f.kind == FindingKind::HiddenText),
                "{name}: no hidden-text finding in {findings:?}"
            );
        } else if name.starts_with("benign-") {
            benign += 1;
            assert_eq!(findings, Vec::new(), "{name}");
        }
    }
    assert!(
        hidden >= 7 && benign >= 2,
        "{hidden} hidden, {benign} benign pages"
    );
}

#[test]
fn hidden_text_offsets_point_at_the_hiding_element() {
    let mut checked = 0;
    for (name, page) in pages() {
        for f in scan(&page, ContentKind::Html) {
            if f.kind == FindingKind::HiddenText && name.starts_with("hidden-") {
                checked += 1;
                let at = &page[f.offset..];
                assert!(
                    at.starts_with('<') || at.starts_with('\u{200B}'),
                    "{name}: finding at {:?}",
                    &at[..at.len().min(40)]
                );
            }
        }
    }
    assert!(checked >= 7, "{checked} hidden-text findings");
}
