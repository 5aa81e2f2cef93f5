//! The local evidence of the audit log (issue 17, item 8): stored
//! checkpoints' signatures, the append-only checkpoint file, the audit key
//! that is never silently replaced, failing closed on an unusable key, and
//! key rotation. Each attack test has the work it must still allow beside.

use super::{read_records, record_count, stored_checkpoints};
use crate::common::{self, Bw};
use std::os::unix::fs::PermissionsExt;

fn db(bw: &Bw) -> rusqlite::Connection {
    rusqlite::Connection::open(bw.path("bulwark.db")).unwrap()
}

/// Deletes every stored checkpoint row (the intruder's first step).
fn delete_checkpoint_rows(bw: &Bw) {
    db(bw)
        .execute_batch("DROP TRIGGER audit_checkpoint_no_delete; DELETE FROM audit_checkpoint;")
        .unwrap();
}

/// Rewrites record `seq`'s detail and re-hashes its leaf, so the rows
/// alone are consistent again.
fn rewrite_record(bw: &Bw, seq: i64) {
    let db = db(bw);
    db.execute_batch("DROP TRIGGER audit_no_update;").unwrap();
    db.execute(
        "UPDATE audit SET detail = 'nothing happened' WHERE seq = ?1",
        [seq],
    )
    .unwrap();
    let records = read_records(&db);
    let leaf = records[(seq - 1) as usize]
        .record
        .leaf_hash(seq as u64)
        .unwrap();
    db.execute(
        "UPDATE audit SET leaf = ?1 WHERE seq = ?2",
        rusqlite::params![leaf.as_slice(), seq],
    )
    .unwrap();
}

/// Asserts that `audit verify` reports tampering and `run` refuses to
/// start an agent (no new record).
fn detected_and_agents_stop(bw: &Bw) {
    let out = bw.run(&["audit", "verify"]);
    out.expect_code(1);
    assert!(out.stdout.contains("TAMPERED"), "{}", out.stdout);
    let before = record_count(bw);
    let out = bw.run(&["run", "demo", "show me"]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("does not verify") && out.stderr.contains("bulwark audit acknowledge"),
        "{}",
        out.stderr
    );
    assert_eq!(record_count(bw), before, "nothing ran");
}

#[test]
fn a_fresh_home_signs_into_its_checkpoint_file_and_verifies() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    bw.run(&["run", "demo", "show me"]).ok();
    let file = std::fs::read_to_string(bw.path("audit/checkpoints")).unwrap();
    assert!(
        file.starts_with("bulwark.local/audit key\nbulwark-audit+"),
        "{file}"
    );
    // Every stored checkpoint is in the file.
    for (_, note) in stored_checkpoints(&bw) {
        assert!(file.contains(&note), "{note} not in {file}");
    }
    let mode = std::fs::metadata(bw.path("audit/checkpoints"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let out = bw.run(&["audit", "verify"]);
    out.ok();
    assert!(
        out.stdout
            .contains("2 stored checkpoint(s) match, 2 checkpoint(s) in the checkpoint file"),
        "{}",
        out.stdout
    );
}

#[test]
fn deleted_checkpoint_rows_and_a_rewritten_record_stop_agents() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    delete_checkpoint_rows(&bw);
    rewrite_record(&bw, 3);
    detected_and_agents_stop(&bw);
    // The escape hatch stays, for exactly this problem.
    bw.run(&["audit", "acknowledge"]).ok();
    bw.run(&["run", "demo", "show me"]).ok();
}

#[test]
fn deleted_checkpoint_rows_and_a_truncation_stop_agents() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    delete_checkpoint_rows(&bw);
    db(&bw)
        .execute_batch("DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE seq > 2;")
        .unwrap();
    detected_and_agents_stop(&bw);
}

