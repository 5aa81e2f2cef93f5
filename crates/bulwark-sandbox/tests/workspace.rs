//! Attacks on the workspace boundary, and the work it must still allow.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use bulwark_sandbox::{EntryKind, FsError, Workspace};
use tempfile::TempDir;

/// A workspace at `<tmp>/ws` and an outside directory `<tmp>/outside`
/// holding `secret` (content "SECRET").
struct Fixture {
    _tmp: TempDir,
    ws: Workspace,
    root: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).expect("mkdir outside");
    std::fs::write(outside.join("secret"), b"SECRET").expect("write secret");
    let ws = Workspace::open(&root).expect("open workspace");
    Fixture {
        _tmp: tmp,
        ws,
        root,
        outside,
    }
}

fn is_escape<T: std::fmt::Debug>(r: &Result<T, FsError>) -> bool {
    matches!(r, Err(FsError::Escape { .. }))
}

#[test]
fn read_parent_traversal_refused() {
    let f = fixture();
    for p in ["../outside/secret", "a/../../outside/secret", ".."] {
        let r = f.ws.read(p, 1024);
        assert!(is_escape(&r), "{p}: {r:?}");
    }
}

#[test]
fn read_absolute_refused() {
    let f = fixture();
    let r = f.ws.read("/etc/passwd", 1 << 20);
    assert!(is_escape(&r), "{r:?}");
    let msg = r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        msg.contains("/etc/passwd") && msg.contains("relative"),
        "{msg}"
    );
}

#[test]
fn control_chars_and_backslashes_refused() {
    let f = fixture();
    for p in ["a\0b", "a\nb", "..\\outside\\secret", "a\u{1b}[2J"] {
        assert!(is_escape(&f.ws.read(p, 10)), "{p:?}");
        assert!(is_escape(&f.ws.write(p, b"x", 10)), "{p:?}");
    }
}

#[test]
fn symlink_to_outside_file_refused() {
    let f = fixture();
    symlink("/etc/passwd", f.root.join("pw")).expect("symlink");
    symlink("../outside/secret", f.root.join("rel")).expect("symlink");
    symlink(f.outside.join("secret"), f.root.join("abs")).expect("symlink");
    for p in ["pw", "rel", "abs"] {
        let r = f.ws.read(p, 1 << 20);
        assert!(is_escape(&r), "{p}: {r:?}");
    }
}

#[test]
fn symlinked_root_dir_refused() {
    let f = fixture();
    symlink("/", f.root.join("link")).expect("symlink");
    let r = f.ws.read("link/etc/passwd", 1 << 20);
    assert!(is_escape(&r), "{r:?}");
    assert!(is_escape(&f.ws.list("link")));
    assert!(is_escape(&f.ws.list("link/etc")));
}

#[test]
fn proc_self_root_refused() {
    let f = fixture();
    symlink("/proc/self/root", f.root.join("p")).expect("symlink");
    symlink("/proc/self/cwd", f.root.join("c")).expect("symlink");
    assert!(is_escape(&f.ws.read("p/etc/passwd", 1 << 20)));
    assert!(is_escape(&f.ws.read("c/Cargo.toml", 1 << 20)));
    assert!(f.ws.write("p/tmp/bulwark-pwned", b"x", 10).is_err());
}

#[test]
fn write_through_dangling_symlink_refused() {
    let f = fixture();
    let target = f.outside.join("pwned");
    symlink(&target, f.root.join("out")).expect("symlink");
    symlink("../outside/pwned2", f.root.join("relout")).expect("symlink");
    let r = f.ws.write("out", b"owned", 100);
    assert!(is_escape(&r), "{r:?}");
    let r = f.ws.write("relout", b"owned", 100);
    assert!(is_escape(&r), "{r:?}");
    assert!(!target.exists(), "outside file was created");
    assert!(
        !f.outside.join("pwned2").exists(),
        "outside file was created"
    );
    // Edit goes through the same write path.
    assert!(f.ws.edit("out", "a", "b", false).is_err());
}

#[test]
fn write_through_symlink_to_existing_file_refused() {
    let f = fixture();
    symlink(f.outside.join("secret"), f.root.join("s")).expect("symlink");
    std::fs::write(f.root.join("inside.txt"), b"in").expect("write");
    symlink("inside.txt", f.root.join("alias")).expect("symlink");
    assert!(is_escape(&f.ws.write("s", b"x", 10)));
    assert!(is_escape(&f.ws.write("alias", b"x", 10)));
    assert_eq!(
        std::fs::read(f.outside.join("secret")).ok(),
        Some(b"SECRET".to_vec())
    );
    assert_eq!(
        std::fs::read(f.root.join("inside.txt")).ok(),
        Some(b"in".to_vec())
    );
}

