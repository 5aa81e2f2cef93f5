//! `bulwark model fetch | list | path` through the binary. A tiny model
//! pinned in a `BULWARK_MODEL_CATALOGUE` file (no wheels, or a URL on a
//! 127.0.0.1 server) stands in for the real ones, so nothing here reaches
//! the network or needs the 1.1 GB file.

use crate::common;

use common::Bw;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

const DEFAULT_FILE: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";

fn bytes() -> Vec<u8> {
    (0..70_000u32)
        .map(|i| (i.wrapping_mul(7919) >> 3) as u8)
        .collect()
}

/// A catalogue file adding `tiny` (the sha256 of [`bytes`]), with `url`.
fn catalogue(dir: &Path, url: Option<&str>) -> PathBuf {
    let data = bytes();
    let mut text = format!(
        "[[model]]\nname = \"tiny\"\ndescription = \"a test model\"\nlicence = \"CC0-1.0\"\n\
         file = \"tiny.gguf\"\nsize = {}\nsha256 = \"{}\"\n",
        data.len(),
        hex::encode(Sha256::digest(&data))
    );
    if let Some(url) = url {
        text.push_str(&format!("url = \"{url}\"\n"));
    }
    let path = dir.join("catalogue.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn str_path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

#[test]
fn list_shows_the_builtin_models_and_touches_nothing() {
    let bw = Bw::empty();
    let out = bw.run(&["model", "list"]);
    out.ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{}", out.stdout);
    assert!(
        lines[1].starts_with("qwen2.5-coder-1.5b *"),
        "{}",
        out.stdout
    );
    assert!(lines[1].contains("1.1 GB") && lines[1].contains("not installed"));
    assert!(lines[1].ends_with(&format!("models/{DEFAULT_FILE}")));
    assert!(
        lines[2].starts_with("qwen2.5-coder-0.5b ") && lines[2].contains("491.4 MB"),
        "{}",
        out.stdout
    );
    assert!(!lines[2].contains(" *"), "{}", out.stdout);
    assert!(common::tree(bw.home()).is_empty(), "list created files");
}

#[test]
fn path_of_a_missing_model_exits_1_with_the_fetch_command() {
    let bw = Bw::empty();
    let out = bw.run(&["model", "path"]);
    out.expect_code(1);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr
            .contains("Install it with `bulwark model fetch qwen2.5-coder-1.5b`"),
        "{}",
        out.stderr
    );
    let out = bw.run(&["model", "path", "gpt-5"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("unknown model `gpt-5`"),
        "{}",
        out.stderr
    );
}

#[test]
fn fetch_from_a_right_file_installs_it_and_path_and_list_find_it() {
    let bw = Bw::empty();
    let tmp = tempfile::tempdir().unwrap();
    let cat = catalogue(tmp.path(), None);
    let from = tmp.path().join("tiny.bin");
    std::fs::write(&from, bytes()).unwrap();

    let run = |args: &[&str]| {
        bw.cmd(args)
            .env("BULWARK_MODEL_CATALOGUE", str_path(&cat))
            .run()
    };
    let out = run(&["model", "fetch", "tiny", "--from", str_path(&from)]);
    out.ok();
    let installed = bw.path("models/tiny.gguf");
    assert_eq!(out.stdout.trim(), installed.display().to_string());
    assert!(out.stderr.contains("installed tiny"), "{}", out.stderr);
    assert_eq!(std::fs::read(&installed).unwrap(), bytes());

    let out = run(&["model", "path", "tiny"]);
    out.ok();
    assert_eq!(out.stdout.trim(), installed.display().to_string());
    let out = run(&["model", "list"]);
    out.ok();
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("tiny "))
        .unwrap_or_else(|| panic!("no tiny row:\n{}", out.stdout));
    assert!(
        row.contains(" installed ") && row.contains("CC0-1.0"),
        "{row}"
    );

    // Fetching again keeps the verified file.
    let out = run(&["model", "fetch", "tiny"]);
    out.ok();
    assert!(out.stderr.contains("already installed"), "{}", out.stderr);
}

#[test]
fn fetch_from_a_wrong_file_fails_naming_every_source_and_keeps_nothing() {
    let bw = Bw::empty();
    let tmp = tempfile::tempdir().unwrap();
    let cat = catalogue(tmp.path(), None);
    let mut wrong = bytes();
    wrong[500] ^= 0xff;
    let from = tmp.path().join("wrong.bin");
    std::fs::write(&from, &wrong).unwrap();

    let out = bw
        .cmd(&["model", "fetch", "tiny", "--from", str_path(&from)])
        .env("BULWARK_MODEL_CATALOGUE", str_path(&cat))
        .run();
    out.expect_code(1);
    let err = &out.stderr;
    let want_hash = hex::encode(Sha256::digest(bytes()));
    let got_hash = hex::encode(Sha256::digest(&wrong));
    assert!(
        err.contains(&format!("1. file {}", from.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!("SHA-256 {got_hash}, expected {want_hash}")),
        "{err}"
    );
    assert!(
        err.contains("2. PyPI wheels: no PyPI wheels are pinned"),
        "{err}"
    );
    assert!(err.contains("no PyPI wheels are pinned"), "{err}");
    assert!(
        err.contains("3. the authors' URL: no download URL"),
        "{err}"
    );
    assert!(
        err.contains("bulwark model fetch tiny --from FILE"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert!(!bw.path("models/tiny.gguf").exists());
    let left: Vec<_> = std::fs::read_dir(bw.path("models"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [".fetch.lock"], "a temporary file survived");
    assert!(from.exists(), "the user's own file is never deleted");
}

#[test]
fn fetch_downloads_from_the_url_when_no_other_source_has_it() {
    let data = bytes();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/tiny.gguf", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        // One request, then the server is gone.
        let (mut stream, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            data.len()
        )
        .unwrap();
        stream.write_all(&data).unwrap();
        String::from_utf8_lossy(&head).into_owned()
    });
    let bw = Bw::empty();
    let tmp = tempfile::tempdir().unwrap();
    let cat = catalogue(tmp.path(), Some(&url));
    let out = bw
        .cmd(&["model", "fetch", "tiny"])
        .env("BULWARK_MODEL_CATALOGUE", str_path(&cat))
        .run();
    out.ok();
    assert!(
        out.stderr.contains(&format!("trying {url}")),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read(bw.path("models/tiny.gguf")).unwrap(), bytes());
    let request = server.join().unwrap();
    assert!(request.starts_with("GET /tiny.gguf HTTP/1.1"), "{request}");
    assert!(
        request
            .to_ascii_lowercase()
            .contains("user-agent: bulwark/")
    );
}

#[test]
fn a_catalogue_cannot_redefine_a_builtin_model() {
    let bw = Bw::empty();
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("evil.toml");
    std::fs::write(
        &cat,
        format!(
            "[[model]]\nname = \"qwen2.5-coder-1.5b\"\nfile = \"{DEFAULT_FILE}\"\nsize = 1\nsha256 = \"{}\"\n",
            "0".repeat(64)
        ),
    )
    .unwrap();
    let out = bw
        .cmd(&["model", "list"])
        .env("BULWARK_MODEL_CATALOGUE", str_path(&cat))
        .run();
    out.expect_code(2);
    assert!(out.stderr.contains("cannot be redefined"), "{}", out.stderr);
    assert!(
        out.stderr.contains("BULWARK_MODEL_CATALOGUE"),
        "{}",
        out.stderr
    );
}

#[test]
fn model_help_has_examples() {
    let bw = Bw::empty();
    for sub in ["fetch", "list", "path"] {
        let out = bw.run(&["model", sub, "--help"]);
        out.ok();
        assert!(out.stdout.contains("Example"), "{sub}:\n{}", out.stdout);
        assert!(
            out.stdout.contains(&format!("bulwark model {sub}")),
            "{sub}"
        );
    }
    let out = bw.run(&["model", "fetch", "--help"]);
    assert!(out.stdout.contains("SHA-256"), "{}", out.stdout);
}
