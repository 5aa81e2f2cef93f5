//! `bulwark audit verify | checkpoint | prove | show | key` on a real run,
//! and tampering with the database file detected by them.

mod common;

use common::Bw;
use std::os::unix::fs::PermissionsExt;

#[test]
fn verify_checkpoint_prove_and_detect_tampering() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();

    let out = bw.run(&["audit", "verify"]);
    out.ok();
    assert!(out.stdout.starts_with("ok: "), "{}", out.stdout);

    let cp = bw.path("checkpoint.txt");
    let cp_arg = cp.display().to_string();
    let out = bw.run(&["audit", "checkpoint", "--out", &cp_arg]);
    out.ok();
    assert!(
        out.stdout.starts_with("bulwark.local/audit\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("\n\u{2014} bulwark-audit "),
        "{}",
        out.stdout
    );
    let mode = std::fs::metadata(bw.path("keys/audit.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the audit key is owner-only");

    bw.run(&["audit", "verify", "--checkpoint", &cp_arg]).ok();
    let out = bw.run(&["audit", "prove", "2"]);
    out.ok();
    assert!(
        out.stdout.trim_end().ends_with("verified"),
        "{}",
        out.stdout
    );
    let out = bw.run(&["audit", "show", "0"]);
    out.ok();
    assert!(out.stdout.contains("\"seq\": 1"), "{}", out.stdout);
    let out = bw.run(&["audit", "key"]);
    out.ok();
    assert!(out.stdout.starts_with("bulwark-audit+"), "{}", out.stdout);

    // Edit one record behind the triggers' back.
    {
        let db = rusqlite::Connection::open(bw.path("bulwark.db")).unwrap();
        db.execute_batch(
            "DROP TRIGGER audit_no_update; UPDATE audit SET detail = 'nothing happened' WHERE seq = 3;",
        )
        .unwrap();
    }
    let out = bw.run(&["audit", "verify"]);
    out.expect_code(1);
    assert!(out.stdout.contains("TAMPERED"), "{}", out.stdout);
    assert!(out.stderr.contains("first bad index 2"), "{}", out.stderr);

    // A checkpoint whose signature was altered is refused outright.
    let note = std::fs::read_to_string(&cp).unwrap();
    let at = note.trim_end().len() - 6;
    let swapped = if &note[at..=at] == "A" { "B" } else { "A" };
    let forged = format!("{}{}{}", &note[..at], swapped, &note[at + 1..]);
    std::fs::write(bw.path("forged.txt"), forged).unwrap();
    let forged_arg = bw.path("forged.txt").display().to_string();
    let out = bw.run(&["audit", "verify", "--checkpoint", &forged_arg]);
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("not a checkpoint signed by this log's key"),
        "{}",
        out.stderr
    );
}

#[test]
fn truncation_is_caught_by_an_exported_checkpoint() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let cp = bw.path("cp.txt").display().to_string();
    bw.run(&["audit", "checkpoint", "--out", &cp]).ok();
    {
        let db = rusqlite::Connection::open(bw.path("bulwark.db")).unwrap();
        db.execute_batch(
            "DROP TRIGGER audit_no_delete; DROP TRIGGER audit_checkpoint_no_delete;
             DELETE FROM audit WHERE seq > 2; DELETE FROM audit_checkpoint;",
        )
        .unwrap();
    }
    // The log alone looks consistent after a clean truncation...
    bw.run(&["audit", "verify"]).ok();
    // ...but not against the checkpoint kept elsewhere.
    let out = bw.run(&["audit", "verify", "--checkpoint", &cp]);
    out.expect_code(1);
    assert!(out.stdout.contains("TAMPERED"), "{}", out.stdout);
}

#[test]
fn a_damaged_log_stops_agents_until_acknowledged() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    // Each run ends with a signed checkpoint.
    let out = bw.run(&["audit", "verify"]);
    out.ok();
    assert!(
        out.stdout.contains("1 stored checkpoint(s) match"),
        "{}",
        out.stdout
    );
    {
        let db = rusqlite::Connection::open(bw.path("bulwark.db")).unwrap();
        db.execute_batch(
            "DROP TRIGGER audit_no_update; UPDATE audit SET reason = 'ok' WHERE seq = 4;",
        )
        .unwrap();
    }
    let out = bw.run(&["run", "demo", "show me"]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("does not verify") && out.stderr.contains("bulwark audit acknowledge"),
        "{}",
        out.stderr
    );
    let out = bw.run(&["audit", "acknowledge"]);
    out.ok();
    assert!(out.stdout.contains("acknowledged"), "{}", out.stdout);
    let out = bw.run(&["run", "demo", "show me"]);
    out.ok();
    assert!(
        out.stderr.contains("an operator acknowledged this"),
        "{}",
        out.stderr
    );
}

#[test]
fn export_and_follow() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let all = bw.audit().len();
    let out = bw.run(&["audit", "export"]);
    out.ok();
    assert_eq!(out.stdout.lines().count(), all);
    let file = bw.path("export.jsonl");
    let out = bw.run(&[
        "audit",
        "export",
        "--since",
        "3",
        "--out",
        &file.display().to_string(),
    ]);
    out.ok();
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), all - 3);
    assert!(text.starts_with("{\"seq\":4,"), "{text}");

    // `tail --follow` prints records written after it started.
    let mut child = std::process::Command::new(common::BIN)
        .args([
            "--home",
            &bw.home().display().to_string(),
            "audit",
            "tail",
            "-n",
            "0",
            "--follow",
            "--json",
        ])
        .env_remove("LD_LIBRARY_PATH")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(700));
    bw.run(&["run", "demo", "show me"]).ok();
    let first = rx.recv_timeout(std::time::Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    let first = first.expect("tail --follow printed the new records");
    assert!(first.contains(&format!("\"seq\":{}", all + 1)), "{first}");
}