#[test]
fn a_stored_checkpoint_with_a_bad_signature_is_not_matching() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let (size, note) = stored_checkpoints(&bw).pop().unwrap();
    let at = note.trim_end().len() - 6;
    let swapped = if &note[at..=at] == "A" { "B" } else { "A" };
    let forged = format!("{}{}{}", &note[..at], swapped, &note[at + 1..]);
    db(&bw)
        .execute_batch("DROP TRIGGER audit_checkpoint_no_update;")
        .unwrap();
    db(&bw)
        .execute(
            "UPDATE audit_checkpoint SET note = ?1 WHERE size = ?2",
            rusqlite::params![forged, size],
        )
        .unwrap();
    let out = bw.run(&["audit", "verify"]);
    out.expect_code(1);
    assert!(out.stdout.contains("CheckpointSignature"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("1 stored checkpoint(s) with a signature that does not verify"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("match"), "{}", out.stdout);
    let out = bw.run(&["run", "demo", "show me"]);
    out.expect_code(1);
}

#[test]
fn a_deleted_key_is_not_replaced_while_a_log_exists() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let key = bw.path("keys/audit.key");
    let saved = std::fs::read(&key).unwrap();
    std::fs::remove_file(&key).unwrap();
    let before = record_count(&bw);
    let out = bw.run(&["run", "demo", "show me"]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("is missing") && out.stderr.contains("backup"),
        "{}",
        out.stderr
    );
    assert!(!key.exists(), "no new key was made");
    assert_eq!(record_count(&bw), before, "nothing ran");
    bw.run(&["audit", "checkpoint"]).expect_code(1);
    assert!(!key.exists(), "no new key was made");
    // Verification needs no key; restoring the key lets agents run again.
    bw.run(&["audit", "verify"]).ok();
    std::fs::write(&key, saved).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    bw.run(&["run", "demo", "show me"]).ok();
}

#[test]
fn a_replaced_key_is_refused() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let key = bw.path("keys/audit.key");
    std::fs::write(&key, "11".repeat(32)).unwrap();
    let out = bw.run(&["run", "demo", "show me"]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("the key was replaced"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_audit_key_others_can_read_stops_run_at_start() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let key = bw.path("keys/audit.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = record_count(&bw);
    let sessions = bw.sessions().len();
    let out = bw.run(&["run", "demo", "show me"]);
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("chmod 600"), "{}", out.stderr);
    assert_eq!(record_count(&bw), before, "nothing ran");
    assert_eq!(bw.sessions().len(), sessions, "no session started");
    // Fixed as told, agents run.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    bw.run(&["run", "demo", "show me"]).ok();
}

#[test]
fn a_removed_database_with_checkpoints_on_file_stops_agents() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(bw.path(&format!("bulwark.db{suffix}")));
    }
    let out = bw.run(&["audit", "verify"]);
    out.expect_code(1);
    assert!(out.stdout.contains("TAMPERED"), "{}", out.stdout);
    let out = bw.run(&["run", "demo", "show me"]);
    out.expect_code(1);
    assert!(out.stderr.contains("does not verify"), "{}", out.stderr);
    assert_eq!(record_count(&bw), 0, "nothing ran on the empty log");
}

#[test]
fn a_removed_checkpoint_file_is_reported_and_can_be_rebuilt() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    std::fs::remove_file(bw.path("audit/checkpoints")).unwrap();
    let out = bw.run(&["audit", "verify"]);
    out.expect_code(1);
    assert!(out.stdout.contains("EvidenceMissing"), "{}", out.stdout);
    let out = bw.run(&["run", "demo", "show me"]);
    out.expect_code(1);
    assert!(out.stderr.contains("--rebuild-file"), "{}", out.stderr);
    // A plain checkpoint does not re-create it silently.
    bw.run(&["audit", "checkpoint"]).expect_code(1);
    bw.run(&["audit", "checkpoint", "--rebuild-file"]).ok();
    bw.run(&["audit", "verify"]).ok();
    bw.run(&["run", "demo", "show me"]).ok();
}

