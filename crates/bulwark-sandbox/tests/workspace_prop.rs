//! Property: whatever relative path an agent invents from hostile pieces,
//! reads never return outside content and writes never modify the outside.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::Path;

use bulwark_sandbox::Workspace;
use proptest::prelude::*;

const OUTSIDE: &[u8] = b"OUTSIDE-CONTENT";

/// Every file and symlink under `dir` (not following symlinks), with content.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let key = p.display().to_string();
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => {
                    out.insert(key, b"<dir>".to_vec());
                    stack.push(p);
                }
                Ok(m) if m.file_type().is_symlink() => {
                    let t = std::fs::read_link(&p).unwrap_or_default();
                    out.insert(key, t.display().to_string().into_bytes());
                }
                Ok(_) => {
                    out.insert(key, std::fs::read(&p).unwrap_or_default());
                }
                Err(_) => {}
            }
        }
    }
    out
}

fn component() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["..", ".", "", "a", "link", "rlink", "new"])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn never_escapes(parts in prop::collection::vec(component(), 1..6), lead_slash in any::<bool>()) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(root.join("a")).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(root.join("a/a"), b"INSIDE").expect("write");
        for name in ["a", "new", "sentinel"] {
            std::fs::write(outside.join(name), OUTSIDE).expect("write");
        }
        symlink(&outside, root.join("link")).expect("symlink");
        symlink("../outside", root.join("rlink")).expect("symlink");
        let before = snapshot(&outside);

        let mut path = parts.join("/");
        if lead_slash {
            path.insert(0, '/');
        }
        let ws = Workspace::open(&root).expect("open");
        if let Ok(data) = ws.read(&path, 1 << 20) {
            prop_assert_ne!(data, OUTSIDE.to_vec(), "read escaped via {:?}", path);
        }
        let _ = ws.write(&path, b"PROBE", 1 << 20);
        let _ = ws.edit(&path, "OUTSIDE", "PWNED", true);
        if let Ok(hits) = ws.search(&path, "OUTSIDE", 10) {
            prop_assert!(hits.is_empty(), "search escaped via {:?}: {:?}", path, hits);
        }
        prop_assert_eq!(&before, &snapshot(&outside), "outside modified via {:?}", path);
    }
}

fn inner_component() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["d", "e", "f.txt", "up", "side", "loop", "chain", "."])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The path a gate is shown is the path the kernel really reaches: for
    /// any path through a tree of relative symlinks that stay inside (up a
    /// level, sideways, chained, looping), a successful read saw exactly
    /// what `canonicalize` says the path is, relative to the root.
    #[test]
    fn the_gate_sees_where_the_kernel_goes(parts in prop::collection::vec(inner_component(), 1..6)) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(root.join("d/e")).expect("mkdir");
        std::fs::write(root.join("d/f.txt"), b"F1").expect("write");
        std::fs::write(root.join("d/e/f.txt"), b"F2").expect("write");
        symlink("..", root.join("d/up")).expect("symlink");
        symlink("../d/e", root.join("d/side")).expect("symlink");
        symlink("side/../f.txt", root.join("d/chain")).expect("symlink");
        symlink("loop", root.join("d/loop")).expect("symlink");
        symlink("d", root.join("up")).expect("symlink");
        let ws = Workspace::open(&root).expect("open");
        let path = format!("d/{}", parts.join("/"));
        let seen = std::sync::Mutex::new(Vec::<String>::new());
        let gate = |p: &str| {
            seen.lock().expect("lock").push(p.to_string());
            true
        };
        if ws.read_gated(&path, 1 << 20, &gate).is_ok() {
            // `.` components are dropped lexically before any lookup (as
            // `a/./b` is `a/b`), so the oracle drops them too.
            let lexical: Vec<&str> = parts.iter().copied().filter(|p| *p != ".").collect();
            let real = std::fs::canonicalize(root.join("d").join(lexical.join("/")))
                .expect("canonicalize");
            let canonical_root = std::fs::canonicalize(&root).expect("root");
            let expected = real
                .strip_prefix(&canonical_root)
                .expect("inside")
                .to_string_lossy()
                .into_owned();
            let seen = seen.lock().expect("lock");
            prop_assert_eq!(seen.as_slice(), &[expected], "path {:?}", path);
        }
    }
}
