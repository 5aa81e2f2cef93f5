//! True- and false-positive rates of the injection scanner on public
//! labelled corpora, extracted by `scripts/scan-corpora` into
//! `tests/data/injection/<corpus>/rows.jsonl` (each corpus's MIT licence
//! beside it). Print the table with
//! `cargo test -p bulwark-policy --test all injection::corpus -- --nocapture`.
//!
//! Each row is in the tuning split or the held-out split by the first byte
//! of the SHA-256 of its text (odd: held out). The patterns were tuned
//! looking only at tuning rows; the held-out rows measure how that
//! generalises. The floors and ceilings below are the rates achieved, with
//! margin, so a regression in either direction fails.
//!
//! `INJECTION_SHOW=tune` lists the tuning split's misses and false alarms
//! (there is deliberately no switch for the held-out split).

use std::path::PathBuf;

use bulwark_policy::injection::{ContentKind, scan};
use serde::Deserialize;
use sha2::{Digest, Sha256};

#[derive(Deserialize)]
struct Row {
    id: String,
    malicious: bool,
    source: String,
    text: String,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Split {
    Tune,
    Holdout,
}

fn split_of(text: &str) -> Split {
    if Sha256::digest(text.as_bytes())[0] & 1 == 1 {
        Split::Holdout
    } else {
        Split::Tune
    }
}

fn load(corpus: &str) -> Vec<Row> {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests/data/injection",
        corpus,
        "rows.jsonl",
    ]
    .iter()
    .collect();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/scan-corpora", path.display()));
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[derive(Default, Debug, Clone, Copy)]
struct Rates {
    positives: usize,
    negatives: usize,
    true_positives: usize,
    false_positives: usize,
}

impl Rates {
    fn tpr(&self) -> f64 {
        self.true_positives as f64 / self.positives.max(1) as f64
    }
    fn fpr(&self) -> f64 {
        self.false_positives as f64 / self.negatives.max(1) as f64
    }
}

/// Scans every row; returns the rates of the tuning and held-out splits.
fn measure(corpus: &str) -> (Rates, Rates) {
    let show_tune = std::env::var("INJECTION_SHOW").is_ok_and(|v| v == "tune");
    let (mut tune, mut holdout) = (Rates::default(), Rates::default());
    for row in load(corpus) {
        let split = split_of(&row.text);
        let rates = match split {
            Split::Tune => &mut tune,
            Split::Holdout => &mut holdout,
        };
        let findings = scan(&row.text, ContentKind::Text);
        let flagged = !findings.is_empty();
        if row.malicious {
            rates.positives += 1;
            rates.true_positives += usize::from(flagged);
        } else {
            rates.negatives += 1;
            rates.false_positives += usize::from(flagged);
        }
        if show_tune && split == Split::Tune && flagged != row.malicious {
            let kinds: Vec<_> = findings.iter().map(|f| f.kind.name()).collect();
            let what = if row.malicious { "MISS" } else { "FALSE ALARM" };
            println!(
                "{what} {corpus} {} ({}) {kinds:?}: {:?}",
                row.id,
                row.source,
                row.text.chars().take(400).collect::<String>()
            );
        }
    }
    (tune, holdout)
}

fn print_row(corpus: &str, split: &str, r: &Rates) {
    println!(
        "| {corpus:<13} | {split:<8} | {:>4} | {:>4} | {:>6.1}% | {:>6.1}% |",
        r.positives,
        r.negatives,
        100.0 * r.tpr(),
        100.0 * r.fpr()
    );
}

/// The floors one split must meet: TPR at least `tpr`, FPR at most `fpr`.
struct Floor {
    tpr: f64,
    fpr: f64,
}

/// Measures one corpus, prints its rows and checks each split's floors.
fn check(corpus: &str, tuning: Floor, held_out: Floor) {
    let (tune, holdout) = measure(corpus);
    println!("\n| corpus        | split    | pos  | neg  |   TPR   |   FPR   |");
    print_row(corpus, "tuning", &tune);
    print_row(corpus, "held-out", &holdout);
    let all = Rates {
        positives: tune.positives + holdout.positives,
        negatives: tune.negatives + holdout.negatives,
        true_positives: tune.true_positives + holdout.true_positives,
        false_positives: tune.false_positives + holdout.false_positives,
    };
    print_row(corpus, "all", &all);
    for (split, r, floor) in [("tuning", tune, tuning), ("held-out", holdout, held_out)] {
        assert!(
            r.positives > 0 && r.negatives > 0,
            "{corpus} {split}: empty"
        );
        assert!(
            r.tpr() >= floor.tpr,
            "{corpus} {split}: TPR {:.3} fell below {}",
            r.tpr(),
            floor.tpr
        );
        assert!(
            r.fpr() <= floor.fpr,
            "{corpus} {split}: FPR {:.3} rose above {}",
            r.fpr(),
            floor.fpr
        );
    }
}

/// bastioncorpus 0.6.0: 117 malicious rows, 63 benign false-positive traps
/// ("please ignore my previous email", "act as a tutor"). Achieved: tuning
/// TPR 98.3% FPR 0%, held-out TPR 62.1% FPR 0%. The gap is the honest
/// measure of how far phrase patterns generalise to unseen attack styles.
#[test]
fn bastioncorpus_rates() {
    check(
        "bastioncorpus",
        Floor {
            tpr: 0.93,
            fpr: 0.05,
        },
        Floor {
            tpr: 0.55,
            fpr: 0.05,
        },
    );
}

/// agentdojo 0.1.35 (v1.2.2 suites): 210 injection texts (six attacks over
/// 35 injection tasks), 297 benign environment texts. Achieved: tuning TPR
/// 95.1% FPR 0%, held-out TPR 94.4% FPR 1.4%. The misses are the `direct`
/// attack's bare goals ("TODO: make a reservation ..."), which carry no
/// injection phrasing at all.
#[test]
fn agentdojo_rates() {
    check(
        "agentdojo",
        Floor {
            tpr: 0.90,
            fpr: 0.03,
        },
        Floor {
            tpr: 0.90,
            fpr: 0.04,
        },
    );
}
