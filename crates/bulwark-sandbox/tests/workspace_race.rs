//! The symlink swap race: while one thread flips `ws/dir` between a real
//! directory and a symlink to a directory outside the workspace, another
//! reads and writes through it thousands of times. A check-then-use
//! implementation loses this race; the cap-std handles resolve every
//! component beneath the root at use time, so nothing outside is ever read
//! or written.

use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bulwark_sandbox::Workspace;

const ITERATIONS: usize = 5000;

#[test]
fn swapping_a_directory_for_a_symlink_never_leaks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("f"), b"SECRET").expect("secret");
    let ws = Workspace::open(&root).expect("workspace");

    let stop = Arc::new(AtomicBool::new(false));
    let flips = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, flips, root, outside) =
            (stop.clone(), flips.clone(), root.clone(), outside.clone());
        std::thread::spawn(move || {
            let dir = root.join("dir");
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&dir);
                if std::fs::create_dir(&dir).is_ok() {
                    let _ = std::fs::write(dir.join("f"), b"inside");
                }
                let _ = std::fs::remove_file(dir.join("f"));
                let _ = std::fs::remove_file(dir.join("w"));
                let _ = std::fs::remove_dir(&dir);
                let _ = symlink(&outside, &dir);
                flips.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let mut inside_reads = 0;
    for i in 0..ITERATIONS {
        if let Ok(bytes) = ws.read("dir/f", 1024) {
            assert_ne!(bytes, b"SECRET", "read through the swapped symlink at {i}");
            inside_reads += 1;
        }
        let _ = ws.write("dir/w", b"x", 1024);
        assert!(
            !outside.join("w").exists(),
            "wrote through the swapped symlink at {i}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("swapper");
    // The race really ran: the link flipped many times and the reader saw
    // the real directory at least sometimes.
    assert!(
        flips.load(Ordering::Relaxed) > 100,
        "only {} flips",
        flips.load(Ordering::Relaxed)
    );
    eprintln!(
        "{ITERATIONS} read+write attempts, {} flips, {inside_reads} reads of the real file",
        flips.load(Ordering::Relaxed)
    );
    assert_eq!(std::fs::read(outside.join("f")).expect("secret"), b"SECRET");
}

/// The same race *inside* the workspace, against a grant: `public/dir`
/// flips between a real directory and a symlink to `../private`. A gate
/// that saw the path as written would pass `public/dir/f` while the read
/// lands in `private/f`; the gate sees the path really reached, and the
/// open uses the handle that was checked, so `private` is never read and
/// never written.
#[test]
fn swapping_inside_the_workspace_never_passes_the_gate() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("ws");
    std::fs::create_dir_all(root.join("private")).expect("private");
    std::fs::create_dir_all(root.join("public")).expect("public");
    std::fs::write(root.join("private/f"), b"SECRET").expect("secret");
    let ws = Workspace::open(&root).expect("workspace");
    let gate = |p: &str| p == "public" || p.starts_with("public/");

    let stop = Arc::new(AtomicBool::new(false));
    let flips = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, flips, root) = (stop.clone(), flips.clone(), root.clone());
        std::thread::spawn(move || {
            let dir = root.join("public/dir");
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&dir);
                if std::fs::create_dir(&dir).is_ok() {
                    let _ = std::fs::write(dir.join("f"), b"inside");
                }
                let _ = std::fs::remove_file(dir.join("f"));
                let _ = std::fs::remove_file(dir.join("w"));
                let _ = std::fs::remove_dir(&dir);
                let _ = symlink("../private", &dir);
                flips.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut inside_reads = 0;
    for i in 0..ITERATIONS {
        if let Ok(bytes) = ws.read_gated("public/dir/f", 1024, &gate) {
            assert_ne!(bytes, b"SECRET", "read past the gate at {i}");
            inside_reads += 1;
        }
        let _ = ws.write_gated("public/dir/w", b"x", 1024, &gate);
        assert!(
            !root.join("private/w").exists(),
            "wrote past the gate at {i}"
        );
        if let Ok((hits, _)) = ws.search_gated("public/dir", "SECRET", 10, &gate) {
            assert!(hits.is_empty(), "searched past the gate at {i}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("swapper");
    assert!(flips.load(Ordering::Relaxed) > 100, "the race did not run");
    eprintln!(
        "{ITERATIONS} gated attempts, {} flips, {inside_reads} reads of the real file",
        flips.load(Ordering::Relaxed)
    );
}
