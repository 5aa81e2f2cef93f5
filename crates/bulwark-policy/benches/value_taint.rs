//! Cost of value-mode taint checks: `find` on every sink call's arguments
//! (clean and with a copied run) against 64 KiB and 256 KiB of untrusted
//! text, and `add` of a 64 KiB tool result (into an empty session, and into
//! one at the cap, which drops a chunk and rebuilds the index).
//!
//! The texts are pseudo-English from a fixed seed: a Zipf-like vocabulary of
//! made-up words, so common 8-byte pieces recur as in real prose and the
//! prefilter is exercised, but unrelated texts share no 16-byte run.

// A benchmark is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bulwark_policy::TaintLabel;
use bulwark_policy::value_taint::{MAX_TEXT, UntrustedText};
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::hint::black_box;

/// xorshift64*: reproducible text without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const SYLLABLES: [&str; 32] = [
    "ka", "lo", "mi", "ne", "ru", "ta", "sen", "dor", "vi", "pa", "gre", "tho", "un", "bel", "cor",
    "an", "is", "el", "mon", "ri", "sta", "que", "fa", "lin", "op", "ber", "ty", "ex", "wa", "zo",
    "hu", "ge",
];

/// Made-up words from common syllables; a different `seed` is a different
/// writer (same syllables, so 8-byte pieces still recur across texts).
fn vocabulary(seed: u64) -> Vec<String> {
    let mut rng = Rng(seed);
    (0..4000)
        .map(|_| {
            let n = 1 + rng.below(3);
            (0..n)
                .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
                .collect()
        })
        .collect()
}

/// `len` bytes of prose: frequent words often, rare words rarely; a page
/// (`links`) also has a link now and then.
fn prose(vocab: &[String], seed: u64, len: usize, links: bool) -> String {
    let mut rng = Rng(seed);
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        let u = (rng.next() % 1_000_000) as f64 / 1_000_000.0;
        let word = &vocab[(u * u * vocab.len() as f64) as usize];
        out.push_str(word);
        out.push(match rng.below(12) {
            0 => '.',
            1 => '\n',
            _ => ' ',
        });
        if links && rng.below(40) == 0 {
            out.push_str("https://www.example.org/");
        }
    }
    out.truncate(len);
    out
}

fn context(vocab: &[String], bytes: usize) -> UntrustedText {
    let mut text = UntrustedText::default();
    let labels = BTreeSet::from([TaintLabel::External]);
    // Tool results of 16 KiB each, as a session would collect them.
    for (i, start) in (0..bytes).step_by(16 * 1024).enumerate() {
        let chunk = prose(vocab, 1000 + i as u64, (bytes - start).min(16 * 1024), true);
        text.add(&chunk, &labels, &format!("call-{i}"));
    }
    text
}

fn args(command: String) -> Value {
    json!({ "command": command, "cwd": "/work/project", "timeout_secs": 30 })
}

/// A clean argument: the user's own words, which share common pieces with
/// the page but (checked) no run of 16 bytes.
fn clean_arg(text: &UntrustedText, len: usize) -> String {
    let vocab = vocabulary(0x5eed_0002);
    (77..200)
        .map(|seed| prose(&vocab, seed, len, false))
        .find(|arg| text.find(&args(arg.clone())).is_empty())
        .expect("a clean argument")
}

fn find(c: &mut Criterion) {
    let vocab = vocabulary(0x5eed_0001);
    for ctx_kib in [64, 256] {
        let text = context(&vocab, ctx_kib * 1024);
        // A run from the middle of the first chunk, as a copied URL or
        // command would be.
        let copied = prose(&vocab, 1000, 8 * 1024, true)[4000..4064].to_string();
        let mut group = c.benchmark_group(format!("find/ctx_{ctx_kib}KiB"));
        for arg_len in [256, 4 * 1024, 16 * 1024] {
            let clean = clean_arg(&text, arg_len);
            let clean_args = args(clean.clone());
            let mid = clean.floor_char_boundary(arg_len / 2);
            let tainted = format!("{} {copied} {}", &clean[..mid], &clean[mid..]);
            let tainted_args = args(tainted);
            assert_eq!(text.find(&tainted_args).len(), 1, "tainted arg must hit");
            group.bench_with_input(BenchmarkId::new("clean", arg_len), &clean_args, |b, a| {
                b.iter(|| black_box(text.find(black_box(a))))
            });
            group.bench_with_input(
                BenchmarkId::new("tainted", arg_len),
                &tainted_args,
                |b, a| b.iter(|| black_box(text.find(black_box(a)))),
            );
        }
        group.finish();
    }
}

fn add(c: &mut Criterion) {
    let vocab = vocabulary(0x5eed_0001);
    let chunk = prose(&vocab, 4242, 64 * 1024, true);
    let labels = BTreeSet::from([TaintLabel::External]);
    let mut group = c.benchmark_group("add_64KiB");
    group.sample_size(20);
    group.bench_function("into_empty", |b| {
        b.iter_batched(
            UntrustedText::default,
            |mut text| {
                text.add(black_box(&chunk), &labels, "call-x");
                text
            },
            BatchSize::SmallInput,
        )
    });
    let full = context(&vocab, MAX_TEXT);
    group.bench_function("at_cap_rebuild", |b| {
        b.iter_batched(
            || full.clone(),
            |mut text| {
                text.add(black_box(&chunk), &labels, "call-x");
                text
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, find, add);
criterion_main!(benches);
