//! The witness's rules, without HTTP: what it cosigns (the work it must
//! allow) and what it refuses (the attacks it stops), and that a refusal
//! changes nothing.

use crate::common::{TestLog, witness_for};
use bulwark_audit::{Cosignature, generate_signing_key};
use bulwark_witness::{AddCheckpoint, LogState, Refusal, Witness};
use std::sync::Arc;

fn state(witness: &Witness, log: &TestLog) -> Option<LogState> {
    witness.latest(&log.origin).unwrap()
}

fn cosign(witness: &Witness, request: &AddCheckpoint) -> Result<Cosignature, Refusal> {
    witness.add(request)
}

#[test]
fn advancing_checkpoints_are_cosigned_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("a.example/log", 5);
    let witness = witness_for(dir.path(), &[&log]);
    let key = witness.cosigner_key().unwrap();

    // First sight: from 0, no proof.
    let first = cosign(&witness, &log.request(0, 5)).unwrap();
    let body = bulwark_audit::note_text(&log.note(5)).unwrap().to_owned();
    first.verify(&body, &key).unwrap();
    assert_eq!(state(&witness, &log).map(|s| s.size), Some(5));

    // Growth, with proofs, several times (power-of-two and not).
    for (old, grow) in [(5u64, 3usize), (8, 9), (17, 1)] {
        log.grow(grow);
        let new = old + grow as u64;
        let cosig = cosign(&witness, &log.request(old, new)).unwrap();
        let body = bulwark_audit::note_text(&log.note(new)).unwrap().to_owned();
        cosig.verify(&body, &key).unwrap();
        assert_eq!(
            state(&witness, &log),
            Some(LogState {
                size: new,
                root: log.root(new)
            })
        );
    }
    // The same checkpoint again is cosigned again.
    cosign(&witness, &log.request(18, 18)).unwrap();
    assert_eq!(state(&witness, &log).map(|s| s.size), Some(18));
}

#[test]
fn a_rolled_back_checkpoint_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = TestLog::new("a.example/log", 20);
    let witness = witness_for(dir.path(), &[&log]);
    cosign(&witness, &log.request(0, 20)).unwrap();

    // A smaller tree from the witness's size: old beyond the checkpoint.
    let err = cosign(&witness, &log.request(0, 12).with_old(20)).unwrap_err();
    assert_eq!(err.status(), 400, "{err}");
    // A smaller tree claiming a smaller old size: 409 with the real size.
    let err = cosign(&witness, &log.request(7, 12)).unwrap_err();
    assert_eq!(
        err,
        Refusal::Conflict {
            size: 20,
            reason: "old size 7 is not the size last cosigned".into()
        }
    );
    let err = cosign(&witness, &log.request(0, 12)).unwrap_err();
    assert_eq!(err.status(), 409);
    assert_eq!(state(&witness, &log).map(|s| s.size), Some(20));

    // Also after a restart: the state is on disk.
    drop(witness);
    let witness = witness_for(dir.path(), &[&log]);
    assert_eq!(
        cosign(&witness, &log.request(0, 12)).unwrap_err().status(),
        409
    );
    assert_eq!(state(&witness, &log).map(|s| s.size), Some(20));
}

#[test]
fn a_forked_checkpoint_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = TestLog::new("a.example/log", 10);
    let witness = witness_for(dir.path(), &[&log]);
    cosign(&witness, &log.request(0, 10)).unwrap();
    let before = state(&witness, &log);

    // The same origin and key, another history of the same size.
    let mut fork = TestLog::new("a.example/log", 0);
    fork.key = log.key.clone();
    fork.leaves = log.leaves.clone();
    fork.leaves[3] = [9; 32];
    let err = cosign(&witness, &fork.request(10, 10)).unwrap_err();
    assert_eq!(err.status(), 409, "{err}");

    // A longer fork: its honest proof is from its own old tree, whose root
    // is not the one the witness holds.
    fork.grow(6);
    let err = cosign(&witness, &fork.request(10, 16)).unwrap_err();
    assert_eq!(err.status(), 422, "{err}");

    // A checkpoint that does extend it, sent with a wrong proof.
    let mut honest = TestLog::new("a.example/log", 0);
    honest.key = log.key.clone();
    honest.leaves = log.leaves.clone();
    honest.grow(6);
    let mut request = honest.request(10, 16);
    request.proof[0][0] ^= 1;
    assert_eq!(cosign(&witness, &request).unwrap_err().status(), 422);
    request.proof.pop();
    assert_eq!(cosign(&witness, &request).unwrap_err().status(), 422);
    // A proof where none is due (equal sizes).
    let mut request = log.request(10, 10);
    request.proof = vec![[1; 32]];
    assert_eq!(cosign(&witness, &request).unwrap_err().status(), 422);
    assert_eq!(state(&witness, &log), before);

    // The honest extension is still cosigned.
    cosign(&witness, &honest.request(10, 16)).unwrap();
}

