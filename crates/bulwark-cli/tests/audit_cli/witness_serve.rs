//! `bulwark witness serve` and `bulwark witness key` from the real binary:
//! a real log's checkpoint (from `bulwark audit checkpoint`) is cosigned,
//! and a rolled-back one is refused.

use crate::common::{BIN, Bw, SCRUBBED};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The witness child process, killed (by its own pid) when dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(data: &std::path::Path, log: &str) -> (Served, String, String) {
    let mut cmd = Command::new(BIN);
    for var in SCRUBBED {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .arg("--home")
        .arg(data)
        .args([
            "witness",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--name",
            "cli.test/w",
        ])
        .arg("--data")
        .arg(data.join("w"))
        .args(["--log", log])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the bulwark binary starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let served = Served(child);
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().expect("a first line").expect("utf-8");
    let url = first
        .strip_prefix("witness listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    let key_line = lines.next().expect("a key line").expect("utf-8");
    let key = key_line
        .strip_prefix("witness key: ")
        .unwrap_or_else(|| panic!("unexpected key line {key_line:?}"))
        .to_owned();
    (served, url, key)
}

#[test]
fn witness_serve_cosigns_a_real_checkpoint_and_refuses_a_rollback() {
    let bw = Bw::init();
    bw.run(&["run", "demo", "show me"]).ok();
    let first = bw.run(&["audit", "checkpoint"]);
    first.ok();
    let first_note = first.stdout.clone();
    let log_vkey = bw.run(&["audit", "key"]).stdout.trim().to_owned();

    let witness_home = tempfile::tempdir().unwrap();
    let (_served, url, key) = serve(
        witness_home.path(),
        &format!("bulwark.local/audit={log_vkey}"),
    );
    // `witness key` prints the same key from the same data directory.
    let printed = Command::new(BIN)
        .env_remove("LD_LIBRARY_PATH")
        .arg("--home")
        .arg(witness_home.path())
        .args(["witness", "key", "--data"])
        .arg(witness_home.path().join("w"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), key);
    let witness_key = bulwark_audit::CosignerKey::parse(&key).unwrap();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = bulwark_witness::WitnessClient::new().unwrap();
    let no_proof = |_old: u64| -> Result<Vec<bulwark_audit::Hash>, String> { Ok(Vec::new()) };
    let cosigned = runtime
        .block_on(client.add_checkpoint(&url, &witness_key, &first_note, 0, &no_proof))
        .unwrap();
    cosigned
        .cosignature
        .verify(bulwark_audit::note_text(&first_note).unwrap(), &witness_key)
        .unwrap();

    // The log grows; the next checkpoint is cosigned with the proof the
    // real store makes.
    bw.run(&["run", "demo", "show me again"]).ok();
    let second_note = bw.run(&["audit", "checkpoint"]).stdout;
    let db = bw.path("bulwark.db");
    let second_size = cosigned_size(&second_note);
    let proof = move |old: u64| -> Result<Vec<bulwark_audit::Hash>, String> {
        let sink = bulwark_store::Store::open(&db).unwrap().audit_sink();
        sink.consistency_proof_between(old, second_size)
            .map_err(|e| e.to_string())
    };
    let cosigned = runtime
        .block_on(client.add_checkpoint(&url, &witness_key, &second_note, cosigned.size, &proof))
        .unwrap();
    assert_eq!(cosigned.size, second_size);

    // Rolling back to the first checkpoint is refused.
    let err = runtime
        .block_on(client.add_checkpoint(&url, &witness_key, &first_note, 0, &no_proof))
        .unwrap_err();
    assert!(
        matches!(err, bulwark_witness::ClientError::Conflict { .. }),
        "{err}"
    );
}

fn cosigned_size(note: &str) -> u64 {
    bulwark_audit::Checkpoint::parse_body(bulwark_audit::note_text(note).unwrap())
        .unwrap()
        .size
}

#[test]
fn witness_serve_refuses_a_bad_log_argument() {
    let bw = Bw::empty();
    let data = bw.path("w").display().to_string();
    let out = bw.run(&[
        "witness",
        "serve",
        "--data",
        &data,
        "--log",
        "no-equals-sign",
    ]);
    out.expect_code(2);
    assert!(out.stderr.contains("ORIGIN=VKEY"), "{}", out.stderr);
    let out = bw.run(&["witness", "serve", "--data", &data, "--log", "o=not+a+key"]);
    out.expect_code(2);
    assert!(out.stderr.contains("bulwark audit key"), "{}", out.stderr);
}