#[test]
fn write_through_symlinked_parent_refused() {
    let f = fixture();
    symlink(&f.outside, f.root.join("sub")).expect("symlink");
    let r = f.ws.write("sub/new.txt", b"x", 10);
    assert!(is_escape(&r), "{r:?}");
    assert!(is_escape(&f.ws.write("sub/deeper/new.txt", b"x", 10)));
    assert!(!f.outside.join("new.txt").exists());
    assert!(!f.outside.join("deeper").exists());
}

#[test]
fn hard_linked_file_refused() {
    let f = fixture();
    std::fs::hard_link(f.outside.join("secret"), f.root.join("hl")).expect("hard link");
    let r = f.ws.write("hl", b"overwritten", 100);
    assert!(matches!(r, Err(FsError::HardLinked { .. })), "{r:?}");
    let r = f.ws.read("hl", 100);
    assert!(matches!(r, Err(FsError::HardLinked { .. })), "{r:?}");
    assert_eq!(
        std::fs::read(f.outside.join("secret")).ok(),
        Some(b"SECRET".to_vec())
    );
}

/// Run `op` on another thread and fail (instead of hanging) after 10 s.
fn within_10s<T: Send + 'static>(op: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(op());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("operation hung on a special file")
}

#[test]
fn fifo_refused_without_hanging() {
    let f = fixture();
    let fifo = f.root.join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        0,
    )
    .expect("mkfifo");
    let root = f.root.clone();
    let r = within_10s(move || {
        let ws = Workspace::open(&root).expect("open");
        (ws.read("fifo", 100), ws.write("fifo", b"x", 100))
    });
    assert!(matches!(r.0, Err(FsError::SpecialFile { .. })), "{:?}", r.0);
    assert!(matches!(r.1, Err(FsError::SpecialFile { .. })), "{:?}", r.1);
    // Search skips it rather than blocking.
    let root = f.root.clone();
    let hits = within_10s(move || Workspace::open(&root).expect("open").search("", "x", 10));
    assert!(hits.map(|h| h.is_empty()).unwrap_or(false));
}

#[test]
fn socket_refused() {
    let f = fixture();
    let _l = std::os::unix::net::UnixListener::bind(f.root.join("sock")).expect("bind");
    assert!(matches!(
        f.ws.read("sock", 100),
        Err(FsError::SpecialFile { .. })
    ));
    assert!(matches!(
        f.ws.write("sock", b"x", 100),
        Err(FsError::SpecialFile { .. })
    ));
}

#[test]
fn size_caps() {
    let f = fixture();
    std::fs::write(f.root.join("hundred"), [b'x'; 100]).expect("write");
    let r = f.ws.read("hundred", 99);
    assert!(
        matches!(r, Err(FsError::TooLarge { limit: 99, .. })),
        "{r:?}"
    );
    assert_eq!(f.ws.read("hundred", 100).map(|v| v.len()).ok(), Some(100));
    let r = f.ws.write("big", &[0u8; 101], 100);
    assert!(
        matches!(r, Err(FsError::TooLarge { limit: 100, .. })),
        "{r:?}"
    );
    assert!(!f.root.join("big").exists());
    assert!(f.ws.write("ok", &[0u8; 100], 100).is_ok());
}

#[test]
fn nested_create_list_and_read_back() {
    let f = fixture();
    f.ws.write("a/b/c.txt", b"hello", 100)
        .expect("write nested");
    f.ws.write("./a//top.txt", b"top", 100)
        .expect("write normalized");
    assert_eq!(f.ws.read("a/b/c.txt", 100).ok(), Some(b"hello".to_vec()));
    f.ws.write("a/b/c.txt", b"again", 100).expect("overwrite");
    assert_eq!(f.ws.read("a/b/c.txt", 100).ok(), Some(b"again".to_vec()));

    let root = f.ws.list("").expect("list root");
    assert_eq!(root.len(), 1);
    assert_eq!((root[0].name.as_str(), root[0].kind), ("a", EntryKind::Dir));
    assert_eq!(f.ws.list(".").ok(), Some(root));

    symlink("b/c.txt", f.root.join("a/zlink")).expect("symlink");
    let a = f.ws.list("a").expect("list a");
    let names: Vec<_> = a
        .iter()
        .map(|e| (e.name.as_str(), e.kind, e.size))
        .collect();
    assert_eq!(
        names,
        vec![
            ("b", EntryKind::Dir, a[0].size),
            ("top.txt", EntryKind::File, 3),
            ("zlink", EntryKind::Symlink, 7)
        ]
    );
    // A symlink that stays inside is fine to read through.
    assert_eq!(f.ws.read("a/zlink", 100).ok(), Some(b"again".to_vec()));
    // No temp files are left behind.
    assert!(
        !f.ws
            .list("a/b")
            .expect("list")
            .iter()
            .any(|e| e.name.starts_with('.'))
    );
}

