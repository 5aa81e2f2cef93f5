//! Bad manifests, configs and access files fail closed: a located error
//! (`file:line:col`) naming the field, exit 2, and nothing started.

use crate::common;

use common::{Bw, tree};

/// The `line` in the first `<file>:<line>:<col>:` of `stderr`.
#[track_caller]
fn located_line(stderr: &str, file: &str) -> usize {
    let marker = format!("/{file}:");
    let at = stderr
        .find(&marker)
        .unwrap_or_else(|| panic!("no `{file}:line:col` in stderr:\n{stderr}"));
    let rest = &stderr[at + marker.len()..];
    let mut parts = rest.splitn(3, ':');
    let line = parts.next().and_then(|l| l.parse().ok());
    let col: Option<usize> = parts.next().and_then(|c| c.parse().ok());
    match (line, col) {
        (Some(line), Some(col)) if line > 0 && col > 0 => line,
        _ => panic!("`{file}:` is not followed by line:col in stderr:\n{stderr}"),
    }
}

/// Nothing was started: no file or directory appeared under the home since
/// `before` (no database, no workspace), and no session or record exists.
#[track_caller]
fn nothing_started(bw: &Bw, before: &[std::path::PathBuf], what: &str) {
    assert_eq!(tree(bw.home()), before, "{what}: files appeared");
    assert!(
        !bw.path("bulwark.db").exists(),
        "{what}: a database was created"
    );
    let tail = bw.run(&["audit", "tail", "--json"]);
    assert!(tail.stdout.trim().is_empty(), "{what}: {}", tail.stdout);
    let sessions = bw.run(&["sessions", "list"]);
    assert!(
        !sessions.stdout.contains("bad"),
        "{what}: {}",
        sessions.stdout
    );
}

struct Case {
    what: &'static str,
    manifest: &'static str,
    line: usize,
    /// Text the error must contain: the field, and what is wrong.
    names: &'static [&'static str],
}

const HEAD: &str = "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\n";

const CASES: &[Case] = &[
    Case {
        what: "unknown field in [agent]",
        manifest: "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\nmodle = \"x\"\n",
        line: 4,
        names: &["agent.modle", "unknown field"],
    },
    Case {
        what: "wrong type",
        manifest: "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\n\nmax_turns = \"ten\"\n",
        line: 5,
        names: &["agent.max_turns", "invalid type"],
    },
    Case {
        what: "duplicate key",
        manifest: "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\nname = \"bad\"\n",
        line: 4,
        names: &["duplicate key `name`"],
    },
    Case {
        what: "unknown capability kind",
        manifest: "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\n\n[[capabilities]]\nkind = \"file_read\"\npath = \"**\"\n\n[[capabilities]]\nkind = \"file_delete\"\npath = \"**\"\n",
        line: 10,
        names: &["capabilities[1].kind", "file_delete", "file_write"],
    },
    Case {
        what: "capability path with ..",
        manifest: "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\n\n[[capabilities]]\nkind = \"file_read\"\npath = \"**\"\n\n[[capabilities]]\nkind = \"file_read\"\npath = \"../x\"\n",
        line: 11,
        names: &["capabilities[1].path", "\"../x\""],
    },
    Case {
        what: "empty capability path",
        manifest: "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\n\n[[capabilities]]\nkind = \"file_write\"\npath = \"\"\n",
        line: 7,
        names: &["capabilities[0].path", "empty"],
    },
    Case {
        what: "unknown top-level table",
        manifest: "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\n\n[sandbx]\nshell = true\n",
        line: 5,
        names: &["sandbx", "unknown field", "sandbox"],
    },
    Case {
        what: "model without provider",
        manifest: "[agent]\nname = \"bad\"\ndescription = \"d\"\nmodel = \"nocolon\"\n",
        line: 4,
        names: &["agent.model", "provider:model"],
    },
    Case {
        what: "max_turns = 0",
        manifest: "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\nmax_turns = 0\n",
        line: 4,
        names: &["agent.max_turns", "at least 1"],
    },
    Case {
        what: "unknown field in [tools]",
        manifest: "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\n\n[tools]\nallow = [\"files\"]\nalow = [\"shell\"]\n",
        line: 7,
        names: &["tools.alow", "unknown field"],
    },
    Case {
        what: "bad approval operation",
        manifest: "[agent]\nname = \"bad\"\nmodel = \"script:s.jsonl\"\n\n[approval]\noperations = [\"files:edit\", \"shell\"]\n",
        line: 6,
        names: &["approval.operations[1]", "domain:operation"],
    },
];

#[test]
fn bad_manifests_give_a_located_error_and_start_nothing() {
    for case in CASES {
        let bw = Bw::empty();
        bw.agent("bad", case.manifest, Some("{\"text\": \"hi\"}\n"));
        let before = tree(bw.home());
        let out = bw.run(&["run", "bad", "x"]);
        assert_eq!(
            out.code,
            Some(2),
            "{}: expected exit 2\n{}",
            case.what,
            out.stderr
        );
        assert_eq!(
            located_line(&out.stderr, "agent.toml"),
            case.line,
            "{}: wrong line\n{}",
            case.what,
            out.stderr
        );
        for name in case.names {
            assert!(
                out.stderr.contains(name),
                "{}: the error does not mention {name:?}\n{}",
                case.what,
                out.stderr
            );
        }
        nothing_started(&bw, &before, case.what);
    }
}

