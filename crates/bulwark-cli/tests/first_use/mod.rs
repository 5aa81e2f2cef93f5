//! What a new user meets first: the scripts' decision of which system
//! packages to install (scripts/lib/system-packages.sh, driven with stub
//! `dpkg-query`, `apt-get` and `id` commands), and `bulwark status` on a
//! healthy home and on each problem it reports. A module of the `surface`
//! test binary, so it adds no link of its own.

use crate::common::{Bw, Out};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

// ---------------------------------------------------------------- packages

/// A directory of stub commands for the package checks.
struct Stubs {
    dir: tempfile::TempDir,
}

impl Stubs {
    fn new() -> Self {
        Stubs {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn add(&self, name: &str, body: &str) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).expect("write a stub");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// `dpkg-query -W -f='${Status}' NAME` answers "install ok installed"
    /// for exactly `installed`.
    fn dpkg(&self, installed: &[&str]) {
        let list = installed.join(" ");
        self.add(
            "dpkg-query",
            &format!(
                "name=\"${{@: -1}}\"; for p in {list}; do [ \"$p\" = \"$name\" ] && {{ printf 'install ok installed'; exit 0; }}; done; echo \"dpkg-query: no packages found matching $name\" >&2; exit 1"
            ),
        );
    }

    fn uid(&self, uid: u32) {
        self.add("id", &format!("echo {uid}"));
    }

    /// apt-get records its arguments in `apt.log` and succeeds.
    fn apt_get(&self) {
        let log = self.dir.path().join("apt.log");
        self.add("apt-get", &format!("echo \"$*\" >> '{}'", log.display()));
    }

    fn apt_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("apt.log")).unwrap_or_default()
    }

    /// `ensure_system_packages PURPOSE` with only the stubs on PATH (the
    /// library needs nothing else: the rest is bash builtins), so the real
    /// machine's dpkg, apt-get and compilers cannot answer.
    fn ensure(&self, purpose: &str, env: &[(&str, &str)]) -> Out {
        let path = self.dir.path().display().to_string();
        let mut cmd = Command::new("/bin/bash");
        cmd.current_dir(repo_root())
            .arg("-c")
            .arg(format!(
                ". scripts/lib/system-packages.sh; ensure_system_packages {purpose}"
            ))
            .env_clear()
            .env("PATH", path);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("bash runs");
        Out {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Everything either script needs, as Debian package names.
const ALL: &[&str] = &[
    "build-essential",
    "pkg-config",
    "cmake",
    "libclang-dev",
    "ca-certificates",
    "python3",
    "python3-pip",
    "python3-venv",
    "git",
    "bsdutils",
    "chromium",
    "chromium-driver",
];

fn all_but(missing: &[&str]) -> Vec<&'static str> {
    ALL.iter()
        .copied()
        .filter(|p| !missing.contains(p))
        .collect()
}

#[test]
fn libclang_cpp_is_not_libclang_both_scripts_ask_dpkg() {
    // The fresh machine of the issue: libclang-cpp14 installed (its
    // libclang-cpp.so.14 fooled the old glob), libclang-dev not.
    let stubs = Stubs::new();
    let mut installed = all_but(&["libclang-dev"]);
    installed.push("libclang-cpp14");
    stubs.dpkg(&installed);
    for purpose in ["quickstart", "test"] {
        let out = stubs.ensure(purpose, &[("BULWARK_SYSPKG_CHECK_ONLY", "1")]);
        out.expect_code(1);
        assert!(
            out.stdout.contains("missing: libclang-dev (libclang.so"),
            "{purpose}: {}",
            out.stdout
        );
        assert_eq!(out.stdout.matches("missing:").count(), 1, "{}", out.stdout);
    }
    // With it installed: nothing to do.
    stubs.dpkg(ALL);
    for purpose in ["quickstart", "test"] {
        let out = stubs.ensure(purpose, &[("BULWARK_SYSPKG_CHECK_ONLY", "1")]);
        out.ok();
        assert!(out.stdout.contains("all present"), "{}", out.stdout);
    }
}

#[test]
fn not_root_prints_one_exact_apt_get_line_and_installs_nothing() {
    let stubs = Stubs::new();
    stubs.dpkg(&all_but(&["cmake", "libclang-dev"]));
    stubs.uid(1000);
    stubs.apt_get();
    let out = stubs.ensure("quickstart", &[]);
    out.expect_code(1);
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("apt-get"))
        .collect();
    assert_eq!(
        lines,
        ["run this, then this script again: sudo apt-get install -y cmake libclang-dev"],
        "{}",
        out.stderr
    );
    assert_eq!(stubs.apt_log(), "", "apt-get must not run without root");
}