#[test]
fn wrong_kinds_and_missing() {
    let f = fixture();
    f.ws.write("d/file", b"x", 10).expect("write");
    assert!(matches!(f.ws.read("d", 10), Err(FsError::NotAFile { .. })));
    assert!(matches!(f.ws.read("", 10), Err(FsError::NotAFile { .. })));
    assert!(matches!(
        f.ws.write("d", b"x", 10),
        Err(FsError::NotAFile { .. })
    ));
    assert!(matches!(
        f.ws.list("d/file"),
        Err(FsError::NotADirectory { .. })
    ));
    assert!(matches!(
        f.ws.write("d/file/x", b"x", 10),
        Err(FsError::NotADirectory { .. })
    ));
    assert!(matches!(
        f.ws.read("nope", 10),
        Err(FsError::NotFound { .. })
    ));
    assert!(matches!(f.ws.list("nope"), Err(FsError::NotFound { .. })));
}

#[test]
fn edit_exact_once_semantics() {
    let f = fixture();
    f.ws.write("e.txt", b"one two two three", 100)
        .expect("write");
    assert_eq!(f.ws.edit("e.txt", "one", "1", false).ok(), Some(1));
    let r = f.ws.edit("e.txt", "two", "2", false);
    assert!(
        matches!(r, Err(FsError::AmbiguousMatch { count: 2, .. })),
        "{r:?}"
    );
    let r = f.ws.edit("e.txt", "four", "4", false);
    assert!(matches!(r, Err(FsError::NoMatch { .. })), "{r:?}");
    assert!(f.ws.edit("e.txt", "", "x", true).is_err());
    assert_eq!(
        f.ws.read("e.txt", 100).ok(),
        Some(b"1 two two three".to_vec())
    );
    assert_eq!(f.ws.edit("e.txt", "two", "2", true).ok(), Some(2));
    assert_eq!(f.ws.read("e.txt", 100).ok(), Some(b"1 2 2 three".to_vec()));
}

#[test]
fn search_finds_and_respects_limits() {
    let f = fixture();
    f.ws.write("src/a.rs", b"fn main() {}\nlet needle = 1;\n", 1000)
        .expect("write");
    f.ws.write("src/b.rs", b"needle\nnothing\nneedle again\n", 1000)
        .expect("write");
    f.ws.write("bin.dat", b"needle\0binary", 1000)
        .expect("write");
    let long = format!("needle{}\n", "x".repeat(1000));
    f.ws.write("long.txt", long.as_bytes(), 10_000)
        .expect("write");
    let huge = format!("needle{}", " ".repeat(1024 * 1024));
    f.ws.write("huge.txt", huge.as_bytes(), 2 << 20)
        .expect("write");
    std::fs::write(f.outside.join("leak.txt"), b"needle outside").expect("write");
    symlink(&f.outside, f.root.join("out")).expect("symlink");
    symlink(f.outside.join("leak.txt"), f.root.join("leak")).expect("symlink");

    let hits = f.ws.search("", "needle", 100).expect("search");
    let got: Vec<_> = hits.iter().map(|h| (h.path.as_str(), h.line)).collect();
    assert_eq!(
        got,
        vec![
            ("long.txt", 1),
            ("src/a.rs", 2),
            ("src/b.rs", 1),
            ("src/b.rs", 3)
        ]
    );
    assert_eq!(hits[0].text.chars().count(), 300);
    assert_eq!(hits[1].text, "let needle = 1;");

    assert_eq!(f.ws.search("", "needle", 2).map(|h| h.len()).ok(), Some(2));
    assert_eq!(
        f.ws.search("src/b.rs", "needle", 10).map(|h| h.len()).ok(),
        Some(2)
    );
    assert_eq!(
        f.ws.search("src", "main", 10).map(|h| h.len()).ok(),
        Some(1)
    );
    // Case is ignored either way ("Rufus" for "rufus", and back).
    assert_eq!(
        f.ws.search("src", "MAIN", 10).map(|h| h.len()).ok(),
        Some(1)
    );
    assert_eq!(
        f.ws.search("src", "Needle Again", 10).map(|h| h.len()).ok(),
        Some(1)
    );
    assert!(is_escape(&f.ws.search("..", "needle", 10)));
    assert!(matches!(
        f.ws.search("missing", "x", 10),
        Err(FsError::NotFound { .. })
    ));
}

#[test]
fn workspace_root_is_reported() {
    let f = fixture();
    assert_eq!(f.ws.root(), Path::new(&f.root));
}
