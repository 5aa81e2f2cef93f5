//! The label table: labels of content Bulwark wrote, by root, path and
//! digest. Round trips, union, clean vs absent, refusal of junk, and the
//! per-file bound that prefers to keep tainted entries.

use bulwark_store::{
    MAX_DIGESTS_PER_PATH, MAX_LABELS_PER_ENTRY, MAX_PROVENANCE_PATH_BYTES,
    MAX_PROVENANCE_ROOT_BYTES, Store, StoreError,
};

const ROOT: &str = "workspace:alice/helper";

fn digest(n: u32) -> [u8; 32] {
    let mut d = [0u8; 32];
    d[..4].copy_from_slice(&n.to_be_bytes());
    d
}

fn labels(store: &Store, path: &str, n: u32) -> Option<Vec<String>> {
    store.provenance(ROOT, path, &digest(n)).unwrap()
}

#[test]
fn labels_round_trip_by_root_path_and_digest() {
    let store = Store::open_in_memory().unwrap();
    store
        .record_provenance(ROOT, "notes.txt", &digest(1), &["external"], "call-1")
        .unwrap();
    assert_eq!(
        labels(&store, "notes.txt", 1),
        Some(vec!["external".into()])
    );
    // Other bytes, another path or another root: no provenance.
    assert_eq!(labels(&store, "notes.txt", 2), None);
    assert_eq!(labels(&store, "other.txt", 1), None);
    let elsewhere = store
        .provenance("workspace:bob/helper", "notes.txt", &digest(1))
        .unwrap();
    assert_eq!(elsewhere, None);
}

#[test]
fn labels_only_grow_and_come_back_sorted() {
    let store = Store::open_in_memory().unwrap();
    let path = "a/b.md";
    store
        .record_provenance(ROOT, path, &digest(1), &["peer"], "c1")
        .unwrap();
    store
        .record_provenance(ROOT, path, &digest(1), &["external", "peer"], "c2")
        .unwrap();
    // A later clean write of the same bytes takes nothing away.
    store
        .record_provenance(ROOT, path, &digest(1), &[], "c3")
        .unwrap();
    assert_eq!(
        labels(&store, path, 1),
        Some(vec!["external".to_string(), "peer".to_string()])
    );
    assert_eq!(store.provenance_entries(ROOT, path).unwrap(), 1);
}

#[test]
fn clean_is_an_entry_and_differs_from_absent() {
    let store = Store::open_in_memory().unwrap();
    assert_eq!(labels(&store, "x", 1), None);
    store
        .record_provenance(ROOT, "x", &digest(1), &[], "c1")
        .unwrap();
    assert_eq!(labels(&store, "x", 1), Some(Vec::new()));
    // Duplicate names in one call are one label.
    store
        .record_provenance(ROOT, "x", &digest(2), &["memory", "memory"], "c2")
        .unwrap();
    assert_eq!(labels(&store, "x", 2), Some(vec!["memory".into()]));
}

