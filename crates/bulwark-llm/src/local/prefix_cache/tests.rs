#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use proptest::prelude::*;

fn cache(dir: &Path, model: &str) -> PrefixCache {
    PrefixCache::open(dir, model.into(), "n_ctx=4096".into()).expect("open")
}

fn store(cache: &PrefixCache, tokens: &[i32], state: &[u8]) -> String {
    let key = cache.key(tokens);
    cache
        .store(&key, tokens, |path| {
            fs::write(path, state).map_err(|e| e.to_string())
        })
        .unwrap();
    key
}

fn verified(lookup: Lookup) -> Vec<u8> {
    match lookup {
        Lookup::Verified(path) => fs::read(&path).unwrap(),
        other => panic!("expected a verified entry, got {other:?}"),
    }
}

#[test]
fn a_stored_entry_is_found_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let c = cache(&dir.path().join("kv"), "model-a");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = fs::metadata(dir.path().join("kv"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }
    let tokens = [1, 2, 3];
    assert!(matches!(c.lookup(&c.key(&tokens), &tokens), Lookup::Miss));
    let key = store(&c, &tokens, b"state bytes");
    assert_eq!(key.len(), 64);
    assert_eq!(verified(c.lookup(&key, &tokens)), b"state bytes");
    // Only the entry's two files remain (the verified copy is gone).
    let mut names: Vec<_> = fs::read_dir(dir.path().join("kv"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, [format!("{key}.json"), format!("{key}.state")]);
}

#[test]
fn keys_differ_by_model_context_and_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let a = cache(dir.path(), "model-a");
    let b = cache(dir.path(), "model-b");
    let other_ctx = PrefixCache::open(dir.path(), "model-a".into(), "n_ctx=2048".into()).unwrap();
    assert_ne!(a.key(&[1, 2]), b.key(&[1, 2]));
    assert_ne!(a.key(&[1, 2]), other_ctx.key(&[1, 2]));
    assert_ne!(a.key(&[1, 2]), a.key(&[1, 2, 3]));
    assert_eq!(a.key(&[1, 2]), a.key(&[1, 2]));
}

