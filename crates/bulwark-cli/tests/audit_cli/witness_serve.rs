//! `bulwark witness serve` and `bulwark witness key` from the real binary:
//! a real log's checkpoint (from `bulwark audit checkpoint`) is cosigned,
//! and a rolled-back one is refused.

use crate::common::{BIN, Bw, SCRUBBED};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A witness child process, killed (by its own pid) when dropped, with
/// its URL and key line. Its stdout stays open so that a late line cannot
/// make it fail to print.
struct Served {
    child: Child,
    _stdout: Option<std::io::Lines<BufReader<std::process::ChildStdout>>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(data: &std::path::Path, log: &str) -> (Served, String, String) {
    serve_as(data, "cli.test/w", log)
}

/// `bulwark witness serve` on a free loopback port, named `name`, with its
/// key and state in `<home>/w`, following `log` (`ORIGIN=VKEY`).
fn serve_as(home: &std::path::Path, name: &str, log: &str) -> (Served, String, String) {
    let mut cmd = Command::new(BIN);
    for var in SCRUBBED {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .arg("--home")
        .arg(home)
        .args([
            "witness",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--name",
            name,
        ])
        .arg("--data")
        .arg(home.join("w"))
        .args(["--log", log])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the bulwark binary starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut served = Served {
        child,
        _stdout: None,
    };
    let mut lines = BufReader::new(stdout).lines();
    let mut next = || lines.next().expect("a line").expect("utf-8");
    let first = next();
    let key_line = next();
    let _witnessing = next();
    let url = first
        .strip_prefix("witness listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    let key = key_line
        .strip_prefix("witness key: ")
        .unwrap_or_else(|| panic!("unexpected key line {key_line:?}"))
        .to_owned();
    served._stdout = Some(lines);
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

/// One of two nodes that witness each other: a home whose log has its own
/// `[audit] origin`.
struct Node {
    bw: Bw,
    /// config.toml ending with the `[audit]` section and its origin; the
    /// witness settings are appended to it.
    base_config: String,
}

impl Node {
    /// `init`, the origin, and one run, so the log has records, a key and
    /// a checkpoint (signed before any witness is configured).
    fn new(origin: &str) -> Node {
        let bw = Bw::init();
        let mut base_config = std::fs::read_to_string(bw.path("config.toml")).unwrap();
        base_config.push_str(&format!("\n[audit]\norigin = \"{origin}\"\n"));
        bw.write("config.toml", &base_config);
        bw.run(&["run", "demo", "show me"]).ok();
        Node { bw, base_config }
    }

    /// The log's verifier key, what the other node's witness follows.
    fn log_key(&self) -> String {
        let out = self.bw.run(&["audit", "key"]);
        out.ok();
        out.stdout.trim().to_owned()
    }

    /// Lists the witness at `url` and requires its cosignature to start.
    fn witnessed_by(&self, url: &str, key: &str) {
        self.bw.write(
            "config.toml",
            &format!(
                "{}require_witnesses = 1\n\n[[audit.witnesses]]\nurl = \"{url}\"\nkey = \"{key}\"\n",
                self.base_config
            ),
        );
    }

    fn run(&self, prompt: &str) -> crate::common::Out {
        self.bw.run(&["run", "demo", prompt])
    }

    /// `audit verify` (which must pass) and the log's size it reports.
    fn verify(&self) -> (String, u64) {
        let out = self.bw.run(&["audit", "verify"]);
        out.ok();
        let size = out
            .stdout
            .strip_prefix("ok: ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no log size in {:?}", out.stdout));
        (out.stdout.clone(), size)
    }

    /// Copies the log (database and checkpoint file) to `to`.
    fn save(&self, to: &Path) {
        copy_log(self.bw.home(), to);
    }

    /// Puts back a log saved earlier, as someone rolling the machine's
    /// disk back would; the key in `keys/` stays the same.
    fn restore(&self, from: &Path) {
        for db in DB_FILES {
            let _ = std::fs::remove_file(self.bw.path(db));
        }
        std::fs::remove_dir_all(self.bw.path("audit")).unwrap();
        copy_log(from, self.bw.home());
    }
}

const DB_FILES: [&str; 3] = ["bulwark.db", "bulwark.db-wal", "bulwark.db-shm"];

fn copy_log(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("audit")).unwrap();
    for db in DB_FILES {
        if from.join(db).exists() {
            std::fs::copy(from.join(db), to.join(db)).unwrap();
        }
    }
    for entry in std::fs::read_dir(from.join("audit")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join("audit").join(entry.file_name())).unwrap();
    }
}

fn cosigned_by(count: usize, size: u64) -> String {
    format!("witnesses: {count} of 1 cosigned the latest checkpoint (size {size})")
}

/// Issue 17 item 9 end to end, through `[audit] witnesses` only: two nodes
/// witness each other's log; runs end with cosigned checkpoints and
/// `require_witnesses = 1` holds agents back while the witness is down; a
/// witness restarted on its state refuses the forked and the rolled-back
/// log of a node, whose next start is then refused.
#[test]
fn two_nodes_witness_each_other_and_refuse_a_forked_or_rolled_back_log() {
    let a = Node::new("a.test/audit");
    let b = Node::new("b.test/audit");
    // Each node runs a witness of the other's log (state in <home>/w).
    let follow_b = format!("b.test/audit={}", b.log_key());
    let follow_a = format!("a.test/audit={}", a.log_key());
    let (witness_a, url_a, key_a) = serve_as(a.bw.home(), "a.test/w", &follow_b);
    let (witness_b, url_b, key_b) = serve_as(b.bw.home(), "b.test/w", &follow_a);
    a.witnessed_by(&url_b, &key_b);
    b.witnessed_by(&url_a, &key_a);

    // The round trip, on both nodes.
    for (node, witness, url) in [(&a, "b.test/w", &url_b), (&b, "a.test/w", &url_a)] {
        // Their checkpoint was signed before any witness was configured.
        let refused = node.run("before any cosignature");
        refused.expect_code(1);
        assert!(
            refused
                .stderr
                .contains("[audit] require_witnesses = 1, but only 0 witness(es) cosigned"),
            "{}",
            refused.stderr
        );
        let signed = node.bw.run(&["audit", "checkpoint"]);
        signed.ok();
        let (_, bootstrap) = node.verify();
        assert!(
            signed.stderr.contains(&cosigned_by(1, bootstrap)),
            "{}",
            signed.stderr
        );

        // A run ends with a checkpoint that the other node's witness cosigns.
        let run = node.run("show me");
        run.ok();
        assert!(!run.stderr.contains("did not cosign"), "{}", run.stderr);
        let (verified, size) = node.verify();
        assert!(size > bootstrap, "the run appended records");
        assert!(verified.contains(&cosigned_by(1, size)), "{verified}");
        assert!(
            verified.contains(&format!("  cosigned: {witness} ({url}) at ")),
            "{verified}"
        );
        node.run("and again").ok();
    }

    // A's witness (run by B) stops: A's next checkpoint is not cosigned,
    // the run still ends well, but the next one does not start.
    drop(witness_b);
    let (_, before) = a.verify();
    let unwitnessed = a.run("while the witness is down");
    unwitnessed.ok();
    assert!(
        unwitnessed.stderr.contains(&format!(
            "warning: witness b.test/w ({url_b}) did not cosign: cannot reach the witness"
        )),
        "{}",
        unwitnessed.stderr
    );
    let (verified, size) = a.verify();
    assert!(size > before, "the run appended records");
    assert!(verified.contains(&cosigned_by(0, size)), "{verified}");
    assert!(
        verified.contains(&format!(
            "  missing:  b.test/w ({url_b}): no cosignature stored"
        )),
        "{verified}"
    );
    let refused = a.run("refused");
    refused.expect_code(1);
    assert!(
        refused.stderr.contains(&format!(
            "[audit] require_witnesses = 1, but only 0 witness(es) cosigned the latest audit checkpoint (size {size})"
        )),
        "{}",
        refused.stderr
    );
    // Restarted on its state (another port): `audit checkpoint` is cosigned
    // and agents start again.
    let (_witness_b, url_b, key) = serve_as(b.bw.home(), "b.test/w", &follow_a);
    assert_eq!(key, key_b, "the witness keeps its key");
    a.witnessed_by(&url_b, &key_b);
    let signed = a.bw.run(&["audit", "checkpoint"]);
    signed.ok();
    assert!(
        signed.stderr.contains(&cosigned_by(1, size)),
        "{}",
        signed.stderr
    );
    a.run("runs again").ok();

    // B keeps two old copies of its log while it goes on being witnessed.
    let saved = tempfile::tempdir().unwrap();
    let (older, fork_point) = (saved.path().join("older"), saved.path().join("fork"));
    b.save(&older);
    b.run("one more").ok();
    b.save(&fork_point);
    b.run("ahead").ok();
    let (verified, witnessed) = b.verify();
    assert!(verified.contains(&cosigned_by(1, witnessed)), "{verified}");
    // B's witness restarts: what it refuses below, it knew before.
    drop(witness_a);
    let (_witness_a, url_a, _) = serve_as(a.bw.home(), "a.test/w", &follow_b);
    b.witnessed_by(&url_a, &key_a);
    let refusal = |size: u64| {
        format!(
            "warning: witness a.test/w ({url_a}) did not cosign: the witness at {url_a}/add-checkpoint is at size {witnessed}, which this checkpoint (size {size}) cannot extend: "
        )
    };

    // Fork: the log goes back to the fork point and another run makes a
    // tree of the witnessed size with another root.
    b.restore(&fork_point);
    let forked = b.run("another history");
    forked.ok();
    let (verified, size) = b.verify();
    assert_eq!(
        size, witnessed,
        "a demo run appends a fixed number of records"
    );
    assert!(
        forked.stderr.contains(&format!(
            "{}it holds another tree of that size (a fork)",
            refusal(size)
        )),
        "{}",
        forked.stderr
    );
    assert!(verified.contains(&cosigned_by(0, size)), "{verified}");
    let refused = b.run("after the fork");
    refused.expect_code(1);
    assert!(
        refused.stderr.contains("[audit] require_witnesses = 1"),
        "{}",
        refused.stderr
    );

    // Rollback: the log goes further back, to a copy whose latest
    // checkpoint was cosigned, so agents start; the run's checkpoint is
    // smaller than the tree the witness cosigned.
    b.restore(&older);
    let rolled_back = b.run("rolled back");
    rolled_back.ok();
    let (verified, size) = b.verify();
    assert!(size < witnessed, "{size} < {witnessed}");
    assert!(
        rolled_back.stderr.contains(&format!(
            "{}it cosigned a larger tree of this origin: this log was rolled back",
            refusal(size)
        )),
        "{}",
        rolled_back.stderr
    );
    assert!(
        verified.contains(&format!(
            "  missing:  a.test/w ({url_a}): no cosignature stored"
        )),
        "{verified}"
    );
    let refused = b.run("after the rollback");
    refused.expect_code(1);
    assert!(
        refused.stderr.contains(&format!(
            "[audit] require_witnesses = 1, but only 0 witness(es) cosigned the latest audit checkpoint (size {size})"
        )),
        "{}",
        refused.stderr
    );
}

/// A key rotation on a witnessed log: the witness follows the old key, so
/// the checkpoint the new key signs is refused (403) and `rotate-key` says
/// what to do; once the witness follows the new key (same state), the log
/// is cosigned again.
#[test]
fn a_rotated_key_is_cosigned_once_the_witness_follows_it() {
    let node = Node::new("r.test/audit");
    let witness_home = tempfile::tempdir().unwrap();
    let follow = |key: &str| format!("r.test/audit={key}");
    let (witness, url, key) = serve_as(witness_home.path(), "w.test/w", &follow(&node.log_key()));
    node.witnessed_by(&url, &key);
    node.bw.run(&["audit", "checkpoint"]).ok();
    node.run("witnessed").ok();

    let rotated = node.bw.run(&["audit", "rotate-key"]);
    rotated.ok();
    assert!(
        rotated.stderr.contains(&format!(
            "warning: witness w.test/w ({url}) did not cosign: the witness at {url}/add-checkpoint answered 403"
        )),
        "{}",
        rotated.stderr
    );
    let new_key = node.log_key();
    assert!(
        rotated
            .stderr
            .contains(&format!("have each follow `r.test/audit={new_key}`")),
        "{}",
        rotated.stderr
    );
    node.run("refused").expect_code(1);

    drop(witness);
    let (_witness, url, _) = serve_as(witness_home.path(), "w.test/w", &follow(&new_key));
    node.witnessed_by(&url, &key);
    let signed = node.bw.run(&["audit", "checkpoint"]);
    signed.ok();
    let (_, size) = node.verify();
    assert!(
        signed.stderr.contains(&cosigned_by(1, size)),
        "{}",
        signed.stderr
    );
    node.run("runs again").ok();
}
