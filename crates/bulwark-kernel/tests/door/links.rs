//! Path grants are checked where a path really leads: symlinks inside the
//! workspace cannot carry a read, write, listing or search past the glob
//! that granted the path as written (issue 16, items 1 and 2).

use super::call;
use crate::common::*;
use bulwark_audit::MemorySink;
use bulwark_kernel::{DispatchResult, Session, ToolRegistry};
use serde_json::json;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;

fn manifest(caps: &[(&str, &str)]) -> String {
    let mut m = String::from("[agent]\nname = \"tester\"\n[tools]\nallow = [\"files\"]\n");
    for (kind, path) in caps {
        m.push_str(&format!(
            "[[capabilities]]\nkind = \"{kind}\"\npath = \"{path}\"\n"
        ));
    }
    m
}

struct Fixture {
    _dir: tempfile::TempDir,
    door: bulwark_kernel::Door,
    session: Session,
}

impl Fixture {
    fn new(caps: &[(&str, &str)]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let registry = ToolRegistry::builtin();
        let sink = Arc::new(MemorySink::new());
        let door = door(registry.clone(), sink, deny_all());
        let session = session(dir.path(), policy(&registry, &manifest(caps)));
        Fixture {
            _dir: dir,
            door,
            session,
        }
    }
    fn root(&self) -> &Path {
        self.session.resources().workspace.root()
    }
    fn put(&self, rel: &str, text: &str) {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    fn link(&self, rel: &str, target: &str) {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p).unwrap();
    }
    async fn call(&mut self, tool: &str, input: serde_json::Value) -> DispatchResult {
        call(&self.door, &mut self.session, tool, input).await
    }
}

fn refused(r: &DispatchResult, secret: &str, what: &str) {
    assert!(r.is_error, "{what} was not refused: {}", r.content);
    assert!(
        !r.content.contains(secret),
        "{what} leaked the secret: {}",
        r.content
    );
}

#[tokio::test]
async fn a_file_symlink_cannot_read_past_the_glob() {
    let mut f = Fixture::new(&[("file_read", "public/**")]);
    f.put("secret.txt", "SECRET-ONE");
    f.put("private/key.txt", "SECRET-TWO");
    f.link("public/link", "../secret.txt");
    f.link("public/dirlink", "../private");
    f.link("public/deep/up", "../../private/key.txt");
    f.link("public/chain1", "chain2");
    f.link("public/chain2", "../secret.txt");

    let r = f.call("file_read", json!({"path": "public/link"})).await;
    refused(&r, "SECRET-ONE", "read through a file symlink");
    assert!(
        r.content.contains("secret.txt"),
        "names where it leads: {}",
        r.content
    );
    let r = f
        .call("file_read", json!({"path": "public/dirlink/key.txt"}))
        .await;
    refused(&r, "SECRET-TWO", "read through a directory symlink");
    let r = f.call("file_read", json!({"path": "public/deep/up"})).await;
    refused(
        &r,
        "SECRET-TWO",
        "read through a two-level climbing symlink",
    );
    let r = f.call("file_read", json!({"path": "public/chain1"})).await;
    refused(&r, "SECRET-ONE", "read through a chain of symlinks");
    let r = f.call("file_list", json!({"path": "public/dirlink"})).await;
    refused(&r, "key.txt", "list through a directory symlink");
    let r = f
        .call(
            "file_search",
            json!({"query": "SECRET", "path": "public/dirlink"}),
        )
        .await;
    refused(&r, "SECRET-TWO", "search through a directory symlink");
    let r = f
        .call(
            "file_search",
            json!({"query": "SECRET", "path": "public/link"}),
        )
        .await;
    refused(&r, "SECRET-ONE", "search of a file symlink");
    let r = f
        .call("file_search", json!({"query": "SECRET", "path": "public"}))
        .await;
    assert!(
        !r.content.contains("SECRET-"),
        "search walked a link: {}",
        r.content
    );
}