fn refused(lookup: Lookup) -> RebuildReason {
    match lookup {
        Lookup::Refused(reason) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn gone(c: &PrefixCache, key: &str) -> bool {
    !c.state_path(key).exists() && !c.sidecar_path(key).exists()
}

#[test]
fn corrupt_truncated_and_swapped_states_are_refused_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let c = cache(dir.path(), "model-a");
    let tokens = [5, 6, 7];
    let state = vec![7u8; 4096];

    let key = store(&c, &tokens, &state);
    let mut flipped = state.clone();
    flipped[100] ^= 0xff;
    fs::write(c.state_path(&key), &flipped).unwrap();
    assert_eq!(refused(c.lookup(&key, &tokens)), RebuildReason::StateHash);
    assert!(gone(&c, &key));

    let key = store(&c, &tokens, &state);
    fs::write(c.state_path(&key), &state[..1000]).unwrap();
    assert_eq!(refused(c.lookup(&key, &tokens)), RebuildReason::StateHash);
    assert!(gone(&c, &key));

    let key = store(&c, &tokens, &state);
    let mut longer = state.clone();
    longer.push(0);
    fs::write(c.state_path(&key), &longer).unwrap();
    assert_eq!(refused(c.lookup(&key, &tokens)), RebuildReason::StateHash);

    // Another entry's state under this entry's sidecar.
    let key = store(&c, &tokens, &state);
    let other = store(&c, &[9], b"another prefix's state");
    fs::copy(c.state_path(&other), c.state_path(&key)).unwrap();
    assert_eq!(refused(c.lookup(&key, &tokens)), RebuildReason::StateHash);

    let key = store(&c, &tokens, &state);
    fs::remove_file(c.state_path(&key)).unwrap();
    assert_eq!(refused(c.lookup(&key, &tokens)), RebuildReason::StateHash);
    assert!(gone(&c, &key));
}

#[test]
fn foreign_entries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = cache(dir.path(), "model-a");
    let tokens = [5, 6, 7];

    // A whole entry copied under another prefix's key.
    let source = store(&c, &[1, 2, 3], b"state of 1 2 3");
    let key = c.key(&tokens);
    fs::copy(c.state_path(&source), c.state_path(&key)).unwrap();
    fs::copy(c.sidecar_path(&source), c.sidecar_path(&key)).unwrap();
    assert_eq!(refused(c.lookup(&key, &tokens)), RebuildReason::Prefix);
    assert!(gone(&c, &key));
    // The source entry is untouched.
    assert_eq!(verified(c.lookup(&source, &[1, 2, 3])), b"state of 1 2 3");

    // Saved by another model, into the same directory under our key.
    let b = cache(dir.path(), "model-b");
    let key = store(&b, &tokens, b"b's state");
    let ours = c.key(&tokens);
    fs::rename(b.state_path(&key), c.state_path(&ours)).unwrap();
    fs::rename(b.sidecar_path(&key), c.sidecar_path(&ours)).unwrap();
    assert_eq!(refused(c.lookup(&ours, &tokens)), RebuildReason::Model);

    // A sidecar edited to another format.
    let key = store(&c, &tokens, b"x");
    let text = fs::read_to_string(c.sidecar_path(&key)).unwrap();
    fs::write(
        c.sidecar_path(&key),
        text.replace("\"format\": 1", "\"format\": 2"),
    )
    .unwrap();
    assert_eq!(refused(c.lookup(&key, &tokens)), RebuildReason::Format);

    // Garbage, extra fields, an oversized sidecar.
    for junk in [
        b"not json".to_vec(),
        text.replace("\"format\"", "\"extra\": 1, \"format\"")
            .into_bytes(),
        vec![b' '; 20_000],
    ] {
        let key = store(&c, &tokens, b"x");
        fs::write(c.sidecar_path(&key), junk).unwrap();
        assert_eq!(refused(c.lookup(&key, &tokens)), RebuildReason::Sidecar);
        assert!(gone(&c, &key));
    }
}

#[test]
fn sidecar_fields_are_each_checked() {
    let dir = tempfile::tempdir().unwrap();
    let c = cache(dir.path(), "m");
    let expected = c.expected(&c.key(&[1]), &[1]);
    let good = Sidecar {
        state_sha256: "ab".repeat(32),
        state_len: 10,
        ..expected.clone()
    };
    assert_eq!(verify_sidecar(&good, &expected), Ok(()));
    let cases: [(Sidecar, RebuildReason); 6] = [
        (
            Sidecar {
                format: 0,
                ..good.clone()
            },
            RebuildReason::Format,
        ),
        (
            Sidecar {
                model: "n".into(),
                ..good.clone()
            },
            RebuildReason::Model,
        ),
        (
            Sidecar {
                key: "0".repeat(64),
                ..good.clone()
            },
            RebuildReason::Prefix,
        ),
        (
            Sidecar {
                tokens: 2,
                ..good.clone()
            },
            RebuildReason::Prefix,
        ),
        (
            Sidecar {
                prefix_sha256: token_hash(&[2]),
                ..good.clone()
            },
            RebuildReason::Prefix,
        ),
        (
            Sidecar {
                state_sha256: "zz".repeat(32),
                ..good.clone()
            },
            RebuildReason::Sidecar,
        ),
    ];
    for (sidecar, reason) in cases {
        assert_eq!(
            verify_sidecar(&sidecar, &expected),
            Err(reason),
            "{sidecar:?}"
        );
    }
}