#[test]
fn a_tampered_checkpoint_file_is_a_clear_error() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let path = bw.path("audit/checkpoints");
    let text = std::fs::read_to_string(&path).unwrap();
    // A torn last entry.
    std::fs::write(&path, &text[..text.len() - 1]).unwrap();
    let out = bw.run(&["audit", "verify"]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("audit/checkpoints does not verify"),
        "{}",
        out.stderr
    );
    bw.run(&["run", "demo", "show me"]).expect_code(1);
}

#[test]
fn key_rotation_round_trip() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let old = bw.run(&["audit", "key"]).stdout.trim().to_string();
    let before = bw.path("before.txt").display().to_string();
    bw.run(&["audit", "checkpoint", "--out", &before]).ok();
    let out = bw.run(&["audit", "rotate-key"]);
    out.ok();
    let new = bw.run(&["audit", "key"]).stdout.trim().to_string();
    assert_ne!(old, new);
    assert!(
        out.stdout.contains(&format!("new key {new}")),
        "{}",
        out.stdout
    );
    // The old key is gone from keys/.
    let keys: Vec<_> = std::fs::read_dir(bw.path("keys"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("audit"))
        .collect();
    assert_eq!(keys, ["audit.key"]);
    // Recorded in the log.
    let records = bw.audit();
    let rotations = common::with_action(&records, "audit_key");
    assert_eq!(rotations.len(), 1);
    assert_eq!(common::field(rotations[0], "operation"), "rotate");
    assert_eq!(common::field(rotations[0], "user"), "local");
    assert!(common::field(rotations[0], "detail").contains(&new));
    // Old checkpoints still verify (stored, in the file, and exported under
    // the old verifier key); new ones are signed by the new key.
    bw.run(&["run", "demo", "show me"]).ok();
    let out = bw.run(&["audit", "verify"]);
    out.ok();
    assert!(out.stdout.contains("2 key(s)"), "{}", out.stdout);
    bw.run(&["audit", "verify", "--checkpoint", &before, "--key", &old])
        .ok();
    let after = bw.path("after.txt").display().to_string();
    bw.run(&["audit", "checkpoint", "--out", &after]).ok();
    bw.run(&["audit", "verify", "--checkpoint", &after, "--key", &new])
        .ok();
    bw.run(&["audit", "verify", "--checkpoint", &after, "--key", &old])
        .expect_code(2);
    let file = std::fs::read_to_string(bw.path("audit/checkpoints")).unwrap();
    assert!(
        file.contains(&format!("bulwark.local/audit key handover\n{old}\n{new}\n")),
        "{file}"
    );
}

#[test]
fn a_forged_key_handover_is_refused() {
    use bulwark_audit::{SigningKey, VerifierKey, note::sign_note};
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let current = bw.run(&["audit", "key"]).stdout.trim().to_string();
    // The intruder's key: a handover from the current key to it, signed
    // only by itself, and the key file replaced to match.
    let intruder = SigningKey::from_bytes(&[7; 32]);
    let theirs = VerifierKey::from_signing_key("bulwark-audit", &intruder)
        .unwrap()
        .to_vkey();
    let size = record_count(&bw);
    let body = format!("bulwark.local/audit key handover\n{current}\n{theirs}\n{size}\n");
    let forged = sign_note(&body, &intruder, "bulwark-audit").unwrap();
    let path = bw.path("audit/checkpoints");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&forged);
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    std::fs::write(bw.path("keys/audit.key"), hex(&intruder.to_bytes())).unwrap();
    let out = bw.run(&["audit", "verify"]);
    out.expect_code(1);
    assert!(out.stderr.contains("key handover"), "{}", out.stderr);
    let before = record_count(&bw);
    bw.run(&["run", "demo", "show me"]).expect_code(1);
    assert_eq!(record_count(&bw), before, "nothing ran");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