#[test]
fn junk_is_refused_with_a_typed_error_and_nothing_is_stored() {
    let store = Store::open_in_memory().unwrap();
    let long_label = "a".repeat(33);
    let too_many: Vec<String> = (0..=MAX_LABELS_PER_ENTRY)
        .map(|i| format!("l{i}"))
        .collect();
    let too_many: Vec<&str> = too_many.iter().map(String::as_str).collect();
    let bad_labels: Vec<Vec<&str>> = vec![
        vec!["External"],
        vec![""],
        vec!["ex ternal"],
        vec!["1abc"],
        vec!["ext-ernal"],
        vec!["externäl"],
        vec![long_label.as_str()],
        vec!["external", "x\u{0}"],
        too_many,
    ];
    for bad in bad_labels {
        let err = store
            .record_provenance(ROOT, "p", &digest(1), &bad, "c")
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Invalid {
                    field: "labels",
                    ..
                }
            ),
            "{bad:?}: {err:?}"
        );
    }
    let long_root = "r".repeat(MAX_PROVENANCE_ROOT_BYTES + 1);
    let long_path = "p".repeat(MAX_PROVENANCE_PATH_BYTES + 1);
    let long_source = "s".repeat(257);
    for (root, path, source, field) in [
        ("", "p", "c", "root"),
        (long_root.as_str(), "p", "c", "root"),
        (ROOT, "", "c", "path"),
        (ROOT, long_path.as_str(), "c", "path"),
        (ROOT, "a\nb", "c", "path"),
        (ROOT, "p", long_source.as_str(), "source"),
        (ROOT, "p", "c\u{1b}[2J", "source"),
    ] {
        let err = store
            .record_provenance(root, path, &digest(1), &["external"], source)
            .unwrap_err();
        assert!(
            matches!(&err, StoreError::Invalid { field: f, .. } if *f == field),
            "{field}: {err:?}"
        );
        // The message names the field, for the tool's report.
        assert!(err.to_string().contains(field), "{err}");
    }
    assert_eq!(labels(&store, "p", 1), None);
    // Lookups refuse what could never have been stored.
    assert!(matches!(
        store.provenance(ROOT, "", &digest(1)),
        Err(StoreError::Invalid { field: "path", .. })
    ));
    // At the limits is fine.
    let max_path = "p".repeat(MAX_PROVENANCE_PATH_BYTES);
    let max_label = "a".repeat(32);
    store
        .record_provenance(ROOT, &max_path, &digest(1), &[&max_label], "")
        .unwrap();
    assert_eq!(labels(&store, &max_path, 1), Some(vec![max_label]));
}

#[test]
fn a_union_past_the_label_bound_is_refused_and_keeps_the_entry() {
    let store = Store::open_in_memory().unwrap();
    let first: Vec<String> = (0..MAX_LABELS_PER_ENTRY).map(|i| format!("a{i}")).collect();
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    store
        .record_provenance(ROOT, "p", &digest(1), &first, "c1")
        .unwrap();
    let err = store
        .record_provenance(ROOT, "p", &digest(1), &["external"], "c2")
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err:?}");
    assert_eq!(labels(&store, "p", 1).unwrap().len(), MAX_LABELS_PER_ENTRY);
}

#[test]
fn each_file_keeps_a_bounded_number_of_digests_newest_first() {
    let store = Store::open_in_memory().unwrap();
    let n = u32::try_from(MAX_DIGESTS_PER_PATH).unwrap();
    for i in 0..n + 10 {
        store
            .record_provenance(ROOT, "log.txt", &digest(i), &[], "c")
            .unwrap();
    }
    assert_eq!(
        store.provenance_entries(ROOT, "log.txt").unwrap(),
        u64::from(n)
    );
    // The oldest went; the newest stayed.
    for i in 0..10 {
        assert_eq!(labels(&store, "log.txt", i), None, "{i}");
    }
    for i in 10..n + 10 {
        assert_eq!(labels(&store, "log.txt", i), Some(Vec::new()), "{i}");
    }
    // Another file's entries are not touched by this one's bound.
    store
        .record_provenance(ROOT, "other.txt", &digest(0), &[], "c")
        .unwrap();
    store
        .record_provenance(ROOT, "log.txt", &digest(999), &[], "c")
        .unwrap();
    assert_eq!(labels(&store, "other.txt", 0), Some(Vec::new()));
}