#[test]
fn eviction_keeps_the_directory_bounded_and_the_newest_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cache(dir.path(), "m");
    c.max_bytes = 10_000;
    let mut keys = Vec::new();
    for i in 0..5 {
        keys.push(store(&c, &[i], &vec![i as u8; 3000]));
        // Distinct modification times, oldest first.
        let past = SystemTime::now() - std::time::Duration::from_secs(100 - i as u64);
        for path in [
            c.state_path(&keys[i as usize]),
            c.sidecar_path(&keys[i as usize]),
        ] {
            File::options()
                .append(true)
                .open(path)
                .unwrap()
                .set_modified(past)
                .unwrap();
        }
    }
    let total: u64 = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(total <= 10_000, "{total}");
    assert!(gone(&c, &keys[0]) && gone(&c, &keys[1]));
    assert!(matches!(c.lookup(&keys[4], &[4]), Lookup::Verified(_)));

    // A state larger than the bound is not kept at all.
    let key = c.key(&[99]);
    let err = c.store(&key, &[99], |p| {
        fs::write(p, vec![0u8; 20_000]).map_err(|e| e.to_string())
    });
    assert!(matches!(err, Err(StoreError::TooLarge(20_000))), "{err:?}");
    assert!(gone(&c, &key));

    // Stale temporary files go; other names stay.
    let stale = dir.path().join(".tmp-crashed");
    fs::write(&stale, b"x").unwrap();
    let past = SystemTime::now() - std::time::Duration::from_secs(3600);
    File::options()
        .append(true)
        .open(&stale)
        .unwrap()
        .set_modified(past)
        .unwrap();
    let fresh = dir.path().join(".tmp-in-use");
    fs::write(&fresh, b"x").unwrap();
    store(&c, &[7], b"y");
    assert!(!stale.exists());
    assert!(fresh.exists());
}

#[test]
fn a_failed_save_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = cache(dir.path(), "m");
    let key = c.key(&[1]);
    let err = c.store(&key, &[1], |_| Err("no".into()));
    assert!(matches!(err, Err(StoreError::Save(_))));
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[cfg(unix)]
#[test]
fn a_directory_others_may_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let kv = dir.path().join("kv");
    fs::create_dir(&kv).unwrap();
    fs::set_permissions(&kv, fs::Permissions::from_mode(0o777)).unwrap();
    assert!(PrefixCache::open(&kv, "m".into(), String::new()).is_none());
    fs::set_permissions(&kv, fs::Permissions::from_mode(0o700)).unwrap();
    assert!(PrefixCache::open(&kv, "m".into(), String::new()).is_some());
    let file = dir.path().join("file");
    fs::write(&file, b"").unwrap();
    assert!(PrefixCache::open(&file, "m".into(), String::new()).is_none());
}

#[test]
fn model_identity_sees_the_head_the_tail_and_the_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    let base = vec![1u8; 12 * 1024 * 1024];
    fs::write(&path, &base).unwrap();
    let id = model_identity(&path, "facts").unwrap();
    assert_eq!(id, model_identity(&path, "facts").unwrap());
    assert_ne!(id, model_identity(&path, "other facts").unwrap());
    for offset in [10, base.len() / 2, base.len() - 10] {
        let mut changed = base.clone();
        changed[offset] ^= 1;
        fs::write(&path, &changed).unwrap();
        assert_ne!(id, model_identity(&path, "facts").unwrap(), "{offset}");
    }
    fs::write(&path, &base[..base.len() - 1]).unwrap();
    assert_ne!(id, model_identity(&path, "facts").unwrap());
}

proptest! {
    /// Whatever a sidecar file holds, a lookup never panics and never
    /// verifies an entry whose sidecar is not the one it wrote.
    #[test]
    fn arbitrary_sidecars_are_never_trusted(junk in proptest::collection::vec(any::<u8>(), 0..512)) {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), "m");
        let key = store(&c, &[1, 2], b"state");
        let written = fs::read(c.sidecar_path(&key)).unwrap();
        prop_assume!(junk != written);
        fs::write(c.sidecar_path(&key), &junk).unwrap();
        match c.lookup(&key, &[1, 2]) {
            // Only a sidecar that parses to the same fields (whitespace
            // aside) may pass.
            Lookup::Verified(_) => {
                let a: Sidecar = serde_json::from_slice(&junk).unwrap();
                let b: Sidecar = serde_json::from_slice(&written).unwrap();
                prop_assert_eq!(a, b);
            }
            Lookup::Refused(_) => prop_assert!(gone(&c, &key)),
            Lookup::Miss => prop_assert!(false, "a present entry was a miss"),
        }
    }
}
