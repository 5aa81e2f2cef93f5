//! Every line of the PayloadsAllTheThings traversal lists (copied into
//! tests/vectors, see SOURCE.md) is either refused or parses to a path with
//! no '..' component and no leading '/'.

use bulwark_policy::WorkspacePath;

const VECTORS: &[(&str, &str)] = &[
    (
        "directory_traversal.txt",
        include_str!("vectors/path-traversal/directory_traversal.txt"),
    ),
    (
        "traversals-8-deep-exotic-encoding.txt",
        include_str!("vectors/path-traversal/traversals-8-deep-exotic-encoding.txt"),
    ),
];

#[test]
fn traversal_vectors_are_refused_or_harmless() {
    let mut total = 0;
    let mut refused = 0;
    for (file, text) in VECTORS {
        for (n, line) in text.lines().enumerate() {
            total += 1;
            match WorkspacePath::parse(line) {
                Err(_) => refused += 1,
                Ok(p) => {
                    assert!(
                        p.components().all(|c| c != ".."),
                        "{file}:{}: {line:?} parsed to {p} with a '..' component",
                        n + 1
                    );
                    assert!(!p.as_str().starts_with('/'), "{file}:{}: {line:?}", n + 1);
                    // Whatever is accepted names something inside the
                    // workspace, literally (no decoding happens).
                    assert_eq!(WorkspacePath::parse(p.as_str()).as_ref(), Ok(&p));
                }
            }
        }
    }
    assert!(total > 1000, "vectors not loaded: {total}");
    assert!(refused > total / 2, "only {refused} of {total} refused");
}