#[test]
fn unknown_keys_and_origins_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = TestLog::new("a.example/log", 4);
    let witness = witness_for(dir.path(), &[&log]);

    let mut impostor = TestLog::new("a.example/log", 4);
    impostor.key = generate_signing_key();
    let err = cosign(&witness, &impostor.request(0, 4)).unwrap_err();
    assert_eq!(err.status(), 403, "{err}");

    let stranger = TestLog::new("b.example/log", 4);
    let err = cosign(&witness, &stranger.request(0, 4)).unwrap_err();
    assert_eq!(err, Refusal::UnknownOrigin("b.example/log".into()));
    assert_eq!(err.status(), 404);
    assert_eq!(state(&witness, &log), None);

    // A checkpoint whose log signature was tampered with.
    let mut request = log.request(0, 4);
    request.checkpoint = request.checkpoint.replacen("\n4\n", "\n5\n", 1);
    assert_eq!(cosign(&witness, &request).unwrap_err().status(), 403);
    assert_eq!(state(&witness, &log), None);
}

#[test]
fn malformed_requests_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = TestLog::new("a.example/log", 6);
    let witness = witness_for(dir.path(), &[&log]);
    witness
        .add_checkpoint(log.request(0, 6).encode().as_bytes())
        .unwrap();
    let before = state(&witness, &log);
    let good = log.request(6, 6).encode();
    for body in [
        String::new(),
        "old 6\n".to_owned(),
        good.replacen("old 6", "old 06", 1),
        good.replacen("old 6\n\n", "old 6\n", 1),
        good.replacen("\n\n", "\n\r\n", 1),
        format!("{}x", good.trim_end()),
        good.replacen("\u{2014}", "-", 1),
    ] {
        let err = witness.add_checkpoint(body.as_bytes()).unwrap_err();
        assert_eq!(err.status(), 400, "{body:?}: {err}");
        assert_eq!(state(&witness, &log), before);
    }
}

#[test]
fn concurrent_submissions_from_one_old_size_advance_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("a.example/log", 3);
    let witness = Arc::new(witness_for(dir.path(), &[&log]));
    witness.add(&log.request(0, 3)).unwrap();
    log.grow(40);
    // Eight submissions, all from old size 3, to different new sizes.
    let requests: Vec<AddCheckpoint> = (0..8).map(|i| log.request(3, 4 + 5 * i)).collect();
    let results: Vec<Result<Cosignature, Refusal>> = std::thread::scope(|scope| {
        let handles: Vec<_> = requests
            .iter()
            .map(|r| {
                let witness = witness.clone();
                scope.spawn(move || witness.add(r))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won: Vec<usize> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.is_ok().then_some(i))
        .collect();
    assert_eq!(won.len(), 1, "{results:?}");
    let size = 4 + 5 * won[0] as u64;
    for r in &results {
        if let Err(refusal) = r {
            assert_eq!(
                refusal,
                &Refusal::Conflict {
                    size,
                    reason: "old size 3 is not the size last cosigned".into()
                }
            );
        }
    }
    assert_eq!(
        witness.latest(&log.origin).unwrap().map(|s| s.size),
        Some(size)
    );
}

#[test]
fn two_witness_processes_on_one_state_file_do_not_both_advance() {
    // Two `Witness` values on one data directory stand for two processes:
    // the IMMEDIATE transaction, not the in-process mutex, serializes them.
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("a.example/log", 2);
    let a = witness_for(dir.path(), &[&log]);
    let b = witness_for(dir.path(), &[&log]);
    a.add(&log.request(0, 2)).unwrap();
    log.grow(10);
    let (ra, rb) = std::thread::scope(|scope| {
        let ha = scope.spawn(|| a.add(&log.request(2, 7)));
        let hb = scope.spawn(|| b.add(&log.request(2, 12)));
        (ha.join().unwrap(), hb.join().unwrap())
    });
    assert!(ra.is_ok() != rb.is_ok(), "{ra:?} {rb:?}");
}

#[test]
fn logs_sharing_a_witness_need_distinct_origins() {
    let dir = tempfile::tempdir().unwrap();
    let one = TestLog::new("same/origin", 1);
    let two = TestLog::new("same/origin", 1);
    let identity = bulwark_witness::Identity::load_or_create(dir.path(), None).unwrap();
    let err = Witness::open(
        dir.path(),
        identity,
        vec![
            (one.origin.clone(), one.verifier()),
            (two.origin.clone(), two.verifier()),
        ],
    )
    .unwrap_err();
    assert!(err.to_string().contains("distinct origins"), "{err}");
}

#[test]
fn the_identity_is_kept_private_and_stable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let first = bulwark_witness::Identity::load_or_create(dir.path(), Some("w.example/a")).unwrap();
    let path = dir.path().join(bulwark_witness::identity::KEY_FILE);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = bulwark_witness::Identity::load_or_create(dir.path(), None).unwrap();
    assert_eq!(again.cosigner_key().unwrap(), first.cosigner_key().unwrap());
    assert!(bulwark_witness::Identity::load_or_create(dir.path(), Some("other")).is_err());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(bulwark_witness::Identity::load(dir.path()).is_err());
}

trait WithOld {
    fn with_old(self, old: u64) -> Self;
}

impl WithOld for AddCheckpoint {
    fn with_old(mut self, old: u64) -> Self {
        self.old_size = old;
        self
    }
}