#[test]
fn pruning_keeps_tainted_entries_before_clean_ones_and_always_the_newest() {
    let store = Store::open_in_memory().unwrap();
    let n = u32::try_from(MAX_DIGESTS_PER_PATH).unwrap();
    // An early tainted version, then many clean ones.
    store
        .record_provenance(ROOT, "f", &digest(0), &["external"], "c0")
        .unwrap();
    store
        .record_provenance(ROOT, "f", &digest(1), &["workspace"], "c1")
        .unwrap();
    for i in 2..n + 20 {
        store
            .record_provenance(ROOT, "f", &digest(i), &[], "c")
            .unwrap();
    }
    assert_eq!(store.provenance_entries(ROOT, "f").unwrap(), u64::from(n));
    // The tainted one survives; a trusted label is not kept for it.
    assert_eq!(labels(&store, "f", 0), Some(vec!["external".into()]));
    assert_eq!(labels(&store, "f", 1), None);
    assert_eq!(labels(&store, "f", n + 19), Some(Vec::new()));

    // With only tainted entries, the oldest tainted ones go, and the entry
    // just written stays even when clean.
    for i in 1000..1000 + n {
        store
            .record_provenance(ROOT, "f", &digest(i), &["peer"], "c")
            .unwrap();
    }
    store
        .record_provenance(ROOT, "f", &digest(5000), &[], "c")
        .unwrap();
    assert_eq!(store.provenance_entries(ROOT, "f").unwrap(), u64::from(n));
    assert_eq!(labels(&store, "f", 5000), Some(Vec::new()));
    assert_eq!(labels(&store, "f", 0), None, "the oldest tainted went");
    assert_eq!(labels(&store, "f", 1000), None);
    assert_eq!(labels(&store, "f", 1001), Some(vec!["peer".into()]));
}

#[test]
fn rewriting_old_bytes_makes_them_newest_again() {
    let store = Store::open_in_memory().unwrap();
    let n = u32::try_from(MAX_DIGESTS_PER_PATH).unwrap();
    store
        .record_provenance(ROOT, "f", &digest(0), &[], "c")
        .unwrap();
    for i in 1..n {
        store
            .record_provenance(ROOT, "f", &digest(i), &[], "c")
            .unwrap();
    }
    // Bulwark writes the first bytes again: they are recent now.
    store
        .record_provenance(ROOT, "f", &digest(0), &[], "c")
        .unwrap();
    store
        .record_provenance(ROOT, "f", &digest(n), &[], "c")
        .unwrap();
    assert_eq!(labels(&store, "f", 0), Some(Vec::new()));
    assert_eq!(labels(&store, "f", 1), None);
}

#[test]
fn labels_survive_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.db");
    {
        let store = Store::open(&path).unwrap();
        store
            .record_provenance(ROOT, "n.md", &digest(7), &["external"], "c")
            .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(labels(&store, "n.md", 7), Some(vec!["external".into()]));
}

#[test]
fn the_table_itself_refuses_junk_labels() {
    // Whoever writes the file directly (another build, a bug) cannot put
    // a label the readers would choke on.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let insert = |labels: &str, digest_len: usize| {
        conn.execute(
            "INSERT INTO provenance (root, path, digest, labels, untrusted, source, time_ms, seq) \
             VALUES ('r', 'p', ?1, ?2, 1, 'c', 0, 1)",
            rusqlite::params![vec![0u8; digest_len], labels],
        )
    };
    assert!(insert("External", 32).is_err());
    assert!(insert("a,b", 32).is_err());
    assert!(insert("external", 31).is_err());
    assert!(insert("external peer", 32).is_ok());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever a caller sends, a label is either refused with a typed
        /// error and nothing is stored, or stored and read back as sent.
        #[test]
        fn any_label_is_refused_typed_or_round_trips(
            label in prop_oneof![
                "[a-z][a-z0-9_]{0,40}",
                "\\PC{0,40}",
                any::<String>(),
            ],
            path in "\\PC{1,64}",
        ) {
            let store = Store::open_in_memory().unwrap();
            match store.record_provenance(ROOT, &path, &digest(1), &[&label], "c") {
                Ok(()) => prop_assert_eq!(
                    store.provenance(ROOT, &path, &digest(1)).unwrap(),
                    Some(vec![label.clone()])
                ),
                Err(StoreError::Invalid { .. }) => prop_assert_eq!(
                    store.provenance(ROOT, &path, &digest(1)).unwrap(),
                    None
                ),
                Err(other) => prop_assert!(false, "untyped refusal: {other:?}"),
            }
        }
    }
}