#[test]
fn as_root_it_installs_what_is_missing_and_checks_again() {
    let stubs = Stubs::new();
    // chromium is needed by the tests only: the quickstart does not ask.
    stubs.dpkg(&all_but(&["libclang-dev", "chromium"]));
    stubs.uid(0);
    stubs.apt_get();
    let out = stubs.ensure("quickstart", &[]);
    // The stub installs nothing, so the second look still misses it.
    out.expect_code(1);
    assert!(
        stubs
            .apt_log()
            .lines()
            .any(|l| l == "install -y -qq libclang-dev"),
        "{}",
        stubs.apt_log()
    );
    assert!(
        out.stderr
            .contains("still missing after apt-get install: libclang-dev"),
        "{}",
        out.stderr
    );
    let out = stubs.ensure("test", &[("BULWARK_SYSPKG_CHECK_ONLY", "1")]);
    assert!(out.stdout.contains("missing: chromium ("), "{}", out.stdout);
}

#[test]
fn without_dpkg_the_fallback_looks_for_the_library_bindgen_loads() {
    let stubs = Stubs::new();
    // The commands the other packages provide.
    for cmd in [
        "cc",
        "c++",
        "cmake",
        "pkg-config",
        "git",
        "script",
        "chromium",
        "chromedriver",
    ] {
        stubs.add(cmd, "exit 0");
    }
    stubs.add("python3", "exit 0");
    let libs = tempfile::tempdir().expect("a temporary directory");
    let dirs = libs.path().display().to_string();
    let env = [
        ("BULWARK_SYSPKG_CHECK_ONLY", "1"),
        ("BULWARK_SYSPKG_LIB_DIRS", dirs.as_str()),
    ];
    // Only the decoys: refused, with no dpkg to ask.
    for decoy in ["libclang-cpp.so.14", "libclang-cpp.so", "libclangBasic.a"] {
        std::fs::write(libs.path().join(decoy), b"").expect("write a decoy");
    }
    let out = stubs.ensure("quickstart", &env);
    out.expect_code(1);
    assert!(
        out.stdout.contains("missing: libclang-dev"),
        "{}",
        out.stdout
    );
    // Each name bindgen accepts is found.
    for real in [
        "libclang.so",
        "libclang-14.so",
        "libclang.so.1",
        "libclang-14.so.1",
    ] {
        let path = libs.path().join(real);
        std::fs::write(&path, b"").expect("write a library");
        let out = stubs.ensure("quickstart", &env);
        out.ok();
        std::fs::remove_file(&path).expect("remove it again");
    }
}

#[test]
fn both_scripts_take_their_packages_from_the_one_list() {
    for script in ["scripts/quickstart", "scripts/test"] {
        let text = std::fs::read_to_string(repo_root().join(script)).expect("read the script");
        assert!(
            text.contains(". scripts/lib/system-packages.sh"),
            "{script} does not use the shared list"
        );
        for stray in ["compgen -G", "libclang", "apt-get install"] {
            assert!(
                !text.contains(stray),
                "{script} decides packages itself ({stray:?}): use scripts/lib/system-packages.sh"
            );
        }
    }
}