#[tokio::test]
async fn a_directory_symlink_cannot_write_past_the_glob() {
    let mut f = Fixture::new(&[("file_write", "out/**"), ("file_read", "out/**")]);
    f.put("config/settings.toml", "safe = true\n");
    f.link("out/cfg", "../config");
    f.link("out/sneaky", "../config/settings.toml");

    let r = f
        .call(
            "file_write",
            json!({"path": "out/cfg/settings.toml", "content": "safe = false"}),
        )
        .await;
    assert!(
        r.is_error,
        "write through a directory symlink: {}",
        r.content
    );
    let r = f
        .call(
            "file_write",
            json!({"path": "out/cfg/new/x.toml", "content": "x"}),
        )
        .await;
    assert!(
        r.is_error,
        "mkdir through a directory symlink: {}",
        r.content
    );
    assert!(
        !f.root().join("config/new").exists(),
        "a directory was created outside the grant"
    );
    let r = f
        .call(
            "file_edit",
            json!({"path": "out/cfg/settings.toml", "old": "true", "new": "false"}),
        )
        .await;
    assert!(
        r.is_error,
        "edit through a directory symlink: {}",
        r.content
    );
    let r = f
        .call(
            "file_write",
            json!({"path": "out/sneaky", "content": "safe = false"}),
        )
        .await;
    assert!(r.is_error, "write onto a file symlink: {}", r.content);
    assert_eq!(
        std::fs::read_to_string(f.root().join("config/settings.toml")).unwrap(),
        "safe = true\n"
    );
}

#[tokio::test]
async fn symlinks_that_stay_inside_the_grant_still_work() {
    let mut f = Fixture::new(&[("file_read", "public/**"), ("file_write", "out/**")]);
    f.put("public/v2/notes.txt", "current notes");
    f.link("public/latest", "v2");
    f.link("public/current.txt", "v2/notes.txt");
    f.link("public/v2/self", "../v2/notes.txt");
    std::fs::create_dir_all(f.root().join("out/real")).unwrap();
    f.link("out/alias", "real");

    for path in [
        "public/latest/notes.txt",
        "public/current.txt",
        "public/v2/self",
    ] {
        let r = f.call("file_read", json!({"path": path})).await;
        assert!(!r.is_error, "{path}: {}", r.content);
        assert!(r.content.contains("current notes"), "{path}: {}", r.content);
    }
    let r = f.call("file_list", json!({"path": "public/latest"})).await;
    assert!(r.content.contains("notes.txt"), "{}", r.content);
    let r = f
        .call(
            "file_search",
            json!({"query": "current", "path": "public/latest"}),
        )
        .await;
    assert!(r.content.contains("public/v2/notes.txt:1"), "{}", r.content);
    let r = f
        .call(
            "file_write",
            json!({"path": "out/alias/new/deep.txt", "content": "ok"}),
        )
        .await;
    assert!(!r.is_error, "{}", r.content);
    assert_eq!(
        std::fs::read_to_string(f.root().join("out/real/new/deep.txt")).unwrap(),
        "ok"
    );
}

