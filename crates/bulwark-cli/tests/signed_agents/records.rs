//! `keys trust|untrust` and `sign` each leave one audit record (never the
//! private key), and a change whose record cannot be written is undone.

use super::common::{self, Bw};
use super::{vkey_from, with_trusted_alice};

/// Every audit record of `action`, oldest first.
fn records_of(bw: &Bw, action: &str) -> Vec<serde_json::Value> {
    common::with_action(&bw.audit(), action)
        .into_iter()
        .cloned()
        .collect()
}

#[test]
fn trust_sign_and_untrust_each_leave_one_record_without_the_private_key() {
    let (bw, vkey) = with_trusted_alice();
    let key_id = vkey.split('+').nth(1).unwrap().to_owned();
    bw.run(&["sign", "demo"]).ok();
    // Trusting a key already trusted changes nothing and records nothing.
    bw.run(&["keys", "trust", &vkey]).ok();
    bw.run(&["keys", "untrust", "alice"]).ok();

    let trust = records_of(&bw, "key_trust");
    let ops: Vec<&str> = trust
        .iter()
        .map(|r| common::field(r, "operation"))
        .collect();
    assert_eq!(ops, ["trust", "untrust"], "{trust:?}");
    for r in &trust {
        assert_eq!(common::field(r, "user"), "local", "{r}");
        let detail = common::field(r, "detail");
        assert!(
            detail.contains("\"alice\"") && detail.contains(&key_id),
            "{r}"
        );
    }
    let signs = records_of(&bw, "agent_sign");
    assert_eq!(signs.len(), 1, "{signs:?}");
    let sign = &signs[0];
    assert_eq!(common::field(sign, "operation"), "sign");
    assert_eq!(common::field(sign, "user"), "local");
    assert_eq!(common::field(sign, "agent"), "demo");
    let detail = common::field(sign, "detail");
    assert!(
        detail.contains("version 1") && detail.contains(&key_id) && detail.contains("sha256"),
        "{detail}"
    );

    // The private key (hex seed) is nowhere in the database or the export.
    let private = std::fs::read_to_string(bw.path("keys/alice.key")).unwrap();
    let private = private.trim();
    assert_eq!(private.len(), 64, "a hex seed");
    let export = bw.run(&["audit", "export"]);
    export.ok();
    let db = std::fs::read(bw.path("bulwark.db")).unwrap();
    assert!(!export.stdout.contains(private));
    assert!(!String::from_utf8_lossy(&db).contains(private));
    assert!(!db.windows(32).any(|w| hex::encode(w) == private));
}

#[test]
fn a_trust_change_or_signature_whose_record_fails_is_undone() {
    let (bw, _) = with_trusted_alice();
    let out = bw.run(&["keys", "gen", "bob"]);
    out.ok();
    let bob = vkey_from(&out, "bob");
    let db = rusqlite::Connection::open(bw.path("bulwark.db")).unwrap();
    db.execute_batch(
        "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit \
         BEGIN SELECT RAISE(ABORT, 'the test refuses audit writes'); END;",
    )
    .unwrap();
    drop(db);
    let alice_vkey = std::fs::read(bw.path("trust/alice.vkey")).unwrap();

    let out = bw.run(&["keys", "trust", &bob]);
    out.expect_code(1);
    assert!(out.stderr.contains("undone"), "{}", out.stderr);
    assert!(!bw.path("trust/bob.vkey").exists(), "bob is not trusted");

    let out = bw.run(&["keys", "untrust", "alice"]);
    out.expect_code(1);
    assert!(out.stderr.contains("undone"), "{}", out.stderr);
    assert_eq!(
        std::fs::read(bw.path("trust/alice.vkey")).unwrap(),
        alice_vkey
    );

    let sig = bw.path("agents/demo/agent.sig");
    assert!(!sig.exists());
    let out = bw.run(&["sign", "demo", "--key", "alice"]);
    out.expect_code(1);
    assert!(out.stderr.contains("undone"), "{}", out.stderr);
    assert!(!sig.exists(), "no signature without its record");

    // An existing signature is put back as it was.
    let fine = Bw::init();
    fine.run(&["keys", "gen", "alice"]).ok();
    fine.run(&["sign", "demo"]).ok();
    let sig = fine.path("agents/demo/agent.sig");
    let signed = std::fs::read(&sig).unwrap();
    std::fs::create_dir_all(fine.path("agents/demo/more")).unwrap();
    fine.write("agents/demo/more/notes.md", "changed after signing\n");
    let db = rusqlite::Connection::open(fine.path("bulwark.db")).unwrap();
    db.execute_batch(
        "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit \
         BEGIN SELECT RAISE(ABORT, 'the test refuses audit writes'); END;",
    )
    .unwrap();
    drop(db);
    fine.run(&["sign", "demo"]).expect_code(1);
    assert_eq!(std::fs::read(&sig).unwrap(), signed);
}