/// The quickstart fetches the catalogue's default model and looks for a
/// cached copy under that model's file name (a copy of another model would
/// fail the hash and be downloaded again).
#[test]
fn the_quickstart_fetches_the_default_model() {
    let text =
        std::fs::read_to_string(repo_root().join("scripts/quickstart")).expect("read the script");
    let default = bulwark_models::Catalogue::builtin()
        .resolve(None)
        .expect("the default model")
        .clone();
    assert!(
        text.lines()
            .any(|l| l == format!("model={}", bulwark_models::DEFAULT_MODEL)),
        "scripts/quickstart does not name {}",
        bulwark_models::DEFAULT_MODEL
    );
    let cache_name = default
        .file
        .replace(bulwark_models::DEFAULT_MODEL, "$model");
    assert!(
        text.contains(&format!("/{cache_name}\"")),
        "scripts/quickstart does not look for {} in the cache",
        default.file
    );
    assert!(text.contains(r#"model fetch "$model""#));
}

// ---------------------------------------------------------------- status

fn status(bw: &Bw, env: &[(&str, &str)]) -> Out {
    let mut cmd = bw.cmd(&["status"]);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    cmd.run()
}

/// The report's line for `topic` that contains `needle`.
#[track_caller]
fn line_with<'a>(out: &'a Out, level: &str, topic: &str, needle: &str) -> &'a str {
    out.stdout
        .lines()
        .find(|l| {
            let mut cols = l.split_whitespace();
            cols.next() == Some(level) && cols.next() == Some(topic) && l.contains(needle)
        })
        .unwrap_or_else(|| {
            panic!(
                "no `{level} {topic}` line with {needle:?}\n--- stdout\n{}\n--- stderr\n{}",
                out.stdout, out.stderr
            )
        })
}

/// A home where every agent can run: the offline agent (whose model is
/// not installed here) removed, a key for the assistant, one run done so
/// there is a log with a checkpoint, and a serve user.
fn healthy() -> Bw {
    let bw = Bw::init();
    std::fs::remove_dir_all(bw.path("agents/offline")).expect("remove the offline agent");
    bw.run(&["run", "demo", "show me"]).ok();
    bw.run(&["access", "create", "alice"]).ok();
    bw
}

const KEY: (&str, &str) = ("ANTHROPIC_API_KEY", "sk-ant-status-test-secret-value");

#[test]
fn a_healthy_home_is_ready() {
    let bw = healthy();
    let out = status(&bw, &[KEY]);
    out.ok();
    line_with(&out, "ok", "home", &bw.home().display().to_string());
    line_with(&out, "ok", "config", "config.toml is valid");
    line_with(&out, "ok", "access", "1 user(s), 1 serve token(s)");
    line_with(&out, "ok", "agent", "demo: script:demo.jsonl");
    line_with(&out, "ok", "agent", "assistant: anthropic:");
    line_with(&out, "ok", "agent", "unsigned");
    line_with(&out, "info", "keys", "set: ANTHROPIC_API_KEY");
    line_with(&out, "info", "models", "no offline model installed");
    line_with(&out, "ok", "audit", "verifies; last checkpoint at size");
    assert!(out.stdout.contains("ready: nothing here stops an agent"));
    // Names only: the key's value never appears.
    assert!(!out.stdout.contains(KEY.1) && !out.stderr.contains(KEY.1));
    // Sandbox layers are reported either way.
    assert!(
        out.stdout.lines().any(|l| l.contains(" sandbox ")),
        "{}",
        out.stdout
    );
}

#[test]
fn status_reads_and_never_writes() {
    let bw = Bw::empty();
    let out = status(&bw, &[]);
    out.expect_code(1);
    line_with(&out, "FAIL", "home", "run `bulwark init`");
    let created: Vec<_> = std::fs::read_dir(bw.home())
        .expect("list the home")
        .collect();
    assert!(created.is_empty(), "status created {created:?}");
    // A healthy home: the database and keys are left byte for byte.
    let bw = healthy();
    let before = std::fs::read(bw.path("bulwark.db")).expect("read the database");
    status(&bw, &[KEY]).ok();
    assert_eq!(before, std::fs::read(bw.path("bulwark.db")).expect("read"));
    assert!(!bw.path("models").exists(), "status created models/");
}