/// A syntax error has no field to name, but it is still located.
#[test]
fn manifest_syntax_errors_are_located() {
    for (manifest, line) in [
        (format!("{HEAD}max_turns = \n"), 4),
        (format!("{HEAD}\n[tools\nallow = []\n"), 5),
        (format!("{HEAD}description = \"unterminated\n"), 4),
    ] {
        let bw = Bw::empty();
        bw.agent("bad", &manifest, Some("{\"text\": \"hi\"}\n"));
        let before = tree(bw.home());
        let out = bw.run(&["run", "bad", "x"]);
        out.expect_code(2);
        assert_eq!(
            located_line(&out.stderr, "agent.toml"),
            line,
            "{manifest}\n{}",
            out.stderr
        );
        nothing_started(&bw, &before, &manifest);
    }
}

/// A bad manifest in a home that already has sessions adds no session and
/// no audit record.
#[test]
fn bad_manifest_leaves_an_existing_store_untouched() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let sessions = bw.sessions();
    let records = bw.audit();
    bw.agent("bad", CASES[0].manifest, Some("{\"text\": \"hi\"}\n"));
    bw.run(&["run", "bad", "x"]).expect_code(2);
    bw.cmd(&["chat", "bad"])
        .stdin("hello\n")
        .run()
        .expect_code(2);
    assert_eq!(bw.sessions(), sessions);
    assert_eq!(bw.audit(), records);
}

/// Every other command that reads a manifest reports it the same way.
#[test]
fn bad_manifest_is_located_by_every_reader() {
    let bw = Bw::empty();
    bw.agent("bad", CASES[0].manifest, Some("{\"text\": \"hi\"}\n"));
    let before = tree(bw.home());
    for args in [
        &["policy", "explain", "bad"][..],
        &["preflight", "bad"],
        &["chat", "bad"],
    ] {
        let out = bw.run(args);
        out.expect_code(2);
        assert_eq!(located_line(&out.stderr, "agent.toml"), 4, "{args:?}");
        assert!(
            out.stderr.contains("agent.modle"),
            "{args:?}: {}",
            out.stderr
        );
    }
    // `agents list` keeps listing, and marks the agent invalid.
    let out = bw.run(&["agents", "list"]);
    out.ok();
    assert!(
        out.stdout.contains("INVALID") && out.stdout.contains("agent.toml:4:"),
        "{}",
        out.stdout
    );
    nothing_started(&bw, &before, "readers");
}

#[test]
fn bad_config_toml_is_located_for_run_and_explain() {
    let bw = Bw::init();
    bw.write(
        "config.toml",
        "# global\n[tools]\ndeny = [\"web\"]\nallow_all = true\n",
    );
    let before = tree(bw.home());
    for args in [
        &["run", "demo", "show me"][..],
        &["policy", "explain", "demo"],
    ] {
        let out = bw.run(args);
        out.expect_code(2);
        assert_eq!(located_line(&out.stderr, "config.toml"), 4, "{args:?}");
        assert!(out.stderr.contains("tools.allow_all"), "{}", out.stderr);
    }
    nothing_started(&bw, &before, "bad config.toml");

    // A semantic error (a bad pattern in the global ceiling) is located too.
    bw.write(
        "config.toml",
        "[tools]\ndeny = []\n\n[[capabilities]]\nkind = \"file_read\"\npath = \"data//x\"\n",
    );
    for args in [
        &["run", "demo", "show me"][..],
        &["policy", "explain", "demo"],
    ] {
        let out = bw.run(args);
        out.expect_code(2);
        assert_eq!(located_line(&out.stderr, "config.toml"), 6, "{args:?}");
        assert!(
            out.stderr.contains("capabilities[0].path"),
            "{}",
            out.stderr
        );
    }
    nothing_started(&bw, &before, "bad config.toml ceiling");
}

#[test]
fn bad_access_toml_is_located_for_run_and_explain() {
    let bw = Bw::init();
    for (text, line, field) in [
        (
            "[users.alice]\nrole = \"user\"\nrol = \"admin\"\n",
            3,
            "users.alice.rol",
        ),
        (
            "[users.alice]\n\nrole = \"superuser\"\n",
            3,
            "users.alice.role",
        ),
        (
            "[users.alice]\nrole = \"user\"\n[users.alice.tools]\ndeny = [\"files:\"]\n",
            4,
            "users.alice.tools.deny[0]",
        ),
    ] {
        bw.write("access.toml", text);
        let before = tree(bw.home());
        for args in [
            &["run", "demo", "show me", "--user", "alice"][..],
            &["run", "demo", "show me"],
            &["policy", "explain", "demo", "--user", "alice"],
        ] {
            let out = bw.run(args);
            out.expect_code(2);
            assert_eq!(
                located_line(&out.stderr, "access.toml"),
                line,
                "{text}\n{args:?}\n{}",
                out.stderr
            );
            assert!(out.stderr.contains(field), "{field}: {}", out.stderr);
        }
        nothing_started(&bw, &before, text);
    }
}
