//! The command-line surface: help, version, usage errors, preflight.

use crate::common;
#[path = "first_use/mod.rs"]
mod first_use;

use common::{Bw, scripted};

const SUBCOMMANDS: &[&[&str]] = &[
    &["init"],
    &["status"],
    &["run"],
    &["chat"],
    &["agents", "list"],
    &["sessions", "list"],
    &["preflight"],
    &["policy", "explain"],
    &["audit", "tail"],
    &["net", "check"],
    &["credits", "balance"],
    &["credits", "transfer"],
    &["credits", "mint"],
    &["credits", "history"],
    &["credits", "policy"],
];

/// Every command a user types has help with at least one worked example.
#[test]
fn every_subcommand_has_help_with_an_example() {
    let bw = Bw::empty();
    for sub in SUBCOMMANDS {
        let mut args = sub.to_vec();
        args.push("--help");
        let out = bw.run(&args);
        out.ok();
        let example = out
            .stdout
            .lines()
            .position(|l| l.starts_with("Example"))
            .unwrap_or_else(|| panic!("{sub:?} --help has no Example section:\n{}", out.stdout));
        let first = out.stdout.lines().nth(example + 1).unwrap_or_default();
        assert!(
            first.trim_start().starts_with("bulwark "),
            "{sub:?}: the Example section does not start with a command:\n{}",
            out.stdout
        );
        assert!(
            out.stdout
                .contains(&format!("Usage: bulwark {}", sub.join(" "))),
            "{sub:?}:\n{}",
            out.stdout
        );
    }
    // Help touches nothing.
    assert!(common::tree(bw.home()).is_empty());
}

#[test]
fn version_prints_the_crate_version() {
    let out = Bw::empty().run(&["--version"]);
    out.ok();
    assert_eq!(
        out.stdout.trim(),
        format!("bulwark {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn usage_errors_exit_2() {
    let bw = Bw::empty();
    for args in [
        &["frobnicate"][..],
        &[],
        &["run"],
        &["run", "demo"],
        &["run", "demo", "x", "--no-such-flag"],
        &["agents"],
        &["audit", "tail", "-n", "many"],
    ] {
        let out = bw.run(args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.starts_with("error:") || out.stderr.contains("\nUsage: bulwark"),
            "{args:?}:\n{}",
            out.stderr
        );
    }
    let out = bw.run(&["frobnicate"]);
    assert!(out.stderr.contains("frobnicate"), "{}", out.stderr);
    assert!(common::tree(bw.home()).is_empty());
}

/// Agent and user names become directory names: anything path-like is
/// refused before anything is touched (no database, no session row).
#[test]
fn path_like_names_are_usage_errors() {
    let bw = Bw::init();
    let before = common::tree(bw.home());
    for args in [
        &["run", "../demo", "x"][..],
        &["run", "demo/../demo", "x"],
        &["run", "Demo", "x"],
        &["run", "demo", "x", "--user", "../local"],
        &["run", "demo", "x", "--user", "a/b"],
        &["policy", "explain", ".."],
        &["policy", "explain", "demo", "--user", "../local"],
        &["chat", "demo", "--user", "Local"],
        &["preflight", "/etc"],
    ] {
        let out = bw.run(args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("invalid"), "{args:?}: {}", out.stderr);
    }
    assert_eq!(common::tree(bw.home()), before);
}

#[test]
fn preflight_passes_for_the_demo() {
    let bw = Bw::init();
    let out = bw.run(&["preflight", "demo"]);
    out.ok();
    assert!(
        out.stdout.contains("ok    model        script:demo.jsonl"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("demo is ready."), "{}", out.stdout);
    assert!(!out.stdout.contains("FAIL"), "{}", out.stdout);
}

/// An Anthropic model with no key in the environment fails preflight and
/// names the variable to set.
#[test]
fn preflight_names_the_missing_api_key() {
    let bw = Bw::empty();
    bw.agent(
        "remote",
        "[agent]\nname = \"remote\"\nmodel = \"anthropic:x\"\n",
        None,
    );
    // The helper removes ANTHROPIC_API_KEY from the child's environment.
    let out = bw.run(&["preflight", "remote"]);
    assert_ne!(out.code, Some(0), "{}", out.stdout);
    assert!(out.code.is_some(), "preflight was killed: {}", out.stderr);
    let fail = out
        .stdout
        .lines()
        .find(|l| l.starts_with("FAIL"))
        .unwrap_or_else(|| panic!("no FAIL line:\n{}", out.stdout));
    assert!(fail.contains("ANTHROPIC_API_KEY"), "{fail}");
    assert!(!out.stdout.contains("is ready"), "{}", out.stdout);

    // `run` refuses the same setup as a configuration error, starting nothing.
    let out = bw.run(&["run", "remote", "x"]);
    out.expect_code(2);
    assert!(out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
    assert!(!bw.path("bulwark.db").exists());
}

/// `--model ollama:x` with nothing listening on 127.0.0.1:11434: the
/// endpoint check fails (connection refused comes back at once).
#[test]
fn preflight_reports_an_unreachable_endpoint() {
    let bw = Bw::empty();
    bw.agent(
        "local",
        &scripted("local", ""),
        Some("{\"text\": \"hi\"}\n"),
    );
    let out = bw.run(&["preflight", "local", "--model", "ollama:x"]);
    out.expect_code(1);
    let fail = out
        .stdout
        .lines()
        .find(|l| l.starts_with("FAIL  endpoint"))
        .unwrap_or_else(|| panic!("no FAIL endpoint line:\n{}", out.stdout));
    assert!(fail.contains("127.0.0.1:11434"), "{fail}");
    assert!(
        out.stdout
            .contains("ok    model        ollama:x (no key needed)"),
        "{}",
        out.stdout
    );
}

/// A credential grant whose key is not set fails preflight by name.
#[test]
fn preflight_names_a_missing_credential() {
    let bw = Bw::empty();
    bw.agent(
        "gh",
        &scripted(
            "gh",
            "[tools]\nallow = [\"web\"]\n[credentials.grants.github]\nkeys = [\"BULWARK_TEST_UNSET_TOKEN\"]\ntools = [\"web\"]\nhosts = [\"api.github.com\"]\n",
        ),
        Some("{\"text\": \"hi\"}\n"),
    );
    let out = bw.run(&["preflight", "gh"]);
    out.expect_code(1);
    assert!(
        out.stdout
            .contains("FAIL  credentials  grant github: BULWARK_TEST_UNSET_TOKEN is not set"),
        "{}",
        out.stdout
    );
}

#[test]
fn agents_list_shows_the_examples() {
    let bw = Bw::init();
    let out = bw.run(&["agents", "list"]);
    out.ok();
    let names: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["assistant", "demo", "offline"]);
    assert!(out.stdout.contains("script:demo.jsonl"), "{}", out.stdout);
    assert!(
        out.stdout.contains("local:qwen2.5-coder-1.5b"),
        "{}",
        out.stdout
    );
}

/// `init` twice keeps the user's edits; `--force` restores the examples.
#[test]
fn init_keeps_edits_unless_forced() {
    let bw = Bw::init();
    let manifest = bw.path("agents/demo/agent.toml");
    let original = std::fs::read_to_string(&manifest).expect("demo manifest");
    std::fs::write(&manifest, "# edited\n").expect("edit");
    let out = bw.run(&["init"]);
    out.ok();
    assert!(
        out.stdout.contains("kept  agents/demo/agent.toml"),
        "{}",
        out.stdout
    );
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), "# edited\n");
    bw.run(&["init", "--force"]).ok();
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), original);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(bw.home()).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the home is readable by others: {mode:o}");
    }
}