#[test]
fn each_problem_is_named_with_its_fix() {
    // A bad config.toml: the file and line.
    let bw = healthy();
    bw.write("config.toml", "[sandbox]\nenforcement = \"sometimes\"\n");
    let out = status(&bw, &[KEY]);
    out.expect_code(1);
    line_with(&out, "FAIL", "config", "config.toml");
    assert!(
        out.stderr.contains("1 problem(s) stop an agent"),
        "{}",
        out.stderr
    );

    // A bad access.toml.
    let bw = healthy();
    bw.write("access.toml", "[users.bob]\nrole = \"emperor\"\n");
    let out = status(&bw, &[KEY]);
    out.expect_code(1);
    line_with(&out, "FAIL", "access", "access.toml");

    // An invalid manifest: the agent and the file.
    let bw = healthy();
    bw.write(
        "agents/broken/agent.toml",
        "[agent]\nname = \"broken\"\nmax_turns = \"many\"\n",
    );
    let out = status(&bw, &[KEY]);
    out.expect_code(1);
    line_with(&out, "FAIL", "agent", "broken:");
    line_with(&out, "ok", "agent", "demo:");

    // Signatures required, agents unsigned: `bulwark sign NAME`.
    let bw = healthy();
    let mut config = std::fs::read_to_string(bw.path("config.toml")).expect("read config");
    config.push_str("\n[trust]\nrequire_signed = true\n");
    bw.write("config.toml", &config);
    let out = status(&bw, &[KEY]);
    out.expect_code(1);
    line_with(&out, "FAIL", "agent", "`bulwark sign demo`");

    // A provider key missing: its name.
    let bw = healthy();
    let out = status(&bw, &[]);
    out.expect_code(1);
    line_with(&out, "FAIL", "agent", "assistant: anthropic:");
    line_with(&out, "FAIL", "agent", "set ANTHROPIC_API_KEY");
    line_with(&out, "info", "keys", "not set: ANTHROPIC_API_KEY");

    // The offline agent without its model: the fetch command.
    let bw = Bw::init();
    let out = status(&bw, &[KEY]);
    out.expect_code(1);
    line_with(
        &out,
        "FAIL",
        "agent",
        "offline: local:qwen2.5-coder-1.5b: not installed: run `bulwark model fetch qwen2.5-coder-1.5b`",
    );
    // A damaged model file: replaced by the same command.
    bw.write(
        "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "not a model",
    );
    let out = status(&bw, &[KEY]);
    out.expect_code(1);
    line_with(&out, "FAIL", "agent", "is damaged");
    line_with(
        &out,
        "WARN",
        "models",
        "`bulwark model fetch qwen2.5-coder-1.5b`",
    );

    // No agents at all.
    let bw = Bw::empty();
    bw.write("config.toml", "");
    let out = status(&bw, &[]);
    out.expect_code(1);
    line_with(&out, "FAIL", "agents", "run `bulwark init`");
}

#[test]
fn a_log_that_does_not_verify_stops_agents_until_acknowledged() {
    let bw = healthy();
    {
        let db = rusqlite::Connection::open(bw.path("bulwark.db")).expect("open the database");
        db.execute_batch(
            "DROP TRIGGER audit_no_update; UPDATE audit SET detail = 'nothing happened' WHERE seq = 2;",
        )
        .expect("tamper with a record");
    }
    let out = status(&bw, &[KEY]);
    out.expect_code(1);
    line_with(&out, "FAIL", "audit", "`bulwark audit acknowledge`");
    // What status says, run says too.
    bw.run(&["run", "demo", "again"]).expect_code(1);
    bw.run(&["audit", "acknowledge"]).ok();
    let out = status(&bw, &[KEY]);
    out.ok();
    line_with(&out, "WARN", "audit", "acknowledged by an operator");
}

#[test]
fn a_readable_audit_key_fails_as_run_does() {
    let bw = healthy();
    let key = bw.path("keys/audit.key");
    assert!(key.exists(), "the run made an audit key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = status(&bw, &[KEY]);
    out.expect_code(1);
    line_with(&out, "FAIL", "audit", "chmod 600");
    // What status says, run says too.
    bw.run(&["run", "demo", "again"]).expect_code(2);
}

#[test]
fn status_help_teaches() {
    let out = Bw::empty().run(&["status", "--help"]);
    out.ok();
    assert!(out.stdout.contains("bulwark status"), "{}", out.stdout);
    assert!(
        out.stdout.contains("FAIL lines stop an agent"),
        "{}",
        out.stdout
    );
}
