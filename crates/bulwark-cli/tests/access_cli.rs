//! `bulwark access create | rotate | revoke | list` through the binary:
//! the token is printed once and verifies; files keep only hashes, stay
//! owner-only and keep the operator's comments; mistakes are refused
//! without touching the file.

use crate::common;

use bulwark_server::auth::AuthSnapshot;
use bulwark_server::{ServerSecret, secret_path};
use common::Bw;
use std::os::unix::fs::PermissionsExt;

/// The one token line of a create/rotate output.
fn token_of(stdout: &str) -> String {
    let tokens: Vec<&str> = stdout.lines().filter(|l| l.starts_with("bwk_")).collect();
    assert_eq!(tokens.len(), 1, "exactly one token line:\n{stdout}");
    tokens[0].to_string()
}

fn snapshot(bw: &Bw) -> AuthSnapshot {
    let access = std::fs::read_to_string(bw.path("access.toml")).unwrap();
    let secret = ServerSecret::load(&secret_path(bw.home())).map_err(|e| e.to_string());
    AuthSnapshot::build(1, Some(&access), "access.toml", secret)
}

fn mode(bw: &Bw, rel: &str) -> u32 {
    std::fs::metadata(bw.path(rel))
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn create_list_rotate_revoke() {
    let bw = Bw::empty();
    bw.write(
        "access.toml",
        "# people who may use the server\n[users.ops]\nrole = \"admin\" # on call\n",
    );
    let out = bw.run(&["access", "create", "alice", "--agents", "assistant,demo"]);
    out.ok();
    let alice = token_of(&out.stdout);
    assert!(out.stdout.contains("shown only now"), "{}", out.stdout);
    assert_eq!(snapshot(&bw).verify(&alice).unwrap().user, "alice");
    let text = std::fs::read_to_string(bw.path("access.toml")).unwrap();
    assert!(!text.contains(&alice), "the raw token is never stored");
    assert!(text.contains("# people who may use the server") && text.contains("# on call"));
    assert!(
        text.contains("agents = [\"assistant\", \"demo\"]"),
        "{text}"
    );
    assert_eq!(mode(&bw, "access.toml"), 0o600);
    assert_eq!(mode(&bw, "keys/server.secret"), 0o600);

    let out = bw.run(&["access", "create", "root", "--role", "admin"]);
    out.ok();
    let root = token_of(&out.stdout);
    assert!(snapshot(&bw).verify(&root).unwrap().is_admin());

    // list: ids, never tokens, hashes or the secret.
    let out = bw.run(&["access", "list"]);
    out.ok();
    let secret = std::fs::read_to_string(bw.path("keys/server.secret")).unwrap();
    for line in text.lines().filter(|l| l.contains("hash")) {
        let hash = line.split("hash = \"").nth(1).unwrap();
        assert!(!out.stdout.contains(&hash[..64]), "{}", out.stdout);
    }
    assert!(!out.stdout.contains(&alice) && !out.stdout.contains(&root));
    assert!(!out.stdout.contains(secret.trim()));
    let alice_id = alice.split('_').nth(1).unwrap();
    assert!(out.stdout.contains(alice_id), "{}", out.stdout);
    assert!(
        out.stdout.contains("ops") && out.stdout.contains("no token"),
        "{}",
        out.stdout
    );

    // A second create for alice is refused; rotate replaces her token.
    let out = bw.run(&["access", "create", "alice"]);
    out.expect_code(2);
    assert!(out.stderr.contains("rotate"), "{}", out.stderr);
    let out = bw.run(&["access", "rotate", "alice"]);
    out.ok();
    let rotated = token_of(&out.stdout);
    assert_ne!(rotated, alice);
    let snap = snapshot(&bw);
    assert!(snap.verify(&alice).is_err(), "the old token is gone");
    assert_eq!(snap.verify(&rotated).unwrap().user, "alice");
    assert!(snap.verify(&root).is_ok(), "other users are untouched");

    // ops had an entry without a token: create adds one and keeps the role.
    let out = bw.run(&["access", "create", "ops"]);
    out.ok();
    let ops = token_of(&out.stdout);
    assert!(snapshot(&bw).verify(&ops).unwrap().is_admin());

    let out = bw.run(&["access", "revoke", "alice"]);
    out.ok();
    assert!(snapshot(&bw).verify(&rotated).is_err());
    assert!(snapshot(&bw).user("alice").is_some(), "the entry stays");
    let out = bw.run(&["access", "revoke", "nobody"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("access create nobody"),
        "{}",
        out.stderr
    );
}

#[test]
fn mistakes_are_refused_and_change_nothing() {
    let bw = Bw::empty();
    bw.run(&["access", "create", "Bad Name"]).expect_code(2);
    bw.run(&["access", "create", "alice", "--role", "root"])
        .expect_code(2);
    bw.run(&["access", "create", "alice", "--agents", "../etc"])
        .expect_code(2);
    assert!(!bw.path("access.toml").exists());

    let broken = "[users.alice]\nrole = \"superuser\"\n";
    bw.write("access.toml", broken);
    let out = bw.run(&["access", "create", "bob"]);
    out.expect_code(2);
    assert!(out.stderr.contains("access.toml:2"), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(bw.path("access.toml")).unwrap(),
        broken
    );
    bw.run(&["access", "list"]).expect_code(2);

    // A server secret others can read is refused, with the fix.
    std::fs::remove_file(bw.path("access.toml")).unwrap();
    bw.run(&["access", "create", "bob"]).ok();
    std::fs::set_permissions(
        bw.path("keys/server.secret"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let out = bw.run(&["access", "rotate", "bob"]);
    out.expect_code(1);
    assert!(out.stderr.contains("chmod 600"), "{}", out.stderr);
    assert!(!out.stdout.contains("bwk_"));
}

#[test]
fn the_operators_name_is_reserved() {
    let bw = Bw::empty();
    for args in [
        &["access", "create", "local"][..],
        &["access", "create", "local", "--role", "admin"],
        &["access", "create", "local", "--agents", "*"],
        &["access", "rotate", "local"],
    ] {
        let out = bw.run(args);
        out.expect_code(2);
        assert!(out.stderr.contains("reserved"), "{args:?}: {}", out.stderr);
        assert!(!out.stdout.contains("bwk_"), "{args:?}: {}", out.stdout);
    }
    assert!(!bw.path("access.toml").exists());

    // An access.toml written by hand that gives the name a token is
    // refused at load, naming the file, the line and the fix; nothing is
    // changed. Its limits alone are fine.
    let with_local = format!(
        "[users.alice]\n\n[users.local]\nrole = \"admin\"\ntokens = [{{ id = \"abc\", hash = \"{}\" }}]\n",
        "0".repeat(64)
    );
    bw.write("access.toml", &with_local);
    for args in [
        &["access", "list"][..],
        &["access", "create", "bob"],
        &["access", "revoke", "alice"],
    ] {
        let out = bw.run(args);
        out.expect_code(2);
        assert!(
            out.stderr.contains("access.toml:5"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("may not hold tokens"),
            "{args:?}: {}",
            out.stderr
        );
    }
    assert_eq!(
        std::fs::read_to_string(bw.path("access.toml")).unwrap(),
        with_local
    );
    bw.write("access.toml", "[users.local.limits]\ntokens_per_day = 5\n");
    bw.run(&["access", "list"]).ok();

    // Names that only resemble it are ordinary users.
    std::fs::remove_file(bw.path("access.toml")).unwrap();
    for name in ["locals", "local-ops", "admin"] {
        let out = bw.run(&["access", "create", name]);
        out.ok();
        token_of(&out.stdout);
    }
}

#[test]
fn list_without_a_file() {
    let bw = Bw::empty();
    let out = bw.run(&["access", "list"]);
    out.ok();
    assert!(out.stdout.contains("no users"), "{}", out.stdout);
}

/// Every audit record of `action`.
fn records_of(bw: &Bw, action: &str) -> Vec<serde_json::Value> {
    common::with_action(&bw.audit(), action)
        .into_iter()
        .cloned()
        .collect()
}

/// Makes every later audit write fail, as a full or damaged database would.
fn refuse_audit_writes(bw: &Bw) {
    let db = rusqlite::Connection::open(bw.path("bulwark.db")).unwrap();
    db.execute_batch(
        "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit \
         BEGIN SELECT RAISE(ABORT, 'the test refuses audit writes'); END;",
    )
    .unwrap();
}

/// The whole database file and the `audit export` output, to grep for
/// secrets.
fn everything_recorded(bw: &Bw) -> String {
    let export = bw.run(&["audit", "export"]);
    export.ok();
    let db = std::fs::read(bw.path("bulwark.db")).unwrap();
    format!("{}\n{}", String::from_utf8_lossy(&db), export.stdout)
}

#[test]
fn each_access_change_leaves_one_record_without_the_token() {
    let bw = Bw::empty();
    let out = bw.run(&["access", "create", "alice", "--agents", "demo"]);
    out.ok();
    let first = token_of(&out.stdout);
    let out = bw.run(&["access", "rotate", "alice"]);
    out.ok();
    let second = token_of(&out.stdout);
    bw.run(&["access", "revoke", "alice"]).ok();
    // Nothing to revoke: nothing changed, nothing recorded.
    bw.run(&["access", "revoke", "alice"]).ok();

    let records = records_of(&bw, "access_change");
    let ops: Vec<&str> = records
        .iter()
        .map(|r| common::field(r, "operation"))
        .collect();
    assert_eq!(ops, ["create", "rotate", "revoke"], "{records:?}");
    for r in &records {
        assert_eq!(common::field(r, "user"), "local", "{r}");
        assert_eq!(common::field(r, "decision"), "allowed", "{r}");
        assert!(common::field(r, "detail").contains("\"alice\""), "{r}");
        assert_eq!(common::field(r, "args_digest").len(), 64, "{r}");
    }
    // The token's ID is named, the token never.
    let first_id = first.split('_').nth(1).unwrap_or_default();
    assert!(
        !first_id.is_empty() && common::field(&records[0], "detail").contains(first_id),
        "{first_id}: {}",
        records[0]
    );
    let all = everything_recorded(&bw);
    for token in [&first, &second] {
        assert!(!all.contains(token.as_str()), "a token reached the log");
        let secret_part = token.splitn(3, '_').nth(2).unwrap_or_default();
        assert!(secret_part.len() >= 16, "{token}");
        assert!(
            !all.contains(secret_part),
            "a token's secret reached the log"
        );
    }
}

#[test]
fn an_access_change_whose_record_fails_is_undone() {
    let bw = Bw::empty();
    bw.run(&["access", "create", "alice"]).ok();
    let before = std::fs::read(bw.path("access.toml")).unwrap();
    refuse_audit_writes(&bw);
    for args in [
        &["access", "create", "bob"][..],
        &["access", "rotate", "alice"],
        &["access", "revoke", "alice"],
    ] {
        let out = bw.run(args);
        out.expect_code(1);
        assert!(out.stderr.contains("audit log"), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("undone"), "{args:?}: {}", out.stderr);
        assert!(!out.stdout.contains("bwk_"), "{args:?}: {}", out.stdout);
        assert_eq!(
            std::fs::read(bw.path("access.toml")).unwrap(),
            before,
            "{args:?} changed access.toml without its record"
        );
    }

    // A database that cannot even be opened: nothing is changed.
    let other = Bw::empty();
    std::fs::create_dir_all(other.path("bulwark.db")).unwrap();
    let out = other.run(&["access", "create", "bob"]);
    out.expect_code(1);
    assert!(out.stderr.contains("nothing was changed"), "{}", out.stderr);
    assert!(!other.path("access.toml").exists());
    assert!(!out.stdout.contains("bwk_"));
}

/// `bulwark init` makes the audit key (owner-only), so whatever writes the
/// first records (an agent, an operator's command, a server's worker)
/// writes them under a key that exists from the start.
#[test]
fn init_makes_the_audit_key() {
    let bw = Bw::init();
    let key = bw.path("keys/audit.key");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // A second init keeps it.
    let before = std::fs::read(&key).unwrap();
    bw.run(&["init"]).ok();
    assert_eq!(std::fs::read(&key).unwrap(), before);
}

/// An operator's record on a home whose log is still empty and has no key
/// (one made before init made keys) gives it its key, so the first run
/// accepts the log instead of refusing to make a key for it.
#[test]
fn a_record_before_the_first_run_does_not_orphan_the_log() {
    let bw = Bw::init();
    std::fs::remove_file(bw.path("keys/audit.key")).unwrap();
    bw.run(&["access", "create", "bob"]).ok();
    assert!(bw.path("keys/audit.key").exists());
    bw.run(&["run", "demo", "show me"]).ok();
    bw.run(&["audit", "verify"]).ok();
}