#[tokio::test]
async fn search_and_list_return_only_what_the_glob_covers() {
    let mut f = Fixture::new(&[("file_read", "docs/*")]);
    f.put("docs/readme.md", "PUBLIC line");
    f.put("docs/internal/plan.md", "HIDDEN line");
    f.put("docs/internal/deeper/more.md", "HIDDEN deeper");

    let r = f
        .call(
            "file_search",
            json!({"query": "line", "path": "docs/internal"}),
        )
        .await;
    assert!(
        !r.content.contains("HIDDEN"),
        "search below the glob: {}",
        r.content
    );
    assert!(
        r.content.contains("not searched"),
        "says files were left out: {}",
        r.content
    );
    let r = f.call("file_list", json!({"path": "docs/internal"})).await;
    assert!(
        !r.content.contains("plan.md"),
        "listing below the glob: {}",
        r.content
    );
    assert!(
        !r.content.contains("deeper"),
        "listing below the glob: {}",
        r.content
    );
    assert!(r.content.contains("not shown"), "{}", r.content);
    // What the glob does cover is still found.
    let r = f
        .call(
            "file_search",
            json!({"query": "PUBLIC", "path": "docs/readme.md"}),
        )
        .await;
    assert!(r.content.contains("docs/readme.md:1"), "{}", r.content);

    // A deeper grant covers the same files.
    let mut g = Fixture::new(&[("file_read", "docs/**")]);
    g.put("docs/internal/plan.md", "HIDDEN line");
    let r = g
        .call("file_search", json!({"query": "line", "path": "docs"}))
        .await;
    assert!(
        r.content.contains("docs/internal/plan.md:1"),
        "{}",
        r.content
    );
    let r = g.call("file_list", json!({"path": "docs/internal"})).await;
    assert!(r.content.contains("plan.md"), "{}", r.content);

    // `**/*.md`: directories are walked, only matching files are read.
    let mut h = Fixture::new(&[("file_read", "a"), ("file_read", "**/*.md")]);
    h.put("a/b/c.md", "MD line");
    h.put("a/b/c.txt", "TXT line");
    let r = h
        .call("file_search", json!({"query": "line", "path": "a"}))
        .await;
    assert!(r.content.contains("a/b/c.md:1"), "{}", r.content);
    assert!(!r.content.contains("TXT"), "{}", r.content);

    // Several texts at once: each found where the glob covers, a line
    // with two of them shown once, and nothing past the glob for any.
    let r = f
        .call(
            "file_search",
            json!({"query": "public", "any_of": ["hidden", "line"], "path": "docs/internal"}),
        )
        .await;
    assert!(
        !r.content.contains("HIDDEN") && r.content.contains("not searched"),
        "{}",
        r.content
    );
    g.put("docs/readme.md", "PUBLIC line");
    let r = g
        .call(
            "file_search",
            json!({"query": "public", "any_of": ["line"], "path": "docs"}),
        )
        .await;
    assert_eq!(
        r.content.matches("docs/readme.md:1").count(),
        1,
        "{}",
        r.content
    );
    assert!(
        r.content.contains("docs/internal/plan.md:1"),
        "{}",
        r.content
    );
    let r = g
        .call(
            "file_search",
            json!({"query": "nothing-here", "any_of": ["hidden"], "path": "docs"}),
        )
        .await;
    assert!(
        r.content.contains("docs/internal/plan.md:1"),
        "{}",
        r.content
    );
    // Seven further texts are taken; more, or an empty one, are refused
    // and nothing is read.
    let r = g
        .call(
            "file_search",
            json!({"query": "a", "any_of": ["b", "c", "d", "e", "f", "g", "hidden"], "path": "docs"}),
        )
        .await;
    assert!(
        r.content.contains("docs/internal/plan.md:1"),
        "{}",
        r.content
    );
    for bad in [
        json!({"query": "a", "any_of": ["b", "c", "d", "e", "f", "g", "h", "i"]}),
        json!({"query": "a", "any_of": [""]}),
    ] {
        let r = g.call("file_search", bad.clone()).await;
        assert!(
            r.content.contains("invalid arguments") && !r.content.contains("HIDDEN"),
            "{bad}: {}",
            r.content
        );
    }
}

#[tokio::test]
async fn writes_must_name_dotfiles_and_repository_configuration() {
    let mut f = Fixture::new(&[("file_write", "**"), ("file_read", "**")]);
    std::fs::create_dir_all(f.root().join(".git/hooks")).unwrap();
    f.put(".git/config", "[core]\n");
    f.link("innocent", ".git");
    for path in [
        ".gitconfig",
        ".bashrc",
        ".profile",
        ".config/git/config",
        ".git/config",
        ".git/hooks/pre-commit",
        "sub/.cargo/config.toml",
        "sub/.git/config",
        "innocent/config",
        "innocent/hooks/post-checkout",
    ] {
        let r = f
            .call(
                "file_write",
                json!({"path": path, "content": "[core]\nfsmonitor = \"x\"\n"}),
            )
            .await;
        assert!(r.is_error, "{path} was written under `**`: {}", r.content);
    }
    assert_eq!(
        std::fs::read_to_string(f.root().join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!f.root().join(".gitconfig").exists());
    assert!(!f.root().join(".git/hooks/pre-commit").exists());
    // Ordinary files, and dotfiles still readable.
    let r = f
        .call("file_write", json!({"path": "src/config", "content": "x"}))
        .await;
    assert!(!r.is_error, "{}", r.content);
    let r = f.call("file_read", json!({"path": ".git/config"})).await;
    assert!(!r.is_error, "{}", r.content);

    // Granted by name, they can be written.
    let mut g = Fixture::new(&[
        ("file_write", ".git/hooks/*"),
        ("file_write", ".gitignore"),
        ("file_write", ".github/**"),
    ]);
    for path in [
        ".git/hooks/pre-commit",
        ".gitignore",
        ".github/workflows/ci.yml",
    ] {
        let r = g
            .call("file_write", json!({"path": path, "content": "x"}))
            .await;
        assert!(!r.is_error, "{path}: {}", r.content);
    }
}
