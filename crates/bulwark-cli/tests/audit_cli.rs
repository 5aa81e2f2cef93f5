//! `bulwark audit verify | checkpoint | prove | show | key` on a real run,
//! and tampering with the database file detected by them.

use crate::common;
#[path = "audit_cli/evidence.rs"]
mod evidence;
#[path = "audit_cli/witness_serve.rs"]
mod witness_serve;

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
    // The checkpoint file on this machine catches the clean truncation...
    bw.run(&["audit", "verify"]).expect_code(1);
    // ...and so does the checkpoint kept elsewhere.
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

/// `(size, note)` of every stored checkpoint, oldest first.
fn stored_checkpoints(bw: &Bw) -> Vec<(i64, String)> {
    let db = rusqlite::Connection::open(bw.path("bulwark.db")).unwrap();
    let mut stmt = db
        .prepare("SELECT size, note FROM audit_checkpoint ORDER BY size")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn record_count(bw: &Bw) -> i64 {
    let db = rusqlite::Connection::open(bw.path("bulwark.db")).unwrap();
    db.query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn checkpoints_are_signed_every_n_records_while_an_agent_runs() {
    let bw = Bw::empty();
    bw.write("config.toml", "[audit]\ncheckpoint_every_records = 2\n");
    let manifest = common::scripted(
        "sleeper",
        "[tools]\nallow = [\"shell\"]\n[sandbox]\nshell = true\n\
         [[capabilities]]\nkind = \"shell_exec\"\nargv = [\"sleep\", \"*\"]\n",
    );
    // Each slow command leaves the 1 s poll time to notice new records.
    let sleep = r#"{"tool_calls": [{"name": "shell_exec", "input": {"argv": ["sleep", "2.5"]}}]}"#;
    let script = format!("{sleep}\n{sleep}\n{{\"text\": \"rested\"}}\n");
    bw.agent("sleeper", &manifest, Some(&script));
    bw.run(&["run", "sleeper", "rest"]).ok();
    let checkpoints = stored_checkpoints(&bw);
    assert!(
        checkpoints.len() >= 2,
        "one periodic checkpoint at least, then the final one: {checkpoints:?}"
    );
    // The final one covers every record, and all verify.
    let (last_size, _) = checkpoints.last().unwrap();
    assert_eq!(*last_size, record_count(&bw));
    let out = bw.run(&["audit", "verify"]);
    out.ok();
}

#[test]
fn a_terminated_chat_signs_its_checkpoint_before_exiting() {
    use std::io::Read;
    let bw = Bw::init();
    let mut child = std::process::Command::new(common::BIN)
        .arg("--home")
        .arg(bw.home())
        .args(["chat", "demo"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the prompt: the session exists and the runtime is idle.
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("> ") {
        let n = stderr.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "chat ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(130), "{rest}");
    assert!(rest.contains("interrupted"), "{rest}");
    let checkpoints = stored_checkpoints(&bw);
    let (last_size, _) = checkpoints.last().expect("a checkpoint was signed");
    assert_eq!(*last_size, record_count(&bw));
}

/// splitmix64: deterministic randomness without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

const TEXT_COLUMNS: [&str; 9] = [
    "session",
    "agent",
    "user",
    "action",
    "tool",
    "operation",
    "args_digest",
    "reason",
    "detail",
];

/// One random single edit of the kinds an intruder with the database file
/// (and the machine's audit key) could make; returns what it did.
fn tamper(db: &rusqlite::Connection, rng: &mut Rng, records: i64) -> String {
    db.execute_batch(
        "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete; \
         DROP TRIGGER audit_checkpoint_no_delete;",
    )
    .unwrap();
    let seq = 1 + rng.below(records as u64) as i64;
    match rng.below(6) {
        0 => {
            // One byte of one text field.
            let column = TEXT_COLUMNS[rng.below(TEXT_COLUMNS.len() as u64) as usize];
            let value: String = db
                .query_row(
                    &format!("SELECT {column} FROM audit WHERE seq = ?1"),
                    [seq],
                    |r| r.get(0),
                )
                .unwrap();
            let mut bytes = value.into_bytes();
            if bytes.is_empty() {
                bytes.push(b'x');
            } else {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] = if bytes[at] == b'x' { b'y' } else { b'x' };
            }
            let value = String::from_utf8_lossy(&bytes).into_owned();
            db.execute(
                &format!("UPDATE audit SET {column} = ?1 WHERE seq = ?2"),
                rusqlite::params![value, seq],
            )
            .unwrap();
            format!("byte of {column} at seq {seq}")
        }
        1 => {
            let column = ["time_ms", "duration_us"][rng.below(2) as usize];
            db.execute(
                &format!("UPDATE audit SET {column} = {column} + 1 + ?1 WHERE seq = ?2"),
                rusqlite::params![rng.below(1000) as i64, seq],
            )
            .unwrap();
            format!("{column} at seq {seq}")
        }
        2 => {
            db.execute("DELETE FROM audit WHERE seq = ?1", [seq])
                .unwrap();
            format!("deleted seq {seq}")
        }
        3 => {
            // Two rows trade places (everything but seq), leaves included.
            let other = 1 + (seq + rng.below(records as u64 - 1) as i64) % records;
            let cols = "time_ms, session, agent, user, action, tool, operation, args_digest, \
                        decision, reason, detail, duration_us, leaf";
            db.execute_batch(&format!(
                "CREATE TEMP TABLE t AS SELECT * FROM audit WHERE seq IN ({seq}, {other});
                 UPDATE audit SET ({cols}) = (SELECT {cols} FROM t WHERE t.seq = {other}) WHERE seq = {seq};
                 UPDATE audit SET ({cols}) = (SELECT {cols} FROM t WHERE t.seq = {seq}) WHERE seq = {other};
                 DROP TABLE t;"
            ))
            .unwrap();
            format!("swapped seq {seq} and {other}")
        }
        4 => {
            // The tail and every checkpoint that covered it.
            let keep = seq - 1;
            db.execute("DELETE FROM audit WHERE seq > ?1", [keep])
                .unwrap();
            db.execute("DELETE FROM audit_checkpoint WHERE size > ?1", [keep])
                .unwrap();
            format!("truncated to {keep}")
        }
        _ => {
            // A consistent forgery: one record rewritten with its leaf
            // re-hashed, and the stored checkpoints re-signed to match.
            let detail = format!("forged {}", rng.below(1 << 30));
            db.execute(
                "UPDATE audit SET detail = ?1 WHERE seq = ?2",
                rusqlite::params![detail, seq],
            )
            .unwrap();
            let records: Vec<bulwark_audit::StoredRecord> = read_records(db);
            let leaves: Vec<bulwark_audit::Hash> = records
                .iter()
                .map(|r| r.record.leaf_hash(r.seq).unwrap())
                .collect();
            db.execute(
                "UPDATE audit SET leaf = ?1 WHERE seq = ?2",
                rusqlite::params![leaves[(seq - 1) as usize].as_slice(), seq],
            )
            .unwrap();
            db.execute("DELETE FROM audit_checkpoint", []).unwrap();
            format!("rewrote seq {seq} with a matching leaf, dropped stored checkpoints")
        }
    }
}

fn read_records(db: &rusqlite::Connection) -> Vec<bulwark_audit::StoredRecord> {
    let mut stmt = db
        .prepare(
            "SELECT seq, time_ms, session, agent, user, action, tool, operation, args_digest, \
             decision, reason, detail, duration_us FROM audit ORDER BY seq",
        )
        .unwrap();
    stmt.query_map([], |r| {
        let decision: String = r.get(9)?;
        Ok(bulwark_audit::StoredRecord {
            seq: r.get::<_, i64>(0)? as u64,
            record: bulwark_audit::AuditRecord {
                time_ms: r.get(1)?,
                session: r.get(2)?,
                agent: r.get(3)?,
                user: r.get(4)?,
                action: r.get::<_, String>(5)?.into(),
                tool: r.get(6)?,
                operation: r.get(7)?,
                args_digest: r.get(8)?,
                decision: serde_json::from_value(serde_json::Value::String(decision)).unwrap(),
                reason: r.get::<_, String>(10)?.into(),
                detail: r.get(11)?,
                duration_us: r.get::<_, i64>(12)? as u64,
            },
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The tamper suite through the binary: thousands of random single edits
/// to copies of a real log, each checked by `audit verify --checkpoint`
/// against a checkpoint exported before the edit (its signature checked
/// with the verifier key kept alongside it, not the machine's key).
#[test]
fn audit_verify_detects_every_random_edit() {
    const EDITS: usize = 2000;
    let bw = Bw::init();
    for _ in 0..3 {
        bw.run(&["run", "demo", "show me"]).ok();
    }
    let exported = bw.path("exported-checkpoint.txt");
    let exported_arg = exported.display().to_string();
    bw.run(&["audit", "checkpoint", "--out", &exported_arg])
        .ok();
    let vkey = bw.run(&["audit", "key"]).stdout.trim().to_string();
    let records = record_count(&bw);
    assert!(records >= 20, "{records} records");
    {
        let db = rusqlite::Connection::open(bw.path("bulwark.db")).unwrap();
        db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
    }
    let pristine = std::fs::read(bw.path("bulwark.db")).unwrap();
    let scratch = Bw::empty();
    std::fs::create_dir_all(scratch.path("keys")).unwrap();
    // The log's evidence travels with it: the database and its checkpoint
    // file (which also names the log's keys).
    std::fs::create_dir_all(scratch.path("audit")).unwrap();
    std::fs::copy(
        bw.path("audit/checkpoints"),
        scratch.path("audit/checkpoints"),
    )
    .unwrap();
    let verify = |bw: &Bw| {
        bw.run(&[
            "audit",
            "verify",
            "--checkpoint",
            &exported_arg,
            "--key",
            &vkey,
        ])
    };
    let reset = || {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(scratch.path(&format!("bulwark.db{suffix}")));
        }
        std::fs::write(scratch.path("bulwark.db"), &pristine).unwrap();
    };
    // The untouched copy verifies, on a machine without the log's key.
    reset();
    verify(&scratch).ok();

    let mut rng = Rng(0x5EED);
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..EDITS {
        reset();
        let what = {
            let db = rusqlite::Connection::open(scratch.path("bulwark.db")).unwrap();
            tamper(&db, &mut rng, records)
        };
        let kind = what.split(' ').next().unwrap_or_default().to_string();
        *kinds.entry(kind).or_default() += 1;
        let out = verify(&scratch);
        assert_eq!(
            out.code,
            Some(1),
            "edit {i} ({what}) was not detected:\n{}\n{}",
            out.stdout,
            out.stderr
        );
        assert!(
            out.stdout.contains("TAMPERED"),
            "edit {i} ({what}): {}",
            out.stdout
        );
    }
    assert!(kinds.len() >= 6, "every kind of edit was tried: {kinds:?}");
}

#[test]
fn an_audit_key_others_can_read_is_refused() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let key = bw.path("keys/audit.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = bw.run(&["audit", "checkpoint"]);
    out.expect_code(2);
    assert!(out.stderr.contains("chmod 600"), "{}", out.stderr);
}
